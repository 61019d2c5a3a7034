// Joined mid-run, a hold that began before the capture and outlived its lease shows only
// by its owner's refused release or extend (lock_operations.hpp, held_before_capture):
// node-redisson's and @redis-kit/lock's recordings joined mid-run
// (tests/locks/effect_clients, measured against their logs by measure.py) each had one,
// shown as an unlock by a non-owner. The fixture's connections are joined mid-stream
// unless `opened` names them.
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

TEST_CASE("held before the capture: a refused unlock by an owner never seen, on a lock held unseen, is its expiry",
          "[timeline][expiry][mid-stream]") {
  fixture f;
  f.acquire("waiter:1", 10, 30000, op_outcome::contended, 2, "10.0.0.2", 800);  // held by someone unseen
  f.unlock("early:7", 900, op_outcome::rejected, 3);
  const recorded_event* gone = first_of(f.events, "expired", "early:7");
  REQUIRE(gone != nullptr);
  CHECK(gone->ts_us == at(900) + 100);
  CHECK(first_of(f.events, "anomaly:expired_while_held", "early:7") != nullptr);
  CHECK(f.events.count("anomaly:unlock_by_non_owner") == 0);
}

TEST_CASE("held before the capture: not when the capture saw the connection open, or the owner, or no unseen holder",
          "[timeline][expiry][mid-stream]") {
  SECTION("the connection's SYN was captured: its owner's holds all began in the capture") {
    fixture f;
    f.opened[3] = at(0);
    f.acquire("waiter:1", 10, 30000, op_outcome::contended, 2, "10.0.0.2", 800);
    f.unlock("early:7", 900, op_outcome::rejected, 3);
    CHECK(f.events.count("expired") == 0);
    CHECK(f.events.count("anomaly:unlock_by_non_owner") == 1);
  }
  SECTION("no attempt was refused while no holder was known") {
    fixture f;
    f.acquire("holder:1", 10, 30000);
    f.acquire("waiter:2", 20, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);
    f.unlock("early:7", 900, op_outcome::rejected, 3);
    CHECK(f.events.count("expired") == 0);
    CHECK(f.events.count("anomaly:unlock_by_non_owner") == 1);
  }
  SECTION("the owner waits for the lock itself") {
    fixture f;
    f.acquire("waiter:1", 10, 30000, op_outcome::contended, 2, "10.0.0.2", 800);
    f.unlock("waiter:1", 20, op_outcome::rejected, 2);
    CHECK(f.events.count("expired") == 0);
  }
}

TEST_CASE("held before the capture: not when another value's hold, seen from the capture's start, was released since",
          "[timeline][expiry][mid-stream]") {
  // safe-redis-leader joined mid-run: a waiter refused while no holder was known, then the
  // holder seen (from its renewal, held since the capture's start) up to its release, then
  // a give-up's compare-and-delete of an id never seen, answered 0. The lock was another
  // value's from the capture's start to that release, and any hold after it would be on
  // the wire: the id never held it in the capture, and nothing expired. A hold seen begun
  // in the capture (its acquisition) leaves the time before it to an unseen one.
  enum class first_seen { renewal, release, acquisition };
  for (const first_seen by : {first_seen::renewal, first_seen::release, first_seen::acquisition}) {
    fixture f;
    f.acquire("waiter:1", 10, 600, op_outcome::contended, 2, "10.0.0.2", 500);  // held by someone unseen
    if (by == first_seen::renewal) f.renew("holder:4", 100, 600);
    if (by == first_seen::acquisition) f.acquire("holder:4", 100, 600);
    f.unlock("holder:4", 200, op_outcome::ok, 1);
    f.unlock("stranger:9", 246, op_outcome::rejected, 3);
    const bool unseen_hold_possible = by == first_seen::acquisition;
    CHECK((first_of(f.events, "expired", "stranger:9") != nullptr) == unseen_hold_possible);
    CHECK(f.events.count("anomaly:expired_while_held") == (unseen_hold_possible ? 1U : 0U));
  }
}
