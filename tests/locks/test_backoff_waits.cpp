// A poller that backs off (its pause grows, e.g. doubling with 50-100% jitter:
// @medusajs/locking-redis) keeps one wait however far its spacing grows from one attempt
// to the next, while a fixed-cadence poller that comes back long after its spacing had
// given up (analyzer/locks/src/timeline/waiter_moved_on.hpp, note_gap/backoff_reach_us).
// The recorded client is measured against its own log by
// tests/locks/effect_clients/measure.py (medusa_lock).
#include <initializer_list>

#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// `holder` holds A from connection 1; p is refused from connection 2 at each of `refusals`
// (ms), then the holder releases at `release_ms` and p acquires 20 ms later.
void waits(fixture& f, std::initializer_list<double> refusals, double release_ms) {
  set_nx(f, "holder", -5, op_outcome::ok, 1, 60'000);
  for (const double t : refusals) set_nx(f, "p", t, op_outcome::contended, 2, 1000);
  del(f, "holder", release_ms, 1);
  set_nx(f, "p", release_ms + 20, op_outcome::ok, 2, 1000);
}

}  // namespace

TEST_CASE("backoff: a poller whose pause doubles with jitter keeps one wait", "[timeline][waiter][backoff]") {
  SECTION("gaps 21, 25, 83, 87, then 299 ms") {
    fixture f;
    waits(f, {0, 21, 46, 129, 216, 515}, 600);
    CHECK(f.events.count("gave_up") == 0);
    const recorded_event* got = first_of(f.events, "acquired", "p");
    REQUIRE(got != nullptr);
    CHECK(got->wait_us == at(620) + 100 - at(0));
  }
  SECTION("gaps 12, 22, 49, 103, 175, then 611 ms") {
    fixture f;
    waits(f, {0, 12, 34, 83, 186, 361, 972}, 1000);
    CHECK(f.events.count("gave_up") == 0);
    const recorded_event* got = first_of(f.events, "acquired", "p");
    REQUIRE(got != nullptr);
    CHECK(got->wait_us == at(1020) + 100 - at(0));
  }
}

TEST_CASE("backoff: a spacing past four times the latest is still a give-up", "[timeline][waiter][backoff][give-up]") {
  fixture f;
  waits(f, {0, 21, 46, 129, 216, 600}, 700);  // 384 ms after a spacing of 87: past x4 + 20
  REQUIRE(f.events.count("gave_up") == 1);
  CHECK(f.events.first("gave_up")->wait_us == at(216) + 100 - at(0));
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(720) + 100 - at(600));
}

TEST_CASE("backoff: a fixed-cadence poller back long after its spacing gave up", "[timeline][waiter][backoff][give-up]") {
  SECTION("a steady cadence") {
    fixture f;
    waits(f, {0, 100, 200, 300, 700}, 800);  // 400 ms after spacings of 100
    REQUIRE(f.events.count("gave_up") == 1);
    CHECK(f.events.first("gave_up")->wait_us == at(300) + 100 - at(0));
  }
  SECTION("a jittered cadence that once grew threefold is no backoff: its spacings also shrank") {
    fixture f;
    waits(f, {0, 40, 65, 105, 225, 650}, 750);  // 40, 25, 40, 120, then 425 ms
    REQUIRE(f.events.count("gave_up") == 1);
    CHECK(f.events.first("gave_up")->wait_us == at(225) + 100 - at(0));
  }
}
