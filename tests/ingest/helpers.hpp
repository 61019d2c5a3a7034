// Shared helpers for the analyzer tests: a sink that records what the pipeline
// emits, and shortcuts to run synthetic segments through it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/test/shell.hpp"
#include "lockscope/test/temp_dir.hpp"
#include "lockscope/resp/format.hpp"

namespace lockscope::ingest::test {

struct recorded {
  exchange_kind kind{};
  std::string client;
  std::string server;
  std::vector<std::string> command;
  std::optional<resp::value> reply;
  std::string reply_type = "none";
  std::int64_t request_us = 0;
  std::int64_t latency_us = -1;
  std::uint64_t connection = 0;
  std::uint32_t connection_sequence = 0;

  // "GET foo => bar", "push: message ch 0": compact text for assertions.
  std::string summary() const {
    std::string out;
    if (kind == exchange_kind::push) {
      out = "push: " + (reply ? resp::to_parsed(*reply) : std::string());
      return out;
    }
    for (std::size_t i = 0; i < command.size(); ++i) {
      if (i > 0) out += ' ';
      out += command[i];
    }
    out += " => ";
    out += reply ? resp::to_parsed(*reply) : std::string("(none)");
    return out;
  }
};

class recording_sink final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    recorded r;
    r.kind = e.kind;
    r.client = e.client->to_string();
    r.server = e.server->to_string();
    for (std::string_view a : e.command) r.command.emplace_back(a);
    if (e.reply != nullptr) {
      r.reply = e.reply->to_value();
      r.reply_type = std::string(resp::to_string(e.reply->root_node()->type));
    }
    r.request_us = e.request_us;
    r.latency_us = e.latency_us();
    r.connection = e.connection;
    r.connection_sequence = e.connection_sequence;
    items.push_back(std::move(r));
  }
  // Events keep copies of the endpoints: the originals die with their connection.
  struct recorded_event : session_event {
    std::string from_text;
    std::string to_text;
  };
  void on_session_event(const session_event& ev) override {
    recorded_event r;
    static_cast<session_event&>(r) = ev;
    r.from_text = ev.from->to_string();
    r.to_text = ev.to->to_string();
    r.from = r.to = nullptr;
    events.push_back(std::move(r));
  }

  std::vector<std::string> summaries() const {
    std::vector<std::string> out;
    for (const recorded& r : items) out.push_back(r.summary());
    return out;
  }
  std::vector<std::string> summaries_of(std::uint64_t connection) const {
    std::vector<std::string> out;
    for (const recorded& r : items) {
      if (r.connection == connection) out.push_back(r.summary());
    }
    return out;
  }
  std::size_t count(session_event_kind k) const {
    std::size_t n = 0;
    for (const recorded_event& e : events) n += e.kind == k ? 1 : 0;
    return n;
  }

  std::vector<recorded> items;
  std::vector<recorded_event> events;
};

// Segments with timestamps, run straight through an analyzer (no file).
struct timed_segment {
  std::int64_t ts_us;
  tcp_segment_spec spec;
};

inline void run_frames(ingest_pipeline& a, const std::vector<timed_segment>& segments, int link = link_type::en10mb,
                       const frame_options& frame = {}) {
  for (const timed_segment& s : segments) {
    const std::string f = make_frame(link, s.spec, frame);
    a.on_packet(s.ts_us, link, f);
  }
}

// A conversation that timestamps what it produces, 100 µs apart.
class script {
 public:
  script(endpoint client, endpoint server, std::uint32_t client_isn = 1000, std::uint32_t server_isn = 5000)
      : conversation(client, server, client_isn, server_isn) {}

  script& handshake() {
    for (auto& s : conversation.handshake()) add(std::move(s));
    return *this;
  }
  script& client(std::string_view bytes) { return add(conversation.client_sends(bytes)); }
  script& server(std::string_view bytes) { return add(conversation.server_sends(bytes)); }
  script& client_fin() { return add(conversation.client_fin()); }
  script& server_fin() { return add(conversation.server_fin()); }
  script& add(tcp_segment_spec s) {
    now += 100;
    segments.push_back({now, std::move(s)});
    return *this;
  }
  // Closes both directions (FIN, FIN).
  script& close() {
    client_fin();
    server_fin();
    return add(conversation.client_acks());
  }

  tcp_conversation conversation;
  std::vector<timed_segment> segments;
  std::int64_t now = 1'700'000'000'000'000;
};

inline endpoint ep(const char* ip, std::uint16_t port) { return make_endpoint(ip, port); }

// Runs the segments through a fresh analyzer and returns what it recorded.
inline recording_sink analyze(const std::vector<timed_segment>& segments, ingest_options options = {},
                              int link = link_type::en10mb, const frame_options& frame = {}) {
  recording_sink sink;
  ingest_pipeline a(options, sink);
  run_frames(a, segments, link, frame);
  a.finish();
  return sink;
}

// Writes the segments to a pcap file of the given link type.
inline void write_pcap(const std::filesystem::path& path, const std::vector<timed_segment>& segments,
                       int link = link_type::en10mb, std::uint32_t snaplen = 262144,
                       const frame_options& frame = {}) {
  pcap_file_writer w(path.string(), link, snaplen);
  for (const timed_segment& s : segments) w.write(s.ts_us, make_frame(link, s.spec, frame));
}

// Reads capture files through offline_capture into a fresh analyzer.
inline recording_sink analyze_files(const std::vector<std::string>& files, ingest_options options = {},
                                    std::vector<std::string>* warnings = nullptr,
                                    ingest_stats* stats = nullptr) {
  recording_sink sink;
  ingest_pipeline a(options, sink);
  offline_capture source(files, [warnings](const std::string& w) {
    if (warnings != nullptr) warnings->push_back(w);
  });
  captured_packet p;
  while (source.next(p)) a.on_packet(p.ts_us, p.link_type, p.data);
  a.finish();
  if (stats != nullptr) *stats = a.stats();
  return sink;
}

using lockscope::test::read_command_output;

// Declares `binary`, the lockscope CLI's path; skips the test (with a warning) when the
// CLI is not built.
#define LOCKSCOPE_REQUIRE_CLI(binary)                         \
  const std::string binary = LOCKSCOPE_CLI_PATH;              \
  if (binary.empty() || !std::filesystem::exists(binary)) {   \
    WARN("the lockscope binary is not built: skipping");      \
    return;                                                   \
  }

using lockscope::test::temp_dir;

// The seed article's acquire script (Redisson 3.x) and a lock owner, as the session
// tests send them.
inline const std::string seed_acquire_script =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], "
    "ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], "
    "ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
inline const std::string seed_owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";

inline std::string cmd(std::initializer_list<std::string_view> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
  return out;
}

}  // namespace lockscope::ingest::test
