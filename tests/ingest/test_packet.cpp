#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "lockscope/ingest/packet.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

tcp_segment_spec sample(const char* src, const char* dst) {
  tcp_segment_spec s;
  s.source = ep(src, 52000);
  s.destination = ep(dst, 6379);
  s.seq = 0xfffffff0u;
  s.ack = 77;
  s.flags = tcp_flags::ack | tcp_flags::psh;
  s.payload = "*1\r\n$4\r\nPING\r\n";
  return s;
}

void check_decoded(const tcp_segment& out, const tcp_segment_spec& in) {
  CHECK(out.source == in.source);
  CHECK(out.destination == in.destination);
  CHECK(out.seq == in.seq);
  CHECK(out.ack == in.ack);
  CHECK(out.flags == in.flags);
  CHECK(out.payload == in.payload);
  CHECK(out.missing == 0);
}

}  // namespace

TEST_CASE("every supported link type decodes IPv4 and IPv6 TCP", "[packet]") {
  const int link = GENERATE(link_type::null, link_type::en10mb, link_type::raw, link_type::loop,
                            link_type::linux_sll, link_type::linux_sll2, link_type::raw_linktype);
  const bool v6 = GENERATE(false, true);
  CAPTURE(link, v6);
  const auto spec = v6 ? sample("2001:db8::1", "2001:db8::2") : sample("10.0.0.1", "10.0.0.2");
  const std::string frame = make_frame(link, spec);
  tcp_segment out;
  REQUIRE(decode_packet(link, frame, out) == decode_status::tcp);
  check_decoded(out, spec);
  CHECK(out.source.family == (v6 ? 6 : 4));
}

TEST_CASE("LINKTYPE_IPV4 and LINKTYPE_IPV6 carry bare packets", "[packet]") {
  tcp_segment out;
  const auto v4 = sample("192.168.1.1", "192.168.1.2");
  const std::string frame4 = make_frame(link_type::ipv4, v4);  // out.payload views it
  REQUIRE(decode_packet(link_type::ipv4, frame4, out) == decode_status::tcp);
  check_decoded(out, v4);
  const auto v6 = sample("::1", "::1");
  const std::string frame6 = make_frame(link_type::ipv6, v6);
  REQUIRE(decode_packet(link_type::ipv6, frame6, out) == decode_status::tcp);
  check_decoded(out, v6);
  CHECK(out.source.to_string() == "[::1]:52000");
}

TEST_CASE("802.1Q and stacked 802.1ad tags are skipped", "[packet]") {
  const auto spec = sample("10.1.1.1", "10.1.1.2");
  for (const std::vector<std::uint16_t>& tags :
       {std::vector<std::uint16_t>{100}, std::vector<std::uint16_t>{10, 20},
        std::vector<std::uint16_t>{1, 2, 3}}) {
    const std::string frame = make_frame(link_type::en10mb, spec, {tags});
    CHECK(frame.size() == make_frame(link_type::en10mb, spec).size() + 4 * tags.size());
    tcp_segment out;
    REQUIRE(decode_packet(link_type::en10mb, frame, out) == decode_status::tcp);
    check_decoded(out, spec);
  }
}

TEST_CASE("IPv6 extension headers are skipped", "[packet]") {
  const auto spec = sample("2001:db8::1", "2001:db8::2");
  std::string frame = make_frame(link_type::raw, spec);
  // Insert hop-by-hop (8 bytes) then destination options (16 bytes) before TCP.
  std::string hop(8, '\0');
  hop[0] = 60;  // next: destination options
  hop[1] = 0;   // (0 + 1) * 8 bytes
  std::string dest(16, '\0');
  dest[0] = 6;  // next: TCP
  dest[1] = 1;  // (1 + 1) * 8 bytes
  frame.insert(40, hop + dest);
  frame[6] = 0;  // IPv6 next header: hop-by-hop
  const auto payload_length = static_cast<std::uint16_t>(frame.size() - 40);
  frame[4] = static_cast<char>(payload_length >> 8);
  frame[5] = static_cast<char>(payload_length & 0xff);
  tcp_segment out;
  REQUIRE(decode_packet(link_type::raw, frame, out) == decode_status::tcp);
  check_decoded(out, spec);
}

TEST_CASE("snaplen truncation is reported as missing payload and padding is ignored", "[packet]") {
  const auto spec = sample("10.0.0.1", "10.0.0.2");
  const std::string frame = make_frame(link_type::en10mb, spec);
  tcp_segment out;
  REQUIRE(decode_packet(link_type::en10mb, std::string_view(frame).substr(0, frame.size() - 5), out) ==
          decode_status::tcp);
  CHECK(out.payload == spec.payload.substr(0, spec.payload.size() - 5));
  CHECK(out.missing == 5);

  const std::string padded = frame + std::string(20, '\0');  // Ethernet minimum-size padding
  REQUIRE(decode_packet(link_type::en10mb, padded, out) == decode_status::tcp);
  CHECK(out.payload == spec.payload);
  CHECK(out.missing == 0);
}

TEST_CASE("non-TCP, fragments, unknown link types and garbage are classified, not fatal", "[packet]") {
  tcp_segment out;
  const auto spec = sample("10.0.0.1", "10.0.0.2");
  std::string ip = make_frame(link_type::raw, spec);
  std::string udp = ip;
  udp[9] = 17;
  CHECK(decode_packet(link_type::raw, udp, out) == decode_status::not_tcp);
  std::string fragment = ip;
  fragment[6] = 0x20;  // more fragments
  CHECK(decode_packet(link_type::raw, fragment, out) == decode_status::fragment);
  CHECK(decode_packet(147, ip, out) == decode_status::unsupported_link);
  CHECK_FALSE(is_supported_link_type(147));
  CHECK(decode_packet(link_type::en10mb, "short", out) == decode_status::malformed);
  CHECK(decode_packet(link_type::raw, ip.substr(0, 30), out) == decode_status::malformed);
  std::string arp = make_frame(link_type::en10mb, spec);
  arp[12] = 0x08;
  arp[13] = 0x06;
  CHECK(decode_packet(link_type::en10mb, arp, out) == decode_status::not_tcp);
  for (std::size_t cut = 0; cut < ip.size(); ++cut) {
    // Never reads past the frame, whatever the cut.
    (void)decode_packet(link_type::raw, ip.substr(0, cut), out);
  }
}

TEST_CASE("endpoints print as ip:port, IPv6 in brackets", "[packet]") {
  CHECK(ep("127.0.0.1", 6379).to_string() == "127.0.0.1:6379");
  CHECK(ep("fe80::1", 16379).to_string() == "[fe80::1]:16379");
  endpoint e;
  CHECK_FALSE(endpoint::parse("not-an-ip", 1, e));
}
