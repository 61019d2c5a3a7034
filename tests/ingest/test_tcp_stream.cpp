#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lockscope/ingest/packet.hpp"
#include "lockscope/ingest/tcp_stream.hpp"

using namespace lockscope::ingest;

namespace {

struct collector final : stream_sink {
  std::string data;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;  // offset, bytes
  std::vector<const char*> pointers;
  void on_data(std::string_view bytes, std::uint64_t offset) override {
    CHECK(offset == data.size() + total_gap());
    data.append(bytes);
    pointers.push_back(bytes.data());
  }
  void on_gap(std::uint64_t bytes, std::uint64_t offset) override {
    CHECK(offset == data.size() + total_gap());
    gaps.emplace_back(offset, bytes);
    data.append("<gap>");
    gap_adjust += bytes - 5;
  }
  std::uint64_t total_gap() const { return gap_adjust; }
  std::uint64_t gap_adjust = 0;
};

constexpr std::uint8_t data_flags = tcp_flags::ack | tcp_flags::psh;

}  // namespace

TEST_CASE("in-order data is passed on without copying", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(100, tcp_flags::syn, {}, 0, c);
  const std::string a = "hello ", b = "world";
  s.on_segment(101, data_flags, a, 0, c);
  s.on_segment(107, data_flags, b, 0, c);
  CHECK(c.data == "hello world");
  REQUIRE(c.pointers.size() == 2);
  CHECK(c.pointers[0] == a.data());
  CHECK(c.pointers[1] == b.data());
  CHECK(s.saw_syn());
  CHECK(s.stats().delivered_bytes == 11);
}

TEST_CASE("out-of-order and duplicated segments are reordered and trimmed", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(1000, tcp_flags::syn, {}, 0, c);
  s.on_segment(1007, data_flags, "CCC", 0, c);   // ahead
  s.on_segment(1004, data_flags, "BBB", 0, c);   // ahead
  CHECK(c.data.empty());
  CHECK(s.buffered_bytes() == 6);
  s.on_segment(1004, data_flags, "BBB", 0, c);   // duplicate of a buffered one
  s.on_segment(1001, data_flags, "AAA", 0, c);   // fills the hole
  CHECK(c.data == "AAABBBCCC");
  s.on_segment(1001, data_flags, "AAA", 0, c);   // retransmission of delivered data
  s.on_segment(1008, data_flags, "CCDD", 0, c);  // overlaps: only DD is new
  CHECK(c.data == "AAABBBCCCDD");
  CHECK(c.gaps.empty());
  CHECK(s.stats().duplicate_bytes == 3 + 3 + 2);
  CHECK(s.buffered_bytes() == 0);
}

TEST_CASE("sequence numbers wrap around 2^32", "[tcp]") {
  tcp_stream s;
  collector c;
  const std::uint32_t isn = 0xfffffffa;
  s.on_segment(isn, tcp_flags::syn, {}, 0, c);
  s.on_segment(isn + 1, data_flags, "01234", 0, c);      // 0xfffffffb..0xffffffff
  s.on_segment(isn + 11, data_flags, "ABC", 0, c);       // wrapped, out of order
  s.on_segment(isn + 6, data_flags, "56789", 0, c);      // crosses zero
  CHECK(c.data == "0123456789ABC");
  CHECK(s.next_offset() == 13);
  CHECK(c.gaps.empty());
}

TEST_CASE("a lost segment becomes a gap once the peer acknowledges past it", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(0, tcp_flags::syn, {}, 0, c);
  s.on_segment(1, data_flags, "aaaa", 0, c);
  // "bbbb" at 5 is lost.
  s.on_segment(9, data_flags, "cccc", 0, c);
  CHECK(c.data == "aaaa");
  s.on_peer_ack(13, c);
  CHECK(c.data == "aaaa<gap>cccc");
  REQUIRE(c.gaps.size() == 1);
  CHECK(c.gaps[0] == std::pair<std::uint64_t, std::uint64_t>{4, 4});
  CHECK(s.stats().gap_bytes == 4);
  // A late copy of the lost bytes is now old news.
  s.on_segment(5, data_flags, "bbbb", 0, c);
  CHECK(c.data == "aaaa<gap>cccc");
}

TEST_CASE("flush reports every remaining hole", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(10, data_flags, "xx", 0, c);  // mid-stream start: no SYN
  CHECK_FALSE(s.saw_syn());
  s.on_segment(20, data_flags, "yy", 0, c);
  s.on_segment(30, data_flags, "zz", 0, c);
  s.flush(c);
  CHECK(c.data == "xx<gap>yy<gap>zz");
  CHECK(s.stats().gaps == 2);
  CHECK(s.stats().gap_bytes == 16);
}

TEST_CASE("the out-of-order buffer is bounded", "[tcp]") {
  tcp_stream s({.max_buffer = 10});
  collector c;
  s.on_segment(0, tcp_flags::syn, {}, 0, c);
  s.on_segment(11, data_flags, "bbbbbb", 0, c);  // hole at 1..10
  CHECK(s.buffered_bytes() == 6);
  s.on_segment(21, data_flags, "cccccc", 0, c);  // would exceed: the first hole is given up
  CHECK(s.buffered_bytes() <= 10);
  CHECK(c.data.substr(0, 5) == "<gap>");
  CHECK(c.data.find("bbbbbb") != std::string::npos);
  s.flush(c);
  CHECK(c.data == "<gap>bbbbbb<gap>cccccc");
}

TEST_CASE("snaplen-truncated payload is delivered up to the cut, then a gap", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(0, tcp_flags::syn, {}, 0, c);
  s.on_segment(1, data_flags, "abc", 7, c);
  s.on_segment(11, data_flags, "next", 0, c);
  CHECK(c.data == "abc<gap>next");
  REQUIRE(c.gaps.size() == 1);
  CHECK(c.gaps[0].second == 7);
}

TEST_CASE("the ACK of a FIN is not mistaken for lost data", "[tcp]") {
  tcp_stream s;
  collector c;
  s.on_segment(0, tcp_flags::syn, {}, 0, c);
  s.on_segment(1, data_flags, "abc", 0, c);
  s.on_segment(6, tcp_flags::fin | tcp_flags::ack, "zz", 0, c);  // FIN first, 4..5 late
  CHECK_FALSE(s.finished());
  s.on_segment(4, data_flags, "de", 0, c);
  CHECK(c.data == "abcdezz");
  s.on_peer_ack(9, c);  // acknowledges the FIN's own sequence number
  CHECK(c.gaps.empty());
  CHECK(s.finished());
}
