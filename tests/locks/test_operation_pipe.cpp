// The operation pipe between the ingest thread and the timeline, and the one-thread
// operation_batch: every field crosses intact and in order, memory stays bounded, a
// failing consumer never blocks the producer, the timeline's prefetch announcements
// (will_handle) change nothing, and analyze_files gives the same output with one
// thread or two.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

#include "helpers.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/operation_batch.hpp"
#include "lockscope/locks/operation_pipe.hpp"
#include "scenarios.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// Everything a lock_operation or session_event carries, owned.
struct copied_call {
  bool is_event = false;
  locks::lock_op_kind kind{};
  locks::lock_family family{};
  locks::op_outcome outcome{};
  bool inferred = false, shared = false, lease_added = false, server_dropped = false, has_client = false,
       has_server = false;
  std::string lock, owner, channel, message, client_text, server_text, redirect_to, client_name;
  locks::cluster_reply redirect{};
  bool asking = false;
  std::int32_t slot = -1;
  std::int64_t lease_ms = 0, ttl_ms = 0, token = 0, sub_count = 0, permits = 0, limit = 0, caller_now_ms = 0,
               request_us = 0, reply_us = 0, opened_us = 0;
  std::uint64_t connection = 0;
  std::int32_t db = 0;
  ingest::endpoint client{}, server{};
  // session events
  ingest::session_event_kind event_kind{};
  bool from_client = false, has_from = false, has_to = false;
  ingest::endpoint from{}, to{};
  std::uint64_t offset = 0, bytes = 0;
  std::error_code error;
  // connection ends
  bool is_end = false;
  std::int64_t at_us = 0;
  bool operator==(const copied_call&) const = default;
};

copied_call copy_of(const locks::lock_operation& op) {
  copied_call c;
  c.kind = op.kind;
  c.family = op.family;
  c.outcome = op.outcome;
  c.inferred = op.inferred;
  c.shared = op.shared;
  c.lease_added = op.lease_added;
  c.server_dropped = op.server_dropped;
  c.has_client = op.client != nullptr;
  if (op.client != nullptr) c.client = *op.client;
  c.has_server = op.server != nullptr;
  if (op.server != nullptr) c.server = *op.server;
  c.client_name = op.client_name;
  c.permits = op.permits;
  c.limit = op.limit;
  c.caller_now_ms = op.caller_now_ms;
  c.opened_us = op.opened_us;
  c.lock = op.lock;
  c.owner = op.owner;
  c.channel = op.channel;
  c.message = op.message;
  c.client_text = op.client_text;
  c.server_text = op.server_text;
  c.redirect_to = op.redirect_to;
  c.redirect = op.redirect;
  c.asking = op.asking;
  c.slot = op.slot;
  c.sub_count = op.sub_count;
  c.lease_ms = op.lease_ms;
  c.ttl_ms = op.ttl_ms;
  c.token = op.token;
  c.request_us = op.request_us;
  c.reply_us = op.reply_us;
  c.connection = op.connection;
  c.db = op.db;
  return c;
}

copied_call copy_of(const ingest::session_event& ev) {
  copied_call c;
  c.is_event = true;
  c.event_kind = ev.kind;
  c.connection = ev.connection;
  c.from_client = ev.from_client;
  c.has_from = ev.from != nullptr;
  c.has_to = ev.to != nullptr;
  if (ev.from != nullptr) c.from = *ev.from;
  if (ev.to != nullptr) c.to = *ev.to;
  c.offset = ev.offset;
  c.bytes = ev.bytes;
  c.error = ev.error;
  return c;
}

// The operation a copied call describes (its views into `c`).
locks::lock_operation operation_of(const copied_call& c) {
  locks::lock_operation op;
  op.kind = c.kind;
  op.family = c.family;
  op.outcome = c.outcome;
  op.inferred = c.inferred;
  op.shared = c.shared;
  op.lease_added = c.lease_added;
  op.client = c.has_client ? &c.client : nullptr;
  op.lock = c.lock;
  op.owner = c.owner;
  op.channel = c.channel;
  op.message = c.message;
  op.client_text = c.client_text;
  op.server_text = c.server_text;
  op.redirect_to = c.redirect_to;
  op.redirect = c.redirect;
  op.asking = c.asking;
  op.slot = c.slot;
  op.sub_count = c.sub_count;
  op.lease_ms = c.lease_ms;
  op.ttl_ms = c.ttl_ms;
  op.token = c.token;
  op.request_us = c.request_us;
  op.reply_us = c.reply_us;
  op.connection = c.connection;
  op.db = c.db;
  return op;
}

// Makes the call `c` records on `sink`.
void replay_call(const copied_call& c, locks::lock_operation_sink& sink) {
  if (c.is_end) {
    sink.on_connection_end(c.connection, c.at_us);
  } else if (c.is_event) {
    ingest::session_event ev;
    ev.kind = c.event_kind;
    ev.connection = c.connection;
    ev.from_client = c.from_client;
    ev.from = c.has_from ? &c.from : nullptr;
    ev.to = c.has_to ? &c.to : nullptr;
    ev.offset = c.offset;
    ev.bytes = c.bytes;
    ev.error = c.error;
    sink.on_session_event(ev);
  } else {
    sink.on_operation(operation_of(c));
  }
}

class call_recorder final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override { calls.push_back(copy_of(op)); }
  // Each announcement: the index of the next call, and the operations announced.
  void will_handle(std::span<const locks::lock_operation> upcoming) noexcept override {
    std::vector<copied_call> ops;
    for (const locks::lock_operation& op : upcoming) ops.push_back(copy_of(op));
    announced.emplace_back(calls.size(), std::move(ops));
  }
  std::vector<std::pair<std::size_t, std::vector<copied_call>>> announced;
  void on_session_event(const ingest::session_event& ev) override { calls.push_back(copy_of(ev)); }
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override {
    copied_call c;
    c.is_end = true;
    c.connection = connection;
    c.at_us = at_us;
    calls.push_back(c);
  }
  std::vector<copied_call> calls;
};

const ingest::endpoint client4 = ingest::make_endpoint("10.0.0.1", 50000);
const ingest::endpoint client6 = ingest::make_endpoint("2001:db8::7", 50001);
const ingest::endpoint server4 = ingest::make_endpoint("10.0.0.2", 6379);

// The i-th of a varied sequence: every kind, family and outcome, both address
// families, no client, empty texts, connection ends, and now and then a payload bigger
// than a chunk.
void send_call(locks::lock_operation_sink& sink, int i, const std::string& big) {
  if (i % 89 == 7) {
    sink.on_connection_end(static_cast<std::uint64_t>(i % 40 + 1), 1'700'000'000'000'000 + i * 100);
    return;
  }
  if (i % 97 == 5) {
    ingest::session_event ev;
    ev.kind = static_cast<ingest::session_event_kind>(i % 3);
    ev.connection = static_cast<std::uint64_t>(i);
    ev.from = i % 2 == 0 ? &client4 : nullptr;
    ev.to = &server4;
    ev.from_client = i % 2 == 0;
    ev.offset = static_cast<std::uint64_t>(i) * 1000;
    ev.bytes = 17;
    ev.error = resp::make_error_code(resp::errc::unknown_type);
    sink.on_session_event(ev);
    return;
  }
  const std::string lock = "lock:" + std::to_string(i % 50);
  const std::string owner = i % 7 == 0 ? "" : "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:" + std::to_string(i % 13);
  const std::string channel = "redisson_lock__channel:{" + lock + "}";
  locks::lock_operation op;
  op.kind = static_cast<locks::lock_op_kind>(i % 9);
  op.family = static_cast<locks::lock_family>(i % 10);
  op.outcome = static_cast<locks::op_outcome>(i % 8);
  op.inferred = i % 3 == 0;
  op.shared = i % 5 == 0;
  op.lease_added = i % 7 == 1;
  op.lock = lock;
  op.owner = owner;
  op.channel = i % 2 == 0 ? std::string_view(channel) : std::string_view();
  op.message = i % 1001 == 3 ? std::string_view(big) : std::string_view(i % 4 == 0 ? "0" : "");
  op.client = i % 11 == 0 ? nullptr : (i % 2 == 0 ? &client4 : &client6);
  op.client_text = op.client == nullptr ? std::string_view() : std::string_view("10.0.0.1:50000");
  op.server_text = "10.0.0.2:6379";
  op.lease_ms = i % 4 == 0 ? -1 : 30000 + i;
  op.ttl_ms = i % 6 == 0 ? 29000 : -1;
  op.token = i % 8 == 0 ? i : -1;
  op.connection = static_cast<std::uint64_t>(i % 40 + 1);
  op.db = static_cast<std::int32_t>(i % 7) - 1;
  if (i % 17 == 4) {  // a Redis Cluster redirect
    op.redirect = static_cast<locks::cluster_reply>(1 + i % 4);
    op.asking = i % 2 == 0;
    op.slot = i % 16384;
    op.redirect_to = "10.0.0.3:7001";
  }
  op.sub_count = i % 5 == 2 ? i % 3 : -1;
  op.server_dropped = i % 19 == 2;
  op.server = i % 13 == 0 ? nullptr : &server4;
  const std::string name = "worker-" + lock;
  op.client_name = i % 3 == 1 ? std::string_view(name) : std::string_view();
  op.permits = i % 10 == 3 ? i % 5 : -1;
  op.limit = i % 10 == 3 ? 5 : -1;
  op.caller_now_ms = i % 23 == 0 ? 1'700'000'000'000 + i : -1;
  op.opened_us = i % 2 == 0 ? 1'699'999'999'000'000 + i : -1;
  op.request_us = 1'700'000'000'000'000 + i * 100;
  op.reply_us = i % 9 == 0 ? -1 : op.request_us + 50;
  sink.on_operation(op);
}

// Every bundled capture: the scenarios and the recordings.
std::vector<std::string> bundled_captures() {
  const std::filesystem::path dir = LOCKSCOPE_CAPTURES_DIR;
  std::vector<std::string> pcaps;
  for (const scenario& s : scenarios()) pcaps.push_back((dir / (s.name + ".pcap")).string());
  for (const char* name : {"contend", "expiry", "resp3", "evalsha", "stress"}) {
    pcaps.push_back((dir / "recorded" / (std::string(name) + ".pcap")).string());
  }
  return pcaps;
}

}  // namespace

TEST_CASE("operation_pipe: every field of every call crosses, in order, through few small chunks", "[pipe]") {
  const std::string big(300'000, 'x');  // more than a chunk: it gets one of its own
  constexpr int n = 20'000;
  call_recorder direct;
  for (int i = 0; i < n; ++i) send_call(direct, i, big);

  locks::operation_pipe pipe(4096, 2);
  call_recorder piped;
  std::thread producer([&] {
    for (int i = 0; i < n; ++i) send_call(pipe, i, big);
    pipe.close();
  });
  pipe.drain(piped);
  producer.join();
  REQUIRE(piped.calls.size() == direct.calls.size());
  CHECK(std::count_if(piped.calls.begin(), piped.calls.end(), [](const copied_call& c) { return c.is_end; }) ==
        (n - 7 + 88) / 89);
  for (std::size_t i = 0; i < direct.calls.size(); ++i) {
    INFO("call " << i);
    REQUIRE(piped.calls[i] == direct.calls[i]);
  }
  CHECK_FALSE(pipe.abandoned());
}

TEST_CASE("operation_pipe: close() with nothing written ends drain(): writing after close() is misuse", "[pipe]") {
  locks::operation_pipe pipe;
  call_recorder rec;
  pipe.close();
  pipe.close();  // idempotent
  pipe.drain(rec);
  CHECK(rec.calls.empty());
  CHECK_THROWS_AS(send_call(pipe, 1, ""), std::logic_error);
}

TEST_CASE("operation_pipe: a throwing consumer abandons the pipe and never blocks the producer", "[pipe]") {
  struct failing final : locks::lock_operation_sink {
    int seen = 0;
    void on_operation(const locks::lock_operation&) override {
      if (++seen == 100) throw std::runtime_error("disk full");
    }
  } sink;
  locks::operation_pipe pipe(4096, 2);
  std::atomic<int> sent{0};
  std::thread producer([&] {
    // Far more than two chunks hold: without abandonment this would wait forever.
    for (int i = 0; i < 200'000; ++i, ++sent) send_call(pipe, i, "");
    pipe.close();
  });
  CHECK_THROWS_WITH(pipe.drain(sink), "disk full");
  producer.join();
  CHECK(sent == 200'000);
  CHECK(sink.seen == 100);
  CHECK(pipe.abandoned());
}

TEST_CASE("analyze_files: one thread or two, the same output for every bundled capture", "[pipe][captures]") {
  for (const std::string& pcap : bundled_captures()) {
    INFO(pcap);
    for (auto format : {locks::report_format::text, locks::report_format::jsonl,
                        locks::report_format::summary_only}) {
      const std::string one = report_of(pcap, format, {}, 1);
      CHECK_FALSE(one.empty());
      CHECK(report_of(pcap, format, {}, 2) == one);
    }
  }
}

TEST_CASE("analyze_files: an output failure on the timeline's thread stops the ingest and is rethrown",
          "[pipe][captures]") {
  const std::string pcap = std::string(LOCKSCOPE_CAPTURES_DIR) + "/recorded/stress.pcap";
  for (unsigned threads : {1u, 2u}) {
    INFO("threads " << threads);
    locks::analysis_options o;
    o.report.format = locks::report_format::stream_text;  // writes at every event
    o.threads = threads;
    int writes = 0;
    CHECK_THROWS_WITH(locks::analyze_files({pcap}, o,
                                              [&](std::string_view) {
                                                if (++writes == 3) throw std::runtime_error("broken pipe");
                                              }),
                      "broken pipe");
    CHECK(writes == 3);
  }
}

TEST_CASE("analyze_files: text spilled to a temporary file is the same text, for every bundled capture",
          "[report][captures][memory]") {
  for (const std::string& pcap : bundled_captures()) {
    INFO(pcap);
    const std::string in_memory = report_of(pcap, locks::report_format::text);
    for (std::size_t budget : {0u, 200u, 5000u}) {  // 0: a run per event
      INFO("budget " << budget);
      locks::analysis_options o;
      o.report.text_buffer_bytes = budget;
      std::string out;
      locks::analyze_files({pcap}, o, [&](std::string_view s) { out += s; });
      CHECK(out == in_memory);
    }
  }
}

TEST_CASE("lock_report: an unusable TMPDIR is a clear error once the text outgrows memory", "[report][memory]") {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", "/nonexistent/lockscope-tmp", 1);
  locks::analysis_options o;
  o.report.text_buffer_bytes = 100;
  const std::string pcap = std::string(LOCKSCOPE_CAPTURES_DIR) + "/recorded/stress.pcap";
  CHECK_THROWS_WITH(locks::analyze_files({pcap}, o, [](std::string_view) {}),
                    Catch::Contains("/nonexistent/lockscope-tmp") && Catch::Contains("TMPDIR"));
  o.report.text_buffer_bytes = 64u << 20;  // fits in memory: no file needed
  CHECK_NOTHROW(locks::analyze_files({pcap}, o, [](std::string_view) {}));
  if (old != nullptr) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
}

namespace {

// Checks that the announcements name the operations delivered, in order, each at most
// once and before it is delivered, at most `ahead` operations before it (an operation
// may go unannounced: a window of one is not worth it).
void check_announcements(const call_recorder& rec, std::size_t ahead) {
  std::vector<std::size_t> operations;  // the calls that are operations
  for (std::size_t k = 0; k < rec.calls.size(); ++k) {
    if (!rec.calls[k].is_event && !rec.calls[k].is_end) operations.push_back(k);
  }
  std::size_t cursor = 0;  // the first operation not announced yet
  for (const auto& [next, ops] : rec.announced) {
    INFO("announcement before call " << next);
    REQUIRE_FALSE(ops.empty());
    while (cursor < operations.size() && rec.calls[operations[cursor]] != ops.front()) ++cursor;
    REQUIRE(cursor + ops.size() <= operations.size());
    REQUIRE(operations[cursor] >= next);  // not delivered yet
    std::size_t delivered_before = 0;     // operations delivered when it was announced
    while (delivered_before < operations.size() && operations[delivered_before] < next) ++delivered_before;
    CHECK(cursor - delivered_before < ahead);
    for (const copied_call& op : ops) REQUIRE(rec.calls[operations[cursor++]] == op);
  }
}

// What `pcap`'s packets make the recognizer call, copied.
std::vector<copied_call> recognized_calls(const std::string& pcap) {
  call_recorder rec;
  locks::lock_recognizer recognizer(rec);
  ingest::ingest_pipeline ingest(ingest::ingest_options{}, recognizer, &recognizer);
  ingest::offline_capture source({pcap});
  ingest::captured_packet p;
  while (source.next(p)) ingest.on_packet(p.ts_us, p.link_type, p.data);
  ingest.finish();
  return rec.calls;
}

// The timeline's JSONL for `calls`, fed through `entry(timeline)`.
template <class Feed>
std::string timeline_jsonl(const std::vector<copied_call>& calls, Feed&& feed) {
  std::string out;
  locks::report_options ro;
  ro.format = locks::report_format::jsonl;
  locks::lock_report report(ro, [&](std::string_view s) { out += s; });
  locks::lock_timeline timeline({}, report);
  feed(timeline);
  const std::int64_t end = calls.empty() ? 0 : calls.back().request_us + 120'000'000;
  timeline.finish(end);
  report.finish(timeline);
  return out;
}

}  // namespace

TEST_CASE("operation_batch: every call passes on intact and in order, its operations announced first",
          "[pipe][batch]") {
  const std::string big(100'000, 'x');  // more text than the batch holds: passed on at once
  constexpr int n = 20'000;
  call_recorder direct;
  for (int i = 0; i < n; ++i) send_call(direct, i, big);

  call_recorder batched;
  locks::operation_batch batch(batched, 100, 4096);
  for (int i = 0; i < n; ++i) {
    send_call(batch, i, big);
    if (i % 37 == 0) batch.flush();  // as the live loop does after each packet
  }
  CHECK_FALSE(batch.empty());
  batch.flush();
  CHECK(batch.empty());
  batch.flush();  // nothing held: nothing happens
  REQUIRE(batched.calls.size() == direct.calls.size());
  for (std::size_t i = 0; i < direct.calls.size(); ++i) {
    INFO("call " << i);
    REQUIRE(batched.calls[i] == direct.calls[i]);
  }
  CHECK(batched.announced.size() > 100);
  check_announcements(batched, 2 * locks::operation_batch::window);

  // Unflushed, it passes calls on by itself once it holds its most operations.
  call_recorder bounded;
  locks::operation_batch small(bounded, 10);
  locks::lock_operation op;
  op.lock = "lock:1";
  for (int i = 0; i < 9; ++i) small.on_operation(op);
  CHECK(bounded.calls.empty());
  small.on_operation(op);
  CHECK(bounded.calls.size() == 10);
  CHECK(small.empty());
}

TEST_CASE("operation_batch: an operation whose texts do not fit passes on those held first, each with its own copy",
          "[pipe][batch]") {
  // The batch's text buffer never moves under the operations that view it: one that
  // would not fit in what is left sends those held on first. Each sender's buffer is
  // overwritten as soon as its call returns: what arrives must be the batch's copy.
  struct recorded final : locks::lock_operation_sink {
    std::vector<std::string> locks, owners;
    void on_operation(const locks::lock_operation& op) override {
      locks.emplace_back(op.lock);
      owners.emplace_back(op.owner);
    }
  } sink;
  locks::operation_batch batch(sink, 100, 4000);  // a text buffer of 5,000 bytes
  std::string scratch;
  auto send = [&](char c, std::size_t lock_bytes) {
    scratch.assign(lock_bytes, c);
    scratch += "owner";
    scratch += c;
    locks::lock_operation op;
    op.lock = std::string_view(scratch).substr(0, lock_bytes);
    op.owner = std::string_view(scratch).substr(lock_bytes);
    batch.on_operation(op);
    scratch.assign(scratch.size(), '?');
  };
  send('a', 3000);
  CHECK(sink.locks.empty());      // held
  send('b', 1500);                // 3,006 + 1,506 bytes fit: held, then passed on (past 4,000)
  CHECK(sink.locks.size() == 2);
  send('c', 3500);
  CHECK(sink.locks.size() == 2);  // held
  send('d', 2000);                // would not fit after c's 3,506: c goes first, d is held
  CHECK(sink.locks.size() == 3);
  CHECK_FALSE(batch.empty());
  send('e', 9000);                // more than the buffer: d first, then e alone (and passed on)
  CHECK(sink.locks.size() == 5);
  CHECK(batch.empty());
  send('f', 10);
  batch.flush();
  const std::vector<std::pair<char, std::size_t>> sent{{'a', 3000}, {'b', 1500}, {'c', 3500},
                                                       {'d', 2000}, {'e', 9000}, {'f', 10}};
  REQUIRE(sink.locks.size() == sent.size());
  for (std::size_t k = 0; k < sent.size(); ++k) {
    INFO("operation " << k);
    CHECK(sink.locks[k] == std::string(sent[k].second, sent[k].first));
    CHECK(sink.owners[k] == std::string("owner") + sent[k].first);
  }
}

TEST_CASE("operation_batch: every text field of any length, empty ones among them, arrives as sent", "[pipe][batch]") {
  // Each field empty (as most are: an acquire names no channel or message), of 1 to 3
  // bytes, or longer than a copy's inline widths; the sender's bytes overwritten after
  // each call, so that only the batch's copies can arrive right.
  auto fields = [](auto& op) {
    return std::array<decltype(&op.lock), 8>{&op.lock,        &op.owner,       &op.channel,     &op.message,
                                             &op.client_text, &op.server_text, &op.redirect_to, &op.client_name};
  };
  struct recorded final : locks::lock_operation_sink {
    std::function<std::array<const std::string_view*, 8>(const locks::lock_operation&)> read;
    std::vector<std::array<std::string, 8>> texts;
    void on_operation(const locks::lock_operation& op) override {
      auto& row = texts.emplace_back();
      const auto f = read(op);
      for (std::size_t i = 0; i < f.size(); ++i) row[i] = std::string(*f[i]);
    }
  } sink;
  sink.read = [&](const locks::lock_operation& op) { return fields(op); };
  locks::operation_batch batch(sink, 64, 2000);
  std::mt19937_64 random(24);
  std::vector<std::array<std::string, 8>> sent;
  std::array<std::string, 8> scratch;
  for (int k = 0; k < 3000; ++k) {
    locks::lock_operation op;
    auto& row = sent.emplace_back();
    const auto f = fields(op);
    for (std::size_t i = 0; i < f.size(); ++i) {
      const std::size_t choice = random() % 6;
      const std::size_t length = choice < 3 ? 0 : choice == 3 ? 1 + random() % 3 : random() % 200;
      row[i].clear();
      for (std::size_t b = 0; b < length; ++b) row[i] += static_cast<char>('!' + random() % 90);
      scratch[i] = row[i];
      *f[i] = scratch[i];
    }
    batch.on_operation(op);
    for (std::string& s : scratch) s.assign(s.size(), '?');
    if (k % 101 == 0) batch.flush();
  }
  batch.flush();
  REQUIRE(sink.texts.size() == sent.size());
  for (std::size_t k = 0; k < sent.size(); ++k) {
    INFO("operation " << k);
    REQUIRE(sink.texts[k] == sent[k]);
  }
}

TEST_CASE("operation_pipe: the operations of each chunk are announced in windows before they are delivered",
          "[pipe][batch]") {
  call_recorder piped;
  locks::operation_pipe pipe(8192, 2);
  std::thread producer([&] {
    for (int i = 0; i < 5'000; ++i) send_call(pipe, i, "");
    pipe.close();
  });
  pipe.drain(piped);
  producer.join();
  REQUIRE(piped.calls.size() == 5'000);
  CHECK(piped.announced.size() > 100);
  check_announcements(piped, 16);
}

TEST_CASE("operation_batch: a throwing downstream drops the calls held, and the batch goes on after", "[pipe][batch]") {
  struct failing final : locks::lock_operation_sink {
    int seen = 0;
    void on_operation(const locks::lock_operation&) override {
      if (++seen == 10) throw std::runtime_error("disk full");
    }
  } sink;
  locks::operation_batch batch(sink);
  for (int i = 0; i < 100; ++i) send_call(batch, i * 3 + 1, "");  // operations, and a connection end
  CHECK_THROWS_WITH(batch.flush(), "disk full");
  CHECK(sink.seen == 10);
  CHECK(batch.empty());
  send_call(batch, 1, "");
  batch.flush();
  CHECK(sink.seen == 11);
}

namespace {

// The calls send_call makes, 6,000 of them.
std::vector<copied_call> varied_calls() {
  call_recorder rec;
  for (int i = 0; i < 6'000; ++i) send_call(rec, i, "");
  return rec.calls;
}

}  // namespace

TEST_CASE("lock_timeline: announcing operations (will_handle) changes no event, for any window",
          "[pipe][batch][timeline]") {
  // Varied calls: every kind and outcome, several scopes (server, database -1..5),
  // empty lock names, cluster redirects, ends; then the bundled recordings.
  std::vector<std::vector<copied_call>> inputs{varied_calls()};
  for (const std::string& pcap : bundled_captures()) inputs.push_back(recognized_calls(pcap));
  inputs.push_back(recognized_calls(std::string(LOCKSCOPE_CAPTURES_DIR) + "/thirdparty/cluster.pcap"));
  std::size_t total_bytes = 0;
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    const std::vector<copied_call>& calls = inputs[input];
    INFO("input " << input << ", " << calls.size() << " calls");
    REQUIRE_FALSE(calls.empty());
    const std::string plain = timeline_jsonl(calls, [&](locks::lock_timeline& t) {
      for (const copied_call& c : calls) replay_call(c, t);
    });
    CHECK_FALSE(plain.empty());
    total_bytes += plain.size();
    for (std::size_t window : {2u, 7u, 40u}) {
      INFO("window " << window);
      // Each operation announced up to `window` times, in overlapping windows, some of
      // which name operations that come after events and ends.
      const std::string announced = timeline_jsonl(calls, [&](locks::lock_timeline& t) {
        for (std::size_t i = 0; i < calls.size(); ++i) {
          if (i % window == 0) {
            std::vector<locks::lock_operation> ops;
            for (std::size_t j = i; j < calls.size() && ops.size() < window; ++j) {
              if (!calls[j].is_event && !calls[j].is_end) ops.push_back(operation_of(calls[j]));
            }
            t.will_handle(ops);
          }
          replay_call(calls[i], t);
        }
      });
      CHECK(announced == plain);
    }
    // Through a batch, as the analyzer runs it.
    const std::string batched = timeline_jsonl(calls, [&](locks::lock_timeline& t) {
      locks::operation_batch batch(t, 50, 2048);
      for (const copied_call& c : calls) replay_call(c, batch);
      batch.flush();
    });
    CHECK(batched == plain);
  }
  CHECK(total_bytes > 1'000'000);  // the timelines had much to say
}

TEST_CASE("lock_timeline: operations delivered as announced reuse the lookup, and wrong announcements change nothing",
          "[pipe][batch][timeline]") {
  // The timeline keeps what will_handle() resolved for each announced operation and
  // takes it when that very operation (by address) comes next, checked against the
  // lock's scope and name. Announced with the right content, or with another
  // operation's (same addresses, other lock names, servers and databases: the
  // candidates it resolved are wrong locks), the events are those of no announcement.
  std::vector<std::vector<copied_call>> inputs{varied_calls()};
  inputs.push_back(recognized_calls(std::string(LOCKSCOPE_CAPTURES_DIR) + "/thirdparty/cluster.pcap"));
  inputs.push_back(recognized_calls(std::string(LOCKSCOPE_CAPTURES_DIR) + "/recorded/stress.pcap"));
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    const std::vector<copied_call>& calls = inputs[input];
    INFO("input " << input << ", " << calls.size() << " calls");
    std::vector<std::size_t> operations;  // the calls that are operations
    for (std::size_t k = 0; k < calls.size(); ++k) {
      if (!calls[k].is_event && !calls[k].is_end) operations.push_back(k);
    }
    REQUIRE(operations.size() > 100);
    const std::string plain = timeline_jsonl(calls, [&](locks::lock_timeline& t) {
      for (const copied_call& c : calls) replay_call(c, t);
    });
    // `shift`: each position announced with the content of the operation that many
    // later (0: its own).
    for (std::size_t shift : {0u, 1u, 5u}) {
      for (std::size_t window : {1u, 16u, 100u}) {  // 100: more than the timeline keeps
        INFO("shift " << shift << ", window " << window);
        const std::string announced = timeline_jsonl(calls, [&](locks::lock_timeline& t) {
          std::vector<locks::lock_operation> ops;
          std::size_t next_call = 0;
          for (std::size_t first = 0; first < operations.size(); first += window) {
            const std::size_t count = std::min(window, operations.size() - first);
            ops.clear();
            for (std::size_t k = 0; k < count; ++k) {
              ops.push_back(operation_of(calls[operations[(first + k + shift) % operations.size()]]));
            }
            t.will_handle(ops);
            for (std::size_t k = 0; k < count; ++k) {
              ops[k] = operation_of(calls[operations[first + k]]);  // the true content, same address
              for (; next_call < operations[first + k]; ++next_call) replay_call(calls[next_call], t);
              t.on_operation(ops[k]);
              ++next_call;
            }
          }
          for (; next_call < calls.size(); ++next_call) replay_call(calls[next_call], t);
        });
        CHECK(announced == plain);
      }
    }
  }
}

TEST_CASE("lock_timeline: an announcement resolved before two servers were linked as one cluster is not reused after",
          "[pipe][batch][timeline][cluster]") {
  // Keys seen on two nodes before they are linked stay two rows under one identity; which
  // row later operations reach is the id table's, and the link reshapes the table. An
  // operation announced before the link (its candidate row read then) and delivered
  // after it must reach the row an unannounced one would.
  constexpr int keys = 40;
  const std::string node_a = "10.0.0.1:6379", node_b = "10.0.0.2:6379";
  std::vector<std::string> names;
  for (int i = 0; i < keys; ++i) names.push_back("lock:" + std::to_string(i));
  auto acquire = [&](int i, const std::string& node, std::string_view owner, std::int64_t at) {
    locks::lock_operation op;
    op.kind = locks::lock_op_kind::acquire;
    op.family = locks::lock_family::redisson;
    op.outcome = locks::op_outcome::ok;
    op.lock = names[static_cast<std::size_t>(i)];
    op.owner = owner;
    op.lease_ms = 30'000;
    op.server_text = node;
    op.client_text = "10.0.0.9:40000";
    op.connection = node == node_a ? 1 : 2;
    op.request_us = at;
    op.reply_us = at + 10;
    return op;
  };
  auto run = [&](bool announce) {
    std::string out;
    locks::report_options ro;
    ro.format = locks::report_format::jsonl;
    locks::lock_report report(ro, [&](std::string_view s) { out += s; });
    locks::lock_timeline t({}, report);
    std::int64_t at = 1'000'000;
    // Node a first: its scope is the one the link keeps. The last operation before the
    // window is on node a, so that the window's are looked up in advance.
    for (int i = 0; i < keys; ++i) t.on_operation(acquire(i, node_a, "a:1", at += 100));
    for (int i = 0; i < keys; ++i) t.on_operation(acquire(i, node_b, "b:1", at += 100));
    t.on_operation(acquire(0, node_a, "a:1", at += 100));
    // The link, then every key again on node a, announced together.
    std::vector<locks::lock_operation> ops;
    locks::lock_operation link;
    link.kind = locks::lock_op_kind::cluster_link;
    link.server_text = node_a;
    link.redirect_to = node_b;
    link.request_us = link.reply_us = at += 100;
    ops.push_back(link);
    for (int i = 0; i < keys; ++i) ops.push_back(acquire(i, node_a, "a:1", at += 100));
    if (announce) t.will_handle(ops);
    for (const locks::lock_operation& op : ops) t.on_operation(op);
    t.finish(at + 1'000'000);
    report.finish(t);
    return out;
  };
  const std::string plain = run(false);
  CHECK(plain.find("\"reentered\"") != std::string::npos);
  CHECK(plain.find("\"overlapping_holders\"") != std::string::npos);  // some keys reach node b's row
  CHECK(run(true) == plain);
}
