// Free while waiting: a long free stretch kept for a waiter that was already waiting when
// it began (who may have given up unseen, still listed until its deadline) does not hide
// a later, shorter stretch that waiters who came since waited through
// (timeline/waiters.hpp, free_interval_ends). The recorded client is measured against its
// own log by tests/locks/effect_clients/measure.py (medusa_lock: 144 ms behind 1.1 s).
#include <vector>

#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

TEST_CASE("free while waiting: a later, shorter stretch is reported to a waiter that came after the longer one began",
          "[timeline][waiter][idle]") {
  fixture f;
  set_nx(f, "h1", 0, op_outcome::ok, 1, 60'000);
  set_nx(f, "old", 10, op_outcome::contended, 5, 60'000);  // listed until its deadline, never back
  del(f, "h1", 100, 1);
  set_nx(f, "h2", 400, op_outcome::ok, 2, 60'000);  // free 300 ms: only `old` could have waited through it
  set_nx(f, "p", 450, op_outcome::contended, 3, 60'000);
  set_nx(f, "p", 500, op_outcome::contended, 3, 60'000);
  del(f, "h2", 520, 2);
  set_nx(f, "h3", 620, op_outcome::ok, 4, 60'000);  // free 100 ms while p slept
  set_nx(f, "p", 640, op_outcome::contended, 3, 60'000);
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->owner == "p");
  CHECK(idle->interval_start_us == at(520) + 100);
  CHECK(idle->interval_us == at(620) - at(520));
}

TEST_CASE("free while waiting: a waiter waiting through both stretches is told the longer one",
          "[timeline][waiter][idle]") {
  fixture f;
  set_nx(f, "h1", 0, op_outcome::ok, 1, 60'000);
  set_nx(f, "old", 10, op_outcome::contended, 5, 60'000);
  del(f, "h1", 100, 1);
  set_nx(f, "h2", 400, op_outcome::ok, 2, 60'000);
  set_nx(f, "p", 450, op_outcome::contended, 3, 60'000);
  del(f, "h2", 520, 2);
  set_nx(f, "h3", 620, op_outcome::ok, 4, 60'000);
  set_nx(f, "old", 700, op_outcome::contended, 5, 60'000);  // `old` was waiting all along: the 300 ms stretch
  set_nx(f, "p", 710, op_outcome::contended, 3, 60'000);    // p: the 100 ms one
  REQUIRE(f.events.count("anomaly:idle_with_waiters") == 2);
  const recorded_event* first = first_of(f.events, "anomaly:idle_with_waiters", "old");
  const recorded_event* second = first_of(f.events, "anomaly:idle_with_waiters", "p");
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(first->interval_us == at(400) - at(100));
  CHECK(second->interval_us == at(620) - at(520));
}

// A poller sleeping 300 ms between attempts: the releaser's own next hold ends a first
// free stretch while it sleeps, and its own attempt ends a second one. It waited through
// both (distributed-lock's stock lock: 101 ms, then 120 ms).
TEST_CASE("free while waiting: an attempt that finds the lock free again reports the stretch kept before it too",
          "[timeline][waiter][idle]") {
  fixture f;
  set_nx(f, "h1", 0, op_outcome::ok, 1, 1'000);
  set_nx(f, "p", 50, op_outcome::contended, 2, 1'000);
  del(f, "h1", 70, 1);
  set_nx(f, "h2", 171, op_outcome::ok, 1, 1'000);  // free 101 ms: the releaser's next hold
  del(f, "h2", 239, 1);
  set_nx(f, "p", 359, op_outcome::ok, 2, 1'000);  // free 120 ms, ended by p's own attempt
  REQUIRE(f.events.count("anomaly:idle_with_waiters") == 2);
  std::vector<std::int64_t> starts;
  for (const recorded_event& e : f.events.events) {
    if (e.event != "anomaly:idle_with_waiters") continue;
    CHECK(e.owner == "p");
    starts.push_back(e.interval_start_us);
  }
  CHECK(starts == std::vector<std::int64_t>{at(70) + 100, at(239) + 100});
}

TEST_CASE("free while waiting: a stretch said once is not said again on the next free stretch",
          "[timeline][waiter][idle]") {
  fixture f;
  set_nx(f, "h1", 0, op_outcome::ok, 1, 1'000);
  set_nx(f, "p", 50, op_outcome::contended, 2, 1'000);
  del(f, "h1", 70, 1);
  set_nx(f, "h2", 171, op_outcome::ok, 1, 1'000);
  set_nx(f, "p", 200, op_outcome::contended, 2, 1'000);  // told the 101 ms stretch here
  del(f, "h2", 239, 1);
  set_nx(f, "p", 359, op_outcome::ok, 2, 1'000);  // and the 120 ms one here, alone
  REQUIRE(f.events.count("anomaly:idle_with_waiters") == 2);
}
