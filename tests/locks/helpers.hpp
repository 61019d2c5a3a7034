// Shared helpers for the timeline tests: messages from RESP text, recorders for
// operations and events, and the whole pipeline over a capture file.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/locks/anomaly_text.hpp"
#include "lockscope/locks/lock_analysis.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/ingest/message.hpp"
#include "lockscope/test/endpoint_text.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/test/shell.hpp"
#include "lockscope/resp/decoder.hpp"

namespace lockscope::timeline_test {

using test::interned_endpoint;

// An operation built by hand gets the addresses its texts spell, as the recognizer sets both.
inline locks::lock_operation& with_addresses(locks::lock_operation& o) {
  o.client = interned_endpoint(o.client_text);
  o.server = interned_endpoint(o.server_text);
  return o;
}

inline ingest::message make_message(std::string_view resp_text) {
  struct adder final : resp::handler {
    ingest::message* m;
    void on_node(const resp::node& n) override { m->add(n, 1u << 20); }
  } h;
  ingest::message m;
  h.m = &m;
  resp::decoder d;
  const std::size_t used = d.feed(resp_text, h);
  REQUIRE(used == resp_text.size());
  REQUIRE(!d.error());
  return m;
}

struct recorded_op {
  locks::lock_op_kind kind{};
  locks::lock_family family{};
  locks::op_outcome outcome{};
  bool inferred = false;
  std::string lock, owner, channel;
  std::int64_t lease_ms = -1, ttl_ms = -1, token = -1, sub_count = -1;
  std::int32_t db = 0;
};

class op_recorder final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    ops.push_back({op.kind, op.family, op.outcome, op.inferred, std::string(op.lock), std::string(op.owner),
                   std::string(op.channel), op.lease_ms, op.ttl_ms, op.token, op.sub_count, op.db});
  }
  std::vector<recorded_op> ops;
};

// Feeds one command (and its reply, RESP text; empty: none) to a recognizer.
inline void feed(locks::lock_recognizer& r, const std::vector<std::string>& args, std::string_view reply,
                 std::int64_t at_us = 1'000'000, std::uint64_t connection = 1,
                 std::string_view client_text = "10.0.0.1:50000", std::string_view server_text = "10.0.0.2:6379",
                 bool from_start = false, std::uint32_t connection_sequence = 0) {
  std::vector<std::string_view> views(args.begin(), args.end());
  ingest::message m;
  if (!reply.empty()) m = make_message(reply);
  ingest::exchange e;
  e.connection = connection;
  static const ingest::endpoint any_client = ingest::make_endpoint("10.0.0.1", 50000);
  static const ingest::endpoint any_server = ingest::make_endpoint("10.0.0.2", 6379);
  e.client = interned_endpoint(client_text);
  e.server = interned_endpoint(server_text);
  if (e.client == nullptr) e.client = &any_client;  // a test's text that spells no address
  if (e.server == nullptr) e.server = &any_server;
  e.client_text = client_text;
  e.server_text = server_text;
  e.request_us = at_us;
  e.reply_us = reply.empty() ? -1 : at_us + 100;
  e.client_from_start = from_start;
  e.connection_sequence = connection_sequence;
  e.command = views;
  e.reply = reply.empty() ? nullptr : &m;
  r.on_exchange(e);
}

// Operations to a recorder, and on to a timeline when one is given (connection ends too).
class op_tee final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    log.on_operation(op);
    if (next != nullptr) next->on_operation(op);
  }
  void on_connection_end(std::uint64_t c, std::int64_t at) override {
    if (next != nullptr) next->on_connection_end(c, at);
  }
  op_recorder log;
  locks::lock_operation_sink* next = nullptr;
};

inline void feed_push(locks::lock_recognizer& r, std::string_view push, std::int64_t at_us = 1'000'000) {
  static const ingest::endpoint client = ingest::make_endpoint("10.0.0.1", 50001);
  static const ingest::endpoint server = ingest::make_endpoint("10.0.0.2", 6379);
  ingest::message m = make_message(push);
  ingest::exchange e;
  e.kind = ingest::exchange_kind::push;
  e.connection = 2;
  e.client = &client;
  e.server = &server;
  e.request_us = at_us;
  e.reply = &m;
  r.on_exchange(e);
}

struct recorded_event {
  std::int64_t ts_us = 0;
  std::string event;  // "acquired", or "anomaly:late_renewal"
  std::string lock, owner, client;
  std::int64_t hold_count = -1, lease_ms = -1, ttl_ms = -1, wait_us = -1, held_us = -1;
  bool inferred = false;
  locks::link_confidence confidence{};
  std::string server;
  std::int64_t token = -1;
  std::int64_t interval_start_us = -1, interval_us = -1;
  std::string lock_server;  // the lock's identity: server ("" merged) and database
  std::int32_t db = 0;
  std::string detail;  // an anomaly's sentence, as the outputs write it (append_anomaly_detail)
  // quorum / multilock events
  std::uint32_t total = 0, acquired = 0, needed = 0;
  bool succeeded = false, released = false;
  std::vector<std::string> acquired_on, owners, tried;
  locks::wait_end ended = locks::wait_end::none;  // gave_up: how its wait is known to have ended
  locks::anomaly_kind link_not_certain = locks::anomaly_kind::none;  // withheld for want of a certain link
  bool kind_unknown = false;  // quorum: a Redisson RedLock or MultiLock, not told apart yet
  std::int64_t wait_at_most_us = -1;  // gave_up: the longest it can have waited, when its end is only bounded
  std::int64_t wait_likely_us = -1;   // gave_up: its owner's earlier give-ups' wait, when they agree
  int wait_likely_from = 0;
  bool operator==(const recorded_event&) const = default;
};

// A lock event as the timeline sends it for a try, release, ... of `lock` (its identity
// is the server's: lock_server = server).
inline locks::lock_event lock_event_of(locks::lock_event_kind kind, std::int64_t ts_us, std::string_view lock,
                                          std::string_view owner, std::string_view client, std::string_view server) {
  locks::lock_event e;
  e.ts_us = ts_us;
  e.event = kind;
  e.lock = lock;
  e.owner = owner;
  e.client = client;
  e.server = server;
  e.client_endpoint = interned_endpoint(client);
  e.server_endpoint = interned_endpoint(server);
  e.lock_server = server;
  return e;
}

class event_recorder final : public locks::lock_event_sink {
 public:
  static std::string sentence_of(const locks::lock_event& e) {
    std::string out;
    locks::append_anomaly_detail(out, e);
    return out;
  }
  void on_event(const locks::lock_event& e) override {
    std::string name(to_string(e.event));
    if (e.event == locks::lock_event_kind::anomaly) name += ":" + std::string(to_string(e.kind));
    events.push_back({e.ts_us, name, std::string(e.lock), std::string(e.owner), std::string(e.client), e.hold_count,
                      e.lease_ms, e.ttl_ms, e.wait_us, e.held_us, e.inferred, e.confidence, std::string(e.server),
                      e.token, e.interval_start_us, e.interval_us, std::string(e.lock_server), e.db, sentence_of(e), 0, 0, 0, false, false, {}, {}, {}});
    events.back().ended = e.wait_ended;
    events.back().link_not_certain = e.link_not_certain;
    events.back().wait_at_most_us = e.wait_at_most_us;
    events.back().wait_likely_us = e.wait_likely_us;
    events.back().wait_likely_from = e.wait_likely_from;
    if (e.group != nullptr) {
      recorded_event& r = events.back();
      r.total = e.group->total;
      r.acquired = e.group->acquired;
      r.needed = e.group->needed;
      r.succeeded = e.group->succeeded;
      r.released = e.group->released;
      r.kind_unknown = e.group->kind_unknown;
      r.acquired_on.assign(e.group->acquired_on.begin(), e.group->acquired_on.end());
      r.owners.assign(e.group->owners.begin(), e.group->owners.end());
      r.tried.assign(e.group->tried.begin(), e.group->tried.end());
    }
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.event);
    return out;
  }
  std::size_t count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e.event == name ? 1 : 0;
    return n;
  }
  const recorded_event* first(std::string_view name) const {
    for (const auto& e : events) {
      if (e.event == name) return &e;
    }
    return nullptr;
  }
  std::vector<const recorded_event*> all(std::string_view name) const {
    std::vector<const recorded_event*> out;
    for (const auto& e : events) {
      if (e.event == name) out.push_back(&e);
    }
    return out;
  }
  std::vector<recorded_event> events;
};

// The full pipeline over a capture file into `sink` (lock groups included), calling
// after_packet(timeline) after each packet and at_end(timeline) once it is finished.
template <class AfterPacket, class AtEnd>
void run_pipeline(const std::string& pcap, const locks::timeline_options& options, locks::lock_event_sink& sink,
                  AfterPacket&& after_packet, AtEnd&& at_end) {
  locks::lock_groups groups({}, sink);
  locks::lock_timeline timeline(options, groups);
  locks::lock_recognizer recognizer(timeline);
  ingest::ingest_pipeline a({}, recognizer, &recognizer);
  ingest::offline_capture source({pcap});
  ingest::captured_packet p;
  std::int64_t last = -1;
  while (source.next(p)) {
    last = p.ts_us;
    a.on_packet(p.ts_us, p.link_type, p.data);
    after_packet(static_cast<const locks::lock_timeline&>(timeline));
  }
  a.finish();
  timeline.finish(last);
  groups.finish(last);
  at_end(static_cast<const locks::lock_timeline&>(timeline));
}

// The full pipeline over a capture file into an event recorder.
inline event_recorder events_of(const std::string& pcap, const locks::timeline_options& options = {}) {
  event_recorder rec;
  run_pipeline(pcap, options, rec, [](const locks::lock_timeline&) {}, [](const locks::lock_timeline&) {});
  return rec;
}

// A RESP bulk string of `s`, as a server sends it (tests that write replies by hand).
inline std::string resp_bulk(std::string_view s) { return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n"; }

inline std::string report_of(const std::string& pcap, locks::report_format format,
                             const locks::timeline_options& options = {}, unsigned threads = 2) {
  locks::analysis_options o;
  o.report.format = format;
  o.timeline = options;
  o.threads = threads;
  std::string out;
  locks::analyze_files({pcap}, o, [&](std::string_view s) { out += s; });
  return out;
}

using lockscope::test::command_output;

// How many times `what` occurs in `text` (overlapping).
inline std::size_t occurrences(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace lockscope::timeline_test
