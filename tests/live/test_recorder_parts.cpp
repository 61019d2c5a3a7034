// The flight recorder's and --write's sans-I/O parts: the packet ring, the per-lock
// connection bookkeeping, tcpdump's rotation names, and the replay clock.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/live/capture_writer.hpp"
#include "lockscope/live/packet_ring.hpp"
#include "lockscope/ingest/replay_capture.hpp"
#include "lockscope/live/lock_connections.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lock_events.hpp"

using namespace lockscope::ingest;
using namespace lockscope::locks;
using namespace lockscope::live;

namespace {

endpoint ep(const char* ip, std::uint16_t port) {
  endpoint e;
  REQUIRE(endpoint::parse(ip, port, e));
  return e;
}

std::string frame_between(const endpoint& a, const endpoint& b, std::size_t payload) {
  tcp_segment_spec s;
  s.source = a;
  s.destination = b;
  s.payload.assign(payload, 'x');
  return make_frame(link_type::en10mb, s);
}

struct recording_sink final : lock_event_sink {
  std::vector<std::string> locks;
  void on_event(const lock_event& e) override { locks.emplace_back(e.lock); }
};

using lockscope::recorder_test::event;

}  // namespace

TEST_CASE("packet_ring: keeps the window's TCP packets within its budget, oldest out first", "[recorder]") {
  packet_ring ring({.budget_bytes = 4u << 20, .window_us = 1'000'000});
  const endpoint c = ep("10.0.0.2", 40000), s = ep("10.0.0.1", 6379);
  const std::string f = frame_between(c, s, 1000);
  std::int64_t t = 1'000'000'000;
  for (int i = 0; i < 100; ++i) {
    captured_packet p;
    p.ts_us = t + i * 1000;
    p.link_type = link_type::en10mb;
    p.data = f;
    p.wire_length = static_cast<std::uint32_t>(f.size());
    REQUIRE(ring.add(p));
  }
  std::vector<std::int64_t> seen;
  ring.for_each_since(t + 50'000, [&](const packet_ring::record& r) {
    seen.push_back(r.ts_us);
    CHECK(r.source == c);
    CHECK(r.destination == s);
    CHECK(r.data == f);
  });
  REQUIRE(seen.size() == 50);
  CHECK(seen.front() == t + 50'000);
  // Not TCP: not kept.
  captured_packet junk;
  junk.link_type = link_type::en10mb;
  junk.data = "short";
  CHECK_FALSE(ring.add(junk));
  // Far later: the old blocks leave with the window.
  captured_packet late;
  late.ts_us = t + 10'000'000;
  late.link_type = link_type::en10mb;
  late.data = f;
  REQUIRE(ring.add(late));
  CHECK(ring.packets_held() == 1);
  CHECK(ring.evicted_in_window() == 0);
  // The budget: 20 MB of packets within one window through a 4 MiB ring.
  for (int i = 0; i < 20'000; ++i) {
    late.ts_us = t + 10'000'000 + i;
    ring.add(late);
  }
  CHECK(ring.bytes_held() <= (4u << 20));
  CHECK(ring.evicted_in_window() > 0);
  std::int64_t first = -1, count = 0;
  ring.for_each_since(0, [&](const packet_ring::record& r) {
    if (first < 0) first = r.ts_us;
    ++count;
  });
  CHECK(count == static_cast<std::int64_t>(ring.packets_held()));
  CHECK(first > t + 10'000'000);  // the oldest went first
}

TEST_CASE("lock_connections: a lock's connections in the window, anomalies once per lock and kind", "[recorder]") {
  recording_sink next;
  struct saved {
    std::string lock;
    anomaly_kind kind;
    std::vector<connection_ref> connections;
  };
  std::vector<saved> saves;
  lock_connections c({.window_us = 30'000'000, .min_interval_us = 30'000'000}, next,
                     [&](const lock_event& e, std::span<const connection_ref> conns) {
                       saves.push_back({std::string(e.lock), e.kind, {conns.begin(), conns.end()}});
                     });
  const std::int64_t t = 1'700'000'000'000'000;
  c.on_event(event(t, "a", "10.0.0.2:40000", lock_event_kind::acquired));
  c.on_event(event(t + 1000, "a", "10.0.0.3:40001", lock_event_kind::contended));
  c.on_event(event(t + 2000, "a", "10.0.0.3:40002", lock_event_kind::subscribed));
  c.on_event(event(t + 3000, "b", "10.0.0.4:40003", lock_event_kind::acquired));
  c.on_event(event(t + 4000, "a", "[::1]:40004", lock_event_kind::contended));
  CHECK(next.locks.size() == 5);  // every event passes on
  c.on_event(event(t + 5000, "a", "10.0.0.2:40000", lock_event_kind::anomaly, anomaly_kind::expired_while_held));
  REQUIRE(saves.size() == 1);
  CHECK(saves[0].lock == "a");
  REQUIRE(saves[0].connections.size() == 4);
  CHECK(saves[0].connections[0].client == ep("10.0.0.2", 40000));
  CHECK(saves[0].connections[3].client == ep("::1", 40004));
  CHECK(saves[0].connections[0].matches(ep("10.0.0.1", 6379), ep("10.0.0.2", 40000)));
  CHECK_FALSE(saves[0].connections[0].matches(ep("10.0.0.9", 6379), ep("10.0.0.2", 40000)));
  // The same kind again within the interval: not saved; another kind: saved.
  c.on_event(event(t + 6000, "a", "10.0.0.2:40000", lock_event_kind::anomaly, anomaly_kind::expired_while_held));
  c.on_event(event(t + 7000, "a", "10.0.0.3:40001", lock_event_kind::anomaly, anomaly_kind::idle_with_waiters));
  CHECK(saves.size() == 2);
  CHECK(c.stats().rate_limited == 1);
  // 31 s later the old connections are out of the window; the kind may be saved again.
  c.on_event(event(t + 31'000'000, "a", "10.0.0.5:40005", lock_event_kind::anomaly, anomaly_kind::expired_while_held));
  REQUIRE(saves.size() == 3);
  REQUIRE(saves[2].connections.size() == 1);
  CHECK(saves[2].connections[0].client == ep("10.0.0.5", 40005));
  // Lock "b" had no event for longer than the window: forgotten.
  c.on_event(event(t + 62'000'000, "c", "10.0.0.6:1", lock_event_kind::acquired));
  CHECK(c.connections_of("b", t + 62'000'000).empty());
  CHECK(c.locks_tracked() <= 2);
}

TEST_CASE("lock_connections: bounded per lock and in locks", "[recorder]") {
  recording_sink next;
  lock_connections c({.window_us = 30'000'000, .min_interval_us = 1, .max_locks = 10, .max_connections_per_lock = 4},
                     next, {});
  const std::int64_t t = 1'700'000'000'000'000;
  for (int i = 0; i < 100; ++i) {
    const std::string client = "10.0.0.2:" + std::to_string(1000 + i);
    const std::string lock = "l" + std::to_string(i % 20);
    c.on_event(event(t + i, lock, client, lock_event_kind::acquired));
  }
  CHECK(c.locks_tracked() == 10);
  CHECK(c.stats().untracked_locks == 50);
  const auto conns = c.connections_of("l0", t + 100);
  REQUIRE(conns.size() == 4);
  CHECK(conns[0].client.port >= 1000 + 20);  // the least recently seen made room
  CHECK(next.locks.size() == 100);
}

TEST_CASE("rotated_file_name: tcpdump's -C and -G names", "[recorder]") {
  rotation_options o;
  o.pattern = "cap.pcap";
  CHECK(rotated_file_name(o, 0, 0) == "cap.pcap");
  CHECK(rotated_file_name(o, 0, 1) == "cap.pcap1");
  CHECK(rotated_file_name(o, 0, 12) == "cap.pcap12");
  o.pattern = "cap-%s.pcap";
  CHECK(rotated_file_name(o, 1'700'000'000'500'000, 0) == "cap-%s.pcap");  // no -G: no strftime
  o.rotate_us = 60'000'000;
  CHECK(rotated_file_name(o, 1'700'000'000'500'000, 0) == "cap-1700000000.pcap");
  CHECK(rotated_file_name(o, 1'700'000'000'500'000, 2) == "cap-1700000000.pcap2");
}

TEST_CASE("strftime_name_span_s: how long a -G name can stay the same", "[recorder]") {
  CHECK(strftime_name_span_s("fixed.pcap") == 0);
  CHECK(strftime_name_span_s("100%%-%n%t%z%Z.pcap") == 0);  // no time in any of them
  CHECK(strftime_name_span_s("cap-%s.pcap") == 1);
  CHECK(strftime_name_span_s("cap-%Y%m%d-%H%M%S.pcap") == 1);
  CHECK(strftime_name_span_s("cap-%H%M.pcap") == 60);
  CHECK(strftime_name_span_s("cap-%F-%-H.pcap") == 3600);  // glibc's flag: still hours
  CHECK(strftime_name_span_s("cap-%OH-%E3Y.pcap") == 3600);
  CHECK(strftime_name_span_s("cap-%d.pcap") == 86400);
  CHECK(strftime_name_span_s("cap-%b.pcap") == 31 * 86400);
  CHECK(strftime_name_span_s("cap-%Y.pcap") == 366 * 86400);
  CHECK(strftime_name_span_s("cap-%") == 0);  // cut short
}

TEST_CASE("rotating_pcap_writer: -C starts FILE1, FILE2… once a file is larger", "[recorder]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lockscope-rotate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  rotating_pcap_writer w({(dir / "w.pcap").string(), 3000, 0});
  const std::string f = frame_between(ep("10.0.0.2", 1), ep("10.0.0.1", 6379), 946);  // 1000-byte frames
  for (int i = 0; i < 10; ++i) {
    captured_packet p;
    p.ts_us = 1'700'000'000'000'000 + i;
    p.link_type = link_type::en10mb;
    p.data = f;
    p.wire_length = static_cast<std::uint32_t>(f.size());
    REQUIRE(w.write(p, p.ts_us).empty());
  }
  REQUIRE(w.close().empty());
  // 24 + 3 × 1016 = 3072 > 3000: a file holds 3 packets, the 4th goes to the next.
  CHECK(w.files() == 4);
  CHECK(std::filesystem::file_size(dir / "w.pcap") == 24 + 3 * 1016);
  CHECK(std::filesystem::file_size(dir / "w.pcap1") == 24 + 3 * 1016);
  CHECK(std::filesystem::file_size(dir / "w.pcap2") == 24 + 3 * 1016);
  CHECK(std::filesystem::file_size(dir / "w.pcap3") == 24 + 1016);
  // Read back by the analyzer's own reader: every packet, in order.
  offline_capture back({(dir / "w.pcap").string(), (dir / "w.pcap1").string(), (dir / "w.pcap2").string(),
                        (dir / "w.pcap3").string()});
  captured_packet p;
  int n = 0;
  while (back.next(p)) {
    CHECK(p.ts_us == 1'700'000'000'000'000 + n);
    CHECK(p.data == f);
    ++n;
  }
  CHECK(n == 10);
  std::filesystem::remove_all(dir);
}

TEST_CASE("replay_capture: the clock follows the packets, never past the next one", "[recorder]") {
  const std::string seed = std::string(LOCKSCOPE_CAPTURES_DIR) + "/seed-redisson.pcap";
  std::vector<std::int64_t> times;
  {
    offline_capture files({seed});
    captured_packet p;
    while (files.next(p)) times.push_back(p.ts_us);
  }
  REQUIRE(times.size() > 10);
  SECTION("as fast as possible: the clock is each packet's time") {
    replay_capture r({seed}, 0);
    CHECK(r.now_us() == times.front());
    captured_packet p;
    std::size_t i = 0;
    while (r.next(p) == packet_source::result::packet) {
      REQUIRE(i < times.size());
      CHECK(p.ts_us == times[i]);
      CHECK(r.now_us() == times[i]);
      ++i;
    }
    CHECK(i == times.size());
    CHECK(r.stats().received == times.size());
  }
  SECTION("paced: waits between packets advance the clock, up to the next packet") {
    // The seed spans about 3 s; at 20× it takes about 150 ms of waits in 10 ms steps.
    replay_capture r({seed}, 20, {}, {}, std::chrono::milliseconds(10));
    captured_packet p;
    std::size_t i = 0, timeouts = 0;
    std::int64_t last = r.now_us();
    for (;;) {
      const auto res = r.next(p);
      if (res == packet_source::result::end) break;
      CHECK(r.now_us() >= last);
      last = r.now_us();
      if (res == packet_source::result::timeout) {
        ++timeouts;
        REQUIRE(i < times.size());
        CHECK(r.now_us() <= times[i]);
        continue;
      }
      CHECK(p.ts_us == times[i]);
      ++i;
    }
    CHECK(i == times.size());
    CHECK(timeouts >= 5);
  }
}
