// A client that draws its value at each attempt from a coarse clock (redlock-js:
// `new Date().toString()`, whole seconds) repeats it for a while, then changes it in the
// middle of a wait: the attempts on its connection at its own cadence are still one
// wait (waiter_of_fresh_value, value_redrawn_at_cadence in timeline/waiter_moved_on.hpp).
// The recorded client is measured against its own log by
// tests/locks/effect_clients/measure.py (redlock_js, the ninth held-out set).
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;


TEST_CASE("redrawn value: a repeated value that changes at the waiter's cadence continues its wait",
          "[timeline][waiter][fresh][redrawn]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  for (double t : {10.0, 60.0, 110.0, 160.0}) set_attempt(f, "second 57", t, op_outcome::contended, 2);
  set_attempt(f, "second 58", 210, op_outcome::contended, 2);  // the clock ticked: a new value
  set_attempt(f, "second 58", 260, op_outcome::contended, 2);
  set_release(f, "holder", 280, 1);
  set_attempt(f, "second 58", 340, op_outcome::ok, 2);  // 60 ms free while it slept
  f.timeline.advance_to(at(60'000));
  const recorded_event* won = first_of(f.events, "acquired", "second 58");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(340) + 100 - at(10));
  CHECK(f.events.count("gave_up") == 0);  // the old value's waiter was this one
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->interval_start_us == at(280) + 100);
}

TEST_CASE("redrawn value: another value on the connection off the waiter's cadence is another task's wait",
          "[timeline][waiter][fresh][redrawn]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  set_attempt(f, "a", 10, op_outcome::contended, 2);
  set_attempt(f, "a", 60, op_outcome::contended, 2);
  set_attempt(f, "a", 110, op_outcome::contended, 2);
  set_attempt(f, "b", 125, op_outcome::contended, 2);  // 15 ms after a's, a's spacing 50 ms
  set_attempt(f, "a", 160, op_outcome::contended, 2);
  set_release(f, "holder", 180, 1);
  set_attempt(f, "a", 210, op_outcome::ok, 2);
  const recorded_event* won = first_of(f.events, "acquired", "a");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(210) + 100 - at(10));
  f.timeline.finish(at(1000));
  for (const recorded_event& e : f.events.events) {
    if (e.event == "gave_up") CHECK(e.owner == "b");
  }
}

TEST_CASE("redrawn value: a client that released its refused value and attempts with another began a new wait",
          "[timeline][waiter][fresh][redrawn]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  for (double t : {10.0, 60.0, 110.0}) set_attempt(f, "x", t, op_outcome::contended, 2);
  // It gave up after that refusal and released its value (@sesamecare-oss/redlock), then
  // its next acquire drew another, at the cadence.
  auto o = f.op(lock_op_kind::unlock, op_outcome::none, "x", 111, 2);
  o.family = lock_family::set_based;
  f.timeline.on_operation(o);
  set_attempt(f, "y", 160, op_outcome::contended, 2);
  set_release(f, "holder", 180, 1);
  set_attempt(f, "y", 210, op_outcome::ok, 2);
  const recorded_event* won = first_of(f.events, "acquired", "y");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(210) + 100 - at(160));
  f.timeline.advance_to(at(60'000));  // x's wait ended unseen: found at its deadline
  const recorded_event* gone = f.events.first("gave_up");
  REQUIRE(gone != nullptr);
  CHECK(gone->owner == "x");
}

TEST_CASE("redrawn value: a new value after the connection worked on another lock is a new wait",
          "[timeline][waiter][fresh][redrawn]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  for (double t : {10.0, 60.0, 110.0}) set_attempt(f, "x", t, op_outcome::contended, 2);
  // Its connection attempts another lock between (a client that gave up on A went on).
  auto other = f.op(lock_op_kind::acquire, op_outcome::contended, "z", 130, 2);
  other.family = lock_family::set_based;
  other.lock = "B";
  other.lease_ms = 1000;
  f.timeline.on_operation(other);
  set_attempt(f, "y", 160, op_outcome::contended, 2);
  set_release(f, "holder", 180, 1);
  set_attempt(f, "y", 210, op_outcome::ok, 2);
  const recorded_event* won = first_of(f.events, "acquired", "y");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(210) + 100 - at(160));
}

// What its connection carries between tries tells a redraw from a new wait: a client that
// reads who holds the lock before each wait (redis_functions' worker: FCALL_RO, then its
// tries with a value drawn per wait, the patience of one wait in five 150 ms) sends that
// read between its last refusal and the next wait's first try, never between two tries.
TEST_CASE("redrawn value: a new value after more went over the connection than between its tries is a new wait",
          "[timeline][waiter][fresh][redrawn]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 5000);
  std::uint32_t sequence = 0;
  const auto attempt = [&](std::string_view value, double t, op_outcome outcome, std::uint32_t between) {
    auto o = f.op(lock_op_kind::acquire, outcome, value, t, 2);
    o.family = lock_family::set_based;
    o.lease_ms = 1000;
    sequence += between + 1;
    o.connection_sequence = sequence;
    f.timeline.on_operation(o);
  };
  attempt("x", 10, op_outcome::contended, 1);  // the read before its wait
  for (double t : {60.0, 110.0, 160.0}) attempt("x", t, op_outcome::contended, 0);
  SECTION("a read before the new value: x gave up, y's wait is its own") {
    attempt("y", 215, op_outcome::contended, 1);
    set_release(f, "holder", 230, 1);
    attempt("y", 265, op_outcome::ok, 0);
    const recorded_event* won = first_of(f.events, "acquired", "y");
    REQUIRE(won != nullptr);
    CHECK(won->wait_us == at(265) + 100 - at(215));
    f.timeline.finish(at(60'000));
    const recorded_event* gone = f.events.first("gave_up");
    REQUIRE(gone != nullptr);
    CHECK(gone->owner == "x");
  }
  SECTION("nothing between, as between its tries: the value redrawn mid-wait") {
    attempt("y", 215, op_outcome::contended, 0);
    set_release(f, "holder", 230, 1);
    attempt("y", 265, op_outcome::ok, 0);
    const recorded_event* won = first_of(f.events, "acquired", "y");
    REQUIRE(won != nullptr);
    CHECK(won->wait_us == at(265) + 100 - at(10));
    f.timeline.finish(at(60'000));
    CHECK(f.events.count("gave_up") == 0);
  }
}
