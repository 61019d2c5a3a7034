// `lockscope analyze -i lo --metrics-listen` against a real redis-server while real
// clients contend (`lockscope lock` processes and redis-py's Lock from Debian's
// python3-redis): /metrics is scraped while it runs and at the end, checked against the
// JSONL the same analyzer printed and against the clients' own counts, and linted by
// `promtool check metrics`. Also: 404, HEAD, a stalled scraper, a busy port, and every
// lockscope_ metric docs/grafana-dashboard.json queries existing in a real scrape.
// Needs CAP_NET_RAW (skipped without it), redis-server, and promtool.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "child_process.hpp"
#include "loopback_socket.hpp"
#include "metrics_text.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using lockscope::timeline_test::connect_to;
using lockscope::timeline_test::free_port;
using lockscope::timeline_test::read_more;

struct http_response {
  int status = 0;
  std::string head;
  std::string body;
};

// One request on a fresh connection (closed by the server or after 5 s); status 0: no answer.
http_response http(std::uint16_t port, const std::string& request) {
  http_response r;
  const int s = connect_to(port);
  if (s < 0) return r;
  ::send(s, request.data(), request.size(), MSG_NOSIGNAL);
  std::string all;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < end) {
    if (!read_more(s, all)) break;
  }
  ::close(s);
  const auto split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.head = all.substr(0, split);
  r.body = all.substr(split + 4);
  return r;
}

http_response scrape(std::uint16_t port) {
  return http(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

using process = lockscope::timeline_test::child;
using lockscope::timeline_test::spawn;

// Per lock, what the JSONL says the metrics must show.
struct expected {
  double acquisitions = 0, contended = 0, expired = 0, waits = 0, wait_ms = 0, holds = 0;
  std::map<std::string, double> anomalies;
};

std::map<std::string, expected> from_jsonl(const std::string& text) {
  std::map<std::string, expected> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    const auto v = boost::json::parse(text.substr(start, nl - start)).as_object();
    const std::string event(v.at("event").as_string());
    expected& e = out[std::string(v.at("lock").as_string())];
    if (event == "acquired") {
      ++e.acquisitions;
      if (v.contains("wait_ms")) {
        ++e.waits;
        e.wait_ms += v.at("wait_ms").to_number<double>();
      }
    }
    if (event == "contended") ++e.contended;
    if (event == "expired") ++e.expired;
    if ((event == "released" || event == "expired" || event == "force_released") && v.contains("held_ms")) ++e.holds;
    if (event == "anomaly") ++e.anomalies[std::string(v.at("kind").as_string())];
  }
  return out;
}

// The part of a scrape the locks make (not the capture's counters, which move with every packet).
std::string lock_lines(const std::string& body) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = body.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = body.substr(start, nl - start);
    if (line.rfind("lockscope_lock_", 0) == 0) out += line + "\n";
  }
  return out;
}

void check_lock(const std::map<std::string, double>& s, const std::string& label, const expected& e) {
  INFO("lock=" << label);
  const auto get = [&](const std::string& name, const std::string& extra = "") {
    return lockscope::test::sample_or(s, "lockscope_" + name + "{lock=\"" + label + "\"" + extra + "}", -1);
  };
  CHECK(get("lock_acquisitions_total") == e.acquisitions);
  CHECK(get("lock_contended_total") == e.contended);
  CHECK(get("lock_expired_total") == e.expired);
  CHECK(get("lock_wait_seconds_count") == e.waits);
  CHECK(get("lock_wait_seconds_bucket", ",le=\"+Inf\"") == e.waits);
  CHECK(get("lock_wait_seconds_sum") == Approx(e.wait_ms / 1000).margin(1e-5));
  CHECK(get("lock_hold_seconds_count") == e.holds);
  for (const auto& [kind, n] : e.anomalies) {
    INFO("kind=" << kind);
    CHECK(get("lock_anomalies_total", ",kind=\"" + kind + "\"") == n);
  }
  // No anomaly kind the JSONL lacks.
  const std::string prefix = "lockscope_lock_anomalies_total{lock=\"" + label + "\",kind=\"";
  for (const auto& [series, value] : s) {
    if (series.rfind(prefix, 0) != 0) continue;
    const std::string kind = series.substr(prefix.size(), series.size() - prefix.size() - 2);
    INFO(series);
    CHECK(e.anomalies.count(kind) == 1);
  }
}

constexpr const char* python_clients = R"(
import json, sys, threading, time
import redis
port = int(sys.argv[1])
acquired = {"py:shared": 0, "py:expire": 0}
guard = threading.Lock()
def worker():
    r = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(3):
        lock = r.lock("py:shared", timeout=5, sleep=0.02, blocking_timeout=20)
        if lock.acquire():
            with guard:
                acquired["py:shared"] += 1
            time.sleep(0.05)
            lock.release()
threads = [threading.Thread(target=worker) for _ in range(3)]
for t in threads: t.start()
r = redis.Redis(host="127.0.0.1", port=port)
lock = r.lock("py:expire", timeout=0.3)
if lock.acquire():
    acquired["py:expire"] += 1
time.sleep(0.6)  # the lease runs out while it is held
try:
    lock.release()
except redis.exceptions.LockNotOwnedError:
    pass
for t in threads: t.join()
print(json.dumps(acquired))
)";

struct live_fixture {
  std::string cli = LOCKSCOPE_CLI_PATH;
  fs::path dir;
  bool usable = false;

  live_fixture() {
    if (cli.empty() || !fs::exists(cli) || !lockscope::test::redis_server::available()) {
      WARN("needs the lockscope CLI and redis-server");
      return;
    }
    if (::geteuid() != 0) {
      WARN("live capture needs CAP_NET_RAW: skipped");
      return;
    }
    REQUIRE(lockscope::test::promtool_available());  // Debian's prometheus package: scripts/install-deps
    dir = fs::temp_directory_path() / ("lockscope-metrics-live-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    usable = true;
  }
  ~live_fixture() {
    if (!dir.empty()) fs::remove_all(dir);
  }

  // Starts the analyzer and waits until /metrics answers.
  process analyze(std::uint16_t redis_port, std::uint16_t metrics_port, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {cli,      "analyze", "-i",
                                     "lo",     "--port",  std::to_string(redis_port),
                                     "--format", "jsonl", "--metrics-listen",
                                     "127.0.0.1:" + std::to_string(metrics_port)};
    args.insert(args.end(), extra.begin(), extra.end());
    process p = spawn(args, dir / "analyze.err");
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (scrape(metrics_port).status != 200) {
      INFO(p.err());
      REQUIRE(std::chrono::steady_clock::now() < end);
      std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(300ms);  // the capture is open too
    return p;
  }
};

}  // namespace

TEST_CASE("metrics live: a scrape agrees with the JSONL and the clients, and passes promtool", "[live][metrics]") {
  live_fixture f;
  if (!f.usable) return;
  lockscope::test::redis_server server;
  const std::uint16_t mport = free_port();
  // Three locks, two labels: the third lock's events are the _other series.
  process analyze = f.analyze(server.port(), mport, {"--metrics-max-locks", "2", "--max-locks", "1000"});

  const std::string redis_url = "redis://127.0.0.1:" + std::to_string(server.port());
  std::vector<process> lockers;
  for (int i = 0; i < 4; ++i) {
    lockers.push_back(spawn({f.cli, "lock", "jobs:a", "--redis", redis_url, "--wait", "30s", "--", "/bin/sleep", "0.3"},
                            f.dir / ("lock" + std::to_string(i) + ".err")));
  }
  const fs::path script = f.dir / "clients.py";
  std::ofstream(script) << python_clients;
  process python = spawn({"/usr/bin/python3", script.string(), std::to_string(server.port())}, f.dir / "python.err");

  // While they contend.
  std::this_thread::sleep_for(400ms);
  const http_response during = scrape(mport);
  REQUIRE(during.status == 200);
  CHECK(during.head.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  {
    const auto lint = lockscope::test::promtool_check(during.body);
    INFO(during.body << lint.output);
    CHECK(lint.status == 0);
  }

  for (auto& l : lockers) {
    INFO(l.err());
    CHECK(l.wait() == 0);  // each acquired jobs:a once
    ::close(l.out);
  }
  INFO(python.err());
  REQUIRE(python.wait() == 0);
  python.read_available();
  ::close(python.out);
  const auto truth = boost::json::parse(python.text).as_object();
  CHECK(truth.at("py:shared").as_int64() == 9);
  CHECK(truth.at("py:expire").as_int64() == 1);

  // Settle: the same lock lines twice, 300 ms apart (past the 100 ms snapshot reuse): the
  // locks' events are all in. Live JSONL is written in 64 KiB chunks, so the analyzer is
  // then stopped and its whole output compared with that last scrape.
  std::this_thread::sleep_for(1s);
  http_response last;
  for (int attempt = 0;; ++attempt) {
    REQUIRE(attempt < 20);
    const http_response a = scrape(mport);
    std::this_thread::sleep_for(300ms);
    analyze.read_available();  // never let its stdout pipe fill up
    last = scrape(mport);
    REQUIRE(a.status == 200);
    REQUIRE(last.status == 200);
    if (lock_lines(a.body) == lock_lines(last.body)) break;
  }
  ::kill(analyze.pid, SIGINT);
  const int analyze_status = analyze.wait();
  analyze.read_available();
  ::close(analyze.out);
  INFO(analyze.err());
  CHECK(analyze_status == 0);
  const std::string jsonl = analyze.text;
  std::vector<std::string> duplicates;
  const auto s = lockscope::test::parse_samples(last.body, &duplicates);
  CHECK(duplicates.empty());
  const auto lint = lockscope::test::promtool_check(last.body);
  INFO(last.body << lint.output);
  CHECK(lint.status == 0);

  const auto per_lock = from_jsonl(jsonl);
  REQUIRE(per_lock.size() == 3);
  std::vector<std::string> unlabelled;
  for (const auto& [lock, e] : per_lock) {
    if (s.count("lockscope_lock_acquisitions_total{lock=\"" + lock + "\"}") == 1) check_lock(s, lock, e);
    else unlabelled.push_back(lock);
  }
  REQUIRE(unlabelled.size() == 1);
  check_lock(s, "_other", per_lock.at(unlabelled.front()));
  // Against the clients themselves, not only the analyzer's own JSONL.
  CHECK(per_lock.at("jobs:a").acquisitions == 4);
  CHECK(per_lock.at("jobs:a").contended >= 1);  // they did contend (each waiter retries after its wake-up)
  CHECK(per_lock.at("py:shared").contended >= 1);
  CHECK(per_lock.at("py:shared").acquisitions == 9);
  CHECK(per_lock.at("py:expire").expired == 1);
  CHECK(per_lock.at("py:expire").anomalies.count("expired_while_held") == 1);
  // The capture's own counters moved.
  CHECK(lockscope::test::sample_or(s, "lockscope_capture_packets_total") > 100);
  CHECK(lockscope::test::sample_or(s, "lockscope_exchanges_total") > 20);
  CHECK(s.count("lockscope_capture_kernel_drops_total") == 1);
  CHECK(lockscope::test::sample_or(s, "lockscope_process_resident_memory_bytes") > 1e6);
  CHECK(lockscope::test::sample_or(s, "lockscope_store_entries{store=\"locks\"}") == 3);
  CHECK(lockscope::test::sample_or(s, "lockscope_store_capacity{store=\"locks\"}") == 1000);
  CHECK(lockscope::test::sample_or(s, "lockscope_locks_forgotten_total", -1) == 0);
  CHECK(lockscope::test::sample_or(s, "lockscope_store_entries{store=\"labelled_locks\"}") == 2);
  CHECK(lockscope::test::sample_or(s, "lockscope_store_entries{store=\"shas\"}", -1) >= 0);
  // Little buffered at the end, and nothing given back under the default cap.
  CHECK(lockscope::test::sample_or(s, "lockscope_buffered_bytes", -1) >= 0);
  CHECK(lockscope::test::sample_or(s, "lockscope_buffered_bytes", -1) < 1 << 20);
  CHECK(lockscope::test::sample_or(s, "lockscope_buffer_sheds_total", -1) == 0);
}

TEST_CASE("metrics live: 404, HEAD, 405, oversized and stalled requests, and a busy port is an error", "[live][metrics]") {
  live_fixture f;
  if (!f.usable) return;
  lockscope::test::redis_server server;
  const std::uint16_t mport = free_port();
  process analyze = f.analyze(server.port(), mport);

  // A scraper that connects and stalls mid-request holds only its own connection.
  const int stalled = connect_to(mport);
  REQUIRE(stalled >= 0);
  ::send(stalled, "GET /met", 8, MSG_NOSIGNAL);

  CHECK(http(mport, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status == 404);
  CHECK(http(mport, "GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n").status == 404);
  CHECK(http(mport, "GET /metrics?collect=all HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status == 200);
  CHECK(http(mport, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").status == 405);
  const http_response get = scrape(mport);
  const http_response head = http(mport, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  REQUIRE(get.status == 200);
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.head.find("Content-Length: ") != std::string::npos);
  CHECK(get.body.find("# TYPE lockscope_lock_wait_seconds histogram") != std::string::npos);
  const std::string huge = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(20000, 'a') + "\r\n\r\n";
  CHECK(http(mport, huge).status == 400);

  // The port is taken: a second analyzer says which address and exits before capturing.
  process second = spawn({f.cli, "analyze", "-i", "lo", "--port", std::to_string(server.port()), "--metrics-listen",
                          "127.0.0.1:" + std::to_string(mport)},
                         f.dir / "second.err");
  CHECK(second.wait() == 2);
  const std::string err = second.err();
  CHECK(err.find("--metrics-listen 127.0.0.1:" + std::to_string(mport) + ": cannot listen") != std::string::npos);
  CHECK(err.find("listening on") == std::string::npos);  // no capture was opened
  ::close(second.out);

  ::close(stalled);
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
}

TEST_CASE("metrics live: every lockscope_ metric the Grafana dashboard queries exists", "[live][metrics]") {
  live_fixture f;
  if (!f.usable) return;
  std::ifstream in(fs::path(LOCKSCOPE_SOURCE_DIR) / "docs" / "grafana-dashboard.json");
  REQUIRE(in);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::set<std::string> queried;
  const auto walk = [&](const auto& self, const boost::json::value& v) -> void {
    if (v.is_object()) {
      for (const auto& [key, value] : v.as_object()) {
        if ((key == "expr" || key == "query" || key == "definition") && value.is_string()) {
          const std::string expr(value.as_string());
          static const std::regex name("lockscope_[a-zA-Z0-9_]+");
          for (std::sregex_iterator it(expr.begin(), expr.end(), name), end; it != end; ++it) queried.insert(it->str());
        } else {
          self(self, value);
        }
      }
    } else if (v.is_array()) {
      for (const auto& e : v.as_array()) self(self, e);
    }
  };
  walk(walk, boost::json::parse(text));
  REQUIRE(queried.size() >= 6);

  lockscope::test::redis_server server;
  const std::uint16_t mport = free_port();
  process analyze = f.analyze(server.port(), mport);
  // One contended lock with an expiry, so every family has samples.
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
  process holder = spawn({f.cli, "lock", "dash", "--redis", url, "--", "/bin/sleep", "0.3"}, f.dir / "h.err");
  std::this_thread::sleep_for(100ms);
  process waiter = spawn({f.cli, "lock", "dash", "--redis", url, "--", "/bin/true"}, f.dir / "w.err");
  CHECK(holder.wait() == 0);
  CHECK(waiter.wait() == 0);
  lockscope::test::resp_connection c("127.0.0.1", server.port());
  c.command_argv({"SETNX", "dash:setnx", "1"});  // non_atomic_acquire: an anomaly sample
  std::this_thread::sleep_for(300ms);
  const http_response r = scrape(mport);
  REQUIRE(r.status == 200);
  std::set<std::string> names;  // metric names with samples, histograms' suffixes included
  for (const auto& [series, value] : lockscope::test::parse_samples(r.body)) {
    names.insert(series.substr(0, series.find('{')));
  }
  for (const std::string& q : queried) {
    INFO("the dashboard queries " << q);
    CHECK(names.count(q) == 1);
  }
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
  ::close(holder.out);
  ::close(waiter.out);
}

TEST_CASE("metrics live: with port 0 the port the kernel chose is said at the start", "[live][metrics]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !fs::exists(cli)) {
    WARN("needs the lockscope CLI");
    return;
  }
  // A replay is the live loop without a capture (no privilege needed); at its capture's
  // speed it runs for seconds, long enough to be scraped.
  const fs::path err = fs::temp_directory_path() / ("lockscope-metrics-port0-" + std::to_string(::getpid()) + ".err");
  process analyze = spawn({cli, "analyze", "--summary", "--replay", std::string(LOCKSCOPE_SOURCE_DIR) +
                           "/captures/seed-redisson.pcap", "--metrics-listen", "127.0.0.1:0"}, err);
  const std::regex said("serving metrics at http://127\\.0\\.0\\.1:([0-9]+)/metrics\n");
  std::smatch m;
  std::string text;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!std::regex_search(text = analyze.err(), m, said) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  INFO(text);
  REQUIRE(m.size() == 2);
  const int port = std::stoi(m[1]);
  CHECK(port > 0);
  const http_response r = scrape(static_cast<std::uint16_t>(port));
  CHECK(r.status == 200);
  CHECK(r.body.find("lockscope_capture_packets_total") != std::string::npos);
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
  fs::remove(err);
}
