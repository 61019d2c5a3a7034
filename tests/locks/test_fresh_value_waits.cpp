// Waits of clients without a stable owner (issue 40 item 3): a client that sends a new
// random value on every attempt (simple-redis-mutex, redis-lock's timestamp, warlock's
// optimistic lock) still waits once, from its first refused attempt until it acquires
// or gives up; and a Redisson fair waiter's clean-up (acquireFailed) ends its wait as a
// give-up at that moment. The recorded clients' waits are checked against their own
// logs in test_effect_recorded.cpp.
#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;


TEST_CASE("fresh values: a poller's attempts with a new value each are one wait, measured to its acquisition",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1);
  set_attempt(f, "v1", 10, op_outcome::contended, 2);
  set_attempt(f, "v2", 60, op_outcome::contended, 2);
  set_attempt(f, "v3", 110, op_outcome::contended, 2);
  set_release(f, "holder", 130, 1);
  set_attempt(f, "v4", 160, op_outcome::ok, 2);
  f.timeline.finish(at(1000));
  CHECK(f.events.count("contended") == 3);
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = first_of(f.events, "acquired", "v4");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(160) + 100 - at(10));
  // The lock stood free 30 ms while it slept: under the idle threshold, nothing to say.
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
}

// kombu's Mutex (tests/locks/effect_clients/kombu_mutex_worker.py): kombu's own single try,
// then, 0.7 ms later over the same pooled connection, a retrying loop's first try, its next
// 90-100 ms on; a new token each. Its log: the single try gave up at its refusal, the
// loop's wait began at its first try. No poller sleeps under 2 ms between two tries of
// one wait; and a pause shorter than a spinner's (250 ms) is no give-up, as for a poller
// keeping its value.
TEST_CASE("fresh values: a single try, a new value at once, then a slower cadence: a give-up, then one wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 10'000);
  set_attempt(f, "v1", 10, op_outcome::contended, 2, 10'000);
  set_attempt(f, "v2", 10.7, op_outcome::contended, 2, 10'000);
  set_attempt(f, "v3", 100, op_outcome::contended, 2, 10'000);
  set_attempt(f, "v4", 195, op_outcome::contended, 2, 10'000);
  set_release(f, "holder", 250, 1);
  set_attempt(f, "v5", 290, op_outcome::ok, 2, 10'000);
  f.timeline.finish(at(1000));
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gave_up = first_of(f.events, "gave_up", "v1");
  REQUIRE(gave_up != nullptr);
  CHECK(gave_up->wait_us <= 100);  // at its refusal
  const recorded_event* won = first_of(f.events, "acquired", "v5");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(290) + 100 - at(10.7));
}

// A spinner drawing a new value per try, at once each time: the first new value at once
// is read as a new wait (nothing tells yet), its next at once shows the spinner, whose
// tries are then one wait.
TEST_CASE("fresh values: a spinner's new values at once are split at most once", "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 10'000);
  for (int i = 0; i < 20; ++i) {
    set_attempt(f, "s" + std::to_string(i), 10 + 0.5 * i, op_outcome::contended, 2, 10'000);
  }
  set_release(f, "holder", 25, 1);
  set_attempt(f, "s20", 25.5, op_outcome::ok, 2, 10'000);
  f.timeline.finish(at(1000));
  CHECK(f.events.count("gave_up") <= 1);
  const recorded_event* won = first_of(f.events, "acquired", "s20");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us >= at(25.5) - at(10.5));
}

TEST_CASE("fresh values: the lock free while the poller slept is measured across its changing values",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1);
  set_attempt(f, "v1", 10, op_outcome::contended, 2);
  set_attempt(f, "v2", 210, op_outcome::contended, 2);
  set_release(f, "holder", 250, 1);
  set_attempt(f, "v3", 410, op_outcome::ok, 2);  // 160 ms free while it slept
  f.timeline.finish(at(1000));
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->interval_start_us == at(250) + 100);
  CHECK(idle->interval_us == at(410) - at(250));
  CHECK(first_of(f.events, "acquired", "v3")->wait_us == at(410) + 100 - at(10));
}

TEST_CASE("fresh values: two pollers on two connections wait apart, and one that stops gives up at its last attempt",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  set_attempt(f, "a1", 10, op_outcome::contended, 2);
  set_attempt(f, "b1", 20, op_outcome::contended, 3);
  set_attempt(f, "a2", 60, op_outcome::contended, 2);
  set_attempt(f, "b2", 70, op_outcome::contended, 3);
  set_attempt(f, "a3", 110, op_outcome::contended, 2);  // a stops polling here
  set_attempt(f, "b3", 120, op_outcome::contended, 3);
  set_release(f, "holder", 140, 1);
  set_attempt(f, "b4", 170, op_outcome::ok, 3);
  f.timeline.advance_to(at(20'000));
  CHECK(first_of(f.events, "acquired", "b4")->wait_us == at(170) + 100 - at(20));
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "a3");
  CHECK(gone->wait_us == at(110) + 100 - at(10));
}

TEST_CASE("fresh values: an owner that came back is a stable one, and another owner on its connection is another wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  set_attempt(f, "s", 10, op_outcome::contended, 2);
  set_attempt(f, "s", 60, op_outcome::contended, 2);  // its client keeps one value
  set_attempt(f, "t", 70, op_outcome::contended, 2);  // another waiter sharing the connection
  set_release(f, "holder", 100, 1);
  set_attempt(f, "s", 110, op_outcome::ok, 2);
  f.timeline.finish(at(1000));
  CHECK(first_of(f.events, "acquired", "s")->wait_us == at(110) + 100 - at(10));
  // t's wait is its own (it never acquired: a give-up at the capture's end or later).
  for (const recorded_event& e : f.events.events) {
    if (e.event == "gave_up") CHECK(e.owner == "t");
  }
}

TEST_CASE("fresh values: a Redisson-style owner is its thread's, never linked to another's wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  const std::string a = "11111111-1111-4111-8111-111111111111:1", b = "11111111-1111-4111-8111-111111111111:2";
  f.acquire("holder", 0, 30000);
  f.acquire(a, 10, 30000, op_outcome::contended, 2, "10.0.0.2", 29990);
  f.acquire(b, 20, 30000, op_outcome::contended, 2, "10.0.0.2", 29980);  // a pool's connection
  f.unlock("holder", 100, op_outcome::ok);
  f.acquire(b, 105, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(first_of(f.events, "acquired", b)->wait_us == at(105) + 100 - at(20));
}

TEST_CASE("fresh values: a Redisson fair waiter's acquireFailed is its give-up, at that moment",
          "[timeline][waiter][give-up]") {
  fixture f;
  const std::string w = "11111111-1111-4111-8111-111111111111:7";
  auto fair = [&](lock_op_kind kind, op_outcome outcome, std::string_view owner, double at_ms, std::int64_t ttl) {
    auto o = f.op(kind, outcome, owner, at_ms, owner == w ? 2 : 1);
    o.family = lock_family::redisson_fair;
    o.lease_ms = 30000;
    o.ttl_ms = ttl;
    f.timeline.on_operation(o);
  };
  fair(lock_op_kind::acquire, op_outcome::ok, "holder", 0, -1);
  fair(lock_op_kind::acquire, op_outcome::contended, w, 10, 29990);
  fair(lock_op_kind::acquire, op_outcome::contended, w, 11, 29989);
  fair(lock_op_kind::acquire, op_outcome::abandoned, w, 310, -1);  // tryLock(300 ms) ran out
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == w);
  CHECK(gone->ts_us == at(310) + 100);
  CHECK(gone->wait_us == at(310) - at(10));
  CHECK(f.events.count("contended") == 2);  // the clean-up is no attempt
  // Nothing is left waiting: no later give-up at its deadline.
  f.timeline.advance_to(at(120'000));
  CHECK(f.events.count("gave_up") == 1);
}

TEST_CASE("fresh values: a poller that stopped, then waits again on its connection: a give-up, then a new wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 60'000);
  set_attempt(f, "a1", 10, op_outcome::contended, 2);
  set_attempt(f, "a2", 70, op_outcome::contended, 2);
  set_attempt(f, "a3", 130, op_outcome::contended, 2);  // it gives up after this one
  set_attempt(f, "b1", 900, op_outcome::contended, 2);   // its next wait, on the same connection
  set_attempt(f, "b2", 960, op_outcome::contended, 2);
  set_release(f, "holder", 1000, 1);
  set_attempt(f, "b3", 1020, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "a3");
  CHECK(gone->wait_us == at(130) + 100 - at(10));
  CHECK(gone->ts_us == at(900) + 100);  // known when the new wait began
  CHECK(first_of(f.events, "acquired", "b3")->wait_us == at(1020) + 100 - at(900));
}

// A poller that keeps one value for every attempt of every wait (ioredis-lock's Lock):
// a give-up leaves nothing on the wire, and its next wait on the lock comes with the
// same owner. Past three of its spacings (and a floor), it had stopped.
TEST_CASE("stable value: a poller that stopped, then waits again with the same value: a give-up, then a new wait",
          "[timeline][waiter][give-up]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 60'000);
  set_attempt(f, "p", 10, op_outcome::contended, 2);
  set_attempt(f, "p", 160, op_outcome::contended, 2);
  set_attempt(f, "p", 310, op_outcome::contended, 2);   // it gives up after this one
  set_attempt(f, "p", 1400, op_outcome::contended, 2);  // its next wait, 1.09 s later
  set_attempt(f, "p", 1550, op_outcome::contended, 2);
  set_release(f, "holder", 1600, 1);
  set_attempt(f, "p", 1700, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "p");
  CHECK(gone->wait_us == at(310) + 100 - at(10));
  CHECK(gone->ts_us == at(1400) + 100);  // known when the new wait began
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(1700) + 100 - at(1400));
}

TEST_CASE("stable value: a poller that stopped and later acquires at once waited no more, and the free stretch was no one's",
          "[timeline][waiter][give-up]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 60'000);
  set_attempt(f, "p", 10, op_outcome::contended, 2);
  set_attempt(f, "p", 160, op_outcome::contended, 2);
  set_attempt(f, "p", 310, op_outcome::contended, 2);  // it gives up after this one
  set_release(f, "holder", 400, 1);
  set_attempt(f, "p", 1400, op_outcome::ok, 2);  // a new call, its first attempt wins
  REQUIRE(f.events.count("gave_up") == 1);
  CHECK(f.events.first("gave_up")->wait_us == at(310) + 100 - at(10));
  CHECK(first_of(f.events, "acquired", "p")->wait_us == -1);
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
}

TEST_CASE("stable value: a poller's slow retry within its spacings, one told a longer TTL, and a pub/sub waiter wait on",
          "[timeline][waiter][give-up]") {
  SECTION("a retry within three spacings (and the floor) is the same wait") {
    fixture f;
    set_attempt(f, "holder", 0, op_outcome::ok, 1, 60'000);
    set_attempt(f, "p", 10, op_outcome::contended, 2);
    set_attempt(f, "p", 110, op_outcome::contended, 2);
    set_attempt(f, "p", 400, op_outcome::contended, 2);  // 290 ms: under 3 x 100 ms + 20 ms
    set_release(f, "holder", 450, 1);
    set_attempt(f, "p", 500, op_outcome::ok, 2);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", "p")->wait_us == at(500) + 100 - at(10));
  }
  SECTION("a poller whose refusal told it a TTL may sleep that long") {
    fixture f;
    set_attempt(f, "holder", 0, op_outcome::ok, 1, 60'000);
    auto told = [&](double at_ms, op_outcome outcome) {
      auto o = f.op(lock_op_kind::acquire, outcome, "p", at_ms, 2);
      o.family = lock_family::set_based;
      o.lease_ms = 1000;
      o.ttl_ms = outcome == op_outcome::contended ? 2000 : -1;
      f.timeline.on_operation(o);
    };
    told(10, op_outcome::contended);
    told(60, op_outcome::contended);
    told(1900, op_outcome::contended);  // slept most of the TTL it was told
    set_release(f, "holder", 1950, 1);
    told(2000, op_outcome::ok);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", "p")->wait_us == at(2000) + 100 - at(10));
  }
  SECTION("a pub/sub waiter waits for a message as long as it likes") {
    fixture f;
    const std::string w = "11111111-1111-4111-8111-111111111111:3";
    f.acquire("holder", 0, 60'000);
    f.acquire(w, 10, 60'000, op_outcome::contended, 2);
    f.acquire(w, 60, 60'000, op_outcome::contended, 2);
    f.acquire(w, 1500, 60'000, op_outcome::contended, 2);
    f.unlock("holder", 1550, op_outcome::ok);
    f.acquire(w, 1600, 60'000, op_outcome::ok, 2);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", w)->wait_us == at(1600) + 100 - at(10));
  }
}
