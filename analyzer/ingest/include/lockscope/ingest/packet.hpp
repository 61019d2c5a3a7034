// Link-layer, IP and TCP header decoding: from a captured frame to a TCP segment.
// Sans-I/O: works on bytes handed in by a capture source (or a test).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockscope::ingest {

// libpcap link types (DLT_* values as pcap_datalink() reports them, plus the
// LINKTYPE_* values some files carry).
namespace link_type {
inline constexpr int null = 0;         // BSD loopback, host byte order family
inline constexpr int en10mb = 1;       // Ethernet, with 802.1Q/802.1ad tags
inline constexpr int raw = 12;         // raw IP (DLT_RAW on Linux)
inline constexpr int raw_bsd = 14;     // raw IP (DLT_RAW on some BSDs)
inline constexpr int raw_linktype = 101;  // LINKTYPE_RAW in files
inline constexpr int loop = 108;       // OpenBSD loopback, network byte order family
inline constexpr int linux_sll = 113;  // Linux cooked v1 (`-i any`, older)
inline constexpr int ipv4 = 228;
inline constexpr int ipv6 = 229;
inline constexpr int linux_sll2 = 276; // Linux cooked v2 (`-i any`)
}  // namespace link_type

// True for every link type decode_packet understands.
bool is_supported_link_type(int link_type) noexcept;

// An IPv4 or IPv6 address and a port.
struct endpoint {
  std::array<std::uint8_t, 16> address{};  // IPv4 in the first 4 bytes
  std::uint8_t family = 4;                 // 4 or 6
  std::uint16_t port = 0;

  bool operator==(const endpoint&) const = default;
  auto operator<=>(const endpoint&) const = default;

  // "10.0.0.1:6379" or "[::1]:6379".
  std::string to_string() const;
  void append_to(std::string& out) const;
  // Parses "1.2.3.4" or "::1" (no brackets) and a port; false when not an address.
  static bool parse(std::string_view ip, std::uint16_t port, endpoint& out);
};

namespace tcp_flags {
inline constexpr std::uint8_t fin = 0x01;
inline constexpr std::uint8_t syn = 0x02;
inline constexpr std::uint8_t rst = 0x04;
inline constexpr std::uint8_t psh = 0x08;
inline constexpr std::uint8_t ack = 0x10;
}  // namespace tcp_flags

// One TCP segment. `payload` views the captured frame.
struct tcp_segment {
  endpoint source;
  endpoint destination;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t flags = 0;
  std::string_view payload;
  // Payload bytes the IP header announces but the capture cut off (snaplen).
  std::uint32_t missing = 0;

  bool has(std::uint8_t flag) const noexcept { return (flags & flag) != 0; }
};

enum class decode_status : std::uint8_t {
  tcp,                // `out` holds a segment
  not_tcp,            // a valid frame carrying something else (ARP, UDP, ICMP, ...)
  fragment,           // an IP fragment: not reassembled, skipped
  unsupported_link,   // a link type we do not decode
  malformed,          // headers cut short or inconsistent
};

// Decodes one captured frame. Payload bytes the IP length announces beyond the
// captured frame (snaplen truncation) are reported in `out.missing`; Ethernet padding
// past the IP length is ignored.
decode_status decode_packet(int link_type, std::string_view frame, tcp_segment& out) noexcept;

}  // namespace lockscope::ingest
