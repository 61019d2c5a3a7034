// Capture files through offline_capture: link types, pcapng, merging, damage.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using Catch::Matchers::Equals;
using strings = std::vector<std::string>;

namespace {

script lock_conversation(const char* client_ip, const char* server_ip, std::uint16_t client_port) {
  script s(ep(client_ip, client_port), ep(server_ip, 16379));
  s.handshake()
      .client(cmd({"AUTH", "Root@123"})).server("+OK\r\n")
      .client(cmd({"SET", "k", "v"})).server("+OK\r\n")
      .client(cmd({"GET", "k"})).server("$1\r\nv\r\n")
      .close();
  return s;
}

const strings lock_summaries{"AUTH **** => OK", "SET k v => OK", "GET k => v"};

}  // namespace

TEST_CASE("pcap files of every link type decode the same conversation", "[capture]") {
  const int link = GENERATE(link_type::null, link_type::en10mb, link_type::raw, link_type::loop,
                            link_type::linux_sll, link_type::linux_sll2, link_type::ipv4, link_type::ipv6);
  const bool v6 = link == link_type::ipv6 || (link != link_type::ipv4 && GENERATE(false, true));
  CAPTURE(link, v6);
  temp_dir dir;
  const auto s = v6 ? lock_conversation("2001:db8::10", "2001:db8::20", 50000)
                    : lock_conversation("192.168.0.10", "192.168.0.20", 50000);
  write_pcap(dir / "x.pcap", s.segments, link);
  ingest_stats stats;
  const auto sink = analyze_files({(dir / "x.pcap").string()}, {}, nullptr, &stats);
  CHECK_THAT(sink.summaries(), Equals(lock_summaries));
  CHECK(stats.packets == s.segments.size());
  CHECK(stats.tcp_segments == s.segments.size());
  CHECK(stats.flows == 1);
  CHECK(stats.resp_flows == 1);
  REQUIRE(!sink.items.empty());
  CHECK(sink.items[0].server == (v6 ? "[2001:db8::20]:16379" : "192.168.0.20:16379"));
}

TEST_CASE("VLAN and QinQ tagged captures decode", "[capture]") {
  const std::vector<std::uint16_t> tags = GENERATE(std::vector<std::uint16_t>{42}, std::vector<std::uint16_t>{7, 42});
  temp_dir dir;
  const auto s = lock_conversation("10.9.0.1", "10.9.0.2", 50001);
  write_pcap(dir / "vlan.pcap", s.segments, link_type::en10mb, 262144, {tags});
  CHECK_THAT(analyze_files({(dir / "vlan.pcap").string()}).summaries(), Equals(lock_summaries));
}

TEST_CASE("a pcapng with two interfaces", "[capture][pcapng]") {
  temp_dir dir;
  auto a = lock_conversation("10.0.0.1", "10.0.0.2", 50001);
  auto b = lock_conversation("10.0.0.3", "10.0.0.2", 50002);
  {
    pcapng_file_writer w((dir / "two.pcapng").string());
    const auto eth = w.add_interface(link_type::en10mb);
    const auto cooked = w.add_interface(link_type::en10mb);
    // Interleave the two conversations, b shifted by 50 µs.
    std::size_t i = 0, j = 0;
    while (i < a.segments.size() || j < b.segments.size()) {
      if (j >= b.segments.size() || (i < a.segments.size() && a.segments[i].ts_us <= b.segments[j].ts_us + 50)) {
        w.write(eth, a.segments[i].ts_us, make_frame(link_type::en10mb, a.segments[i].spec));
        ++i;
      } else {
        w.write(cooked, b.segments[j].ts_us + 50, make_frame(link_type::en10mb, b.segments[j].spec, {{5}}));
        ++j;
      }
    }
  }
  const auto sink = analyze_files({(dir / "two.pcapng").string()});
  REQUIRE(sink.items.size() == 6);
  strings from_a, from_b;
  for (const recorded& r : sink.items) (r.client == "10.0.0.1:50001" ? from_a : from_b).push_back(r.summary());
  CHECK_THAT(from_a, Equals(lock_summaries));
  CHECK_THAT(from_b, Equals(lock_summaries));
  for (std::size_t k = 1; k < sink.items.size(); ++k) CHECK(sink.items[k - 1].request_us <= sink.items[k].request_us);
}

TEST_CASE("several files are merged by timestamp", "[capture]") {
  temp_dir dir;
  const auto s = lock_conversation("10.0.0.1", "10.0.0.2", 50003);
  // Alternate packets between two files: only a timestamp merge gets the order right.
  std::vector<timed_segment> even, odd;
  for (std::size_t i = 0; i < s.segments.size(); ++i) (i % 2 == 0 ? even : odd).push_back(s.segments[i]);
  write_pcap(dir / "even.pcap", even, link_type::en10mb);
  write_pcap(dir / "odd.pcap", odd, link_type::linux_sll);
  ingest_stats stats;
  const auto sink = analyze_files({(dir / "odd.pcap").string(), (dir / "even.pcap").string()}, {}, nullptr, &stats);
  CHECK_THAT(sink.summaries(), Equals(lock_summaries));
  CHECK(stats.gaps == 0);
}

TEST_CASE("a file truncated mid-record is read up to the damage, with a warning", "[capture]") {
  temp_dir dir;
  const auto s = lock_conversation("10.0.0.1", "10.0.0.2", 50004);
  const auto path = dir / "cut.pcap";
  write_pcap(path, s.segments);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 20);  // into the last record
  std::vector<std::string> warnings;
  const auto sink = analyze_files({path.string()}, {}, &warnings);
  CHECK_THAT(sink.summaries(), Equals(lock_summaries));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("cut.pcap") && Catch::Contains("truncated"));
}

TEST_CASE("unreadable input is a clear error and unknown link types are counted", "[capture]") {
  temp_dir dir;
  CHECK_THROWS_WITH(offline_capture({(dir / "missing.pcap").string()}), Catch::Contains("missing.pcap"));
  {
    std::ofstream junk(dir / "junk.pcap");
    junk << "this is not a capture";
  }
  CHECK_THROWS_AS(offline_capture({(dir / "junk.pcap").string()}), capture_error);

  const auto s = lock_conversation("10.0.0.1", "10.0.0.2", 50005);
  {
    pcap_file_writer w((dir / "user0.pcap").string(), 147);
    for (const auto& seg : s.segments) w.write(seg.ts_us, make_frame(link_type::raw, seg.spec));
  }
  ingest_stats stats;
  const auto sink = analyze_files({(dir / "user0.pcap").string()}, {}, nullptr, &stats);
  CHECK(sink.items.empty());
  CHECK(stats.unsupported_link == s.segments.size());
}

// Captures are often kept compressed, and libpcap reads none of the usual formats: the
// error names the compression and how to read the file anyway. Each file is compressed
// by the real tool (skipped when it is not installed), and the suggested command must
// really read it.
TEST_CASE("a compressed capture is named as such, with the command that reads it", "[capture]") {
  temp_dir dir;
  const auto s = lock_conversation("10.0.0.1", "10.0.0.2", 50007);
  const auto pcap = dir / "c.pcap";
  write_pcap(pcap, s.segments);
  const auto whole = analyze_files({pcap.string()}, {});
  REQUIRE_FALSE(whole.items.empty());
  struct format {
    const char* compress;  // writes FILE.<suffix>
    const char* suffix;
    const char* name;
    const char* reader;
  };
  for (const format& f : {format{"gzip -k", ".gz", "gzip", "zcat"}, format{"zstd -q", ".zst", "zstd", "zstdcat"},
                          format{"xz -k", ".xz", "xz", "xzcat"}, format{"bzip2 -k", ".bz2", "bzip2", "bzcat"},
                          format{"lz4 -q", ".lz4", "lz4", "lz4cat"}}) {
    const std::string tool = std::string(f.compress).substr(0, std::string(f.compress).find(' '));
    if (std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) != 0) {
      WARN(tool << " is not installed: skipped");
      continue;
    }
    const std::string compressed = pcap.string() + f.suffix;
    REQUIRE(std::system((std::string(f.compress) + " " + pcap.string() + (tool == "lz4" ? " " + compressed : "")).c_str()) == 0);
    INFO(compressed);
    std::string error;
    try {
      offline_capture files({compressed});
    } catch (const capture_error& e) {
      error = e.what();
    }
    CHECK(error == compressed + ": " + f.name + "-compressed, not a capture: decompress it first (" + f.reader + " " +
                       compressed + " | lockscope … -)");
    // The suggested reader gives back the capture.
    const auto back = dir / "back.pcap";
    REQUIRE(std::system((std::string(f.reader) + " " + compressed + " > " + back.string()).c_str()) == 0);
    CHECK(analyze_files({back.string()}, {}).items.size() == whole.items.size());
    std::filesystem::remove(compressed);
  }
}

TEST_CASE("snaplen truncation is a gap in that flow only", "[capture][tcp]") {
  temp_dir dir;
  script s(ep("10.0.0.1", 50006), ep("10.0.0.2", 6379));
  const std::string big(1000, 'B');
  s.handshake()
      .client(cmd({"GET", "small"})).server("$2\r\nok\r\n")
      .client(cmd({"GET", "big"})).server("$1000\r\n" + big + "\r\n")
      .client(cmd({"GET", "after"})).server("$5\r\nfine!\r\n")
      .close();
  write_pcap(dir / "snap.pcap", s.segments, link_type::en10mb, 200);
  ingest_stats stats;
  const auto sink = analyze_files({(dir / "snap.pcap").string()}, {}, nullptr, &stats);
  CHECK_THAT(sink.summaries(), Equals(strings{"GET small => ok", "GET big => (none)", "GET after => fine!"}));
  CHECK(stats.gaps == 1);
  CHECK(stats.gap_bytes == 1009 - (200 - 54));
  CHECK(sink.count(session_event_kind::gap) == 1);
}

TEST_CASE("a pcapng mixing link types decodes every interface's packets", "[capture][pcapng]") {
  temp_dir dir;
  const auto s = lock_conversation("10.0.0.1", "10.0.0.2", 50007);
  {
    pcapng_file_writer w((dir / "mixed.pcapng").string());
    const auto eth = w.add_interface(link_type::en10mb);
    const auto cooked = w.add_interface(link_type::linux_sll2);
    // One connection, its packets alternating between the two interfaces.
    for (std::size_t i = 0; i < s.segments.size(); ++i) {
      const int link = i % 2 == 0 ? link_type::en10mb : link_type::linux_sll2;
      w.write(i % 2 == 0 ? eth : cooked, s.segments[i].ts_us, make_frame(link, s.segments[i].spec));
    }
  }
  std::vector<std::string> warnings;
  ingest_stats stats;
  const auto sink = analyze_files({(dir / "mixed.pcapng").string()}, {}, &warnings, &stats);
  CHECK(warnings.empty());
  CHECK_THAT(sink.summaries(), Equals(lock_summaries));
  CHECK(stats.packets == s.segments.size());
  CHECK(stats.gaps == 0);
}

TEST_CASE("records across the reader's reads, and one longer than a read, are read whole", "[capture]") {
  // The reader asks read() for 256 KiB at a time (more only for a record that needs it):
  // ~3.6 MB of 60 KB commands put record boundaries across every read, and a 262,144-byte
  // frame (the largest a pcap record holds) needs more than one read's worth at once.
  script s(ep("192.168.0.10", 50000), ep("192.168.0.20", 16379));
  s.handshake();
  const std::string value(60'000, 'v');
  strings expected;
  for (int i = 0; i < 60; ++i) {
    const std::string key = "k" + std::to_string(i);
    s.client(cmd({"SET", key, value})).server("+OK\r\n");
    expected.push_back("SET " + key);
  }
  s.close();
  temp_dir dir;
  const std::string junk(262'144, '\x5a');  // not IP: counted, then dropped
  {
    pcap_file_writer w((dir / "big.pcap").string(), link_type::en10mb);
    for (std::size_t i = 0; i < s.segments.size(); ++i) {
      w.write(s.segments[i].ts_us, make_frame(link_type::en10mb, s.segments[i].spec));
      if (i == s.segments.size() / 2) w.write(s.segments[i].ts_us, junk);
    }
  }
  ingest_stats stats;
  std::vector<std::string> warnings;
  const auto sink = analyze_files({(dir / "big.pcap").string()}, {}, &warnings, &stats);
  CHECK(stats.packets == s.segments.size() + 1);
  CHECK(stats.tcp_segments == s.segments.size());
  const strings summaries = sink.summaries();
  REQUIRE(summaries.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(summaries[i].rfind(expected[i] + " ", 0) == 0);
  CHECK(warnings.empty());
}
