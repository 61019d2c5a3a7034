#include "lockscope/ingest/packet.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace lockscope::ingest {

namespace {

std::uint16_t be16(const unsigned char* p) noexcept {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t be32(const unsigned char* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

constexpr std::uint16_t ethertype_ipv4 = 0x0800;
constexpr std::uint16_t ethertype_ipv6 = 0x86dd;
constexpr std::uint16_t ethertype_vlan = 0x8100;
constexpr std::uint16_t ethertype_qinq = 0x88a8;
constexpr std::uint16_t ethertype_qinq_old = 0x9100;

constexpr std::uint8_t ip_proto_tcp = 6;

decode_status decode_tcp(const unsigned char* p, std::size_t captured, std::size_t announced,
                         tcp_segment& out) noexcept {
  if (captured < 20) return decode_status::malformed;
  const std::size_t header = static_cast<std::size_t>(p[12] >> 4) * 4;
  if (header < 20 || header > announced) return decode_status::malformed;
  if (captured < header) return decode_status::malformed;  // options cut by snaplen
  out.source.port = be16(p);
  out.destination.port = be16(p + 2);
  out.seq = be32(p + 4);
  out.ack = be32(p + 8);
  out.flags = p[13];
  const std::size_t payload_captured = captured - header;
  const std::size_t payload_announced = announced - header;
  out.payload = std::string_view(reinterpret_cast<const char*>(p + header), payload_captured);
  out.missing = static_cast<std::uint32_t>(payload_announced - payload_captured);
  return decode_status::tcp;
}

decode_status decode_ipv4(const unsigned char* p, std::size_t captured, tcp_segment& out) noexcept {
  if (captured < 20 || (p[0] >> 4) != 4) return decode_status::malformed;
  const std::size_t header = static_cast<std::size_t>(p[0] & 0x0f) * 4;
  std::size_t total = be16(p + 2);
  // A 0 length is a TSO super-frame captured on the sending host: trust the capture.
  if (total == 0) total = captured;
  if (header < 20 || total < header || captured < header) return decode_status::malformed;
  const std::uint16_t fragment = be16(p + 6);
  if ((fragment & 0x3fff) != 0) return decode_status::fragment;  // MF set or offset != 0
  if (p[9] != ip_proto_tcp) return decode_status::not_tcp;
  out.source = endpoint{};
  out.destination = endpoint{};
  out.source.family = out.destination.family = 4;
  std::memcpy(out.source.address.data(), p + 12, 4);
  std::memcpy(out.destination.address.data(), p + 16, 4);
  // Bytes past `total` are link padding; bytes short of it were cut by snaplen.
  const std::size_t available = captured < total ? captured : total;
  return decode_tcp(p + header, available - header, total - header, out);
}

decode_status decode_ipv6(const unsigned char* p, std::size_t captured, tcp_segment& out) noexcept {
  if (captured < 40 || (p[0] >> 4) != 6) return decode_status::malformed;
  const std::size_t payload_length = be16(p + 4);
  std::uint8_t next = p[6];
  std::size_t offset = 40;
  const std::size_t end = 40 + payload_length;
  const std::size_t available = captured < end ? captured : end;
  // Skip extension headers until the upper-layer protocol.
  for (int guard = 0; guard < 16; ++guard) {
    switch (next) {
      case 0:    // hop-by-hop options
      case 43:   // routing
      case 60:   // destination options
      case 135:  // mobility
      case 139:  // HIP
      case 140: {  // shim6
        if (available < offset + 8) return decode_status::malformed;
        next = p[offset];
        offset += (static_cast<std::size_t>(p[offset + 1]) + 1) * 8;
        continue;
      }
      case 51: {  // authentication header: length in 4-byte units, minus 2
        if (available < offset + 8) return decode_status::malformed;
        next = p[offset];
        offset += (static_cast<std::size_t>(p[offset + 1]) + 2) * 4;
        continue;
      }
      case 44: {  // fragment
        if (available < offset + 8) return decode_status::malformed;
        const std::uint16_t fragment = be16(p + offset + 2);
        if ((fragment & 0xfff9) != 0) return decode_status::fragment;  // offset or M flag
        next = p[offset];
        offset += 8;
        continue;
      }
      case 59:  // no next header
        return decode_status::not_tcp;
      default:
        break;
    }
    break;
  }
  if (next != ip_proto_tcp) return decode_status::not_tcp;
  if (offset > available || offset > end) return decode_status::malformed;
  out.source = endpoint{};
  out.destination = endpoint{};
  out.source.family = out.destination.family = 6;
  std::memcpy(out.source.address.data(), p + 8, 16);
  std::memcpy(out.destination.address.data(), p + 24, 16);
  return decode_tcp(p + offset, available - offset, end - offset, out);
}

decode_status decode_by_ethertype(std::uint16_t ethertype, const unsigned char* p, std::size_t size,
                                  tcp_segment& out) noexcept {
  switch (ethertype) {
    case ethertype_ipv4: return decode_ipv4(p, size, out);
    case ethertype_ipv6: return decode_ipv6(p, size, out);
    default: return decode_status::not_tcp;
  }
}

decode_status decode_by_version(const unsigned char* p, std::size_t size, tcp_segment& out) noexcept {
  if (size < 1) return decode_status::malformed;
  switch (p[0] >> 4) {
    case 4: return decode_ipv4(p, size, out);
    case 6: return decode_ipv6(p, size, out);
    default: return decode_status::malformed;
  }
}

// BSD address families: AF_INET is 2 everywhere; AF_INET6 differs by OS.
decode_status decode_by_family(std::uint32_t family, const unsigned char* p, std::size_t size,
                               tcp_segment& out) noexcept {
  switch (family) {
    case 2: return decode_ipv4(p, size, out);
    case 10: case 24: case 28: case 30: return decode_ipv6(p, size, out);
    default: return decode_status::not_tcp;
  }
}

}  // namespace

bool is_supported_link_type(int lt) noexcept {
  switch (lt) {
    case link_type::null: case link_type::en10mb: case link_type::raw: case link_type::raw_bsd:
    case link_type::raw_linktype: case link_type::loop: case link_type::linux_sll:
    case link_type::ipv4: case link_type::ipv6: case link_type::linux_sll2:
      return true;
    default:
      return false;
  }
}

decode_status decode_packet(int lt, std::string_view frame, tcp_segment& out) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(frame.data());
  const std::size_t size = frame.size();
  switch (lt) {
    case link_type::en10mb: {
      if (size < 14) return decode_status::malformed;
      std::size_t offset = 12;
      std::uint16_t ethertype = be16(p + offset);
      // Stacked 802.1Q / 802.1ad tags: 4 bytes each, the ethertype follows.
      for (int tags = 0; tags < 8 && (ethertype == ethertype_vlan || ethertype == ethertype_qinq ||
                                      ethertype == ethertype_qinq_old);
           ++tags) {
        offset += 4;
        if (size < offset + 2) return decode_status::malformed;
        ethertype = be16(p + offset);
      }
      offset += 2;
      return decode_by_ethertype(ethertype, p + offset, size - offset, out);
    }
    case link_type::linux_sll:
      if (size < 16) return decode_status::malformed;
      return decode_by_ethertype(be16(p + 14), p + 16, size - 16, out);
    case link_type::linux_sll2:
      if (size < 20) return decode_status::malformed;
      return decode_by_ethertype(be16(p), p + 20, size - 20, out);
    case link_type::null: {
      if (size < 4) return decode_status::malformed;
      std::uint32_t family = 0;
      std::memcpy(&family, p, 4);  // host byte order of the capturing machine
      if (family > 0xffff) family = __builtin_bswap32(family);
      return decode_by_family(family, p + 4, size - 4, out);
    }
    case link_type::loop:
      if (size < 4) return decode_status::malformed;
      return decode_by_family(be32(p), p + 4, size - 4, out);
    case link_type::raw:
    case link_type::raw_bsd:
    case link_type::raw_linktype:
      return decode_by_version(p, size, out);
    case link_type::ipv4:
      return decode_ipv4(p, size, out);
    case link_type::ipv6:
      return decode_ipv6(p, size, out);
    default:
      return decode_status::unsupported_link;
  }
}

std::string endpoint::to_string() const {
  std::string out;
  append_to(out);
  return out;
}

namespace {

void append_decimal(std::string& out, unsigned v) {
  char digits[8];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) out.push_back(digits[--n]);
}

}  // namespace

void endpoint::append_to(std::string& out) const {
  if (family == 4) {  // by hand: inet_ntop goes through printf, and this runs per line
    for (int i = 0; i < 4; ++i) {
      if (i > 0) out.push_back('.');
      append_decimal(out, address[static_cast<std::size_t>(i)]);
    }
    out.push_back(':');
    append_decimal(out, port);
    return;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (family == 6) {
    inet_ntop(AF_INET6, address.data(), text, sizeof text);
    out.push_back('[');
    out += text;
    out.push_back(']');
  } else {
    inet_ntop(AF_INET, address.data(), text, sizeof text);
    out += text;
  }
  out.push_back(':');
  append_decimal(out, port);
}

bool endpoint::parse(std::string_view ip, std::uint16_t p, endpoint& out) {
  const std::string text(ip);
  endpoint e;
  e.port = p;
  if (inet_pton(AF_INET, text.c_str(), e.address.data()) == 1) {
    e.family = 4;
  } else if (inet_pton(AF_INET6, text.c_str(), e.address.data()) == 1) {
    e.family = 6;
  } else {
    return false;
  }
  out = e;
  return true;
}

}  // namespace lockscope::ingest
