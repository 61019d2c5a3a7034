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

// A client that gives up after the same wait each time (a tryLock timeout, a retry
// budget): its give-ups whose end was seen (a close within its cadence) give the likely
// wait of one the wire only bounds (likely_wait, waiters.hpp). Real Redisson's case:
// test_give_ups.cpp, "three give-ups, none joined".
namespace {

// `owner` polls on `connection` at `times` (ms), refused, then its connection closes at `close`.
void polls_then_closes(fixture& f, std::string_view owner, std::uint64_t connection, std::initializer_list<double> times,
                       double close) {
  for (double t : times) poll_attempt(f, owner, t, op_outcome::contended, connection);
  f.timeline.on_connection_end(connection, at(close));
}

std::vector<const recorded_event*> give_ups(const fixture& f) {
  std::vector<const recorded_event*> out;
  for (const recorded_event& e : f.events.events) {
    if (e.event == "gave_up") out.push_back(&e);
  }
  return out;
}

}  // namespace

TEST_CASE("give-up bounds: an owner's earlier exact give-ups give the likely wait of a bounded one",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  poll_attempt(f, "holder", 0, op_outcome::ok, 1);
  polls_then_closes(f, "p", 2, {10, 60, 110, 160}, 200);   // exact: 190 ms
  polls_then_closes(f, "p", 3, {250, 300, 350, 400}, 441);  // exact: 191 ms
  SECTION("a single attempt, then a late close: likely the 190.5 ms its two give-ups had") {
    polls_then_closes(f, "p", 4, {500}, 900);
    const auto g = give_ups(f);
    REQUIRE(g.size() == 3);
    CHECK(g[0]->wait_likely_us == -1);  // exact ones carry none
    CHECK(g[1]->wait_likely_us == -1);
    CHECK(g[2]->wait_us == reply);
    CHECK(g[2]->wait_at_most_us == at(900) - at(500));
    CHECK(g[2]->wait_likely_us == (190'000 + 191'000) / 2);
    CHECK(g[2]->wait_likely_from == 2);
  }
  SECTION("another owner's bounded give-up: no likely wait") {
    polls_then_closes(f, "q", 4, {500}, 900);
    const auto g = give_ups(f);
    REQUIRE(g.size() == 3);
    CHECK(g[2]->wait_at_most_us == at(900) - at(500));
    CHECK(g[2]->wait_likely_us == -1);
  }
  SECTION("the bounds exclude it (closed 50 ms after its attempt): no likely wait") {
    polls_then_closes(f, "p", 4, {500}, 550);
    const auto g = give_ups(f);
    REQUIRE(g.size() == 3);
    CHECK(g[2]->wait_at_most_us == at(550) - at(500));
    CHECK(g[2]->wait_likely_us == -1);
  }
}

TEST_CASE("give-up bounds: earlier give-ups that disagree, or only one, give no likely wait",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  poll_attempt(f, "holder", 0, op_outcome::ok, 1);
  polls_then_closes(f, "p", 2, {10, 60, 110, 160}, 200);  // exact: 190 ms
  SECTION("one earlier give-up") {
    polls_then_closes(f, "p", 3, {300}, 900);
    const auto g = give_ups(f);
    REQUIRE(g.size() == 2);
    CHECK(g[1]->wait_at_most_us >= 0);
    CHECK(g[1]->wait_likely_us == -1);
  }
  SECTION("two that differ by more than 10%") {
    polls_then_closes(f, "p", 3, {250, 300, 350, 400, 450}, 490);  // exact: 240 ms
    polls_then_closes(f, "p", 4, {550}, 950);
    const auto g = give_ups(f);
    REQUIRE(g.size() == 3);
    CHECK(g[2]->wait_at_most_us >= 0);
    CHECK(g[2]->wait_likely_us == -1);
  }
}

}  // namespace lockscope::give_up_bounds_test

namespace lockscope::give_up_bounds_test {

// The capture ends while a poller waits (give_up_stopped_pollers, waiters.hpp): its
// deadline (no TTL told: 30 s + the margin) lies beyond the end, but its next attempt
// was due long before it. portalocker's poller (100 ms apart) timed out 0.1 s before its
// recording ended: no event at all before.
TEST_CASE("give-up bounds: a poller overdue at the capture's end gave up at its last attempt",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  holder_then_polls(f, {10, 110, 210, 310});
  SECTION("its next attempt due long before the end: a give-up, bounded by that attempt") {
    f.timeline.finish(at(1000));
    REQUIRE(f.events.count("gave_up") == 1);
    const recorded_event* e = f.events.first("gave_up");
    CHECK(e->owner == "p");
    CHECK(e->ended == locks::wait_end::next_attempt_missed);
    CHECK(e->ts_us == at(1000));
    CHECK(e->wait_us == at(310) + reply - at(10));
    // its spacing 100 ms (reply to request) + half of it
    CHECK(e->wait_at_most_us == at(310) + reply + 99'900 + 49'950 - at(10));
  }
  SECTION("its next attempt not yet due at the end: still waiting, no event") {
    f.timeline.finish(at(420));
    CHECK(f.events.count("gave_up") == 0);
  }
}

TEST_CASE("give-up bounds: a pub/sub waiter at the capture's end waits on", "[timeline][waiter][give-up][bounds]") {
  fixture f;
  f.redisson_attempt(link_holder, 0, 1, "10.0.0.1", op_outcome::ok);
  for (double t : {10.0, 110.0, 210.0}) f.redisson_attempt(link_pa, t, 2, "10.0.0.2");
  f.timeline.finish(at(5000));
  CHECK(f.events.count("gave_up") == 0);
}

}  // namespace lockscope::give_up_bounds_test

namespace lockscope::give_up_bounds_test {

// A poller whose next attempt comes far later than its cadence had stopped (continuing_waiter,
// waiter_of_fresh_value: waiters.hpp): its wait ended somewhere from its last refusal to when
// its next attempt was due, which never came; nothing on the wire says when. kombu's Mutex
// loop (tests/locks/effect_clients/kombu_mutex_worker.py) sleeps once more after its last
// refusal and gives up then: its log's waits lay 90-120 ms past the last refusal, shown as
// exact waits ending there.
TEST_CASE("give-up bounds: a poller that stopped, told by its next attempt far later, is bounded by when its "
          "attempt was due",
          "[timeline][waiter][give-up][bounds]") {
  fixture f;
  set_attempt(f, "holder", 0, op_outcome::ok, 1, 10'000);
  SECTION("one value for every attempt") {
    for (double t : {10.0, 110.0, 210.0, 310.0}) set_attempt(f, "p", t, op_outcome::contended, 2, 10'000);
    set_attempt(f, "p", 2000, op_outcome::contended, 2, 10'000);
  }
  SECTION("a new value at every attempt") {
    set_attempt(f, "9f2c1e77b04d4a6e", 10, op_outcome::contended, 2, 10'000);
    set_attempt(f, "3b8d0c2f6e1a49d7", 110, op_outcome::contended, 2, 10'000);
    set_attempt(f, "54a5dbacd48cb3de", 210, op_outcome::contended, 2, 10'000);
    set_attempt(f, "68d3ce1e87266dc0", 310, op_outcome::contended, 2, 10'000);
    set_attempt(f, "752088247f0bf9ca", 2000, op_outcome::contended, 2, 10'000);
  }
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* e = f.events.first("gave_up");
  CHECK(e->ended == locks::wait_end::new_wait);
  CHECK(e->wait_us == at(310) + reply - at(10));
  // its spacing 100 ms (reply to request) + half of it
  CHECK(e->wait_at_most_us == at(310) + reply + 99'900 + 49'950 - at(10));
}

}  // namespace lockscope::give_up_bounds_test
