// Builds synthetic captures of Redis conversations for the timeline tests and for
// captures/: connections with handshakes, commands with their replies at chosen
// times, pushes, and an orderly close. Frames are written in timestamp order.
//
//   capture_builder b;
//   int a = b.connect("192.168.1.21", 50001, "192.168.1.10", 16379, t);
//   b.command(a, t + 100, {"PING"}, "+PONG\r\n");
//   b.write("x.pcap");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/test/pcap_writer.hpp"

namespace lockscope::timeline_test {

class capture_builder {
 public:
  // A connection: SYN, SYN-ACK, ACK at `at_us`. Returns its handle.
  int connect(std::string_view client_ip, std::uint16_t client_port, std::string_view server_ip,
              std::uint16_t server_port, std::int64_t at_us);
  // The command (RESP array of bulk strings) at `at_us`, and `reply` (raw RESP; empty:
  // none) `latency_us` later.
  void command(int conn, std::int64_t at_us, const std::vector<std::string>& args, std::string_view reply,
               std::int64_t latency_us = 120);
  // Raw bytes from the server (a pub/sub message) at `at_us`.
  void server_push(int conn, std::int64_t at_us, std::string_view resp);
  // FIN from both sides.
  void close(int conn, std::int64_t at_us);
  void write(const std::string& path) const;

 private:
  struct frame {
    std::int64_t ts_us;
    std::uint64_t order;
    std::string bytes;
  };
  void add(std::int64_t ts, const ingest::tcp_segment_spec& s);
  std::vector<ingest::tcp_conversation> conversations_;
  std::vector<frame> frames_;
};

// RESP helpers.
std::string resp_array(const std::vector<std::string>& items);  // of bulk strings
std::string resp_int(std::int64_t v);
inline constexpr std::string_view resp_nil = "$-1\r\n";
inline constexpr std::string_view resp_ok = "+OK\r\n";

}  // namespace lockscope::timeline_test
