// lock_bench: the lock client against a redis-server it starts itself, next to the
// redis-benchmark anchors measured in the same run on the same server. Prints one
// JSON object on stdout (progress goes to stderr).
//
//   pair_latency_us_p50/p99   uncontended lock()+unlock() on one connection, one after
//                             the other, driven from the client's I/O thread (async)
//   throughput_locks_per_s    lock+unlock of many distinct locks through one client,
//                             async and pipelined
//   handoff_us_p50/p99        unlock issued -> next waiter's lock() completes, with 4
//                             contenders (4 clients) on one lock
//   fair_handoff_us_p50/p99   the same on a fair lock (4 queued clients)
//
// Options: --quick (shorter runs), --redis-benchmark PATH. Diagnostics against a
// server already running on PORT: --pair-only PORT, --handoff-only PORT, --fair-handoff-only PORT.
// --tls: instead, the pair latency over TLS against plain TCP on one server that listens
// on both (certificates made by tests/support/scripts/make-test-certs), with
// redis-benchmark --tls -c 1 as the peer figure.
// --redlock-only starts three servers: the async pair latency on each alone, then a
// RedLock (try_lock(): one round sent to all three at once, unlock everywhere) over
// the three; then the same with hiredis and no lock logic (the floor no client can beat).
// --cluster-only: throughput_locks_per_s (256 chains, one client) on one redis-server,
// then on a Redis Cluster of 3 masters (no replicas) started by the bench, through the
// cluster client (redis-cluster://), in the same run.
// --semaphore-only: the semaphore's acquire+release pair against redis-benchmark -c 1's
// EVAL of the same two scripts in the same run (target: 1.15 x two round trips).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <hiredis/hiredis.h>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/semaphore.hpp"
#include "lockscope/lock/multi_lock.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/redis_cluster.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/tls_certificates.hpp"

namespace asio = boost::asio;
namespace lock = lockscope::lock;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr const char* bench_owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(index, v.size() - 1)];
}

// The machine's load, printed with every result: these figures move with it.
double load_average_1m() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

double micros(steady::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct rb_result {
  double rps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  bool ok = false;
};

// Runs redis-benchmark on the acquire EVAL over random lock names and parses --csv.
// `tls_options`: redis-benchmark's --tls flags, or empty.
// `eval_args`: another EVAL's script and arguments (quoted for sh) instead.
rb_result redis_benchmark(const std::string& binary, std::uint16_t port, int clients, int pipeline, int requests,
                          const std::string& tls_options = {}, const std::string& eval_args = {}) {
  const std::string args = eval_args.empty()
                               ? fmt::format("\"{}\" 1 lock:__rand_int__ 30000 {}", lock::scripts::acquire, bench_owner)
                               : eval_args;
  const std::string command =
      fmt::format("{} -h 127.0.0.1 -p {} {} -c {} -P {} -n {} -r 100000 --csv EVAL {} 2>/dev/null", binary, port,
                  tls_options, clients, pipeline, requests, args);
  rb_result r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  std::string out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, p) != nullptr) out += buffer;
  ::pclose(p);
  // The last line: "EVAL ...","rps","avg","min","p50","p95","p99","max"
  const std::size_t last = out.rfind("\",\"");
  if (last == std::string::npos) return r;
  std::size_t start = out.rfind("\"EVAL");
  if (start == std::string::npos) return r;
  // Fields after the test name.
  std::string tail = out.substr(out.find("\",\"", start) + 3);
  std::vector<double> fields;
  std::stringstream s(tail);
  std::string field;
  while (std::getline(s, field, ',')) {
    field.erase(std::remove(field.begin(), field.end(), '"'), field.end());
    try {
      fields.push_back(std::stod(field));
    } catch (...) {
      break;
    }
  }
  if (fields.size() < 7) return r;
  r.rps = fields[0];
  r.p50_ms = fields[3];
  r.p99_ms = fields[5];
  r.ok = true;
  return r;
}

lock::client_config config_for(const lockscope::test::redis_server& server) {
  lock::client_config c;
  c.host = server.host();
  c.port = server.port();
  c.command_timeout = 10s;
  // The scripts the hiredis floor and redis-benchmark send (the seeds' 3.16 form): like
  // against like. The 3.24+ dialects add the unlock latch (a SET in the script, a DEL after).
  c.redisson_dialect = "3.16.8";
  return c;
}

// Runs `pair(done)` warmup + samples times, each started from the previous one's `done`
// on `executor` (an I/O thread: no hand-off to a waiting thread); the latencies in µs.
template <class Executor>
std::vector<double> chained_latencies(const Executor& executor, int warmup, int samples,
                                      const std::function<void(std::function<void()> done)>& pair) {
  struct chain {
    std::vector<double> result;
    int remaining;
    int samples;
    std::promise<void> finished;
    std::function<void()> next;
  } c{{}, warmup + samples, samples, {}, {}};
  c.result.reserve(static_cast<std::size_t>(samples));
  c.next = [&c, &pair] {
    if (c.remaining-- == 0) {
      c.finished.set_value();
      return;
    }
    // A pointer and a time point: small enough for std::function's inline storage, so
    // the chain allocates nothing per pair.
    pair([chain = &c, start = steady::now()] {
      if (chain->remaining < chain->samples) chain->result.push_back(micros(steady::now() - start));
      chain->next();
    });
  };
  asio::dispatch(executor, [&c] { c.next(); });
  c.finished.get_future().wait();
  return std::move(c.result);
}

// Sequential lock+unlock pairs chained in callbacks on the client's I/O thread.
std::vector<double> pair_latencies(lock::client& client, int warmup, int samples) {
  auto l = client.get_lock("bench:pair", bench_owner);
  return chained_latencies(client.get_executor(), warmup, samples, [&](std::function<void()> done) {
    l.async_lock([&, done](boost::system::error_code ec) {
      if (ec) throw boost::system::system_error(ec);
      l.async_unlock([done](boost::system::error_code uec) {
        if (uec) throw boost::system::system_error(uec);
        done();
      });
    });
  });
}

// try_lock() + unlock() pairs of a RedLock, chained the same way on the first client's
// I/O thread (where the RedLock's completions run), so that both figures leave out the
// hand-off to a waiting thread.
std::vector<double> redlock_pair_latencies(lock::red_lock& red, const lock::client& first, int warmup, int samples) {
  return chained_latencies(first.get_executor(), warmup, samples, [&](std::function<void()> done) {
    red.async_try_lock([&, done](boost::system::error_code ec, bool acquired) {
      if (ec || !acquired) throw std::runtime_error("redlock not acquired");
      red.async_unlock([done](boost::system::error_code uec) {
        if (uec) throw boost::system::system_error(uec);
        done();
      });
    });
  });
}

// The floor under the RedLock ratio: hiredis with blocking contexts, no lock logic, the
// same acquire and unlock scripts by EVALSHA. A "pair" on one server is acquire then
// unlock; on several, each command is written to every server before any reply is read,
// so the servers work at once, as a RedLock round does. What this ratio cannot beat on a
// machine, the client cannot either.
class hiredis_floor {
 public:
  explicit hiredis_floor(const std::vector<std::unique_ptr<lockscope::test::redis_server>>& servers) {
    for (const auto& s : servers) {
      redisContext* c = redisConnect(s->host().c_str(), s->port());
      if (c == nullptr || c->err) throw std::runtime_error("hiredis: cannot connect");
      contexts_.push_back(c);
      for (auto kind : {lock::script_kind::acquire, lock::script_kind::unlock}) {
        const auto& info = lock::script(kind);
        command(c, {"SCRIPT", "LOAD", std::string(info.text)});
      }
    }
  }
  ~hiredis_floor() {
    for (auto* c : contexts_) redisFree(c);
  }
  hiredis_floor(const hiredis_floor&) = delete;
  hiredis_floor& operator=(const hiredis_floor&) = delete;

  // Pairs on the servers [first, last).
  std::vector<double> pairs(std::size_t first, std::size_t last, int warmup, int samples) {
    const std::string acquire_sha(lock::script(lock::script_kind::acquire).sha1);
    const std::string unlock_sha(lock::script(lock::script_kind::unlock).sha1);
    const std::vector<std::string> acquire = {"EVALSHA", acquire_sha, "1", "bench:floor", "30000", bench_owner};
    const std::vector<std::string> unlock = {"EVALSHA", unlock_sha, "2", "bench:floor",
                                             "redisson_lock__channel:{bench:floor}", "0", "30000", bench_owner};
    std::vector<double> result;
    for (int i = 0; i < warmup + samples; ++i) {
      const auto start = steady::now();
      round(first, last, acquire);
      round(first, last, unlock);
      if (i >= warmup) result.push_back(micros(steady::now() - start));
    }
    return result;
  }

 private:
  std::vector<redisContext*> contexts_;

  static void append(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) {
      throw std::runtime_error("hiredis: cannot append");
    }
  }
  static void read_reply(redisContext* c) {
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) throw std::runtime_error("hiredis: no reply");
    const bool error = static_cast<redisReply*>(reply)->type == REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    if (error) throw std::runtime_error("hiredis: error reply");
  }
  static void command(redisContext* c, const std::vector<std::string>& args) {
    append(c, args);
    read_reply(c);
  }
  void round(std::size_t first, std::size_t last, const std::vector<std::string>& args) {
    for (std::size_t k = first; k < last; ++k) {
      append(contexts_[k], args);
      int done = 0;
      while (done == 0) {
        if (redisBufferWrite(contexts_[k], &done) != REDIS_OK) throw std::runtime_error("hiredis: write failed");
      }
    }
    for (std::size_t k = first; k < last; ++k) read_reply(contexts_[k]);
  }
};

// The same through the blocking API from another thread (two thread handoffs per call).
std::vector<double> sync_pair_latencies(lock::client& client, int samples) {
  auto l = client.get_lock("bench:syncpair");
  std::vector<double> result;
  for (int i = 0; i < samples; ++i) {
    const auto start = steady::now();
    l.lock();
    l.unlock_or_throw();
    result.push_back(micros(steady::now() - start));
  }
  return result;
}

// `concurrency` chains of lock+unlock on distinct locks, for `duration`.
double throughput(lock::client& client, int concurrency, std::chrono::milliseconds duration) {
  struct state {
    std::atomic<bool> stop{false};
    std::atomic<long> pairs{0};
    std::atomic<int> running{0};
    std::promise<void> all_done;
  };
  auto st = std::make_shared<state>();
  std::vector<lock::rlock> locks;
  for (int i = 0; i < concurrency; ++i) locks.push_back(client.get_lock(fmt::format("bench:many:{}", i), bench_owner));
  st->running = concurrency;
  std::function<void(std::size_t)> chain = [&, st](std::size_t i) {
    if (st->stop) {
      if (--st->running == 0) st->all_done.set_value();
      return;
    }
    locks[i].async_lock([&, st, i](boost::system::error_code ec) {
      if (ec) throw boost::system::system_error(ec);
      locks[i].async_unlock([&, st, i](boost::system::error_code uec) {
        if (uec) throw boost::system::system_error(uec);
        st->pairs.fetch_add(1, std::memory_order_relaxed);
        chain(i);
      });
    });
  };
  asio::dispatch(client.get_executor(), [&] {
    for (std::size_t i = 0; i < locks.size(); ++i) chain(i);
  });
  std::this_thread::sleep_for(300ms);  // warm-up
  const long before = st->pairs;
  const auto start = steady::now();
  std::this_thread::sleep_for(duration);
  const long after = st->pairs;
  const double seconds = std::chrono::duration<double>(steady::now() - start).count();
  st->stop = true;
  st->all_done.get_future().wait();
  return static_cast<double>(after - before) / seconds;
}

// Four clients contend for one lock on one I/O thread. Each holds it ~100 us, unlocks,
// then thinks 200-400 us before trying again, so that a waiter (woken by the unlock
// message) takes over. Handoff = unlock issued -> next holder's lock completes.
// `fair`: the same with Redisson's fair lock, whose waiters queue and are woken one at
// a time (the queue's head, on its own channel).
std::vector<double> handoffs(const lock::client_config& config, int samples, bool fair = false) {
  asio::io_context io;
  std::vector<std::unique_ptr<lock::client>> clients;
  std::vector<lock::rlock> locks;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<lock::client>(io, config));
    const std::string owner = fmt::format("contender-{}", i);
    locks.push_back(fair ? clients.back()->get_fair_lock("bench:fair-handoff", owner)
                         : clients.back()->get_lock("bench:handoff", owner));
  }
  std::vector<double> result;
  result.reserve(static_cast<std::size_t>(samples));
  steady::time_point released{};
  int last_holder = -1;
  bool done = false;
  std::mt19937 random(7);
  std::vector<std::unique_ptr<asio::steady_timer>> timers;
  for (int i = 0; i < 4; ++i) timers.push_back(std::make_unique<asio::steady_timer>(io));
  std::function<void(int)> contend = [&](int i) {
    if (done) return;
    locks[i].async_lock([&, i](boost::system::error_code ec) {
      if (done && ec == lock::errc::shut_down) return;  // closed at the end while waiting
      if (ec) throw boost::system::system_error(ec);
      const auto now = steady::now();
      if (last_holder >= 0 && last_holder != i) result.push_back(micros(now - released));
      last_holder = i;
      if (static_cast<int>(result.size()) >= samples) done = true;
      timers[i]->expires_after(100us);
      timers[i]->async_wait([&, i](boost::system::error_code) {
        released = steady::now();
        locks[i].async_unlock([&, i](boost::system::error_code uec) {
          if (done && uec == lock::errc::shut_down) return;
          if (uec) throw boost::system::system_error(uec);
          if (done) {
            for (auto& c : clients) c->close();
            return;
          }
          timers[i]->expires_after(std::chrono::microseconds(200 + random() % 200));
          timers[i]->async_wait([&, i](boost::system::error_code) { contend(i); });
        });
      });
    });
  };
  for (int i = 0; i < 4; ++i) contend(i);
  io.run_for(120s);
  return result;
}

// How late a 100 us timer fires on an idle io_context: the machine's own wake-up
// latency, which bounds what any handoff can achieve (reported next to it).
std::vector<double> timer_lateness(int samples) {
  asio::io_context io(1);
  asio::steady_timer timer(io);
  std::vector<double> result;
  std::function<void()> next = [&] {
    if (static_cast<int>(result.size()) >= samples) return;
    const auto due = steady::now() + 100us;
    timer.expires_at(due);
    timer.async_wait([&, due](boost::system::error_code) {
      result.push_back(micros(steady::now() - due));
      next();
    });
  };
  next();
  io.run();
  return result;
}

// Pair latency over TLS and plain TCP on the same server, in alternating rounds so that
// load on the machine hits both alike.
int tls_comparison(const std::string& rb_binary, bool quick) {
  const auto& certs = lockscope::test::tls_certificates::shared();
  lockscope::test::redis_server_options options;
  options.tls = certs.server_tls();
  options.tls->plain_port_too = true;
  lockscope::test::redis_server server(std::move(options));
  const std::string rb_tls = fmt::format("--tls --cacert {}", certs.file("ca.pem"));
  fmt::print(stderr, "redis-benchmark -c 1, plain and --tls ...\n");
  const int rb_requests = quick ? 5000 : 20000;
  const rb_result rb_plain = redis_benchmark(rb_binary, server.port(), 1, 1, rb_requests);
  const rb_result rb_tls_c1 = redis_benchmark(rb_binary, server.tls_port(), 1, 1, rb_requests, rb_tls);

  auto plain_cfg = config_for(server);
  auto tls_cfg = plain_cfg;
  tls_cfg.port = server.tls_port();
  tls_cfg.tls.enabled = true;
  tls_cfg.tls.ca = certs.file("ca.pem");
  lock::client plain(plain_cfg);
  lock::client tls(tls_cfg);
  plain.connect();
  tls.connect();
  fmt::print(stderr, "pair latency, plain and TLS ...\n");
  const int rounds = 5;
  const int per_round = quick ? 600 : 4000;
  std::vector<double> plain_pairs;
  std::vector<double> tls_pairs;
  for (int r = 0; r < rounds; ++r) {
    for (double v : pair_latencies(plain, 200, per_round)) plain_pairs.push_back(v);
    for (double v : pair_latencies(tls, 200, per_round)) tls_pairs.push_back(v);
  }
  const double plain_p50 = percentile(plain_pairs, 50);
  const double tls_p50 = percentile(tls_pairs, 50);
  const double load = load_average_1m();
  fmt::print("{{\n");
  fmt::print("  \"loadavg_1m\": {:.2f},\n", load);
  fmt::print("  \"plain_pair_latency_us_p50\": {:.1f},\n", plain_p50);
  fmt::print("  \"plain_pair_latency_us_p99\": {:.1f},\n", percentile(plain_pairs, 99));
  fmt::print("  \"tls_pair_latency_us_p50\": {:.1f},\n", tls_p50);
  fmt::print("  \"tls_pair_latency_us_p99\": {:.1f},\n", percentile(tls_pairs, 99));
  fmt::print("  \"pair_samples_each\": {},\n", tls_pairs.size());
  fmt::print("  \"tls_over_plain_p50\": {:.3f},\n", tls_p50 / plain_p50);
  fmt::print("  \"anchor_redis_benchmark_c1_p50_us\": {:.1f},\n", rb_plain.p50_ms * 1000.0);
  fmt::print("  \"anchor_redis_benchmark_tls_c1_p50_us\": {:.1f},\n", rb_tls_c1.p50_ms * 1000.0);
  fmt::print("  \"anchor_redis_benchmark_tls_over_plain_p50\": {:.3f},\n",
             rb_plain.ok && rb_tls_c1.ok ? rb_tls_c1.p50_ms / rb_plain.p50_ms : 0.0);
  fmt::print("  \"anchors_ok\": {},\n", rb_plain.ok && rb_tls_c1.ok ? "true" : "false");
  fmt::print("  \"target_tls_over_plain_p50_max\": 1.2,\n");
  fmt::print("  \"verdict_tls_pair_latency\": {}\n", tls_p50 <= 1.2 * plain_p50 ? "\"pass\"" : "\"fail\"");
  fmt::print("}}\n");
  return 0;
}

}  // namespace

// CPU seconds (user + system) a process has used: ours (pid 0) or a child's.
double cpu_seconds(pid_t pid) {
  if (pid == 0) {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt: fields 3-13
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Throughput plus the CPU the client and the servers spent on it, in µs per lock.
struct measured {
  double locks_per_s = 0;
  double client_cpu_us_per_lock = 0;
  double servers_cpu_us_per_lock = 0;
};

measured measure(lock::client& client, const std::vector<pid_t>& servers, std::chrono::milliseconds duration) {
  auto total = [&] {
    double t = 0;
    for (pid_t p : servers) t += cpu_seconds(p);
    return t;
  };
  const double client_before = cpu_seconds(0);
  const double servers_before = total();
  measured m;
  m.locks_per_s = throughput(client, 256, duration);
  // throughput() runs a 300 ms warm-up, then `duration`: count the locks of both.
  const double locks = m.locks_per_s * (std::chrono::duration<double>(duration).count() + 0.3);
  m.client_cpu_us_per_lock = (cpu_seconds(0) - client_before) * 1e6 / locks;
  m.servers_cpu_us_per_lock = (total() - servers_before) * 1e6 / locks;
  return m;
}

// Single server against a 3-master cluster, same client, same load shape.
int cluster_comparison(bool quick) {
  if (auto why = lockscope::test::redis_cluster::unsupported()) {
    std::fprintf(stderr, "lock_bench: %s\n", why->c_str());
    return 1;
  }
  const auto duration = quick ? 1000ms : 3000ms;
  measured single;
  {
    lockscope::test::redis_server server;
    lock::client client(config_for(server));
    client.connect();
    fmt::print(stderr, "throughput on one server ...\n");
    single = measure(client, {server.pid()}, duration);
  }
  lockscope::test::redis_cluster cluster(3, 0);
  auto config = lock::client_config::from_url(cluster.url());
  lock::client client(config);
  client.connect();
  fmt::print(stderr, "throughput on 3 masters ...\n");
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < cluster.size(); ++i) pids.push_back(cluster.node(i).pid());
  const measured clustered = measure(client, pids, duration);
  std::vector<long long> per_master;
  for (std::size_t m : cluster.masters()) {
    const std::string stats = cluster.connect(m).command("INFO", "commandstats").text;
    const std::size_t at = stats.find("cmdstat_evalsha:calls=");
    per_master.push_back(at == std::string::npos ? 0 : std::stoll(stats.substr(at + 22)));
  }
  fmt::print("{{\n");
  fmt::print("  \"loadavg_1m\": {:.2f},\n", load_average_1m());
  fmt::print("  \"cores\": {},\n", std::thread::hardware_concurrency());
  fmt::print("  \"single_server_locks_per_s\": {:.0f},\n", single.locks_per_s);
  fmt::print("  \"single_client_cpu_us_per_lock\": {:.2f},\n", single.client_cpu_us_per_lock);
  fmt::print("  \"single_server_cpu_us_per_lock\": {:.2f},\n", single.servers_cpu_us_per_lock);
  fmt::print("  \"cluster_3_masters_locks_per_s\": {:.0f},\n", clustered.locks_per_s);
  fmt::print("  \"cluster_client_cpu_us_per_lock\": {:.2f},\n", clustered.client_cpu_us_per_lock);
  fmt::print("  \"cluster_servers_cpu_us_per_lock\": {:.2f},\n", clustered.servers_cpu_us_per_lock);
  fmt::print("  \"cluster_speedup\": {:.2f},\n",
             single.locks_per_s > 0 ? clustered.locks_per_s / single.locks_per_s : 0.0);
  // Two cores shared by the client and the servers: at best 2 s of CPU per second, so
  // no configuration can pass 2e6 / (client + servers µs per lock) locks/s.
  fmt::print("  \"cluster_cpu_bound_locks_per_s\": {:.0f},\n",
             std::thread::hardware_concurrency() * 1e6 /
                 (clustered.client_cpu_us_per_lock + clustered.servers_cpu_us_per_lock));
  fmt::print("  \"cluster_evalsha_calls_per_master\": [{}],\n", fmt::join(per_master, ", "));
  fmt::print("  \"concurrent_locks\": 256,\n");
  fmt::print("  \"target_speedup_min\": 2.0\n");
  fmt::print("}}\n");
  return 0;
}

// The semaphore's acquire + release pair (async_try_acquire(1, 0) then async_release(1),
// chained on the client's I/O thread) against redis-benchmark -c 1 running the same two
// scripts by EVAL in the same run: the pair's p50 target is 1.15 x the sum of their p50s
// (two round trips).
int semaphore_comparison(const std::string& rb_binary, bool quick) {
  lockscope::test::redis_server server;
  const int requests = quick ? 5000 : 20000;
  {
    lock::client setup(config_for(server));
    // Enough permits that every benchmark acquire succeeds.
    setup.command({"SET", "bench:sem", "1000000000000"});
  }
  fmt::print(stderr, "redis-benchmark -c 1, the semaphore's acquire and release scripts ...\n");
  const rb_result rb_acquire = redis_benchmark(
      rb_binary, server.port(), 1, 1, requests, {},
      fmt::format("\"{}\" 1 bench:sem 1", lock::scripts::semaphore_try_acquire));
  const rb_result rb_release =
      redis_benchmark(rb_binary, server.port(), 1, 1, requests, {},
                      fmt::format("\"{}\" 2 bench:sem redisson_sc:{{bench:sem}} 1 PUBLISH", lock::scripts::semaphore_release));
  lock::client client(config_for(server));
  client.connect();
  lock::semaphore sem = client.get_semaphore("bench:sem");
  fmt::print(stderr, "semaphore pair latency ...\n");
  const auto pairs = chained_latencies(client.get_executor(), 1000, quick ? 3000 : 20000, [&](std::function<void()> done) {
    sem.async_try_acquire(1, std::chrono::milliseconds(0), [&, done](boost::system::error_code ec, bool acquired) {
      if (ec || !acquired) throw std::runtime_error("semaphore not acquired");
      sem.async_release(1, [done](boost::system::error_code rec) {
        if (rec) throw boost::system::system_error(rec);
        done();
      });
    });
  });
  const double p50 = percentile(pairs, 50);
  const double anchor = (rb_acquire.p50_ms + rb_release.p50_ms) * 1000.0;
  const double target = 1.15 * anchor;
  fmt::print("{{\n");
  fmt::print("  \"loadavg_1m\": {:.2f},\n", load_average_1m());
  fmt::print("  \"semaphore_pair_latency_us_p50\": {:.1f},\n", p50);
  fmt::print("  \"semaphore_pair_latency_us_p99\": {:.1f},\n", percentile(pairs, 99));
  fmt::print("  \"semaphore_pair_samples\": {},\n", pairs.size());
  fmt::print("  \"anchor_redis_benchmark_c1_acquire_p50_us\": {:.1f},\n", rb_acquire.p50_ms * 1000.0);
  fmt::print("  \"anchor_redis_benchmark_c1_release_p50_us\": {:.1f},\n", rb_release.p50_ms * 1000.0);
  fmt::print("  \"anchors_ok\": {},\n", rb_acquire.ok && rb_release.ok ? "true" : "false");
  fmt::print("  \"target_semaphore_pair_p50_max_us\": {:.1f},\n", target);
  fmt::print("  \"verdict_semaphore_pair_latency\": {}\n",
             rb_acquire.ok && rb_release.ok && p50 <= target ? "\"pass\"" : "\"fail\"");
  fmt::print("}}\n");
  return 0;
}

int main(int argc, char** argv) {
  bool quick = false;
  bool tls_only = false;
  std::string rb_binary = "redis-benchmark";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--tls") tls_only = true;
    else if (a == "--redis-benchmark" && i + 1 < argc) rb_binary = argv[++i];
    else if (a == "--pair-only" && i + 1 < argc) {
      // Diagnostics: only the async pair latency, against a server already on PORT.
      lock::client_config c;
      c.port = static_cast<std::uint16_t>(std::stoi(argv[++i]));
      lock::client client(c);
      client.connect();
      const auto pairs = pair_latencies(client, 1000, 20000);
      fmt::print("pair_us p50 {:.1f} p99 {:.1f}\n", percentile(pairs, 50), percentile(pairs, 99));
      return 0;
    }
    else if (a == "--cluster-only") return cluster_comparison(quick);
    else if (a == "--semaphore-only") return semaphore_comparison(rb_binary, quick);
    else if (a == "--redlock-only") {
      std::vector<std::unique_ptr<lockscope::test::redis_server>> servers;
      std::vector<std::unique_ptr<lock::client>> clients;
      std::vector<lock::rlock> parts;
      double slowest_single_p50 = 0;
      double slowest_single_p99 = 0;
      for (int k = 0; k < 3; ++k) {
        servers.push_back(std::make_unique<lockscope::test::redis_server>());
        clients.push_back(std::make_unique<lock::client>(config_for(*servers.back())));
        clients.back()->connect();
        const auto single = pair_latencies(*clients.back(), 1000, 10000);
        slowest_single_p50 = std::max(slowest_single_p50, percentile(single, 50));
        slowest_single_p99 = std::max(slowest_single_p99, percentile(single, 99));
        parts.push_back(clients.back()->get_lock("bench:red", bench_owner));
      }
      auto red = lock::get_red_lock(std::move(parts));
      const auto pairs = redlock_pair_latencies(red, *clients.front(), 1000, 10000);
      // The same three servers through three clients sharing one io_context and thread:
      // no thread hop between the servers' replies.
      asio::io_context io(1);
      auto work = asio::make_work_guard(io);
      std::thread runner([&] { io.run(); });
      std::vector<std::unique_ptr<lock::client>> shared;
      std::vector<lock::rlock> shared_parts;
      for (const auto& server : servers) {
        shared.push_back(std::make_unique<lock::client>(io, config_for(*server)));
        shared.back()->connect();
        shared_parts.push_back(shared.back()->get_lock("bench:red1", bench_owner));
      }
      auto red1 = lock::get_red_lock(std::move(shared_parts));
      const auto pairs1 = redlock_pair_latencies(red1, *shared.front(), 1000, 10000);
      fmt::print("single_pair_us (slowest of 3) p50 {:.1f} p99 {:.1f}\n", slowest_single_p50, slowest_single_p99);
      fmt::print("redlock_pair_us, 3 client threads p50 {:.1f} p99 {:.1f} (ratio {:.2f} / {:.2f})\n",
                 percentile(pairs, 50), percentile(pairs, 99), percentile(pairs, 50) / slowest_single_p50,
                 percentile(pairs, 99) / slowest_single_p99);
      fmt::print("redlock_pair_us, one shared io_context p50 {:.1f} p99 {:.1f} (ratio {:.2f} / {:.2f})\n",
                 percentile(pairs1, 50), percentile(pairs1, 99), percentile(pairs1, 50) / slowest_single_p50,
                 percentile(pairs1, 99) / slowest_single_p99);
      hiredis_floor floor(servers);
      double floor_single_p50 = 0;
      double floor_single_p99 = 0;
      for (std::size_t k = 0; k < servers.size(); ++k) {
        const auto single = floor.pairs(k, k + 1, 1000, 10000);
        floor_single_p50 = std::max(floor_single_p50, percentile(single, 50));
        floor_single_p99 = std::max(floor_single_p99, percentile(single, 99));
      }
      const auto floor_three = floor.pairs(0, servers.size(), 1000, 10000);
      fmt::print("hiredis floor: single pair (slowest of 3) p50 {:.1f} p99 {:.1f}; all three at once p50 {:.1f} "
                 "p99 {:.1f} (ratio {:.2f} / {:.2f})\n",
                 floor_single_p50, floor_single_p99, percentile(floor_three, 50), percentile(floor_three, 99),
                 percentile(floor_three, 50) / floor_single_p50, percentile(floor_three, 99) / floor_single_p99);
      for (auto& c : shared) c->close();
      shared.clear();
      work.reset();
      runner.join();
      return 0;
    }
    else if ((a == "--handoff-only" || a == "--fair-handoff-only") && i + 1 < argc) {
      // Diagnostics: only the handoff run, against a server already on PORT.
      lock::client_config c;
      c.port = static_cast<std::uint16_t>(std::stoi(argv[++i]));
      const auto gaps = handoffs(c, 2000, a == "--fair-handoff-only");
      fmt::print("handoff_us p50 {:.1f} p90 {:.1f} p99 {:.1f} max {:.1f}\n", percentile(gaps, 50),
                 percentile(gaps, 90), percentile(gaps, 99), percentile(gaps, 100));
      for (std::size_t k = 0; k < gaps.size(); ++k) {
        if (gaps[k] > 2000) fmt::print("slow sample {}: {:.0f} us\n", k, gaps[k]);
      }
      return 0;
    }
    else {
      std::fprintf(stderr,
                   "usage: lock_bench [--quick] [--tls] [--redis-benchmark PATH] | --pair-only PORT | --handoff-only PORT | --fair-handoff-only PORT | --redlock-only | [--quick] --cluster-only | [--quick] --semaphore-only\n");
      return 2;
    }
  }
  if (!lockscope::test::redis_server::available()) {
    std::fprintf(stderr, "lock_bench: redis-server not found\n");
    return 1;
  }
  if (tls_only) return tls_comparison(rb_binary, quick);
  lockscope::test::redis_server server;
  const int pair_samples = quick ? 3000 : 20000;
  const auto throughput_time = quick ? 1000ms : 3000ms;
  const int handoff_samples = quick ? 500 : 2000;

  fmt::print(stderr, "redis-benchmark -c 1 ...\n");
  const rb_result rb_c1 = redis_benchmark(rb_binary, server.port(), 1, 1, quick ? 5000 : 20000);
  fmt::print(stderr, "redis-benchmark -c 20 -P 16 ...\n");
  const rb_result rb_p16 = redis_benchmark(rb_binary, server.port(), 20, 16, quick ? 100000 : 400000);

  lock::client client(config_for(server));
  client.connect();
  fmt::print(stderr, "pair latency ...\n");
  const auto pairs = pair_latencies(client, 1000, pair_samples);
  const auto sync_pairs = sync_pair_latencies(client, quick ? 1000 : 5000);
  fmt::print(stderr, "throughput ...\n");
  const double locks_per_s = throughput(client, 256, throughput_time);
  auto eval_cfg = config_for(server);
  eval_cfg.scripts = lock::script_mode::eval;
  lock::client eval_client(eval_cfg);
  const double eval_locks_per_s = throughput(eval_client, 256, throughput_time);
  fmt::print(stderr, "handoff ...\n");
  const auto gaps = handoffs(config_for(server), handoff_samples);
  fmt::print(stderr, "fair lock handoff ...\n");
  const auto fair_gaps = handoffs(config_for(server), handoff_samples, true);
  const double fair_handoff_p99 = percentile(fair_gaps, 99);
  const auto lateness = timer_lateness(handoff_samples);

  const double pair_p50 = percentile(pairs, 50);
  const double pair_p99 = percentile(pairs, 99);
  const double rb_p50_us = rb_c1.p50_ms * 1000.0;
  const double pair_target = 1.15 * 2 * rb_p50_us;
  // One lock = two script runs (acquire, unlock); redis-benchmark counts runs of one.
  const double scripts_per_s = 2 * locks_per_s;
  const double throughput_target = 0.7 * rb_p16.rps;
  const double handoff_p99 = percentile(gaps, 99);
  auto verdict = [](bool ok) { return ok ? "\"pass\"" : "\"fail\""; };

  const double load = load_average_1m();
  fmt::print("{{\n");
  fmt::print("  \"loadavg_1m\": {:.2f},\n", load);
  fmt::print("  \"pair_latency_us_p50\": {:.1f},\n", pair_p50);
  fmt::print("  \"pair_latency_us_p99\": {:.1f},\n", pair_p99);
  fmt::print("  \"pair_latency_samples\": {},\n", pairs.size());
  fmt::print("  \"sync_pair_latency_us_p50\": {:.1f},\n", percentile(sync_pairs, 50));
  fmt::print("  \"sync_pair_latency_us_p99\": {:.1f},\n", percentile(sync_pairs, 99));
  fmt::print("  \"throughput_locks_per_s\": {:.0f},\n", locks_per_s);
  fmt::print("  \"throughput_scripts_per_s\": {:.0f},\n", scripts_per_s);
  fmt::print("  \"throughput_locks_per_s_eval_mode\": {:.0f},\n", eval_locks_per_s);
  fmt::print("  \"throughput_concurrent_locks\": 256,\n");
  fmt::print("  \"handoff_us_p50\": {:.1f},\n", percentile(gaps, 50));
  fmt::print("  \"handoff_us_p90\": {:.1f},\n", percentile(gaps, 90));
  fmt::print("  \"handoff_us_p99\": {:.1f},\n", handoff_p99);
  fmt::print("  \"handoff_us_max\": {:.1f},\n", percentile(gaps, 100));
  fmt::print("  \"handoff_samples\": {},\n", gaps.size());
  fmt::print("  \"fair_handoff_us_p50\": {:.1f},\n", percentile(fair_gaps, 50));
  fmt::print("  \"fair_handoff_us_p90\": {:.1f},\n", percentile(fair_gaps, 90));
  fmt::print("  \"fair_handoff_us_p99\": {:.1f},\n", fair_handoff_p99);
  fmt::print("  \"fair_handoff_us_max\": {:.1f},\n", percentile(fair_gaps, 100));
  fmt::print("  \"fair_handoff_samples\": {},\n", fair_gaps.size());
  fmt::print("  \"machine_timer_lateness_us_p50\": {:.1f},\n", percentile(lateness, 50));
  fmt::print("  \"machine_timer_lateness_us_p99\": {:.1f},\n", percentile(lateness, 99));
  fmt::print("  \"anchor_redis_benchmark_c1_p50_us\": {:.1f},\n", rb_p50_us);
  fmt::print("  \"anchor_redis_benchmark_c1_p99_us\": {:.1f},\n", rb_c1.p99_ms * 1000.0);
  fmt::print("  \"anchor_redis_benchmark_c1_rps\": {:.0f},\n", rb_c1.rps);
  fmt::print("  \"anchor_redis_benchmark_P16_c20_rps\": {:.0f},\n", rb_p16.rps);
  fmt::print("  \"anchors_ok\": {},\n", rb_c1.ok && rb_p16.ok ? "true" : "false");
  fmt::print("  \"target_pair_p50_max_us\": {:.1f},\n", pair_target);
  fmt::print("  \"target_throughput_min_scripts_per_s\": {:.0f},\n", throughput_target);
  fmt::print("  \"target_handoff_p99_max_us\": 2000,\n");
  fmt::print("  \"verdict_pair_latency\": {},\n", verdict(rb_c1.ok && pair_p50 <= pair_target));
  fmt::print("  \"verdict_throughput\": {},\n", verdict(rb_p16.ok && scripts_per_s >= throughput_target));
  fmt::print("  \"verdict_throughput_counting_locks\": {},\n", verdict(rb_p16.ok && locks_per_s >= throughput_target));
  fmt::print("  \"verdict_handoff\": {},\n", verdict(!gaps.empty() && handoff_p99 <= 2000));
  fmt::print("  \"verdict_fair_handoff\": {}\n", verdict(!fair_gaps.empty() && fair_handoff_p99 <= 2000));
  fmt::print("}}\n");
  return 0;
}
