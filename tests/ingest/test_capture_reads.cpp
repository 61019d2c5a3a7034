// A capture file of many small records read through its refills: a record whose header
// or body ends at any byte of a read's end must come out whole, byte for byte, with its
// time and its length on the wire, as it was written.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

TEST_CASE("records that end at every byte of the reader's reads come out as written", "[capture]") {
  // 1.2 M records of 17–64 bytes (a snaplen of 48 cuts the longer frames) over ~48 MB:
  // about 190 of the reader's 256 KiB reads end inside one, at random bytes of its
  // header and body, a dozen of them one byte short of its end.
  std::mt19937 rng(4322);
  temp_dir dir;
  const std::string path = (dir / "small.pcap").string();
  std::vector<std::string> frames;
  constexpr std::size_t snaplen = 48;
  {
    pcap_file_writer w(path, link_type::en10mb, snaplen);
    std::size_t bytes = 0;
    std::string frame;
    for (std::int64_t i = 0; bytes < (48u << 20); ++i) {
      frame.resize(1 + rng() % (rng() % 8 == 0 ? 1500 : 48));
      for (char& c : frame) c = static_cast<char>(rng());
      w.write(1'000'000 + i, frame);
      frames.push_back(frame);
      bytes += 16 + std::min(frame.size(), snaplen);
    }
  }
  offline_capture source({path});
  captured_packet p;
  std::size_t k = 0;
  std::size_t wrong = 0;
  while (source.next(p)) {
    if (k >= frames.size()) break;
    const std::string& f = frames[k];
    const bool same = p.ts_us == 1'000'000 + static_cast<std::int64_t>(k) && p.wire_length == f.size() &&
                      p.data == std::string_view(f).substr(0, snaplen);
    if (!same && ++wrong <= 3) WARN("record " << k << " differs");
    ++k;
  }
  CHECK(wrong == 0);
  CHECK(k == frames.size());
}
