// The capture's end (capture_end.hpp): the connections still open end one after another
// at the same time, and their waiters leave together, one pass per lock, as they would
// one connection at a time: silently (still waiting when the capture ended), every one
// of them (their owners and connections freed), and before any operation that comes
// between the ends (a command flushed unanswered) can see them.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {
// A Redisson owner id a waiter: each its own client (random owners, an anomaly storm's).
std::string owner_of(int i) {
  char text[48];
  std::snprintf(text, sizeof text, "%08x-0000-4000-8000-%012x:1", static_cast<unsigned>(i), static_cast<unsigned>(i));
  return text;
}
}  // namespace

TEST_CASE("capture end: 300 waiters over 20 connections all leave, silently, their owners and connections freed",
          "[timeline][capture-end]") {
  for (const bool same_time : {true, false}) {
    CAPTURE(same_time);
    fixture f;
    f.acquire("holder:1", 0, 30'000, op_outcome::ok, 1);
    constexpr int waiters = 300;  // past the dormant threshold (waiter_vector.hpp): records read in place
    for (int i = 0; i < waiters; ++i) {
      f.acquire(owner_of(i), 1 + i * 0.01, 30'000, op_outcome::contended,
                static_cast<std::uint64_t>(2 + i % 20), "10.0.0.2", 29'000);
    }
    REQUIRE(f.timeline.memory().owners == waiters + 1);
    f.timeline.on_connection_end(locks::capture_ends_connection, 0);
    for (std::uint64_t c = 21; c >= 1; --c) {
      f.timeline.on_connection_end(c, same_time ? t0 + 10 * ms : t0 + static_cast<std::int64_t>(30 - c) * ms);
    }
    // Past every waiter's deadline: one still there would give up now.
    f.timeline.finish(t0 + 100'000 * ms);
    CHECK(f.events.count("gave_up") == 0);
    CHECK(f.events.count("contended") == waiters);
    // Only the holder is still named (its connection, ended, is not kept for it).
    CHECK(f.timeline.memory().owners == 1);
    CHECK(f.timeline.memory().connections == 0);
    std::uint64_t gave_up = 0;
    f.timeline.for_each_lock([&](std::string_view, const locks::lock_stats& s) { gave_up += s.gave_up; });
    CHECK(gave_up == 0);
  }
}

TEST_CASE("capture end: a command flushed between two ends finds the first one's waiter gone",
          "[timeline][capture-end]") {
  // b:1 waits over connection 2, which ends with the capture; an acquisition of b:1 that
  // comes after (a command of connection 3 flushed as its flow closes) is a new one, not
  // the end of b's wait.
  fixture f;
  f.acquire("a:1", 0, 30'000, op_outcome::ok, 1);
  f.acquire("b:1", 1, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  f.timeline.on_connection_end(locks::capture_ends_connection, 0);
  f.timeline.on_connection_end(2, t0 + 5 * ms);
  f.unlock("a:1", 5, op_outcome::ok, 1);
  f.acquire("b:1", 5, 30'000, op_outcome::ok, 3, "10.0.0.2");
  f.timeline.on_connection_end(1, t0 + 5 * ms);
  f.timeline.on_connection_end(3, t0 + 5 * ms);
  f.timeline.finish(t0 + 6 * ms);
  const recorded_event* acquired = first_of(f.events, "acquired", "b:1");
  REQUIRE(acquired != nullptr);
  CHECK(acquired->wait_us == -1);
  CHECK(f.events.count("gave_up") == 0);
  // The same with connection 2 seen closing (before the capture's end): the same answer.
  fixture g;
  g.acquire("a:1", 0, 30'000, op_outcome::ok, 1);
  g.acquire("b:1", 1, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  g.timeline.on_connection_end(2, t0 + 5 * ms);
  g.unlock("a:1", 5, op_outcome::ok, 1);
  g.acquire("b:1", 5, 30'000, op_outcome::ok, 3, "10.0.0.2");
  const recorded_event* again = first_of(g.events, "acquired", "b:1");
  REQUIRE(again != nullptr);
  CHECK(again->wait_us == -1);
}

TEST_CASE("capture end: the waiters of a connection still open are found again after the others left",
          "[timeline][capture-end]") {
  // 200 waiters over connection 2 and 100 over connection 3 (past the waiters a lookup
  // scans: found through the index by owner, which the pass lets go). Connection 2 ends
  // with the capture; a command of connection 3 flushed after it is its waiter's.
  fixture f;
  f.acquire("holder:1", 0, 30'000, op_outcome::ok, 1);
  for (int i = 0; i < 300; ++i) {
    f.acquire(owner_of(i), 1 + i * 0.01, 30'000, op_outcome::contended, i % 3 == 0 ? 3 : 2, "10.0.0.2", 29'000);
  }
  f.timeline.on_connection_end(locks::capture_ends_connection, 0);
  f.timeline.on_connection_end(2, t0 + 10 * ms);
  f.unlock("holder:1", 10, op_outcome::ok, 1);
  f.acquire(owner_of(151), 10, 30'000, op_outcome::ok, 3, "10.0.0.2");  // connection 2's: left
  f.unlock(owner_of(151), 10.2, op_outcome::ok, 3);
  f.acquire(owner_of(297), 10.3, 30'000, op_outcome::ok, 3, "10.0.0.2");  // connection 3's: still waiting
  f.timeline.on_connection_end(1, t0 + 11 * ms);
  f.timeline.on_connection_end(3, t0 + 11 * ms);
  f.timeline.finish(t0 + 100'000 * ms);
  const recorded_event* fresh = first_of(f.events, "acquired", owner_of(151));
  const recorded_event* waited = first_of(f.events, "acquired", owner_of(297));
  REQUIRE(fresh != nullptr);
  REQUIRE(waited != nullptr);
  CHECK(fresh->wait_us == -1);
  CHECK(waited->wait_us == at(10.3) + 100 - at(1 + 297 * 0.01));  // from its refused request
  CHECK(f.events.count("gave_up") == 0);
  CHECK(f.timeline.memory().owners <= 2);
}
