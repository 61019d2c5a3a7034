// A give-up whose end the wire only bounds (report_give_up, waiters.hpp): dated at its
// last refusal as a lower bound (wait_at_least), it also carries the longest it can have
// waited (wait_at_most_us): to the earliest of the event that ended it (here its
// connection's close) and when its next attempt was due (next_attempt_reach_us,
// waiter_moved_on.hpp: its longest spacing plus half of it, at least the wake window, or
// its backoff's next step). The clients' own logs fall inside (measure.py, "give ups
// within 10pct": murlock logs its give-up one spacing after its last refusal).
#include "timeline_fixture.hpp"

// (In a namespace of its own: the unity build joins this file with others that name `ms`.)
namespace lockscope::give_up_bounds_test {

using namespace lockscope::timeline_test;

namespace {

constexpr std::int64_t reply = 100;  // the fixture's reply, 100 µs after each request

}  // namespace

TEST_CASE("give-up bounds: a poller closing late is bounded by when its next attempt was due",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  // murlock's stock task as recorded: attempts 25-30 ms apart, the process closing 75 ms
  // after the last; the client logged its give-up at 161 ms, one spacing after the refusal.
  holder_then_polls(f, {10, 35.85, 65.9, 92.26, 119.2, 145.1});
  f.timeline.on_connection_end(2, at(220));
  const recorded_event& e = only_close_give_up(f);
  CHECK(e.wait_us == at(145.1) + reply - at(10));
  // Longest spacing (a reply to the next request) 29.95 ms, + the wake window (20 ms,
  // more than half of it).
  const std::int64_t due = at(145.1) + reply + (at(65.9) - at(35.85) - reply) + 20'000;
  CHECK(e.wait_at_most_us == due - at(10));
  CHECK(e.wait_at_most_us < at(220) - at(10));  // tighter than the close
  CHECK(e.wait_us <= 151'000);
  CHECK(e.wait_at_most_us >= 151'000);  // the log's wait (161 ms from its first send at 10) lies inside
}

TEST_CASE("give-up bounds: a backing-off poller closing late is bounded by its backoff's next step",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  // Doubling pauses 20, 40, 80, 160 ms: the next may take up to 4 × the latest (159 ms from
  // reply to request, in whole ms) + the wake window.
  holder_then_polls(f, {10, 30, 70, 150, 310});
  SECTION("the close after that step: bounded by the step") {
    f.timeline.on_connection_end(2, at(1200));
    const recorded_event& e = only_close_give_up(f);
    CHECK(e.wait_us == at(310) + reply - at(10));
    CHECK(e.wait_at_most_us == at(310) + reply + 4 * 159'000 + 20'000 - at(10));
  }
  SECTION("the close within the step: the close dates it exactly, no bound") {
    f.timeline.on_connection_end(2, at(600));
    const recorded_event& e = only_close_give_up(f);
    CHECK(e.wait_us == at(600) - at(10));
    CHECK(e.wait_at_most_us == -1);
  }
}

TEST_CASE("give-up bounds: a close within the poller's cadence is exact, with no bound",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  holder_then_polls(f, {10, 60, 110, 160});
  f.timeline.on_connection_end(2, at(200));  // its next attempt was due at 210
  const recorded_event& e = only_close_give_up(f);
  CHECK(e.wait_us == at(200) - at(10));
  CHECK(e.wait_at_most_us == -1);
}

TEST_CASE("give-up bounds: a single refused attempt closing late is bounded by the close",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  holder_then_polls(f, {10});
  f.timeline.on_connection_end(2, at(200));  // no spacing learnt: only the close bounds it
  const recorded_event& e = only_close_give_up(f);
  CHECK(e.wait_us == reply);
  CHECK(e.wait_at_most_us == at(200) - at(10));
}

}  // namespace lockscope::give_up_bounds_test
