// The "moved on" rule of waiter matching (analyzer/locks/src/timeline/waiter_moved_on.hpp):
// a poller that keeps one value for every wait (ioredis-lock's Lock) gives up, takes
// another lock on its connection, and comes back to this one with the same value, often
// within its spacing: its wait ended at its last attempt. A connection that carries
// several tasks side by side (Node clients multiplex: one holds B while another polls A)
// keeps its waiter's wait whole. The recorded clients are measured against their own logs
// by tests/locks/effect_clients/measure.py (ioredis_lock; sesame_redlock_mux multiplexes).
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// A SET NX attempt on `lock` (lease 1 s unless said), or with `kind` another operation
// that sets a lease (a renewal).
void attempt(fixture& f, std::string_view lock, std::string_view value, double at_ms, op_outcome outcome,
             std::uint64_t connection, std::int64_t lease_ms = 1000, lock_op_kind kind = lock_op_kind::acquire) {
  auto o = f.op(kind, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  o.lease_ms = lease_ms;
  f.timeline.on_operation(o);
}

void release(fixture& f, std::string_view lock, std::string_view value, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  f.timeline.on_operation(o);
}

const recorded_event* acquired_on(const fixture& f, std::string_view lock, std::string_view owner) {
  for (const recorded_event& e : f.events.events) {
    if (e.event == "acquired" && e.lock == lock && e.owner == owner) return &e;
  }
  FAIL("no acquisition of " << lock << " by " << owner);
  return nullptr;
}

// p polls A every 150 ms from connection 2 and gives up after its attempt at 310.
void polls_then_stops(fixture& f) {
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "p", 10, op_outcome::contended, 2);
  attempt(f, "A", "p", 160, op_outcome::contended, 2);
  attempt(f, "A", "p", 310, op_outcome::contended, 2);
}

}  // namespace

TEST_CASE("moved on: a poller that took and released another lock, then tries again within its spacing, gave up",
          "[timeline][waiter][give-up][moved-on]") {
  fixture f;
  polls_then_stops(f);
  attempt(f, "B", "q", 330, op_outcome::ok, 2);  // its next task
  release(f, "B", "q", 420, 2);
  attempt(f, "A", "p", 440, op_outcome::contended, 2);  // 130 ms after its last: on its cadence
  attempt(f, "A", "p", 590, op_outcome::contended, 2);
  release(f, "A", "holder", 600, 1);
  attempt(f, "A", "p", 740, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "p");
  CHECK(gone->wait_us == at(310) + 100 - at(10));
  CHECK(gone->ended == locks::wait_end::new_wait);
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(740) + 100 - at(440));
}

TEST_CASE("moved on: a poller whose connection took another lock and whose next attempt is off its cadence gave up",
          "[timeline][waiter][give-up][moved-on]") {
  fixture f;
  polls_then_stops(f);
  attempt(f, "B", "q", 330, op_outcome::ok, 2);  // held (its release not seen yet)
  attempt(f, "A", "p", 560, op_outcome::contended, 2);  // 250 ms: past 150 + 75
  release(f, "A", "holder", 600, 1);
  attempt(f, "A", "p", 710, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  CHECK(f.events.first("gave_up")->wait_us == at(310) + 100 - at(10));
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(710) + 100 - at(560));
}

TEST_CASE("moved on: a connection carrying two tasks side by side keeps its poller's wait whole",
          "[timeline][waiter][moved-on][multiplex]") {
  SECTION("the other task takes a lock and the poller polls on while it is held") {
    fixture f;
    polls_then_stops(f);
    attempt(f, "B", "q", 330, op_outcome::ok, 2);
    attempt(f, "A", "p", 460, op_outcome::contended, 2);  // on its cadence, B still held
    release(f, "B", "q", 500, 2);
    attempt(f, "A", "p", 610, op_outcome::contended, 2);  // a whole hold of B since: still polling
    release(f, "A", "holder", 650, 1);
    attempt(f, "A", "p", 760, op_outcome::ok, 2);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", "p")->wait_us == at(760) + 100 - at(10));
  }
  SECTION("the other task's whole holds fit in the poller's first spacing and in its second") {
    fixture f;
    attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
    attempt(f, "A", "p", 10, op_outcome::contended, 2);
    attempt(f, "B", "q", 15, op_outcome::ok, 2);  // the other task, over the same connection
    release(f, "B", "q", 45, 2);
    attempt(f, "A", "p", 85, op_outcome::contended, 2);  // no spacing known yet: it waits on
    attempt(f, "B", "r", 90, op_outcome::ok, 2);
    release(f, "B", "r", 120, 2);
    release(f, "A", "holder", 130, 1);
    attempt(f, "A", "p", 145, op_outcome::ok, 2);  // on its cadence, after another whole hold
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", "p")->wait_us == at(145) + 100 - at(10));
  }
  SECTION("two waits on the connection overlap, then the other task's whole hold fits in one spacing") {
    fixture f;
    attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
    attempt(f, "B", "holder", 0, op_outcome::ok, 3, 60'000);
    attempt(f, "A", "p", 10, op_outcome::contended, 2);
    attempt(f, "B", "q", 20, op_outcome::contended, 2);  // task q waits for B beside p
    attempt(f, "A", "p", 160, op_outcome::contended, 2);
    attempt(f, "B", "q", 170, op_outcome::contended, 2);
    attempt(f, "A", "p", 310, op_outcome::contended, 2);
    release(f, "B", "holder", 315, 3);
    attempt(f, "B", "q", 320, op_outcome::ok, 2);  // q takes B ...
    release(f, "B", "q", 400, 2);                  // ... and is done with it within p's spacing
    attempt(f, "A", "p", 460, op_outcome::contended, 2);
    release(f, "A", "holder", 500, 1);
    attempt(f, "A", "p", 610, op_outcome::ok, 2);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(first_of(f.events, "acquired", "p")->wait_us == at(610) + 100 - at(10));
  }
}

TEST_CASE("moved on: a poller whose connection took nothing, retrying on its cadence, waits on",
          "[timeline][waiter][moved-on]") {
  fixture f;
  polls_then_stops(f);
  attempt(f, "B", "q", 330, op_outcome::ok, 5);  // another connection's
  release(f, "B", "q", 420, 5);
  attempt(f, "A", "p", 460, op_outcome::contended, 2);
  release(f, "A", "holder", 500, 1);
  attempt(f, "A", "p", 610, op_outcome::ok, 2);
  CHECK(f.events.count("gave_up") == 0);
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(610) + 100 - at(10));
}

// Joined mid-run, a give-up is often seen by its last attempt alone: whether its client
// keeps one value or draws one per attempt is not known yet. Its connection then took
// another lock (the client went on to its next task) and later tries this lock with a
// new value: that begins a new wait, not the old one's retry seconds late.
TEST_CASE("moved on: a waiter seen by one attempt, its connection then took another lock: a new value is a new wait",
          "[timeline][waiter][give-up][moved-on][fresh]") {
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2);  // its last attempt before giving up
  attempt(f, "B", "w1", 20, op_outcome::ok, 2);          // its next task
  attempt(f, "A", "v2", 1200, op_outcome::contended, 2);  // B expired meanwhile; A again
  attempt(f, "A", "v3", 1350, op_outcome::contended, 2);
  release(f, "A", "holder", 1400, 1);
  attempt(f, "A", "v4", 1500, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  CHECK(f.events.first("gave_up")->owner == "v1");
  CHECK(first_of(f.events, "acquired", "v4")->wait_us == at(1500) + 100 - at(1200));
}

// Joined mid-run, a give-up of a client that keeps one value for every wait (redislock's
// Lock) is seen by its last attempt alone; its connection then holds another lock from
// acquisition to release (or to a release refused once its lease ran out) and comes back
// to this lock with the same value. No spacing is known for that first gap; the attempt
// after it gives one, and a first gap far off it was a give-up and a new wait. A first
// gap on the cadence is a connection carrying another task beside the wait (above).
TEST_CASE("moved on: a waiter seen by one attempt, a whole hold of another lock, then the same value polling on "
          "a cadence far shorter than that gap: a give-up at its first attempt",
          "[timeline][waiter][give-up][moved-on]") {
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "p", 10, op_outcome::contended, 2);  // its last attempt before giving up
  attempt(f, "B", "q", 30, op_outcome::ok, 2);          // its next task ...
  SECTION("released") { release(f, "B", "q", 200, 2); }
  SECTION("its release refused after its lease ran out") {
    auto o = f.op(lock_op_kind::unlock, op_outcome::rejected, "q", 1300, 2);
    o.family = lock_family::set_based;
    o.lock = "B";
    f.timeline.on_operation(o);
  }
  attempt(f, "A", "p", 1400, op_outcome::contended, 2);  // back to A, the same value
  attempt(f, "A", "p", 1550, op_outcome::contended, 2);  // polling every 150 ms
  attempt(f, "A", "p", 1700, op_outcome::contended, 2);
  release(f, "A", "holder", 1750, 1);
  attempt(f, "A", "p", 1850, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "p");
  CHECK(gone->ended == locks::wait_end::new_wait);
  CHECK(gone->wait_us == 0);  // one attempt seen
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(1850) - at(1400));
  // Its connection serves one wait at a time: its next give-up, a whole hold of B and a
  // retry of A on the cadence, is split there too.
  release(f, "A", "p", 1890, 2);
  attempt(f, "A", "holder2", 1900, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "p", 1960, op_outcome::contended, 2);
  attempt(f, "A", "p", 2110, op_outcome::contended, 2);  // gives up after this one
  attempt(f, "B", "q2", 2120, op_outcome::ok, 2);
  release(f, "B", "q2", 2160, 2);
  attempt(f, "A", "p", 2200, op_outcome::contended, 2);  // 90 ms: within its cadence
  CHECK(f.events.count("gave_up") == 2);
}

// A client that sends one value per thread for every lock and round (Beaker's creation
// lock) makes a single try, refused, goes on to rounds on another lock under the same
// value, and only then comes back. Its value's whole hold of the other lock since its try
// ended the wait there: the time the first lock stood free meanwhile was no missed
// wake-up. Another value's whole hold on the connection (another task, side by side,
// above) or the other key still held (a group taking its keys in turn) says nothing.
TEST_CASE("moved on: a single try whose own value then took and released another lock gave up at its try",
          "[timeline][waiter][give-up][moved-on][idle]") {
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "t", 10, op_outcome::contended, 2);  // its single try
  attempt(f, "B", "t", 40, op_outcome::ok, 2);         // the thread's next round, on B
  release(f, "B", "t", 150, 2);
  release(f, "A", "holder", 320, 1);  // A free from here ...
  SECTION("its next round takes A at once") {
    attempt(f, "A", "t", 700, op_outcome::ok, 2);  // ... until its next round
    CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
    REQUIRE(f.events.count("gave_up") == 1);
    CHECK(f.events.first("gave_up")->wait_us == at(10) + 100 - at(10));  // its try alone
    CHECK(f.events.first("gave_up")->ended == locks::wait_end::new_wait);
    CHECK(acquired_on(f, "A", "t")->wait_us < 0);
  }
  SECTION("another takes A, and its next round is refused") {
    attempt(f, "A", "other", 600, op_outcome::ok, 3, 60'000);
    attempt(f, "A", "t", 700, op_outcome::contended, 2);
    CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
    CHECK(f.events.count("gave_up") == 1);
  }
}

TEST_CASE("moved on: a single try whose connection held another lock under another value, or still holds its "
          "own, waits on",
          "[timeline][waiter][moved-on][idle]") {
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "t", 10, op_outcome::contended, 2);
  SECTION("another task's value") {
    attempt(f, "B", "q", 40, op_outcome::ok, 2);
    release(f, "B", "q", 150, 2);
  }
  SECTION("its own value, the other key still held") { attempt(f, "B", "t", 40, op_outcome::ok, 2); }
  release(f, "A", "holder", 320, 1);
  attempt(f, "A", "t", 700, op_outcome::ok, 2);
  CHECK(f.events.count("gave_up") == 0);
  CHECK(acquired_on(f, "A", "t")->wait_us == at(700) + 100 - at(10));
  CHECK(f.events.count("anomaly:idle_with_waiters") == 1);
}

// The free interval kept for a waiter to confirm is the longest one a waiter saw; once
// none of the waiters present was waiting when it began (its own waiters left), a newer,
// shorter stretch that a present waiter did wait through is the one reported.
TEST_CASE("free while waiting: an old long stretch no present waiter saw does not hide a newer one",
          "[timeline][waiter][idle]") {
  fixture f;
  attempt(f, "A", "h1", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "s", 10, op_outcome::contended, 2);  // s waits, and will leave unseen
  release(f, "A", "h1", 100, 1);
  attempt(f, "A", "h2", 1000, op_outcome::ok, 3, 60'000);  // free 900 ms; s never came back
  attempt(f, "A", "p", 1030, op_outcome::contended, 4);
  f.timeline.on_connection_end(2, at(1040));  // s's process ends: its give-up
  release(f, "A", "h2", 1100, 3);
  attempt(f, "A", "h3", 1213, op_outcome::ok, 5, 60'000);  // free 113 ms while p slept
  attempt(f, "A", "p", 1260, op_outcome::contended, 4);
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->owner == "p");
  CHECK(idle->interval_start_us == at(1100) + 100);
  CHECK(idle->interval_us == at(1213) - at(1100));
}

// Redisson's tryLock, and node-redisson's, UNSUBSCRIBEs when its wait time runs out and
// returns false: nothing else on the wire. Such a waiter stays listed until its deadline
// and then ends as of its UNSUBSCRIBE, but it listens no more: the next waiter of the same
// client (node-redisson draws a new owner for every lock object) subscribes and leaves on
// its own, and its give-up too is known by its UNSUBSCRIBE (not a lower bound at its last
// attempt).
TEST_CASE("left waiters: a client's waiters that each time out and UNSUBSCRIBE give up when they left",
          "[timeline][waiter][give-up][pubsub]") {
  fixture f;
  const std::string a = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:11111111-1111-4111-8111-111111111111";
  const std::string b = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:22222222-2222-4222-8222-222222222222";
  f.acquire("bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1", 0, 30'000);
  f.acquire(a, 10, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'990);
  f.acquire(a, 11, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'989);
  f.pubsub(lock_op_kind::subscribe, 12, 3, "10.0.0.2", 1);
  f.pubsub(lock_op_kind::unsubscribe, 400, 3, "10.0.0.2", 0);  // a's wait time ran out
  f.acquire(b, 1000, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  f.acquire(b, 1001, 30'000, op_outcome::contended, 2, "10.0.0.2", 28'999);
  f.pubsub(lock_op_kind::subscribe, 1002, 3, "10.0.0.2", 1);
  f.pubsub(lock_op_kind::unsubscribe, 1400, 3, "10.0.0.2", 0);  // b's too
  f.timeline.advance_to(at(40'000));
  const recorded_event* gone_a = first_of(f.events, "gave_up", a);
  const recorded_event* gone_b = first_of(f.events, "gave_up", b);
  REQUIRE(gone_a != nullptr);
  REQUIRE(gone_b != nullptr);
  CHECK(gone_a->ended == locks::wait_end::unsubscribed);
  CHECK(gone_a->wait_us == at(400) + 100 - at(10));
  CHECK(gone_b->ended == locks::wait_end::unsubscribed);
  CHECK(gone_b->wait_us == at(1400) + 100 - at(1000));
}

// The same for a poller that draws a new value for every attempt (warlock, redis-lock):
// on a connection seen carrying two waits side by side, the other task's acquisition
// between two of its attempts does not end its wait while it keeps its cadence.
TEST_CASE("moved on: a fresh-value poller on a multiplexing connection keeps its wait while it keeps its cadence",
          "[timeline][waiter][moved-on][multiplex][fresh]") {
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "B", "holder", 0, op_outcome::ok, 3, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2);
  attempt(f, "B", "q", 20, op_outcome::contended, 2);  // task q waits for B beside p
  attempt(f, "A", "v2", 110, op_outcome::contended, 2);
  attempt(f, "B", "q", 120, op_outcome::contended, 2);
  attempt(f, "A", "v3", 210, op_outcome::contended, 2);
  release(f, "B", "holder", 215, 3);
  attempt(f, "B", "q", 220, op_outcome::ok, 2);  // q takes B between two of p's attempts
  attempt(f, "A", "v4", 310, op_outcome::contended, 2);
  release(f, "A", "holder", 350, 1);
  attempt(f, "A", "v5", 410, op_outcome::ok, 2);
  CHECK(f.events.count("gave_up") == 0);
  CHECK(first_of(f.events, "acquired", "v5")->wait_us == at(410) + 100 - at(10));
}

// A clean-up release (waiter_moved_on.hpp): a client that draws a new value for every
// attempt and releases each refused attempt's value at once (@redis-kit/lock) waits once;
// its give-up shows by what its connection does next, or by a retry that comes back late
// against the lease it sets (node-redlock with retryCount 0 on an application's timer).
namespace {

// A release of a refused value (answered 0, or with `outcome` another answer: an error).
void cleanup(fixture& f, std::string_view lock, std::string_view value, double at_ms, std::uint64_t connection,
             op_outcome outcome = op_outcome::none) {
  auto o = f.op(lock_op_kind::unlock, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  f.timeline.on_operation(o);
}

// p attempts A from connection 2 with a new value each time, 50 ms apart, cleaning up
// each refused attempt's value 1 ms later; its third clean-up at 111.
void retries_with_cleanups(fixture& f) {
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2);
  cleanup(f, "A", "v1", 11, 2);
  attempt(f, "A", "v2", 60, op_outcome::contended, 2);
  cleanup(f, "A", "v2", 61, 2);
  attempt(f, "A", "v3", 110, op_outcome::contended, 2);
  cleanup(f, "A", "v3", 111, 2);
}

}  // namespace

TEST_CASE("clean-up: a release of each refused attempt's value, followed by a retry soon, is one wait",
          "[timeline][waiter][fresh][cleanup]") {
  fixture f;
  retries_with_cleanups(f);
  release(f, "A", "holder", 130, 1);
  attempt(f, "A", "v4", 160, op_outcome::ok, 2);
  f.timeline.finish(at(2000));
  CHECK(f.events.count("contended") == 3);
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = first_of(f.events, "acquired", "v4");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(160) + 100 - at(10));
}

TEST_CASE("clean-up: the same release sent again after a NOSCRIPT answer is the same clean-up",
          "[timeline][waiter][cleanup][noscript]") {
  // node-redlock calls its release by SHA1: its first use on a server is answered NOSCRIPT
  // and sent again as text, 22 ms after the refusal; the value's next attempt takes the lock.
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "v", 10, op_outcome::contended, 2);
  cleanup(f, "A", "v", 21, 2, op_outcome::error);  // NOSCRIPT
  cleanup(f, "A", "v", 32, 2);
  release(f, "A", "holder", 40, 1);
  attempt(f, "A", "v", 59, op_outcome::ok, 2);
  f.timeline.finish(at(2000));
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = first_of(f.events, "acquired", "v");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(59) + 100 - at(10));
}

TEST_CASE("clean-up: a single try refused by its own connection's hold gave up at that connection's next step",
          "[timeline][waiter][cleanup][give-up]") {
  // A RedLock-style client holding A over its connection tries A again for another task,
  // is refused, cleans up and releases its own hold: the try ended at its clean-up. That
  // the connection runs tasks side by side keeps a new value from continuing the try, but
  // does not leave the try open (the 3-server shape's generator never retries).
  fixture f;
  attempt(f, "A", "h", 0, op_outcome::ok, 2, 10'000);
  attempt(f, "A", "v", 10, op_outcome::contended, 2, 10'000);
  cleanup(f, "A", "v", 11, 2);
  release(f, "A", "h", 12, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  CHECK(f.events.first("gave_up")->owner == "v");
  CHECK(f.events.first("gave_up")->ended == locks::wait_end::new_wait);
}

TEST_CASE("clean-up: a retry's cadence, once learnt, extends the window past the lease's first bound",
          "[timeline][waiter][fresh][cleanup]") {
  // Lease 400 ms: the first retry must come within 100 ms of the clean-up; once it did
  // (90 ms), its spacing plus half of it (135 ms) judges the next.
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2, 400);
  cleanup(f, "A", "v1", 11, 2);
  attempt(f, "A", "v2", 101, op_outcome::contended, 2, 400);
  cleanup(f, "A", "v2", 102, 2);
  attempt(f, "A", "v3", 222, op_outcome::contended, 2, 400);  // 120 ms: within 135
  cleanup(f, "A", "v3", 223, 2);
  release(f, "A", "holder", 230, 1);
  attempt(f, "A", "v4", 323, op_outcome::ok, 2, 400);
  CHECK(f.events.count("gave_up") == 0);
  REQUIRE(first_of(f.events, "acquired", "v4") != nullptr);
  CHECK(first_of(f.events, "acquired", "v4")->wait_us == at(323) + 100 - at(10));
}

TEST_CASE("clean-up: the connection's next operation on another lock is a give-up dated at the clean-up",
          "[timeline][waiter][fresh][cleanup][give-up]") {
  fixture f;
  retries_with_cleanups(f);
  attempt(f, "B", "w1", 140, op_outcome::ok, 2);  // its next task, within the retry window
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "v3");
  CHECK(gone->wait_us == at(111) + 100 - at(10));
  CHECK(gone->ended == locks::wait_end::new_wait);  // known then, not at its deadline
  // Its next wait for A is a new one.
  attempt(f, "A", "v5", 200, op_outcome::contended, 2);
  release(f, "A", "holder", 230, 1);
  attempt(f, "A", "v6", 240, op_outcome::ok, 2);
  CHECK(first_of(f.events, "acquired", "v6")->wait_us == at(240) + 100 - at(200));
}

TEST_CASE("clean-up: a poller's give-up told by its next lock is bounded by when its next attempt was due",
          "[timeline][waiter][fresh][cleanup][give-up][bounds]") {
  // malkusch/lock's spinlock: a clean-up after each refusal, then a sleep; at its deadline
  // it gives up without trying again and goes on to its next lock. Its last clean-up only
  // bounds the give-up from below: it may have slept on to when its next attempt was due.
  fixture f;
  retries_with_cleanups(f);
  attempt(f, "B", "w1", 300, op_outcome::ok, 2);
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->wait_us == at(111) + 100 - at(10));
  CHECK(gone->ended == locks::wait_end::new_wait);
  // Its spacing (a clean-up's reply to the next request, 48.9 ms) plus half of it (more
  // than the wake window): due 73.35 ms after its last clean-up, before its next lock.
  const std::int64_t spacing = at(60) - (at(11) + 100);
  CHECK(gone->wait_at_most_us == at(111) + 100 + spacing + spacing / 2 - at(10));
  CHECK(gone->wait_at_most_us < at(300) - at(10));
}

TEST_CASE("clean-up: a backing-off poller whose spacing drops back to its first steps began a new wait",
          "[timeline][waiter][fresh][cleanup][give-up][backoff]") {
  // malkusch/lock: a new value and a clean-up per attempt, pauses growing from 20 to 100
  // ms; at its deadline it gives up and its next round takes the lock again at once,
  // from its first pause: 24 ms after its last clean-up, then 20.
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  const double tries[] = {10, 30, 55, 90, 140, 210, 310};
  for (const double t : tries) {
    const std::string value = "v" + std::to_string(static_cast<int>(t));
    attempt(f, "A", value, t, op_outcome::contended, 2);
    cleanup(f, "A", value, t + 1, 2);
  }
  attempt(f, "A", "r1", 335, op_outcome::contended, 2);
  cleanup(f, "A", "r1", 336, 2);
  attempt(f, "A", "r2", 356, op_outcome::contended, 2);
  cleanup(f, "A", "r2", 357, 2);
  release(f, "A", "holder", 360, 1);
  attempt(f, "A", "r3", 380, op_outcome::ok, 2);
  const recorded_event* gone = first_of(f.events, "gave_up", "v310");
  REQUIRE(gone != nullptr);
  CHECK(gone->wait_us == at(311) + 100 - at(10));
  CHECK(gone->wait_at_most_us >= at(335) - at(10) - 1'000);  // up to its next round's first try
  const recorded_event* won = first_of(f.events, "acquired", "r3");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(380) + 100 - at(335));
}

TEST_CASE("clean-up: a fixed-cadence poller's shorter spacing is no new wait", "[timeline][waiter][fresh][cleanup][backoff]") {
  // Spacings of 50 ms with jitter, one of 15: no backoff grew, so nothing began again.
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  const double tries[] = {10, 60, 105, 160, 175, 225};
  for (const double t : tries) {
    const std::string value = "v" + std::to_string(static_cast<int>(t));
    attempt(f, "A", value, t, op_outcome::contended, 2);
    cleanup(f, "A", value, t + 1, 2);
  }
  release(f, "A", "holder", 230, 1);
  attempt(f, "A", "w", 270, op_outcome::ok, 2);
  CHECK(f.events.count("gave_up") == 0);
  REQUIRE(first_of(f.events, "acquired", "w") != nullptr);
  CHECK(first_of(f.events, "acquired", "w")->wait_us == at(270) + 100 - at(10));
}

TEST_CASE("clean-up: attempts with no retries repeated on an application's timer are separate give-ups",
          "[timeline][waiter][fresh][cleanup][give-up]") {
  // node-redlock with retryCount 0 (captures/thirdparty/redlock.pcap, rl:batch): attempt,
  // clean-up, give-up, every 500 ms, a 1 s lease: each comes back past a quarter of it.
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  for (int tick = 0; tick < 3; ++tick) {
    const std::string value = "t" + std::to_string(tick);
    attempt(f, "A", value, 500.0 * tick + 1, op_outcome::contended, 2);
    cleanup(f, "A", value, 500.0 * tick + 4, 2);
  }
  release(f, "A", "holder", 1200, 1);
  attempt(f, "A", "t3", 1501, op_outcome::ok, 2);
  CHECK(f.events.count("gave_up") == 3);
  for (const recorded_event& e : f.events.events) {
    if (e.event != "gave_up") continue;
    CHECK(e.wait_us == 3 * ms + 100);  // to its clean-up's reply
    CHECK(e.ended == locks::wait_end::new_wait);
  }
  const recorded_event* won = first_of(f.events, "acquired", "t3");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us < 0);  // its first attempt
}

TEST_CASE("clean-up: a release of a refused value that something else preceded is no clean-up",
          "[timeline][waiter][fresh][cleanup][give-up]") {
  // Its connection acted between the refusal and the release: the release is the
  // give-up it was before (the next attempt with a new value begins a new wait).
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "B", "holder", 0, op_outcome::ok, 3, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2);
  attempt(f, "B", "w1", 12, op_outcome::contended, 2);
  cleanup(f, "A", "v1", 14, 2);
  attempt(f, "A", "v2", 60, op_outcome::contended, 2);
  CHECK(first_of(f.events, "gave_up", "v1") != nullptr);
}

TEST_CASE("clean-up: its connection's close as the next step is a give-up dated at the clean-up",
          "[timeline][waiter][fresh][cleanup][give-up]") {
  fixture f;
  retries_with_cleanups(f);
  f.timeline.on_connection_end(2, at(150));
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->wait_us == at(111) + 100 - at(10));
  CHECK(gone->ended == locks::wait_end::connection_closed);
}

TEST_CASE("clean-up: a release of a refused value long after the refusal is no clean-up",
          "[timeline][waiter][fresh][cleanup][give-up]") {
  // A Redlock quorum holder releases every server when its hold ends, one that refused
  // it included: the wait there is judged as before (no give-up dated at the release).
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "v1", 10, op_outcome::contended, 2);
  cleanup(f, "A", "v1", 90, 2);  // 80 ms later: its hold elsewhere ended
  attempt(f, "B", "w1", 120, op_outcome::ok, 2);
  const recorded_event* gone = first_of(f.events, "gave_up", "v1");
  CHECK((gone == nullptr || gone->wait_us != at(90) + 100 - at(10)));
}

TEST_CASE("withdrew: a poller's release of its refused value where its next attempt was due ends its wait there",
          "[timeline][waiter][cleanup][give-up]") {
  // @huangang/nestjs-simple-redis-lock: one value a process, refused every 150 ms; its
  // lock() gives up after one more sleep and its decorator unlocks that value instead of
  // trying again. The wait ran to the unlock, not to the last refusal.
  fixture f;
  polls_then_stops(f);
  cleanup(f, "A", "p", 460, 2);
  const recorded_event* gone = first_of(f.events, "gave_up", "p");
  REQUIRE(gone != nullptr);
  CHECK(gone->ended == locks::wait_end::withdrew);
  CHECK(gone->wait_us == at(460) - at(10));
  CHECK(gone->wait_at_most_us < 0);  // exact: no bound
  // Its next attempt is a new wait.
  attempt(f, "A", "p", 700, op_outcome::contended, 2);
  release(f, "A", "holder", 720, 1);
  attempt(f, "A", "p", 760, op_outcome::ok, 2);
  REQUIRE(first_of(f.events, "acquired", "p") != nullptr);
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(760) + 100 - at(700));
}

void renew(fixture& f, std::string_view lock, std::string_view value, double at_ms, op_outcome outcome,
           std::uint64_t connection) {
  attempt(f, lock, value, at_ms, outcome, connection, 1000, lock_op_kind::renew);
}

TEST_CASE("moved on: a connection that renewed another lock while its poller waited keeps the wait whole",
          "[timeline][waiter][moved-on][multiplex][give-up]") {
  // safe-redis-leader runs each lock's candidate over one connection: the `orders`
  // candidate (q, on B) sends a stray renewal between two of p's polls on A, then takes B
  // again and steps down within p's next spacing; p polls on at its cadence and gives up
  // by deleting its own refused value where its next poll was due.
  for (const op_outcome renewal : {op_outcome::rejected, op_outcome::ok}) {
    fixture f;
    attempt(f, "B", "q", 0, op_outcome::ok, 2);
    if (renewal == op_outcome::rejected) release(f, "B", "q", 5, 2);
    polls_then_stops(f);
    renew(f, "B", "q", 230, renewal, 2);
    if (renewal == op_outcome::ok) release(f, "B", "q", 300, 2);
    attempt(f, "B", "q", 330, op_outcome::ok, 2);
    release(f, "B", "q", 331, 2);
    attempt(f, "A", "p", 460, op_outcome::contended, 2);  // on its cadence
    cleanup(f, "A", "p", 610, 2);
    const recorded_event* gone = first_of(f.events, "gave_up", "p");
    REQUIRE(gone != nullptr);
    CHECK(f.events.count("gave_up") == 1);
    CHECK(gone->ended == locks::wait_end::withdrew);
    CHECK(gone->wait_us == at(610) - at(10));
  }
  SECTION("a renewal within the whole hold itself says nothing: the poller had moved on") {
    fixture f;
    polls_then_stops(f);
    attempt(f, "B", "q", 330, op_outcome::ok, 2);
    renew(f, "B", "q", 380, op_outcome::ok, 2);
    release(f, "B", "q", 420, 2);
    attempt(f, "A", "p", 440, op_outcome::contended, 2);
    const recorded_event* gone = first_of(f.events, "gave_up", "p");
    REQUIRE(gone != nullptr);
    CHECK(gone->ended == locks::wait_end::new_wait);
    CHECK(gone->wait_us == at(310) + 100 - at(10));
  }
}

TEST_CASE("withdrew: a poller's release of its refused value off its cadence says nothing of when it stopped",
          "[timeline][waiter][cleanup][give-up]") {
  // Long after the next attempt was due (a hold elsewhere ended), or something else on
  // the connection first: no give-up dated at the release.
  for (const bool between : {false, true}) {
    fixture f;
    polls_then_stops(f);
    if (between) attempt(f, "B", "q", 400, op_outcome::ok, 2);
    cleanup(f, "A", "p", between ? 460 : 900, 2);
    const recorded_event* gone = first_of(f.events, "gave_up", "p");
    CHECK((gone == nullptr || gone->ended != locks::wait_end::withdrew));
  }
}

// @huangang/nestjs-simple-redis-lock sends one value per process for every lock: a single
// try on A, refused, then a wait on B under the same value that its unlock ends (withdrew),
// then the process's next round on A. The value waited for B meanwhile: the try gave up at
// once, and A's free time before the next round was no missed wake-up. Another value's
// wait on B over the connection (another task), or the own wait on B not yet ended, says
// nothing of the try.
TEST_CASE("moved on: a single try whose own value then waited for another lock and gave it up gave up at its try",
          "[timeline][waiter][give-up][moved-on][idle]") {
  const auto waits_for_b = [](fixture& f, std::string_view value, bool withdraws) {
    attempt(f, "B", "b-holder", 0, op_outcome::ok, 3, 60'000);
    attempt(f, "B", value, 20, op_outcome::contended, 2);
    attempt(f, "B", value, 170, op_outcome::contended, 2);
    attempt(f, "B", value, 320, op_outcome::contended, 2);
    if (withdraws) cleanup(f, "B", value, 470, 2);  // where its next attempt was due
  };
  fixture f;
  attempt(f, "A", "holder", 0, op_outcome::ok, 1, 60'000);
  attempt(f, "A", "t", 10, op_outcome::contended, 2);  // its single try
  SECTION("its own value withdrew from B") {
    waits_for_b(f, "t", true);
    release(f, "A", "holder", 330, 1);  // A free from here ...
    attempt(f, "A", "t", 500, op_outcome::ok, 2);  // ... until its next round
    CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
    const recorded_event* gone = nullptr;
    for (const recorded_event& e : f.events.events) {
      if (e.event == "gave_up" && e.lock == "A") gone = &e;
    }
    REQUIRE(gone != nullptr);
    CHECK(gone->wait_us == at(10) + 100 - at(10));  // its try alone
    CHECK(gone->ended == locks::wait_end::new_wait);
    CHECK(acquired_on(f, "A", "t")->wait_us < 0);
  }
  SECTION("another value waited for B, or its own wait there goes on") {
    const bool other_value = GENERATE(true, false);
    waits_for_b(f, other_value ? "q" : "t", other_value);
    release(f, "A", "holder", 330, 1);
    attempt(f, "A", "t", 500, op_outcome::ok, 2);
    CHECK(acquired_on(f, "A", "t")->wait_us == at(500) + 100 - at(10));
    CHECK(f.events.count("anomaly:idle_with_waiters") == 1);
  }
}

TEST_CASE("clean-up: the capture's end closing its connection says nothing of the wait",
          "[timeline][waiter][fresh][cleanup]") {
  fixture f;
  retries_with_cleanups(f);
  f.timeline.on_connection_end(locks::capture_ends_connection, at(150));
  f.timeline.on_connection_end(2, at(150));
  CHECK(f.events.count("gave_up") == 0);
}
