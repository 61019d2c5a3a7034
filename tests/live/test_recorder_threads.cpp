// The flight recorder's writer thread in one process: the capture thread adds packets,
// lock events and anomalies while the writer thread saves each anomaly's pcap and JSON
// and deletes the oldest past --save-max-mb. Built into make test, and into CI's TSan
// run (it fails on any data race between the two threads); the recorder's other tests
// run the lockscope process, which the TSan preset does not build.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/live/recorder_hooks.hpp"
#include "lock_events.hpp"

using namespace lockscope::ingest;
using namespace lockscope::locks;
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

  lockscope::live::recorder_options o;
  o.save_dir = dir.string();
  o.save_window_s = 0.05;      // 50 ms of packets before an anomaly
  o.save_after_s = 0.01;       // and 10 ms after it
  o.save_buffer = 16u << 20;
  o.save_max_mb = 0.5;         // the writer deletes the oldest as it goes
  counting_sink next;
  std::size_t anomalies = 0;
  {
    lockscope::live::recorder_hooks hooks("analyze", o);
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
    const lockscope::live::recorder_stats st = hooks.stats();
    // Every anomaly was written (the disk cap deleted the oldest later): a burst of 300
    // fits the writer's queue, which only --save-buffer bytes bound.
    CHECK(st.saved == anomalies);
    CHECK(st.dropped == 0);
    CHECK(st.rate_limited == 0);
    CHECK(st.write_errors == 0);
    CHECK(st.deleted > 0);
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
  // The oldest went first: the survivors' locks, in file-name (time) order, rise.
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

namespace {

// Frames of `n` client connections from `subnet`.1.. (ports from `first_port`) to
// 10.0.0.1:6379, connection c's payload `payload + step × c` bytes; and the clients' names.
struct client_frames {
  std::vector<std::string> frames, clients;
};
client_frames make_clients(const std::string& subnet, std::uint16_t first_port, int n, std::size_t payload,
                           std::size_t step) {
  client_frames out;
  for (int c = 0; c < n; ++c) {
    tcp_segment_spec s;
    REQUIRE(endpoint::parse(subnet + "." + std::to_string(1 + c), static_cast<std::uint16_t>(first_port + c), s.source));
    REQUIRE(endpoint::parse("10.0.0.1", 6379, s.destination));
    s.payload.assign(payload + step * static_cast<std::size_t>(c), 'x');
    out.frames.push_back(make_frame(link_type::en10mb, s));
    out.clients.push_back(s.source.to_string());
  }
  return out;
}

// One packet of `frame` at `t`, the loop's clock at the packet's time.
void feed(lockscope::live::recorder_hooks& hooks, const std::string& frame, std::int64_t t) {
  captured_packet p;
  p.ts_us = t;
  p.link_type = link_type::en10mb;
  p.data = frame;
  p.wire_length = static_cast<std::uint32_t>(p.data.size());
  hooks.on_loop(&p, t);
}

// A burst: `locks` anomalies within 0.3 ms (a Redis stall letting hundreds of leases run
// out at once), each lock held by one of 64 connections and every seventh also waited
// for by the next connection. Packets of all 64 connections, 100 µs apart, from 60 ms
// before the burst to 20 ms after, of `payload` bytes or a few more. Returns the expected
// packet count of each lock's file, counted here from the packets sent (not from the
// recorder), and the recorder's counts.
struct burst_result {
  std::map<int, std::size_t> expected;  // lock number → packets its file must hold
  lockscope::live::recorder_stats stats;
};

burst_result run_burst(const fs::path& dir, int locks, std::uint64_t save_buffer, std::size_t payload = 100) {
  lockscope::live::recorder_options o;
  o.save_dir = dir.string();
  o.save_window_s = 0.05;  // 50 ms of packets before an anomaly
  o.save_after_s = 0.01;   // and 10 ms after it
  o.save_buffer = save_buffer;
  constexpr int connections = 64;
  const auto [frames, clients] = make_clients("10.0.1", 50000, connections, payload, 1);
  const std::int64_t burst = 1'700'000'000'000'000;
  const std::int64_t window = 50'000, after = 10'000;
  auto connections_of = [&](int k) {
    std::vector<int> c{k % connections};
    if (k % 7 == 0) c.push_back((k + 1) % connections);
    return c;
  };
  burst_result out;
  counting_sink next;
  {
    lockscope::live::recorder_hooks hooks("analyze", o);
    REQUIRE(hooks.ready());
    lock_event_sink& sink = hooks.chain(next);
    std::vector<std::pair<std::int64_t, int>> sent;  // (time, connection)
    bool fired = false;
    for (std::int64_t t = burst - 60'000; t <= burst + 20'000; t += 100) {
      const int c = static_cast<int>((t / 100) % connections);
      feed(hooks, frames[static_cast<std::size_t>(c)], t);
      sent.emplace_back(t, c);
      if (t == burst - 30'000) {
        for (int k = 0; k < locks; ++k) {
          const std::string lock = "burst:" + std::to_string(k);
          const auto cs = connections_of(k);
          sink.on_event(event(t, lock, clients[static_cast<std::size_t>(cs[0])], lock_event_kind::acquired));
          if (cs.size() > 1) {
            sink.on_event(event(t, lock, clients[static_cast<std::size_t>(cs[1])], lock_event_kind::contended));
          }
        }
      }
      if (!fired && t >= burst) {
        fired = true;
        for (int k = 0; k < locks; ++k) {
          const std::string lock = "burst:" + std::to_string(k);
          const std::string& holder = clients[static_cast<std::size_t>(connections_of(k)[0])];
          sink.on_event(event(burst + k, lock, holder, lock_event_kind::anomaly, anomaly_kind::expired_while_held));
        }
      }
    }
    hooks.finish();
    out.stats = hooks.stats();
    for (int k = 0; k < locks; ++k) {
      const auto cs = connections_of(k);
      const std::int64_t at = burst + k;
      out.expected[k] = static_cast<std::size_t>(std::count_if(sent.begin(), sent.end(), [&](const auto& s) {
        return s.first >= at - window && s.first <= at + after && std::find(cs.begin(), cs.end(), s.second) != cs.end();
      }));
    }
  }
  return out;
}

// The lock number in a saved file's name (…-burst_<k>-expired_while_held.pcap).
int burst_lock_of(const fs::path& p) {
  const std::string name = p.filename().string();
  const auto at = name.find("-burst_");
  REQUIRE(at != std::string::npos);
  return std::stoi(name.substr(at + 7));
}

// A fresh directory for a test's files.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Every lock's pair of files is there, its pcap holding exactly the packets of its
// connections in its window (no more, no less: never a cut file).
void check_burst_files(const fs::path& dir, const burst_result& r, int locks) {
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".pcap") continue;
    ++files;
    INFO(e.path().string());
    CHECK(pcap_packets(e.path()) == r.expected.at(burst_lock_of(e.path())));
    fs::path json = e.path();
    json.replace_extension(".json");
    CHECK(fs::exists(json));
  }
  CHECK(files == static_cast<std::size_t>(locks));
}

}  // namespace

TEST_CASE("flight recorder: a burst of anomalies is saved whole, in one pass over the ring per batch",
          "[recorder][threads]") {
  const fs::path dir = fresh_dir("lockscope-recorder-burst");
  constexpr int locks = 500;
  const burst_result r = run_burst(dir, locks, 16u << 20);
  CHECK(r.stats.saved == static_cast<std::uint64_t>(locks));
  CHECK(r.stats.dropped == 0);
  CHECK(r.stats.write_errors == 0);
  // One pass for the first anomaly due, one for the other 499 (they waited for it to be
  // at most 100 ms old on the loop's clock, here until the end): not one per anomaly.
  CHECK(r.stats.ring_passes <= 2);
  check_burst_files(dir, r, locks);
  fs::remove_all(dir);
}

TEST_CASE("flight recorder: files that do not fit in the writer's queue wait for it, whole and in order",
          "[recorder][threads]") {
  const fs::path dir = fresh_dir("lockscope-recorder-full");
  // 1 KB packets: a file of one connection holds about 10 (10 KB), 300 of them about
  // 3.5 MB, more than the 2 MiB queue (the ring, 2 MiB too, keeps the 800 KB sent).
  constexpr int locks = 300;
  const burst_result r = run_burst(dir, locks, 2u << 20, 1000);
  CHECK(r.stats.saved == static_cast<std::uint64_t>(locks));
  CHECK(r.stats.dropped == 0);
  CHECK(r.stats.write_errors == 0);
  // Three passes: the first anomaly's file; at the end, the other 299 (sized, then as
  // many copied as fit: about 180); then those that waited. A file is sized once, so
  // the last pass scans the ring once (a copy), not twice: 2 + 2 + 1 scans.
  CHECK(r.stats.ring_passes >= 3);
  CHECK(r.stats.ring_scans <= r.stats.ring_passes + 2);
  check_burst_files(dir, r, locks);
  fs::remove_all(dir);
}

namespace {

// The name the recorder gives an anomaly's files, without .pcap/.json (the format the
// README documents): DIR/<UTC time to the µs>-<lock, '_' for other bytes>-<kind>.
fs::path anomaly_base(const fs::path& dir, std::int64_t ts_us, const std::string& lock_in_name) {
  const std::time_t t = static_cast<std::time_t>(ts_us / 1'000'000);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &utc);
  char micros[16];
  std::snprintf(micros, sizeof micros, ".%06lldZ", static_cast<long long>(ts_us % 1'000'000));
  return dir / (std::string(stamp) + micros + "-" + lock_in_name + "-expired_while_held");
}

std::size_t files_with_extension(const fs::path& dir, const std::string& extension) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == extension ? 1 : 0;
  return n;
}

// Should the test stop early (a failed REQUIRE), opens the FIFO the writer is blocked on,
// so that the recorder's destructor can join it instead of hanging. The descriptor is left
// open: a reader that goes before the writer has written would hand it SIGPIPE.
struct unblock_on_exit {
  fs::path fifo;
  bool drained = false;
  ~unblock_on_exit() {
    if (!drained) static_cast<void>(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  }
};

// How many of `sizes`, in order, fit in `room` bytes (the writer's queue takes a prefix).
std::size_t prefix_fitting(const std::vector<std::uint64_t>& sizes, std::size_t first, std::uint64_t room) {
  std::size_t n = 0;
  for (std::size_t k = first; k < sizes.size() && sizes[k] <= room; ++k, ++n) room -= sizes[k];
  return n;
}

}  // namespace

// A disk that stops answering: the first file's JSON is a FIFO nobody reads, so the
// writer thread blocks on it with a full queue behind it. The passes over the ring are put
// off while the queue is more than half full (the capture thread never waits), files that
// do not fit wait, and once the writer is back, those that waited longer than the whole
// --save-window and still do not fit are dropped and counted; every file written is
// whole.
TEST_CASE("flight recorder: a stalled writer puts passes off, and a file that waited a whole window is dropped",
          "[recorder][threads]") {
  const fs::path dir = fresh_dir("lockscope-recorder-stalled");
  lockscope::live::recorder_options o;
  o.save_dir = dir.string();
  o.save_window_s = 1;     // a file may wait 1 s for the writer
  o.save_after_s = 0.01;
  o.save_buffer = 2u << 20;  // the writer's queue (and the ring): 2 MiB
  constexpr int connections = 8, burst = 150;
  constexpr std::int64_t ms = 1000, t0 = 1'700'000'000'000'000;
  const auto [frames, clients] = make_clients("10.0.2", 51000, connections, 1000, 0);
  // Lock 0's anomaly at t0 - 5 ms (due first, alone); locks 1..150 within the 150 µs after t0.
  auto anomaly_at = [&](int k) { return k == 0 ? t0 - 5 * ms : t0 + k; };
  auto connection_of = [&](int k) { return k % connections; };
  const fs::path stuck_json = anomaly_base(dir, anomaly_at(0), "stuck_0").string() + ".json";
  REQUIRE(::mkfifo(stuck_json.c_str(), 0600) == 0);

  std::vector<std::pair<std::int64_t, int>> sent;  // (time, connection)
  counting_sink next;
  lockscope::live::recorder_stats st;
  std::size_t fit_first = 0, fit_second = 0;
  {
    lockscope::live::recorder_hooks hooks("analyze", o);
    unblock_on_exit unblock{stuck_json};  // destroyed first
    REQUIRE(hooks.ready());
    lock_event_sink& sink = hooks.chain(next);
    for (std::int64_t t = t0 - 60 * ms; t <= t0 + 20 * ms; t += 250) {
      const int c = static_cast<int>((t / 250) % connections);
      feed(hooks, frames[static_cast<std::size_t>(c)], t);
      sent.emplace_back(t, c);
      if (t == t0 - 30 * ms) {
        for (int k = 0; k <= burst; ++k) {
          sink.on_event(event(t, "stuck:" + std::to_string(k), clients[static_cast<std::size_t>(connection_of(k))],
                              lock_event_kind::acquired));
        }
      }
      if (t == t0 - 5 * ms || t == t0) {
        for (int k = t == t0 ? 1 : 0; k <= (t == t0 ? burst : 0); ++k) {
          sink.on_event(event(anomaly_at(k), "stuck:" + std::to_string(k),
                              clients[static_cast<std::size_t>(connection_of(k))], lock_event_kind::anomaly,
                              anomaly_kind::expired_while_held));
        }
      }
    }
    // Lock 0's pass ran at t0 + 5 ms: once its pcap is there, the writer has taken it from
    // the queue and is blocked opening its JSON.
    const fs::path stuck_pcap = anomaly_base(dir, anomaly_at(0), "stuck_0").string() + ".pcap";
    for (int i = 0; i < 1000 && !fs::exists(stuck_pcap); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(fs::exists(stuck_pcap));

    // Each file's bytes in the queue (16 per record + the frame), from the packets sent.
    std::vector<std::uint64_t> sizes(burst + 1, 0);
    for (int k = 1; k <= burst; ++k) {
      for (const auto& [t, c] : sent) {
        if (c == connection_of(k) && t >= anomaly_at(k) - 1000 * ms && t <= anomaly_at(k) + 10 * ms) {
          sizes[static_cast<std::size_t>(k)] += 16 + frames[static_cast<std::size_t>(c)].size();
        }
      }
    }
    // t0 + 105 ms: the burst's pass queues what fits in the empty queue; the rest wait.
    hooks.on_loop(nullptr, t0 + 105 * ms);
    fit_first = prefix_fitting(sizes, 1, o.save_buffer);
    REQUIRE(fit_first > 0);
    REQUIRE(fit_first < static_cast<std::size_t>(burst));
    // Every 100 ms for a second: the queue is full and the writer stuck, so each pass is put off.
    for (std::int64_t t = t0 + 205 * ms; t <= t0 + 1105 * ms; t += 100 * ms) hooks.on_loop(nullptr, t);
    // The disk answers again: the writer finishes lock 0 and the queue.
    {
      std::ifstream fifo(stuck_json);  // opens once the writer has it open for writing
      std::string json((std::istreambuf_iterator<char>(fifo)), std::istreambuf_iterator<char>());
      CHECK(json.find("\"stuck:0\"") != std::string::npos);
      unblock.drained = true;
    }
    for (int i = 0; i < 2000 && files_with_extension(dir, ".json") < 1 + fit_first; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE(files_with_extension(dir, ".json") == 1 + fit_first);
    // t0 + 1205 ms: the waiting files' anomalies are more than a window old. Those that
    // fit are written (their packets are still in the ring), the others are dropped.
    hooks.on_loop(nullptr, t0 + 1205 * ms);
    fit_second = prefix_fitting(sizes, 1 + fit_first, o.save_buffer);
    hooks.finish();
    st = hooks.stats();
  }
  const std::size_t dropped = burst - fit_first - fit_second;
  INFO("fit first " << fit_first << ", then " << fit_second << ", dropped " << dropped);
  REQUIRE(dropped > 0);
  CHECK(st.passes_put_off == 10);
  CHECK(st.ring_passes == 3);  // lock 0's, the burst's, and the one after the stall
  CHECK(st.saved == 1 + fit_first + fit_second);
  CHECK(st.dropped == dropped);
  CHECK(st.write_errors == 0);
  // Written: lock 0 and locks 1..fit_first + fit_second, each whole; the rest nowhere.
  for (int k = 1; k <= burst; ++k) {
    const fs::path pcap = anomaly_base(dir, anomaly_at(k), "stuck_" + std::to_string(k)).string() + ".pcap";
    INFO(pcap.string());
    if (static_cast<std::size_t>(k) > fit_first + fit_second) {
      CHECK_FALSE(fs::exists(pcap));
      continue;
    }
    const auto expected = static_cast<std::size_t>(std::count_if(sent.begin(), sent.end(), [&](const auto& s) {
      return s.second == connection_of(k) && s.first >= anomaly_at(k) - 1000 * ms && s.first <= anomaly_at(k) + 10 * ms;
    }));
    CHECK(pcap_packets(pcap) == expected);
  }
  CHECK(files_with_extension(dir, ".pcap") == 1 + fit_first + fit_second);
  fs::remove_all(dir);
}
