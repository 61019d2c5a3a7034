// A poller's give-up dated at its connection's close (connection_ended, connections.hpp;
// next_attempt_reach_us, waiter_moved_on.hpp): a close that comes while the waiter could
// still be waiting for its next attempt ends its wait; a close after that attempt was due
// comes after the client stopped (a process exiting after its give-up takes 75-115 ms:
// the murlock and redis-mutex recordings of tests/locks/effect_clients, measured against
// the clients' own logs by measure.py, "give ups within 10pct"), and the wait is dated at
// its last refusal, where most clients log their give-up.
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

TEST_CASE("give-up at a close: a poller whose process exits after its last refusal gave up there, not at the close",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  // murlock's stock task as recorded: six attempts 25-30 ms apart, the process closing
  // 75 ms after the last; read at the close, the wait was 210 ms for the log's 161.
  holder_then_polls(f, {10, 35.85, 65.9, 92.26, 119.2, 145.1});
  f.timeline.on_connection_end(2, at(220));
  CHECK(only_close_give_up(f).wait_us == at(145.1) + 100 - at(10));
}

TEST_CASE("give-up at a close: redis-mutex's 50 ms poller closing 115 ms after its last refusal gave up there",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  holder_then_polls(f, {10, 60, 110, 160, 210});
  f.timeline.on_connection_end(2, at(325));
  CHECK(only_close_give_up(f).wait_us == at(210) + 100 - at(10));
}

TEST_CASE("give-up at a close: a close within the poller's cadence ends its wait at the close",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  holder_then_polls(f, {10, 60, 110, 160});
  f.timeline.on_connection_end(2, at(200));  // its next attempt was due at 210
  CHECK(only_close_give_up(f).wait_us == at(200) - at(10));
}

// A poller that gives up at a deadline sleeps only the time left before its last try
// (@meta-1/nest-common's WithLock: every 100 ms, given up after 250 ms, so tries at 0,
// 100, 200 and 250 ms): that try, its spacing cut short after steady ones, was its last,
// and a close within its spacing after it (a process killed 101-135 ms on) only bounds it.
TEST_CASE("give-up at a close: a poller whose last spacing was cut short after steady ones gave up at that try",
          "[timeline][waiter][give-up][close]") {
  SECTION("steady spacings, then one cut short") {
    fixture f;
    holder_then_polls(f, {10, 110, 210, 255});
    f.timeline.on_connection_end(2, at(355));
    CHECK(only_close_give_up(f).wait_us == at(255) + 100 - at(10));
  }
  SECTION("spacings that vary all along (a jittered poller): it may still be waiting") {
    fixture f;
    holder_then_polls(f, {10, 110, 160, 260, 300});
    f.timeline.on_connection_end(2, at(380));
    CHECK(only_close_give_up(f).wait_us == at(380) - at(10));
  }
}

TEST_CASE("give-up at a close: a backing-off poller waits until its backoff's next step",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  // Doubling pauses 20, 40, 80, 160 ms: the next is due about 320 ms after the last.
  holder_then_polls(f, {10, 30, 70, 150, 310});
  f.timeline.on_connection_end(2, at(600));
  CHECK(only_close_give_up(f).wait_us == at(600) - at(10));
}

// A single refused attempt and its connection's close: the single try of a process that
// then ends (Laravel's RedisLock get() as recorded, tests/locks/effect_clients/laravel_lock.*:
// refused, predis's close 13.7 ms later; verrou's acquireImmediately(), ioredis's QUIT
// 40 ms later). Read as a waiter that waited to the close, its wait was 13.7 ms for the
// 0.1 ms the client logged: nothing on the wire says it waited at all, so the close only
// bounds the give-up, however soon it comes.
TEST_CASE("give-up at a close: a single refused attempt gave up at its refusal, the close its bound",
          "[timeline][waiter][give-up][close]") {
  SECTION("a close at once") {
    fixture f;
    holder_then_polls(f, {10});
    f.timeline.on_connection_end(2, at(23.7));
    const recorded_event& gone = only_close_give_up(f);
    CHECK(gone.wait_us == 100);  // its one attempt's reply: the bound
    CHECK(gone.wait_at_most_us == at(23.7) - at(10));
  }
  SECTION("a close later") {
    fixture f;
    holder_then_polls(f, {10});
    f.timeline.on_connection_end(2, at(200));
    const recorded_event& gone = only_close_give_up(f);
    CHECK(gone.wait_us == 100);
    CHECK(gone.wait_at_most_us == at(200) - at(10));
  }
}

// A close within the waiter's cadence, after its connection took and released another
// lock since its latest refusal (moved_on_before_close, waiter_moved_on.hpp): a client
// waiting for one lock at a time goes on to another only once it gave this one up.
// verrou's process as recorded (tests/locks/effect_clients/verrou.*): stock polled every
// 200 ms, given up right after the 5th refusal; orders taken and released; the close
// 260 ms after that refusal, within the 300 ms reach of a next attempt. Read as waiting
// to the close, the wait was 1,069 ms for the 810 ms the client logged.
TEST_CASE("give-up at a close: a poller whose connection took and released another lock since its last refusal "
          "gave up there, though the close came within its cadence",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  holder_then_polls(f, {10, 210, 410, 610, 810});
  set_nx(f, "q", 825, op_outcome::ok, 2, 1000);  // lock A, on the waiter's connection
  del(f, "q", 900, 2);
  f.timeline.on_connection_end(2, at(980));  // before the holder's 1 s lease runs out
  const recorded_event& gone = only_close_give_up(f);
  CHECK(gone.wait_us == at(810) + 100 - at(10));
  CHECK(gone.wait_at_most_us == at(980) - at(10));
}

TEST_CASE("give-up at a close: a connection that polls while holding another lock still waits to the close",
          "[timeline][waiter][give-up][close]") {
  fixture f;
  // It took A at 300 and polled L at 410 while holding it: it runs tasks side by side, so a
  // later whole hold of A says nothing of the wait on L.
  holder_then_polls(f, {10, 210});
  set_nx(f, "q", 300, op_outcome::ok, 2, 1000);
  poll_attempt(f, "p", 410, op_outcome::contended, 2);
  del(f, "q", 450, 2);
  poll_attempt(f, "p", 610, op_outcome::contended, 2);
  poll_attempt(f, "p", 810, op_outcome::contended, 2);
  set_nx(f, "r", 825, op_outcome::ok, 2, 1000);
  del(f, "r", 900, 2);
  f.timeline.on_connection_end(2, at(980));
  CHECK(only_close_give_up(f).wait_us == at(980) - at(10));
}
