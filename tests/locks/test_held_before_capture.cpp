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
