// The operation pipe between the ingest thread and the timeline: every field crosses
// intact and in order, memory stays bounded, a failing consumer never blocks the
// producer, and analyze_files gives the same output with one thread or two.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "helpers.hpp"
#include "lockscope/locks/operation_pipe.hpp"
#include "scenarios.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// Everything a lock_operation or session_event carries, owned.
struct copied_call {
  bool is_event = false;
  analyzer::lock_op_kind kind{};
  analyzer::lock_family family{};
  analyzer::op_outcome outcome{};
  bool inferred = false, shared = false, lease_added = false, has_client = false;
  std::string lock, owner, channel, message, client_text, server_text;
  std::int64_t lease_ms = 0, ttl_ms = 0, token = 0, request_us = 0, reply_us = 0;
  std::uint64_t connection = 0;
  std::int32_t db = 0;
  analyzer::endpoint client{};
  // session events
  analyzer::session_event_kind event_kind{};
  bool from_client = false, has_from = false, has_to = false;
  analyzer::endpoint from{}, to{};
  std::uint64_t offset = 0, bytes = 0;
  std::error_code error;
  // connection ends
  bool is_end = false;
  std::int64_t at_us = 0;
  bool operator==(const copied_call&) const = default;
};

copied_call copy_of(const analyzer::lock_operation& op) {
  copied_call c;
  c.kind = op.kind;
  c.family = op.family;
  c.outcome = op.outcome;
  c.inferred = op.inferred;
  c.shared = op.shared;
  c.lease_added = op.lease_added;
  c.has_client = op.client != nullptr;
  if (op.client != nullptr) c.client = *op.client;
  c.lock = op.lock;
  c.owner = op.owner;
  c.channel = op.channel;
  c.message = op.message;
  c.client_text = op.client_text;
  c.server_text = op.server_text;
  c.lease_ms = op.lease_ms;
  c.ttl_ms = op.ttl_ms;
  c.token = op.token;
  c.request_us = op.request_us;
  c.reply_us = op.reply_us;
  c.connection = op.connection;
  c.db = op.db;
  return c;
}

copied_call copy_of(const analyzer::session_event& ev) {
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

class call_recorder final : public analyzer::lock_operation_sink {
 public:
  void on_operation(const analyzer::lock_operation& op) override { calls.push_back(copy_of(op)); }
  void on_session_event(const analyzer::session_event& ev) override { calls.push_back(copy_of(ev)); }
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override {
    copied_call c;
    c.is_end = true;
    c.connection = connection;
    c.at_us = at_us;
    calls.push_back(c);
  }
  std::vector<copied_call> calls;
};

const analyzer::endpoint client4 = analyzer::make_endpoint("10.0.0.1", 50000);
const analyzer::endpoint client6 = analyzer::make_endpoint("2001:db8::7", 50001);
const analyzer::endpoint server4 = analyzer::make_endpoint("10.0.0.2", 6379);

// The i-th of a varied sequence: every kind, family and outcome, both address
// families, no client, empty texts, connection ends, and now and then a payload bigger
// than a chunk.
void send_call(analyzer::lock_operation_sink& sink, int i, const std::string& big) {
  if (i % 89 == 7) {
    sink.on_connection_end(static_cast<std::uint64_t>(i % 40 + 1), 1'700'000'000'000'000 + i * 100);
    return;
  }
  if (i % 97 == 5) {
    analyzer::session_event ev;
    ev.kind = static_cast<analyzer::session_event_kind>(i % 3);
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
  analyzer::lock_operation op;
  op.kind = static_cast<analyzer::lock_op_kind>(i % 9);
  op.family = static_cast<analyzer::lock_family>(i % 10);
  op.outcome = static_cast<analyzer::op_outcome>(i % 8);
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

  analyzer::operation_pipe pipe(4096, 2);
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
  analyzer::operation_pipe pipe;
  call_recorder rec;
  pipe.close();
  pipe.close();  // idempotent
  pipe.drain(rec);
  CHECK(rec.calls.empty());
  CHECK_THROWS_AS(send_call(pipe, 1, ""), std::logic_error);
}

TEST_CASE("operation_pipe: a throwing consumer abandons the pipe and never blocks the producer", "[pipe]") {
  struct failing final : analyzer::lock_operation_sink {
    int seen = 0;
    void on_operation(const analyzer::lock_operation&) override {
      if (++seen == 100) throw std::runtime_error("disk full");
    }
  } sink;
  analyzer::operation_pipe pipe(4096, 2);
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
    for (auto format : {analyzer::report_format::text, analyzer::report_format::jsonl,
                        analyzer::report_format::summary_only}) {
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
    analyzer::analysis_options o;
    o.report.format = analyzer::report_format::stream_text;  // writes at every event
    o.threads = threads;
    int writes = 0;
    CHECK_THROWS_WITH(analyzer::analyze_files({pcap}, o,
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
    const std::string in_memory = report_of(pcap, analyzer::report_format::text);
    for (std::size_t budget : {0u, 200u, 5000u}) {  // 0: a run per event
      INFO("budget " << budget);
      analyzer::analysis_options o;
      o.report.text_buffer_bytes = budget;
      std::string out;
      analyzer::analyze_files({pcap}, o, [&](std::string_view s) { out += s; });
      CHECK(out == in_memory);
    }
  }
}

TEST_CASE("lock_report: an unusable TMPDIR is a clear error once the text outgrows memory", "[report][memory]") {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", "/nonexistent/lockscope-tmp", 1);
  analyzer::analysis_options o;
  o.report.text_buffer_bytes = 100;
  const std::string pcap = std::string(LOCKSCOPE_CAPTURES_DIR) + "/recorded/stress.pcap";
  CHECK_THROWS_WITH(analyzer::analyze_files({pcap}, o, [](std::string_view) {}),
                    Catch::Contains("/nonexistent/lockscope-tmp") && Catch::Contains("TMPDIR"));
  o.report.text_buffer_bytes = 64u << 20;  // fits in memory: no file needed
  CHECK_NOTHROW(analyzer::analyze_files({pcap}, o, [](std::string_view) {}));
  if (old != nullptr) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
}
