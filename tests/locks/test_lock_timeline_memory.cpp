// The timeline's memory, fed operations directly: ended connections and released owners
// are freed and their texts compacted, while a lock still held keeps its owner and its
// ended connection.
#include <cmath>
#include <deque>
#include <sstream>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_report.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

// `n` short-lived connections (ids first..first+n-1), each acquiring and releasing a
// lock of its own name set with a fresh owner, then ending.
void churn(fixture& f, std::uint64_t first, int n, double at_ms) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t c = first + static_cast<std::uint64_t>(i);
    const std::string owner = "fresh-owner-" + std::to_string(c) + std::string(60, 'o');
    const std::string lock = "churn:" + std::to_string(i % 8);
    auto a = f.op(lock_op_kind::acquire, op_outcome::ok, owner, at_ms + i, c, "10.0.1.1");
    a.family = lock_family::set_based;
    a.lock = lock;
    a.lease_ms = 5000;
    f.timeline.on_operation(a);
    auto r = f.op(lock_op_kind::unlock, op_outcome::ok, owner, at_ms + i + 0.5, c, "10.0.1.1");
    r.family = lock_family::set_based;
    r.lock = a.lock;
    f.timeline.on_operation(r);
    f.timeline.on_connection_end(c, a.request_us + 600);
  }
}

}  // namespace

TEST_CASE("timeline: ended connections and released owners are freed and the texts compacted", "[timeline][memory]") {
  fixture f;
  CHECK(f.timeline.memory().owners == 0);
  churn(f, 1, 5000, 10);  // 5000 owners of ~80 bytes: 400 KB of text over time
  const locks::timeline_memory m = f.timeline.memory();
  CHECK(m.owners == 0);
  CHECK(m.connections == 0);
  CHECK(m.endpoint_texts == 0);
  CHECK(m.text_bytes == 0);
  CHECK(m.arena_bytes <= 128 * 1024);  // compacted: not the 400 KB seen
  CHECK(f.events.events.size() == 10'000);
  CHECK(f.timeline.lock_count() == 8);
}

TEST_CASE("timeline: a lock still held keeps its owner and its ended connection, and prints them later",
          "[timeline][memory]") {
  fixture f;
  auto a = f.op(lock_op_kind::acquire, op_outcome::ok, "keeper:7", 1, 20'000, "10.0.0.77");
  a.lock = "held";
  a.lease_ms = 60'000;
  f.timeline.on_operation(a);
  f.timeline.on_connection_end(20'000, a.reply_us + 10);
  churn(f, 1, 5000, 10);  // forces compactions: the kept texts move
  locks::timeline_memory m = f.timeline.memory();
  CHECK(m.owners == 1);
  CHECK(m.connections == 1);      // ended, but the holder names it
  CHECK(m.endpoint_texts == 2);   // its client and server
  f.timeline.advance_to(t0 + 61'000 * ms);
  const recorded_event* expired = f.events.first("expired");
  REQUIRE(expired != nullptr);
  CHECK(expired->lock == "held");
  CHECK(expired->owner == "keeper:7");
  CHECK(expired->client == "10.0.0.77:60000");  // 40000 + 20000
  m = f.timeline.memory();
  CHECK(m.connections == 0);
  CHECK(m.endpoint_texts == 0);
  CHECK(m.owners == 1);  // the lock's last expired owner, for expired_while_held
  // ... which still recognises a late unlock by that owner after all the churn.
  auto late = f.op(lock_op_kind::unlock, op_outcome::rejected, "keeper:7", 61'500, 20'001);
  late.lock = "held";
  f.timeline.on_operation(late);
  CHECK(f.events.first("anomaly:expired_while_held") != nullptr);
  CHECK(f.timeline.memory().owners == 0);
}
