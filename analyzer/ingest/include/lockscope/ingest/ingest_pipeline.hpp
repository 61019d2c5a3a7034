// The ingest pipeline after the capture source: packet decode → flow table → TCP
// reassembly → RESP sessions. Sans-I/O: feed it frames, it calls the sink.
//
//   ingest_pipeline a(options, sink);
//   while (source.next(p)) a.on_packet(p.ts_us, p.link_type, p.data);
//   a.finish();   // flushes every flow: buffered segments, unanswered commands
//
// Flows are keyed by their 4-tuple, both directions in one connection. A connection
// ends on RST, on FIN from both sides, or after `flow_timeout_us` without packets; a
// new SYN on a finished 4-tuple starts a new connection.
//
// The flow table holds at most `max_flows` connections: a new one beyond that ends the
// connection whose last packet is the oldest (counted in ingest_stats::capped_flows).
// An open connection costs about 3.5 KB while little is buffered in it (measured: see
// the README), so the default cap keeps the table near 42 MB and the whole process
// within 64 MB. What connections buffer on top (out-of-order segments, commands waiting
// for replies) is bounded for all of them together by `max_buffer_total`: each holds up
// to its own limits, but once the sum passes it, the connection that just grew gives up
// its holes (reported as gaps) and its oldest waiting commands (emitted unanswered).
// Without it, a capture of one direction over thousands of connections (a SPAN port
// that sees only requests) held gigabytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockscope/ingest/argument_interner.hpp"
#include "lockscope/ingest/packet.hpp"
#include "lockscope/ingest/port_set.hpp"
#include "lockscope/ingest/resp_session.hpp"
#include "lockscope/ingest/tcp_stream.hpp"

namespace lockscope::ingest {

struct ingest_options {
  // Server ports. Empty: every TCP flow is examined and RESP is found by content.
  // Otherwise only flows with one of these ports, and that end is the server.
  std::vector<std::uint16_t> ports;
  tcp_stream_options tcp{};
  session_options session{};
  std::int64_t flow_timeout_us = 600'000'000;  // idle connections are evicted
  std::size_t max_flows = default_max_flows;    // 0: no cap
  static constexpr std::size_t default_max_flows = 12'288;
  // What all connections together hold beyond their table entries (see above); 0: no cap.
  std::size_t max_buffer_total = default_max_buffer_total;
  static constexpr std::size_t default_max_buffer_total = 64u << 20;
};

// Told when a connection ends (FIN from both sides, RST, idle timeout, the flow cap
// or finish()), after its last exchange and session event.
class connection_end_sink {
 public:
  virtual ~connection_end_sink() = default;
  virtual void on_connection_end(std::uint64_t connection, std::int64_t at_us) = 0;
};

// Flows of one protocol that is not RESP: how many, and the first few "a → b".
struct other_protocol_flows {
  static constexpr std::size_t max_examples = 8;
  std::uint64_t flows = 0;
  std::vector<std::string> examples;
};

struct ingest_stats {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;              // captured bytes
  std::uint64_t tcp_segments = 0;
  std::uint64_t not_tcp = 0;
  std::uint64_t fragments = 0;
  std::uint64_t unsupported_link = 0;
  std::uint64_t malformed = 0;
  std::uint64_t filtered = 0;           // TCP, but not on a selected port
  std::uint64_t flows = 0;              // connections seen
  std::uint64_t resp_flows = 0;         // connections that carried RESP
  std::uint64_t not_resp_flows = 0;
  // RESP connections of which the capture holds one direction only (`tcpdump 'dst port
  // 6379'`, a SPAN port that mirrors one way): bytes from the client and none from the
  // server, or the reverse. Counted when they end (closed ones only).
  // (Replies only: replies to commands not in the capture; pushes alone do not count.)
  std::uint64_t requests_only_flows = 0;
  std::uint64_t replies_only_flows = 0;
  std::uint64_t two_way_resp_flows = 0;   // RESP connections with bytes both ways
  std::uint64_t evicted_flows = 0;      // idle longer than flow_timeout_us
  std::uint64_t capped_flows = 0;       // ended to keep the table within max_flows
  std::uint64_t payload_bytes = 0;      // TCP payload delivered in order
  std::uint64_t gaps = 0;
  std::uint64_t gap_bytes = 0;
  // Segments of the flows followed whose payload the capture cut short (its snapshot
  // length, tcpdump -s), and the payload bytes so lost (also counted in gap_bytes).
  std::uint64_t snaplen_cut_segments = 0;
  std::uint64_t snaplen_cut_bytes = 0;
  std::uint64_t decode_errors = 0;
  std::uint64_t commands = 0;
  std::uint64_t exchanges = 0;
  std::uint64_t pushes = 0;
  std::uint64_t unpaired_replies = 0;
  std::uint64_t resyncs = 0;
  std::uint64_t skipped_bytes = 0;      // not RESP, dropped while resynchronising
  std::uint64_t stray_bytes = 0;        // CR/LF between two messages, skipped in step
  std::uint64_t pending_overflow = 0;   // commands shown unanswered: too many bytes waiting
  // max_buffer_total: times a connection gave back what it held, and the commands it so
  // emitted unanswered (its holes given up are counted in gaps).
  std::uint64_t buffer_sheds = 0;
  std::uint64_t shed_flows = 0;           // connections that gave back at least once
  std::vector<std::string> shed_examples;  // the first max_shed_examples of them, "client → server"
  static constexpr std::size_t max_shed_examples = 8;
  std::uint64_t pending_shed = 0;
  std::size_t held_bytes = 0;           // what the open connections hold now
  std::size_t held_bytes_peak = 0;
  std::uint64_t side_corrections = 0;   // guessed sides that later bytes contradicted
  // TLS, HTTP, unknown (flow_protocol minus one), counted when their flow ends.
  std::array<other_protocol_flows, 3> other_protocols;
};

// The end-of-run lines naming other protocols: "TLS: cannot decode; ... — 2 flows:
// a → b, c → d", one per protocol seen; empty when there were none.
std::vector<std::string> describe_other_protocols(const ingest_stats& s);

class ingest_pipeline {
 public:
  // `ends`, when given, is told when each connection ends.
  ingest_pipeline(const ingest_options& options, exchange_sink& sink, connection_end_sink* ends = nullptr);
  ~ingest_pipeline();
  ingest_pipeline(const ingest_pipeline&) = delete;
  ingest_pipeline& operator=(const ingest_pipeline&) = delete;

  void on_packet(std::int64_t ts_us, int link_type, std::string_view frame);
  // A segment already decoded (tests, or callers with their own decoding).
  void on_segment(std::int64_t ts_us, const tcp_segment& segment);
  // Ends every connection: buffered data is flushed, waiting commands are emitted.
  void finish();

  // Totals so far; connections still open contribute what they have delivered.
  ingest_stats stats() const;
  std::size_t active_flows() const noexcept { return flows_.size(); }

 private:
  struct flow_key {
    endpoint a;  // the lower endpoint
    endpoint b;
    bool operator==(const flow_key& o) const noexcept;  // word compares, not memcmp: per packet
  };
  struct flow_key_hash {
    std::size_t operator()(const flow_key& k) const noexcept;
  };
  struct connection;

  void close(std::unordered_map<flow_key, std::unique_ptr<connection>, flow_key_hash>::iterator it,
             std::int64_t now_us);
  void sweep(std::int64_t now_us);
  // Ends the connection whose last packet is the oldest.
  void end_oldest(std::int64_t now_us);
  // The recency list: oldest_ ... newest_, by last packet.
  void unlink(connection& c) noexcept;
  void link_newest(connection& c) noexcept;
  // A connection's commands, exchanges, bytes and gaps, added to `to`.
  static void add_traffic(ingest_stats& to, const connection& c) noexcept;
  bool selected_port(std::uint16_t port) const noexcept { return ports_.contains(port); }

  ingest_options options_;
  port_set ports_;  // options_.ports
  exchange_sink& sink_;
  connection_end_sink* ends_;
  // Long arguments the sessions' pending commands share (before flows_: it outlives them).
  argument_interner interner_;
  std::unordered_map<flow_key, std::unique_ptr<connection>, flow_key_hash> flows_;
  // Recent flows, direct-mapped by their ports: a reply follows its request on the same
  // flow, and a client's connections take turns (a pool's, redis-benchmark's 20): one
  // compare of the key, not a hash and a bucket walk, per segment. nullptr: none.
  static constexpr std::size_t recent_flow_slots = 64;
  static std::size_t recent_flow_slot(const flow_key& k) noexcept {
    return (static_cast<std::uint32_t>(k.a.port ^ (k.b.port << 16)) * 0x9e3779b1u) >> 26;
  }
  std::array<connection*, recent_flow_slots> recent_flows_{};
  // What `c` holds now is its share of held_bytes_; past max_buffer_total, it gives back.
  void account(connection& c);
  connection* oldest_ = nullptr;
  connection* newest_ = nullptr;
  std::size_t held_bytes_ = 0;
  std::size_t held_bytes_peak_ = 0;
  std::uint64_t buffer_sheds_ = 0;
  std::uint64_t shed_flows_ = 0;
  std::vector<std::string> shed_examples_;
  std::uint64_t next_connection_id_ = 1;
  std::int64_t last_sweep_us_ = 0;
  ingest_stats totals_;         // packet counters and the totals of closed connections
  tcp_segment segment_;           // reused decode target
};

}  // namespace lockscope::ingest
