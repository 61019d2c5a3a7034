// The metrics server's two threads in one process: scrapers on their own threads while
// the capture thread counts lock events and polls, as `analyze -i` does. Built into
// make test, and into CI's TSan run (live_thread_tests), which fails on any data race
// between the HTTP thread and the capture thread. The CLI's own scrape tests
// (test_metrics_live.cpp) run the lockscope process, which the TSan preset does not build.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "loopback_socket.hpp"
#include "lockscope/live/metrics_server.hpp"

using namespace std::chrono_literals;
namespace locks = lockscope::locks;

using namespace lockscope::timeline_test;  // loopback sockets

namespace {

// Reads one response (Content-Length framed) from `s`; "" when none comes within 5 s.
std::string read_response(int s) {
  std::string all;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < end) {
    const auto split = all.find("\r\n\r\n");
    if (split != std::string::npos) {
      const auto at = all.find("Content-Length: ");
      if (at != std::string::npos && at < split) {
        const std::size_t length = std::stoul(all.substr(at + 16));
        if (all.size() >= split + 4 + length) return all.substr(0, split + 4 + length);
      }
    }
    if (!read_more(s, all)) break;
  }
  return {};
}

// The value of `lockscope_lock_acquisitions_total{lock="L"}` in a 200 response of the
// whole exposition (0 before L's first event); -1 for anything else.
long acquisitions_of_l(const std::string& response) {
  if (response.rfind("HTTP/1.1 200", 0) != 0) return -1;
  if (response.find("\nlockscope_capture_packets_total ") == std::string::npos) return -1;
  const std::string series = "lockscope_lock_acquisitions_total{lock=\"L\"} ";
  const auto at = response.find(series);
  if (at == std::string::npos) return 0;
  return std::stol(response.substr(at + series.size()));
}

locks::lock_event acquired(std::string_view lock, std::int64_t ts_us) {
  locks::lock_event e;
  e.event = locks::lock_event_kind::acquired;
  e.lock = lock;
  e.ts_us = ts_us;
  e.wait_us = 150;
  return e;
}

}  // namespace

TEST_CASE("metrics server: scrapes on four threads while the capture thread counts and renders", "[metrics][threads]") {
  const std::uint16_t port = free_port();
  lockscope::live::metrics_server server("127.0.0.1:" + std::to_string(port), lockscope::live::metrics_options{});
  std::uint64_t packets = 0;  // the capture thread's, read by gather on that thread
  server.attach([&packets] {
    lockscope::live::capture_gauges g;
    g.packets = packets;
    return g;
  });

  std::atomic<long> counted{0};  // acquisitions of L handed to the metrics so far
  std::atomic<bool> stop{false};
  struct scraper_result {
    int scrapes = 0;
    int bad = 0;
    int went_back = 0;  // a scrape showing fewer acquisitions than an earlier one
    int ahead = 0;      // a scrape showing more than had been counted
  };
  std::vector<scraper_result> results(4);
  std::vector<std::thread> scrapers;
  for (std::size_t t = 0; t < results.size(); ++t) {
    scrapers.emplace_back([&, t] {
      scraper_result& r = results[t];
      const bool keep_alive = t % 2 == 1;  // half reuse one connection, half connect per scrape
      int s = -1;
      long last = 0;
      while (!stop.load()) {
        if (s < 0) s = connect_to(port);
        if (s < 0) {
          ++r.bad;
          std::this_thread::sleep_for(10ms);
          continue;
        }
        const std::string request = std::string("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n") +
                                    (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
        ::send(s, request.data(), request.size(), MSG_NOSIGNAL);
        const std::string response = read_response(s);
        const long ceiling = counted.load();
        const long value = acquisitions_of_l(response);
        ++r.scrapes;
        if (value < 0) {
          ++r.bad;
        } else {
          if (value < last) ++r.went_back;
          if (value > ceiling) ++r.ahead;
          last = value;
        }
        if (!keep_alive || response.empty()) {
          ::close(s);
          s = -1;
        }
      }
      if (s >= 0) ::close(s);
    });
  }

  // The capture thread: L and a changing set of other locks (labels come and go), a
  // poll every turn, for about 1.5 s.
  const auto until = std::chrono::steady_clock::now() + 1500ms;
  std::int64_t now_us = 1'000'000;
  long i = 0;
  for (; std::chrono::steady_clock::now() < until; ++i) {
    now_us += 1000;
    ++packets;
    server.metrics().on_event(acquired("L", now_us));
    server.metrics().on_event(acquired("other:" + std::to_string(i % 300), now_us));
    counted.store(i + 1);
    server.poll();
    std::this_thread::sleep_for(200us);
  }
  stop.store(true);
  // Scrapers waiting for a snapshot are answered within 500 ms (the previous one, at worst).
  const auto drain_until = std::chrono::steady_clock::now() + 1s;
  while (std::chrono::steady_clock::now() < drain_until) {
    server.poll();
    std::this_thread::sleep_for(1ms);
  }
  for (auto& t : scrapers) t.join();

  int total = 0;
  for (const scraper_result& r : results) {
    INFO("scraper: " << r.scrapes << " scrapes, " << r.bad << " bad");
    CHECK(r.scrapes >= 10);
    CHECK(r.bad == 0);
    CHECK(r.went_back == 0);
    CHECK(r.ahead == 0);
    total += r.scrapes;
  }
  CHECK(total >= 40);

  // Once the capture thread has rendered again, a scrape shows every acquisition.
  std::this_thread::sleep_for(150ms);  // past the 100 ms a snapshot is served as is
  std::string last;  // the scraping thread's until `answered`
  std::atomic<bool> answered{false};
  std::thread final_scrape([&] {
    const int s = connect_to(port);
    if (s >= 0) {
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
      ::send(s, request.data(), request.size(), MSG_NOSIGNAL);
      last = read_response(s);
      ::close(s);
    }
    answered.store(true);
  });
  const auto final_until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < final_until && !answered.load()) {
    server.poll();
    std::this_thread::sleep_for(1ms);
  }
  final_scrape.join();
  CHECK(acquisitions_of_l(last) == i);
  CHECK(last.find("lockscope_capture_packets_total " + std::to_string(packets)) != std::string::npos);
}
