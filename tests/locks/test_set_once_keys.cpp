// Keys set once and never used again (set_once_keys.hpp): the stage fed events, no
// timeline; and the timeline's first_of_key mark, fed operations.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lockscope/locks/set_once_keys.hpp"
#include "timeline_fixture.hpp"

namespace lockscope::timeline_test {
namespace {

using locks::anomaly_kind;
using locks::lock_event;
using locks::lock_event_kind;
using locks::set_once_keys;
using locks::set_once_options;

// What came out: "event lock@ms" per event, in order.
struct lines final : locks::lock_event_sink {
  std::vector<std::string> out;
  std::vector<std::vector<std::string>> groups_acquired_on;
  void on_event(const lock_event& e) override {
    std::string name(to_string(e.event));
    if (e.event == lock_event_kind::anomaly) name += ":" + std::string(to_string(e.kind));
    out.push_back(name + " " + std::string(e.lock) + "@" + std::to_string((e.ts_us - t0) / 1000));
    if (e.group != nullptr) groups_acquired_on.emplace_back(e.group->acquired_on.begin(), e.group->acquired_on.end());
  }
};

// An event of `lock` at t0 + at_ms; `first`: a SET NX's acquisition of a key never seen.
lock_event ev(lock_event_kind kind, const std::string& lock, double at_ms, bool first = false) {
  lock_event e;
  e.event = kind;
  e.lock = lock;
  e.owner = "1";
  e.lock_server = "10.0.0.9:6379";
  e.ts_us = at(at_ms);
  e.first_of_key = first;
  return e;
}

lock_event closed(const std::string& lock, double at_ms) {
  lock_event e = ev(lock_event_kind::anomaly, lock, at_ms);
  e.kind = anomaly_kind::holder_connection_closed;
  return e;
}

TEST_CASE("set once: a family of keys set once and never used again is markers, not locks", "[set_once]") {
  lines got;
  set_once_keys stage(set_once_options{}, got);
  std::vector<std::string> keys;
  for (int i = 0; i < 6; ++i) keys.push_back("app:dedupe:msg-" + std::to_string(1000 + i));
  for (int i = 0; i < 6; ++i) stage.on_event(ev(lock_event_kind::acquired, keys[i], i * 100.0, true));
  const std::string lock = "app:lock:orders";
  stage.on_event(ev(lock_event_kind::acquired, lock, 700, true));
  stage.on_event(ev(lock_event_kind::released, lock, 800));
  stage.on_event(closed(keys[0], 900));  // the marker's client went away: no use of the key
  CHECK(got.out.empty());                // all behind the first marker, within the bound
  stage.finish();
  CHECK(got.out == std::vector<std::string>{"acquired app:lock:orders@700", "released app:lock:orders@800"});
  REQUIRE(stage.families().size() == 1);
  CHECK(stage.families()[0].shape == "app:dedupe:msg-#");
  CHECK(stage.families()[0].keys == 6);
  CHECK(stage.families()[0].example == keys[0]);
  REQUIRE(stage.markers().size() == 6);
  CHECK(stage.markers()[5].lock == keys[5]);
}

TEST_CASE("set once: keys of a shape whose other keys were used again are locks held to the end", "[set_once]") {
  lines got;
  set_once_keys stage(set_once_options{}, got);
  // Per-order locks: earlier ones released; the capture ends while six are held.
  stage.on_event(ev(lock_event_kind::acquired, "lock:order:17", 0, true));
  stage.on_event(ev(lock_event_kind::released, "lock:order:17", 50));
  for (int i = 0; i < 6; ++i) stage.on_event(ev(lock_event_kind::acquired, "lock:order:" + std::to_string(100 + i), 100.0 + i, true));
  stage.finish();
  CHECK(got.out.size() == 8);
  CHECK(got.out.back() == "acquired lock:order:105@105");
  CHECK(stage.families().empty());
  CHECK(stage.markers().empty());
}

TEST_CASE("set once: fewer keys of a shape than a family are locks held to the end", "[set_once]") {
  lines got;
  set_once_keys stage(set_once_options{}, got);
  for (int i = 0; i < 4; ++i) stage.on_event(ev(lock_event_kind::acquired, "job:" + std::to_string(i), i * 10.0, true));
  stage.on_event(closed("job:1", 50));
  stage.finish();
  CHECK(got.out == std::vector<std::string>{"acquired job:0@0", "acquired job:1@10", "anomaly:holder_connection_closed job:1@50",
                                            "acquired job:2@20", "acquired job:3@30"});
  CHECK(stage.families().empty());
  CHECK(stage.markers().empty());
}

TEST_CASE("set once: a key used within the bound goes out in time order", "[set_once]") {
  lines got;
  set_once_keys stage(set_once_options{}, got);
  stage.on_event(ev(lock_event_kind::acquired, "a", 0, true));
  stage.on_event(ev(lock_event_kind::contended, "b", 1));
  CHECK(got.out.empty());
  CHECK(stage.queued() == 2);
  stage.on_event(ev(lock_event_kind::released, "a", 2));
  CHECK(got.out == std::vector<std::string>{"acquired a@0", "contended b@1", "released a@2"});
  CHECK(stage.queued() == 0);
  stage.finish();
  CHECK(got.out.size() == 3);
}

TEST_CASE("set once: past the bound a candidate steps out of the line, and goes out late if used", "[set_once]") {
  lines got;
  set_once_options o;
  o.order_hold_us = 10'000'000;
  set_once_keys stage(o, got);
  stage.on_event(ev(lock_event_kind::acquired, "a", 0, true));
  stage.on_event(ev(lock_event_kind::contended, "b", 5'000));
  CHECK(got.out.empty());
  stage.on_event(ev(lock_event_kind::contended, "b", 10'000));
  CHECK(got.out == std::vector<std::string>{"contended b@5000", "contended b@10000"});
  CHECK(stage.held() == 1);
  stage.on_event(ev(lock_event_kind::expired, "a", 12'000));
  CHECK(got.out == std::vector<std::string>{"contended b@5000", "contended b@10000", "acquired a@0", "expired a@12000"});
  CHECK(stage.held() == 0);
}

TEST_CASE("set once: the line and the candidates waiting on their own are bounded", "[set_once]") {
  lines got;
  set_once_options o;
  o.max_queued = 3;
  o.max_held = 2;
  set_once_keys stage(o, got);
  stage.on_event(ev(lock_event_kind::acquired, "k1", 0, true));
  stage.on_event(ev(lock_event_kind::contended, "x", 1));
  stage.on_event(ev(lock_event_kind::contended, "x", 2));
  CHECK(got.out.empty());
  stage.on_event(ev(lock_event_kind::contended, "x", 3));  // 4 in line: k1 steps out
  CHECK(got.out == std::vector<std::string>{"contended x@1", "contended x@2", "contended x@3"});
  stage.on_event(ev(lock_event_kind::acquired, "k2", 4, true));
  for (int i = 0; i < 3; ++i) stage.on_event(ev(lock_event_kind::contended, "x", 5 + i));
  stage.on_event(ev(lock_event_kind::acquired, "k3", 8, true));
  for (int i = 0; i < 3; ++i) stage.on_event(ev(lock_event_kind::contended, "x", 9 + i));
  // k3 stepping out made three waiting on their own: the oldest (k1) went out as a lock
  CHECK(stage.held() == 2);
  CHECK(std::count(got.out.begin(), got.out.end(), "acquired k1@0") == 1);
  CHECK(std::count(got.out.begin(), got.out.end(), "acquired k2@4") == 0);
}

TEST_CASE("set once: a group's event waits in line with its record copied", "[set_once]") {
  lines got;
  set_once_keys stage(set_once_options{}, got);
  const std::string rl = "rl";  // (an event views its lock's name)
  stage.on_event(ev(lock_event_kind::acquired, rl, 0, true));
  {
    std::vector<std::string> servers = {"s1", "s2"};
    std::vector<std::string_view> views(servers.begin(), servers.end());
    locks::lock_group g;
    g.acquired_on = views;
    lock_event q = ev(lock_event_kind::quorum, rl, 1);
    q.group = &g;
    stage.on_event(q);
    servers[0] = "overwritten";  // the groups' record changes after the call
  }
  stage.on_event(ev(lock_event_kind::released, "rl", 2));
  CHECK(got.out == std::vector<std::string>{"acquired rl@0", "quorum rl@1", "released rl@2"});
  REQUIRE(got.groups_acquired_on.size() == 1);
  CHECK(got.groups_acquired_on[0] == std::vector<std::string>{"s1", "s2"});
}

TEST_CASE("set once: live, every event goes straight on", "[set_once]") {
  lines got;
  set_once_options o;
  o.hold = false;
  set_once_keys stage(o, got);
  for (int i = 0; i < 6; ++i) stage.on_event(ev(lock_event_kind::acquired, "d:" + std::to_string(i), i, true));
  CHECK(got.out.size() == 6);
  stage.finish();
  CHECK(stage.markers().empty());
}

TEST_CASE("set once: a key's shape", "[set_once]") {
  CHECK(set_once_keys::shape_of("chat-sdk:cache:dedupe:worker:p3-17") == "chat-sdk:cache:dedupe:worker:#-#");
  CHECK(set_once_keys::shape_of("idem:3f2a9c1e-77aa-4b1c-9d2e-0a1b2c3d4e5f") == "idem:#-#-#-#-#");
  CHECK(set_once_keys::shape_of("lock:orders") == "lock:orders");
  CHECK(set_once_keys::shape_of("") == "");
  CHECK(set_once_keys::shape_of("{tenant7}:job") == "{#}:job");
}

// The timeline marks only the first acquisition of a key nothing was seen of, taken by
// a SET NX-style call.
struct first_marks final : locks::lock_event_sink {
  std::vector<std::pair<std::string, bool>> acquired;  // owner, first_of_key
  void on_event(const lock_event& e) override {
    if (e.event == lock_event_kind::acquired) acquired.emplace_back(std::string(e.owner), e.first_of_key);
  }
};

TEST_CASE("set once: the timeline marks a key's first SET NX acquisition only", "[set_once]") {
  first_marks got;
  locks::lock_timeline timeline(as_decided(), got);
  fixture f;  // (builds operations)
  auto set_nx = [&](std::string_view lock, std::string_view owner, double at_ms, op_outcome outcome,
                    lock_family family = lock_family::set_based) {
    auto o = f.op(lock_op_kind::acquire, outcome, owner, at_ms);
    o.family = family;
    o.lock = lock;
    o.lease_ms = 10000;
    timeline.on_operation(o);
  };
  set_nx("m1", "v1", 0, op_outcome::ok);                                 // first: marked
  set_nx("r1", "h1", 1, op_outcome::ok, lock_family::redisson);          // a Redisson script: not
  set_nx("c1", "w1", 2, op_outcome::contended);                          // refused first: a waiter
  set_nx("c1", "w1", 3, op_outcome::ok);                                 // ... whose acquisition is not
  set_nx("m1", "v2", 11'000, op_outcome::ok);                            // after its expiry: seen before
  timeline.finish(at(20'000));
  REQUIRE(got.acquired.size() == 4);
  CHECK(got.acquired[0] == std::pair<std::string, bool>{"v1", true});
  CHECK(got.acquired[1] == std::pair<std::string, bool>{"h1", false});
  CHECK(got.acquired[2] == std::pair<std::string, bool>{"w1", false});
  CHECK(got.acquired[3] == std::pair<std::string, bool>{"v2", false});
}

}  // namespace
}  // namespace lockscope::timeline_test
