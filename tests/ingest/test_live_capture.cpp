// The live capture adapter on a real interface: on loopback the kernel shows a capture
// every packet twice (as sent and as received); the adapter must hand each over once,
// and have the kernel reject the sent copy instead of copying it into the ring. Needs
// root to capture on lo (skipped otherwise) and redis-server.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <tuple>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/packet.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace lockscope::ingest;
using namespace std::chrono_literals;

namespace {
// Root to capture on lo, and redis-server to talk to; else the test is skipped, saying why.
bool can_capture_on_lo() {
  if (::geteuid() != 0) {
    WARN("live capture needs root here: skipping");
    return false;
  }
  if (!lockscope::test::redis_server::available()) {
    WARN("redis-server is not installed: skipping");
    return false;
  }
  return true;
}

// A capture on lo of redis-server's port.
live_options on_lo(std::uint16_t port, bool immediate) {
  live_options options;
  options.interface = "lo";
  options.ports = {port};
  options.immediate = immediate;
  return options;
}
}  // namespace

TEST_CASE("is_loopback_interface knows lo from other names", "[capture][live]") {
  CHECK(is_loopback_interface("lo"));
  CHECK_FALSE(is_loopback_interface("no-such-interface0"));
  CHECK_FALSE(is_loopback_interface(""));
  CHECK_FALSE(is_loopback_interface(std::string(64, 'x')));  // longer than IFNAMSIZ
  CHECK_FALSE(is_loopback_interface("any"));                 // libpcap's pseudo-device
}

TEST_CASE("on lo each packet is handed over once, and the kernel copies only the received one", "[capture][live]") {
  if (!can_capture_on_lo()) return;
  lockscope::test::redis_server server;
  live_capture capture(on_lo(server.port(), true));
  CHECK(capture.sent_copies_rejected());
  CHECK(capture.filter() == port_filter({server.port()}, capture.link_type()));  // what the user is shown

  // What reached the ring before the filter was in place (libpcap filters those in
  // userland): counted by the kernel, never handed over.
  int handed_over = 0, pings = 0, pongs = 0, syns = 0;
  auto count_only = [&](const captured_packet&) { ++handed_over; };
  for (int i = 0; i < 3; ++i) capture.dispatch(64, count_only);
  REQUIRE(handed_over == 0);
  const std::uint64_t received_before = capture.stats().received;

  constexpr int commands = 40;
  {
    lockscope::test::resp_connection client(server.host(), server.port());
    for (int i = 0; i < commands; ++i) client.command("PING");  // one request and one reply packet each
  }

  // Every packet of the connection, by direction and sequence number: a second copy of
  // one would be counted twice under its key.
  std::map<std::tuple<bool, std::uint32_t, std::size_t>, int> seen;
  auto on_packet = [&](const captured_packet& p) {
    ++handed_over;
    tcp_segment segment;
    REQUIRE(decode_packet(p.link_type, p.data, segment) == decode_status::tcp);
    const bool to_server = segment.destination.port == server.port();
    ++seen[{to_server, segment.seq, segment.payload.size()}];
    if (segment.payload == "*1\r\n$4\r\nPING\r\n") ++pings;
    if (segment.payload == "+PONG\r\n") ++pongs;
    if (to_server && segment.has(tcp_flags::syn) && !segment.has(tcp_flags::ack)) ++syns;
  };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto quiet_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    if (capture.dispatch(64, on_packet) == packet_source::result::packet) {
      quiet_since = std::chrono::steady_clock::now();
    } else if (pongs == commands && std::chrono::steady_clock::now() - quiet_since > 300ms) {
      break;  // the FIN exchange has had time to arrive too
    }
  }
  // The first packets too: libpcap filters in userland what its ring's first block held
  // before its filter was set, with an interpreter that cannot read the direction.
  CHECK(syns == 1);
  CHECK(pings == commands);
  CHECK(pongs == commands);
  for (const auto& [key, copies] : seen) {
    INFO("to server " << std::get<0>(key) << ", seq " << std::get<1>(key) << ", " << std::get<2>(key) << " bytes");
    CHECK(copies == 1);
  }
  // The kernel's own count of what its filter let into the ring: without the rejection
  // it is twice what libpcap hands over (it throws the sent copies away itself).
  // (Taken between two draining passes: a packet may arrive in between.)
  const int handed_before = handed_over;
  const auto stats = capture.stats();
  const std::uint64_t received = stats.received - received_before;
  for (int i = 0; i < 3; ++i) capture.dispatch(64, on_packet);
  INFO("handed over " << handed_before << ", then " << handed_over);
  CHECK(received >= static_cast<std::uint64_t>(handed_before));
  CHECK(received <= static_cast<std::uint64_t>(handed_over));
  CHECK(stats.dropped == 0);
}

// Out of immediate mode the kernel hands a block over when its timeout runs out: until
// then the capture says it holds packets (the live loop's clock must not pass them), and
// once they are handed over, that it holds none.
TEST_CASE("out of immediate mode, the capture tells when the kernel holds packets not handed over", "[capture][live]") {
  if (!can_capture_on_lo()) return;
  lockscope::test::redis_server server;
  live_options options = on_lo(server.port(), false);
  options.timeout_ms = 300;  // long enough to look while a block waits
  options.max_gather_us = 0;
  live_capture capture(options);
  REQUIRE(capture.sent_copies_rejected());
  int handed_over = 0;
  auto count = [&](const captured_packet&) { ++handed_over; };
  // What reached the ring before the filter was set is never handed over: settled once
  // its count stays put.
  const auto settle_by = std::chrono::steady_clock::now() + 5s;
  while (capture.holds_unhanded_packets() && std::chrono::steady_clock::now() < settle_by) capture.dispatch(64, count);
  REQUIRE_FALSE(capture.holds_unhanded_packets());
  REQUIRE(handed_over == 0);
  lockscope::test::resp_connection client(server.host(), server.port());
  client.command("PING");
  CHECK(capture.holds_unhanded_packets());  // in the block, whose timeout has not run out
  // Well before a count that stays put settles (ten timeouts): handed over, not settled.
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (capture.holds_unhanded_packets() && std::chrono::steady_clock::now() < deadline) capture.dispatch(64, count);
  CHECK(handed_over >= 4);  // the handshake's SYN and ACK, the PING and its reply (the SYN-ACK on the way back)
  CHECK_FALSE(capture.holds_unhanded_packets());
}
