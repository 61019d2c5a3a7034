// A value that is no identity: every process of ioredis-mutex sends `SET key mutex NX`,
// so one value is refused over one connection while it holds over another. The lock's
// waiters are then its value's over each connection (waiters.hpp, waiter_of_owner);
// a client that retries one value over the connections of a pool keeps one wait. The
// recorded client is measured against its own log by tests/locks/effect_clients/measure.py
// (ioredis_mutex).
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// The acquisition over `connection` (its client's port is 40000 + connection).
const recorded_event* acquired_over(const event_recorder& rec, std::uint64_t connection) {
  const std::string port = ":" + std::to_string(40000 + connection);
  for (const recorded_event& e : rec.events) {
    if (e.event == "acquired" && e.client.size() > port.size() && e.client.ends_with(port)) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("shared value: refusals of one value over several connections are one wait each",
          "[timeline][waiter][shared-owner]") {
  fixture f;
  set_nx(f, "mutex", 0, op_outcome::ok, 1);
  set_nx(f, "mutex", 10, op_outcome::contended, 3);   // p3 waits from 10
  set_nx(f, "mutex", 150, op_outcome::contended, 2);  // p2 waits from 150
  del(f, "mutex", 200, 1);
  set_nx(f, "mutex", 205, op_outcome::ok, 2);
  set_nx(f, "mutex", 210, op_outcome::contended, 3);
  del(f, "mutex", 300, 2);
  set_nx(f, "mutex", 305, op_outcome::ok, 3);
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* p2 = acquired_over(f.events, 2);
  const recorded_event* p3 = acquired_over(f.events, 3);
  REQUIRE(p2 != nullptr);
  REQUIRE(p3 != nullptr);
  CHECK(p2->wait_us == at(205) + 100 - at(150));
  CHECK(p3->wait_us == at(305) + 100 - at(10));
}

TEST_CASE("shared value: a client acquiring at its first attempt takes no other connection's wait",
          "[timeline][waiter][shared-owner]") {
  fixture f;
  set_nx(f, "mutex", 0, op_outcome::ok, 1);
  set_nx(f, "mutex", 10, op_outcome::contended, 3);
  del(f, "mutex", 100, 1);
  set_nx(f, "mutex", 101, op_outcome::ok, 2);  // p2's first attempt, before p3 retries
  set_nx(f, "mutex", 120, op_outcome::contended, 3);
  del(f, "mutex", 200, 2);
  set_nx(f, "mutex", 205, op_outcome::ok, 3);
  const recorded_event* p2 = acquired_over(f.events, 2);
  REQUIRE(p2 != nullptr);
  CHECK(p2->wait_us == -1);
  CHECK(acquired_over(f.events, 3)->wait_us == at(205) + 100 - at(10));
}

TEST_CASE("shared value: one value retried over the connections of a pool is one wait",
          "[timeline][waiter][shared-owner]") {
  fixture f;
  set_nx(f, "holder", 0, op_outcome::ok, 1);
  set_nx(f, "p", 10, op_outcome::contended, 2);
  set_nx(f, "p", 60, op_outcome::contended, 3);
  del(f, "holder", 100, 1);
  set_nx(f, "p", 110, op_outcome::ok, 4);
  CHECK(f.events.count("gave_up") == 0);
  CHECK(first_of(f.events, "acquired", "p")->wait_us == at(110) + 100 - at(10));
}

// A Redlock's value holds on one server and is refused on another; --merge-servers makes
// the key on every server one lock. That is one client over a connection per server, not
// a shared value: its attempts stay one wait, whichever server's connection they use.
TEST_CASE("shared value: a Redlock value held on one server and refused on another, servers merged, is one waiter",
          "[timeline][waiter][shared-owner]") {
  locks::timeline_options options;
  options.merge_servers = true;
  fixture f(options);
  auto on = [&](const char* server, lock_op_kind kind, op_outcome outcome, std::string_view value, double at_ms,
                std::uint64_t connection) {
    auto o = f.op(kind, outcome, value, at_ms, connection);
    o.family = lock_family::set_based;
    o.lock = "A";
    o.lease_ms = 1000;
    o.server_text = server;
    o.server = interned_endpoint(o.server_text);
    f.timeline.on_operation(o);
  };
  on(s1, lock_op_kind::acquire, op_outcome::ok, "v", 0, 1);
  on(s2, lock_op_kind::acquire, op_outcome::contended, "v", 1, 2);
  on(s3, lock_op_kind::acquire, op_outcome::contended, "v", 2, 3);
  on(s1, lock_op_kind::unlock, op_outcome::ok, "v", 3, 1);
  on(s3, lock_op_kind::acquire, op_outcome::ok, "v", 200, 3);
  const recorded_event* got = acquired_over(f.events, 3);
  REQUIRE(got != nullptr);
  CHECK(got->wait_us == at(200) + 100 - at(1));
}
