// A timeline fed operations directly (no recognizer, no sockets), with helpers that
// build one operation each, for the state-machine tests.
#pragma once

#include <deque>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "helpers.hpp"

namespace lockscope::timeline_test {

using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;

// The capture time `at_ms` milliseconds after t0.
inline std::int64_t at(double at_ms) { return t0 + static_cast<std::int64_t>(at_ms * 1000); }

// The first event named `name` of `owner`, or nullptr.
inline const recorded_event* first_of(const event_recorder& rec, std::string_view name, std::string_view owner) {
  for (const recorded_event& e : rec.events) {
    if (e.event == name && e.owner == owner) return &e;
  }
  return nullptr;
}

// Three servers on one host, for the tests of lock identity and lock groups (the same
// name on several servers).
inline const char* const s1 = "10.0.0.9:6379";
inline const char* const s2 = "10.0.0.9:6380";
inline const char* const s3 = "10.0.0.9:6381";

// Options under which each event goes out as it happens, naming the link as decided at
// that moment (no subscriber event held for the traffic's later decision: the tests of
// that hold, test_held_links.cpp, ask for it).
inline locks::timeline_options as_decided() {
  locks::timeline_options o;
  o.link_hold_us = 0;
  return o;
}

// The owners of the subscriber-link tests: a holder and processes A and B, Redisson-style.
inline const std::string link_holder = "dddddddd-dddd-4ddd-8ddd-dddddddddddd:1";
inline const std::string link_pa = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1";
inline const std::string link_pb = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1";

// Options that hold guessed subscriber events up to `hold_us` (timeline_options::link_hold_us).
inline locks::timeline_options holding(std::int64_t hold_us = 2'000'000) {
  locks::timeline_options o;
  o.link_hold_us = hold_us;
  return o;
}

class fixture {
 public:
  explicit fixture(locks::timeline_options o = as_decided()) : timeline(o, events) {}

  // An operation at t0 + at_ms (reply 100 µs after the request).
  locks::lock_operation op(lock_op_kind kind, op_outcome outcome, std::string_view owner, double at_ms,
                              std::uint64_t connection = 1, std::string_view ip = "10.0.0.1") {
    locks::lock_operation o;
    o.kind = kind;
    o.family = lock_family::redisson;
    o.outcome = outcome;
    o.lock = "L";
    o.owner = owner;
    o.connection = connection;
    endpoints.push_back(ingest::make_endpoint(ip, static_cast<std::uint16_t>(40000 + connection)));
    texts.push_back(endpoints.back().to_string());
    o.client = &endpoints.back();
    o.client_text = texts.back();
    o.server_text = "10.0.0.9:6379";
    o.server = interned_endpoint(o.server_text);
    o.request_us = t0 + static_cast<std::int64_t>(at_ms * 1000);
    o.reply_us = o.request_us + 100;
    if (const auto it = opened.find(connection); it != opened.end()) o.opened_us = it->second;
    return o;
  }
  // Redisson's lock as the subscriber-link tests drive it: an attempt (lease 30 s; refused,
  // the holder's TTL 29 s), an unlock, and its channel's (un)subscribe or message.
  void redisson_attempt(std::string_view owner, double at_ms, std::uint64_t conn, std::string_view ip,
                        op_outcome outcome = op_outcome::contended) {
    auto o = op(lock_op_kind::acquire, outcome, owner, at_ms, conn, ip);
    o.lease_ms = 30000;
    if (outcome == op_outcome::contended) o.ttl_ms = 29000;
    timeline.on_operation(o);
  }
  void redisson_release(std::string_view owner, double at_ms, std::uint64_t conn, std::string_view ip) {
    timeline.on_operation(op(lock_op_kind::unlock, op_outcome::ok, owner, at_ms, conn, ip));
  }
  void redisson_channel(lock_op_kind kind, double at_ms, std::uint64_t conn, std::string_view ip) {
    auto o = op(kind, op_outcome::ok, "", at_ms, conn, ip);
    o.channel = "redisson_lock__channel:{L}";
    o.sub_count = kind == lock_op_kind::unsubscribe ? 0 : 1;
    if (kind == lock_op_kind::message) o.reply_us = o.request_us;
    timeline.on_operation(o);
  }
  void acquire(std::string_view owner, double at_ms, std::int64_t lease_ms, op_outcome outcome = op_outcome::ok,
               std::uint64_t connection = 1, std::string_view ip = "10.0.0.1", std::int64_t ttl = -1) {
    auto o = op(lock_op_kind::acquire, outcome, owner, at_ms, connection, ip);
    o.lease_ms = lease_ms;
    o.ttl_ms = ttl;
    timeline.on_operation(o);
  }
  void unlock(std::string_view owner, double at_ms, op_outcome outcome, std::uint64_t connection = 1,
              std::int64_t lease_ms = 30000) {
    auto o = op(lock_op_kind::unlock, outcome, owner, at_ms, connection);
    o.lease_ms = lease_ms;
    timeline.on_operation(o);
  }
  void renew(std::string_view owner, double at_ms, std::int64_t lease_ms, op_outcome outcome = op_outcome::ok) {
    auto o = op(lock_op_kind::renew, outcome, owner, at_ms);
    o.lease_ms = lease_ms;
    timeline.on_operation(o);
  }
  // `sub_count`: the subscriptions left in the server's confirmation (-1: not seen).
  void pubsub(lock_op_kind kind, double at_ms, std::uint64_t connection, std::string_view ip = "10.0.0.2",
              std::int64_t sub_count = -1) {
    auto o = op(kind, op_outcome::ok, "", at_ms, connection, ip);
    o.channel = "redisson_lock__channel:{L}";
    o.sub_count = sub_count;
    if (kind == lock_op_kind::message) o.reply_us = o.request_us;
    timeline.on_operation(o);
  }

  // When a connection's SYN was captured (lock_operation::opened_us); absent: joined mid-stream.
  std::map<std::uint64_t, std::int64_t> opened;
  event_recorder events;
  locks::lock_timeline timeline;
  std::deque<ingest::endpoint> endpoints;
  std::deque<std::string> texts;
};


// A SET-based client on lock "A": an attempt `SET A value NX` (with a lease when
// lease_ms >= 0) and a release of `value` (DEL or compare-and-DEL), over `connection`.
inline void set_nx(fixture& f, std::string_view value, double at_ms, op_outcome outcome, std::uint64_t connection,
                   std::int64_t lease_ms = -1) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = "A";
  o.lease_ms = lease_ms;
  f.timeline.on_operation(o);
}

inline void del(fixture& f, std::string_view value, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = "A";
  f.timeline.on_operation(o);
}

// A poller on lock "L" (the give-up tests): a SET NX attempt with a 1 s lease; a holder
// on connection 1 throughout while p polls from connection 2 at `times` (ms); and the one
// give-up that a close of p's connection must leave.
inline void poll_attempt(fixture& f, std::string_view value, double at_ms, op_outcome outcome,
                         std::uint64_t connection) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lease_ms = 1000;
  f.timeline.on_operation(o);
}

// A SET NX client on lock "L" (the fresh-value tests): an attempt with `value` and a
// lease, and a release of `value`, over `connection`.
inline void set_attempt(fixture& f, std::string_view value, double at_ms, op_outcome outcome, std::uint64_t connection,
                        std::int64_t lease_ms = 1000) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lease_ms = lease_ms;
  f.timeline.on_operation(o);
}

inline void set_release(fixture& f, std::string_view value, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, value, at_ms, connection);
  o.family = lock_family::set_based;
  f.timeline.on_operation(o);
}

inline void holder_then_polls(fixture& f, std::initializer_list<double> times) {
  poll_attempt(f, "holder", 0, op_outcome::ok, 1);
  for (double t : times) poll_attempt(f, "p", t, op_outcome::contended, 2);
}

inline const recorded_event& only_close_give_up(const fixture& f) {
  REQUIRE(f.events.count("gave_up") == 1);
  const recorded_event* gone = f.events.first("gave_up");
  CHECK(gone->owner == "p");
  CHECK(gone->ended == locks::wait_end::connection_closed);
  return *gone;
}

}  // namespace lockscope::timeline_test
