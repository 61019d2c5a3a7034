// Two ways a waiter's wait ends or goes on that only its connection tells (the tenth
// held-out set, docs/reference/clients.md):
// - a client that draws a new value for each round of attempts (dlock: a new
//   ioredis-lock Lock per push, retried with that value a few times), waiting between
//   rounds with nothing on the wire for a publication that the lock went free or its own
//   timer: its next round's new value, sent long after its round's cadence and at once
//   after the lock went free, or as the connection's next lock operation after it, later
//   still, continues the one wait (sooner, it is a new wait: redis-py's next acquire);
// - a waiter whose connection deletes the hold that refused it (the Chat SDK's
//   onLockConflict "force": a plain DEL, then an acquire with a new value): its wait
//   ended when it sent the DEL (gave_up, ended "forced"), and the acquisition after it
//   has no wait.
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// `SET A value NX PX 1000` over `connection` at at_ms (answered 0.1 ms later).
void try_set(fixture& f, std::string_view value, double at_ms, op_outcome outcome, std::uint64_t connection,
             std::int64_t lease_ms = 1000) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = "A";
  o.lease_ms = lease_ms;
  f.timeline.on_operation(o);
}

// A compare-and-delete release of `value`.
void release(fixture& f, std::string_view value, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = "A";
  f.timeline.on_operation(o);
}

// A plain `DEL A` over `connection`.
void plain_del(fixture& f, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::del, op_outcome::ok, "", at_ms, connection);
  o.family = lock_family::unknown;
  o.lock = "A";
  f.timeline.on_operation(o);
}

// A round of 4 attempts 50 ms apart with one value, from `from_ms`, all refused.
void refused_round(fixture& f, std::string_view value, double from_ms, std::uint64_t connection) {
  for (int i = 0; i < 4; ++i) try_set(f, value, from_ms + 50 * i, op_outcome::contended, connection);
}

}  // namespace

TEST_CASE("rounds: a new value sent at once after the lock went free continues the wait of the round before",
          "[timeline][waiter][rounds]") {
  fixture f;
  try_set(f, "holder", 0, op_outcome::ok, 1);
  refused_round(f, "round1", 10, 2);  // 10 .. 160 ms, then silence until the release
  release(f, "holder", 900, 1);
  try_set(f, "round2", 902, op_outcome::ok, 2);  // woken: 2 ms after the lock went free
  f.timeline.advance_to(at(10'000));
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = first_of(f.events, "acquired", "round2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(902) + 100 - at(10));
}

TEST_CASE("rounds: a new value at once after the last refusal is a new wait (a poller that gave up and began again)",
          "[timeline][waiter][rounds]") {
  // redis-py: B's blocking acquire runs out right after its last refusal, and its next
  // acquire (a new token) comes 4 ms later, just after A released.
  fixture f;
  try_set(f, "holder", 0, op_outcome::ok, 1);
  refused_round(f, "round1", 10, 2);  // its last refusal answered at 160.1 ms
  release(f, "holder", 162, 1);
  try_set(f, "round2", 164, op_outcome::ok, 2);
  f.timeline.advance_to(at(10'000));
  const recorded_event* gone = first_of(f.events, "gave_up", "round1");
  REQUIRE(gone != nullptr);
  const recorded_event* won = first_of(f.events, "acquired", "round2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us < 0);
}

TEST_CASE("rounds: after a silent wait for its timer, the next round continues the wait, and the free time is reported",
          "[timeline][waiter][rounds]") {
  // The holder's lease runs out with nothing published: the waiter's timer (twice the
  // lease after its round began) sends the next round, the connection's next lock
  // operation after the round's last refusal.
  fixture f;
  try_set(f, "holder", 0, op_outcome::ok, 1);
  refused_round(f, "round1", 10, 2);  // 10 .. 160 ms
  try_set(f, "round2", 2010, op_outcome::ok, 2);
  f.timeline.advance_to(at(10'000));
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = first_of(f.events, "acquired", "round2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(2010) + 100 - at(10));
  // Free from the lease's end (1000.1 ms) until the next round: while it waited.
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->interval_us >= at(2010) - at(1002));
}

TEST_CASE("rounds: a new value after the connection tried or took another lock meanwhile is a new wait",
          "[timeline][waiter][rounds]") {
  for (const op_outcome other_outcome : {op_outcome::contended, op_outcome::ok}) {
    INFO("the other lock's attempt: " << (other_outcome == op_outcome::ok ? "acquired" : "refused"));
    fixture f;
    try_set(f, "holder", 0, op_outcome::ok, 1);
    try_set(f, "b-holder", 1, op_outcome::ok, 3);
    if (other_outcome == op_outcome::ok) release(f, "b-holder", 2, 3);
    refused_round(f, "round1", 10, 2);
    auto other = f.op(lock_op_kind::acquire, other_outcome, "b-value", 500, 2);
    other.family = lock_family::set_based;
    other.lock = "B";
    other.lease_ms = 1000;
    f.timeline.on_operation(other);
    release(f, "holder", 900, 1);
    try_set(f, "round2", 950, op_outcome::ok, 2);
    f.timeline.advance_to(at(10'000));
    const recorded_event* gone = first_of(f.events, "gave_up", "round1");
    REQUIRE(gone != nullptr);
    CHECK(gone->wait_us == at(160) + 100 - at(10));
    const recorded_event* won = first_of(f.events, "acquired", "round2");
    REQUIRE(won != nullptr);
    CHECK(won->wait_us < 0);
  }
}

TEST_CASE("forcing: a waiter that deletes the hold that refused it gave up then, and acquires without a wait",
          "[timeline][waiter][forced]") {
  fixture f;
  try_set(f, "holder", 0, op_outcome::ok, 1, 5000);
  for (int i = 0; i < 8; ++i) try_set(f, "t" + std::to_string(i), 10 + 150 * i, op_outcome::contended, 2);
  plain_del(f, 1061, 2);  // the holder's key, deleted by the waiter's connection
  try_set(f, "t-forced", 1061.3, op_outcome::ok, 2);
  f.timeline.advance_to(at(10'000));
  const recorded_event* gone = f.events.first("gave_up");
  REQUIRE(gone != nullptr);
  CHECK(gone->ended == locks::wait_end::forced);
  CHECK(gone->wait_us == at(1061) - at(10));
  const recorded_event* won = first_of(f.events, "acquired", "t-forced");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us < 0);
  // The hold it deleted ended there (a release by another owner's connection).
  CHECK(f.events.count("anomaly:released_other_owner") == 1);
}

// RQ's scheduler keeps one value (its pid) for every queue's lock: a queue's lock refused
// is left to its holder and the next queue's taken, and when it stops it deletes every
// queue's lock, held or not. Its refused try ended at that try, not at the DEL, and the
// time the lock stood free before the DEL was no missed wake-up. Another value's
// acquisition on the connection says nothing of this waiter.
TEST_CASE("forcing: a waiter whose own value took another lock, then deleted the hold that refused it, gave up at "
          "its try",
          "[timeline][waiter][forced][idle]") {
  fixture f;
  try_set(f, "holder", 0, op_outcome::ok, 1, 60'000);
  try_set(f, "pid", 10, op_outcome::contended, 2, 60'000);
  const auto take_b = [&](std::string_view value) {
    auto o = f.op(lock_op_kind::acquire, op_outcome::ok, value, 11, 2);
    o.family = lock_family::set_based;
    o.lock = "B";
    o.lease_ms = 60'000;
    f.timeline.on_operation(o);
  };
  const bool own = GENERATE(true, false);
  take_b(own ? "pid" : "other-task");
  release(f, "holder", 300, 1);                      // A free from here ...
  try_set(f, "next", 700, op_outcome::ok, 3, 60'000);  // ... until another takes it
  plain_del(f, 900, 2);                              // the scheduler stops
  f.timeline.advance_to(at(10'000));
  const recorded_event* gone = first_of(f.events, "gave_up", "pid");
  REQUIRE(gone != nullptr);
  CHECK(gone->ended == locks::wait_end::forced);
  CHECK(gone->wait_us == (own ? at(10) + 100 : at(900)) - at(10));
  CHECK(f.events.count("anomaly:idle_with_waiters") == (own ? 0u : 1u));
}
