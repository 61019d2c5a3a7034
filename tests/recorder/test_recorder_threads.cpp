// The flight recorder's writer thread in one process: the capture thread adds packets,
// lock events and anomalies while the writer thread saves each anomaly's pcap and JSON
// and deletes the oldest past --save-max-mb. Built into make test, and into CI's TSan
// run (it fails on any data race between the two threads); the recorder's other tests
// run the lockscope process, which the TSan preset does not build.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "recorder_hooks.hpp"
#include "lock_events.hpp"

using namespace lockscope::analyzer;
namespace fs = std::filesystem;

namespace {

struct counting_sink final : lock_event_sink {
  std::size_t events = 0;
  void on_event(const lock_event&) override { ++events; }
};

using lockscope::recorder_test::event;

// Packets in a pcap file written by the recorder (classic pcap: 24-byte header, 16 per record).
std::size_t pcap_packets(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 24) return 0;
  std::size_t at = 24, n = 0;
  while (at + 16 <= bytes.size()) {
    std::uint32_t caplen = 0;
    std::memcpy(&caplen, bytes.data() + at + 8, 4);
    at += 16 + caplen;
    if (at > bytes.size()) return 0;
    ++n;
  }
  return at == bytes.size() ? n : 0;
}

}  // namespace

TEST_CASE("flight recorder: the writer thread saves and deletes while the capture thread goes on", "[recorder][threads]") {
  const fs::path dir = fs::temp_directory_path() / ("lockscope-recorder-threads-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);

  lockscope::cli::recorder_options o;
  o.save_dir = dir.string();
  o.save_window_s = 0.05;      // 50 ms of packets before an anomaly
  o.save_after_s = 0.01;       // and 10 ms after it
  o.save_buffer = 16u << 20;
  o.save_max_mb = 0.5;         // the writer deletes the oldest as it goes
  counting_sink next;
  std::size_t anomalies = 0;
  {
    lockscope::cli::recorder_hooks hooks("analyze", o);
    REQUIRE(hooks.ready());
    lock_event_sink& sink = hooks.chain(next);

    const std::int64_t start = 1'700'000'000'000'000;
    std::int64_t t = start;
    std::vector<std::string> frames;
    for (int c = 0; c < 8; ++c) {
      tcp_segment_spec s;
      REQUIRE(endpoint::parse("10.0.0." + std::to_string(2 + c), static_cast<std::uint16_t>(40000 + c), s.source));
      REQUIRE(endpoint::parse("10.0.0.1", 6379, s.destination));
      s.payload.assign(400, 'x');
      frames.push_back(make_frame(link_type::en10mb, s));
    }
    for (int round = 0; round < 300; ++round) {
      // 40 packets of the eight connections, 1 ms apart; then an acquire and an anomaly
      // of a lock of its own (no rate limit), saved 10 ms later on the loop's clock.
      for (int k = 0; k < 40; ++k) {
        captured_packet p;
        p.ts_us = t += 1000;
        p.link_type = link_type::en10mb;
        p.data = frames[static_cast<std::size_t>(k % 8)];
        p.wire_length = static_cast<std::uint32_t>(p.data.size());
        hooks.on_loop(&p, p.ts_us);
      }
      const std::string lock = "lock:" + std::to_string(round);
      const std::string client = "10.0.0." + std::to_string(2 + round % 8) + ":" + std::to_string(40000 + round % 8);
      sink.on_event(event(t - 30'000, lock, client, lock_event_kind::acquired));
      sink.on_event(event(t, lock, client, lock_event_kind::anomaly, anomaly_kind::expired_while_held));
      ++anomalies;
      hooks.on_loop(nullptr, t + 5000);
    }
    hooks.finish();  // saves the last ones, joins the writer, prints its summary
  }
  CHECK(next.events == 2 * anomalies);  // every event passes on

  std::vector<fs::path> pcaps, jsons;
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    total += e.file_size();
    if (e.path().extension() == ".pcap") pcaps.push_back(e.path());
    if (e.path().extension() == ".json") jsons.push_back(e.path());
  }
  // Each saved anomaly: its pcap and its JSON, or neither (the oldest deleted in pairs).
  CHECK(pcaps.size() == jsons.size());
  REQUIRE(pcaps.size() >= 2);
  CHECK(pcaps.size() < anomalies);          // --save-max-mb deleted the oldest
  CHECK(total <= static_cast<std::uintmax_t>(o.save_max_mb * 1e6) + 64'000);  // at most the pair just written over
  std::sort(pcaps.begin(), pcaps.end());
  for (const fs::path& p : pcaps) {
    INFO(p.string());
    // The anomaly's client connection only: 40 packets of 8 connections within 60 ms, 5 of its own.
    CHECK(pcap_packets(p) >= 5);
    fs::path json = p;
    json.replace_extension(".json");
    CHECK(fs::exists(json));
  }
  // The oldest went first: the survivors' locks, in file-name (time) order, rise. (Which
  // anomalies were saved at all varies: the queue drops some when the writer is behind.)
  int previous = -1;
  for (const fs::path& p : pcaps) {
    const std::string name = p.filename().string();
    const auto at = name.find("-lock_");
    REQUIRE(at != std::string::npos);
    const int round = std::stoi(name.substr(at + 6));
    CHECK(round > previous);
    previous = round;
  }
  fs::remove_all(dir);
}
