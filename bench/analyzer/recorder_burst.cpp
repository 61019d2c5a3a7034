// What a burst of anomalies costs the capture thread with --save-anomalies: the time the
// live loop's on_loop() calls take (the flight recorder saving), and how many files are
// saved. 64 client connections, one packet every 100 µs (150-byte payloads) for 31 s,
// a 30 s --save-window, a 1 s --save-after and a 64 MiB --save-buffer; N locks held by
// them all fire an anomaly within N µs, twice (the second burst 1.5 s after the first,
// when the process's memory has been touched once).
//
//   build/default/bench/recorder_burst [N]     (default 300)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "lock_events.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/live/recorder_hooks.hpp"

using namespace lockscope::ingest;
using namespace lockscope::locks;
namespace fs = std::filesystem;

namespace {

struct null_sink final : lock_event_sink {
  void on_event(const lock_event&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  const int locks = argc > 1 ? std::atoi(argv[1]) : 300;
  const fs::path dir = fs::temp_directory_path() / ("lockscope-recorder-burst-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  lockscope::live::recorder_options o;
  o.save_dir = dir.string();
  o.save_window_s = 30;
  o.save_after_s = 1;
  o.save_buffer = 64u << 20;
  o.save_max_mb = 1e6;
  constexpr int connections = 64;
  std::vector<std::string> frames, clients;
  for (int c = 0; c < connections; ++c) {
    tcp_segment_spec s;
    endpoint::parse("10.0.1." + std::to_string(1 + c), static_cast<std::uint16_t>(50000 + c), s.source);
    endpoint::parse("10.0.0.1", 6379, s.destination);
    s.payload.assign(150, 'x');
    frames.push_back(make_frame(link_type::en10mb, s));
    clients.push_back(s.source.to_string());
  }
  null_sink next;
  lockscope::live::recorder_stats stats;
  double finish_ms = 0;
  struct period {
    double longest_ms = 0, total_ms = 0;
  } bursts[2];
  {
    lockscope::live::recorder_hooks hooks("analyze", o);
    if (!hooks.ready()) return 2;
    lock_event_sink& sink = hooks.chain(next);
    const std::int64_t first = 1'700'000'000'000'000, second = first + 1'500'000;
    auto fire = [&](std::int64_t at, const char* prefix) {
      for (int k = 0; k < locks; ++k) {
        const std::string lock = prefix + std::to_string(k);
        const std::string& client = clients[static_cast<std::size_t>(k % connections)];
        sink.on_event(lockscope::recorder_test::event(at - 10'000'000, lock, client, lock_event_kind::acquired));
        sink.on_event(lockscope::recorder_test::event(at + k, lock, client, lock_event_kind::anomaly,
                                                      anomaly_kind::expired_while_held));
      }
    };
    for (std::int64_t t = first - 31'000'000; t <= second + 1'500'000; t += 100) {
      if (t == first) fire(t, "first:");
      if (t == second) fire(t, "second:");
      captured_packet p;
      p.ts_us = t;
      p.link_type = link_type::en10mb;
      p.data = frames[static_cast<std::size_t>((t / 100) % connections)];
      p.wire_length = static_cast<std::uint32_t>(p.data.size());
      const auto start = std::chrono::steady_clock::now();
      hooks.on_loop(&p, t);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (t >= first) {
        period& b = bursts[t >= second ? 1 : 0];
        b.total_ms += ms;
        b.longest_ms = std::max(b.longest_ms, ms);
      }
    }
    const auto finish_start = std::chrono::steady_clock::now();
    hooks.finish();
    finish_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - finish_start).count();
    stats = hooks.stats();
  }
  for (int b = 0; b < 2; ++b) {
    std::printf("burst %d of %d anomalies: capture thread's longest on_loop %.1f ms, all on_loop calls %.1f ms\n",
                b + 1, locks, bursts[b].longest_ms, bursts[b].total_ms);
  }
  std::printf("saved %llu of %d, dropped %llu, %llu passes over the ring (%llu scans, %llu put off while the "
              "writer was behind); the end (waiting for the writer, the last passes) %.0f ms\n",
              static_cast<unsigned long long>(stats.saved), 2 * locks, static_cast<unsigned long long>(stats.dropped),
              static_cast<unsigned long long>(stats.ring_passes), static_cast<unsigned long long>(stats.ring_scans),
              static_cast<unsigned long long>(stats.passes_put_off), finish_ms);
  fs::remove_all(dir);
}
