// The lock client and `lockscope lock` against a real Redis Cluster of 3 masters and 3
// replicas, started once for this process (every SECTION reuses it): routing by hash
// slot, sharded pub/sub, MultiLock across shards, mutual exclusion from several
// processes, a live resharding and a failover of a contended lock's slot. And a second
// cluster all over TLS (rediss-cluster://), where a master is also killed mid-hold.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/cluster.hpp"
#include "lockscope/lock/multi_lock.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/semaphore.hpp"
#include "lockscope/lock/count_down_latch.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_cluster.hpp"
#include "lockscope/test/tls_certificates.hpp"
#include "process.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lockscope::test::redis_cluster;
using lockscope::test::spawn;

namespace {

struct cluster_temp_dir {
  std::filesystem::path path;
  cluster_temp_dir() {
    char name[] = "/tmp/lockscope-cluster-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~cluster_temp_dir() { std::filesystem::remove_all(path); }
};

// Lock names whose slots are served by `count` different masters, one per master.
std::vector<std::string> names_on_distinct_masters(redis_cluster& cluster, const std::string& prefix,
                                                   std::size_t count) {
  std::vector<std::string> names;
  std::set<std::size_t> seen;
  for (int i = 0; names.size() < count && i < 1000; ++i) {
    const std::string name = prefix + std::to_string(i);
    if (seen.insert(cluster.master_of(lock::key_slot(name))).second) names.push_back(name);
  }
  REQUIRE(names.size() == count);
  return names;
}

// EXISTS of `name` on the master that serves its slot: 1 while the lock is held there.
long long exists_on_its_master(redis_cluster& cluster, const std::string& name) {
  return cluster.connect(cluster.master_of(lock::key_slot(name))).command("EXISTS", name).integer;
}

std::vector<std::pair<long long, long long>> sorted_intervals(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::pair<long long, long long>> out;
  long long start = 0, end = 0;
  while (in >> start >> end) out.emplace_back(start, end);
  std::sort(out.begin(), out.end());
  return out;
}

// The longest time the lock sat free between two holders. A waiter whose wake-up was
// lost sleeps until the holder's lease (30 s) runs out, so this would show it.
std::chrono::nanoseconds longest_gap(const std::vector<std::pair<long long, long long>>& sorted) {
  long long gap = 0;
  for (std::size_t i = 1; i < sorted.size(); ++i) gap = std::max(gap, sorted[i].first - sorted[i - 1].second);
  return std::chrono::nanoseconds(gap);
}

int overlaps(const std::vector<std::pair<long long, long long>>& sorted) {
  int n = 0;
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].first < sorted[i - 1].second) ++n;
  return n;
}

// ASK and TRYAGAIN errors node `i` sent since CONFIG RESETSTAT (Redis 7's INFO errorstats).
long long migration_redirects(redis_cluster& cluster, std::size_t i) {
  const std::string stats = cluster.connect(i).command("INFO", "errorstats").text;
  long long total = 0;
  for (const std::string kind : {"ASK", "TRYAGAIN"}) {
    const std::size_t at = stats.find("errorstat_" + kind + ":count=");
    if (at != std::string::npos) total += std::stoll(stats.substr(at + kind.size() + 17));
  }
  return total;
}


using worker_list = std::vector<std::unique_ptr<lockscope::test::child_process>>;

// A shell loop of `times` `lockscope lock NAME --redis URL -- lock_test_helper critical DIR`;
// exits 9 at the first failure.
std::unique_ptr<lockscope::test::child_process> worker(const std::string& url, const std::string& name,
                                                       const std::filesystem::path& dir, int times) {
  const std::string one = std::string(LOCKSCOPE_CLI) + " lock " + name + " --redis " + url + " --wait 30s -- " +
                          LOCK_TEST_HELPER + " critical " + dir.string();
  return spawn({"sh", "-c", "i=0; while [ $i -lt " + std::to_string(times) + " ]; do " + one +
                                " || exit 9; i=$((i+1)); done"});
}

void start_counter(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "counter") << 0 << '\n';
}

long long counter_in(const std::filesystem::path& dir) {
  std::ifstream in(dir / "counter");
  long long n = 0;
  in >> n;
  return n;
}

void check_all_succeed(worker_list& workers, std::chrono::seconds timeout) {
  for (auto& w : workers) {
    const int status = w->wait(timeout);
    INFO(w->output());
    CHECK(status == 0);
  }
}

// Every critical section logged in DIR/log: `count` of them, none overlapping, and no
// free gap near the 30 s lease a lost wake-up costs (a gap can also be a process
// start-up when every contender is between two runs: ~3 s under ASan and load).
// `disturbed_ns`: when the disturbance began (steady clock, as the helper logs), so that
// a failure says where the gap was.
void check_sections(const std::filesystem::path& dir, std::size_t count, long long disturbed_ns = 0) {
  CHECK(counter_in(dir) == static_cast<long long>(count));
  const auto sections = sorted_intervals(dir / "log");
  CHECK(sections.size() == count);
  CHECK(overlaps(sections) == 0);
  const std::chrono::nanoseconds gap = longest_gap(sections);
  std::string where;
  for (std::size_t i = 1; i < sections.size(); ++i) {
    if (sections[i].first - sections[i - 1].second != gap.count()) continue;
    const auto at = [&](long long ns) { return std::to_string((ns - sections.front().first) / 1'000'000) + " ms"; };
    where = "the longest gap: after section " + std::to_string(i) + " of " + std::to_string(sections.size()) +
            ", from " + at(sections[i - 1].second) + " to " + at(sections[i].first) +
            " (from the first section's start; the disturbance began at " +
            (disturbed_ns != 0 ? at(disturbed_ns) : std::string("-")) + ")";
  }
  INFO(where);
  CHECK(gap < 15s);
}

// Three `lockscope lock NAME` loops of 12 contend while `disturb` runs.
template <class Disturb>
void contend(redis_cluster& cluster, const std::string& name, Disturb disturb) {
  cluster_temp_dir dir;
  start_counter(dir.path);
  worker_list workers;
  for (int w = 0; w < 3; ++w) workers.push_back(worker(cluster.url(), name, dir.path, 12));
  // Disturb once they contend: after the first critical section.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (sorted_intervals(dir.path / "log").empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const long long disturbed_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  disturb();
  check_all_succeed(workers, 120s);
  // What the workers printed (`lockscope lock` is silent unless something went wrong).
  std::string printed;
  for (const auto& w : workers) printed += w->output();
  INFO("the workers printed: " + (printed.empty() ? std::string("nothing") : printed));
  check_sections(dir.path, 36, disturbed_ns);
}

// A waiter in its own thread: try_lock(wait[, lease]) on `client`, unlocked at once when
// acquired. Its thread is joined on destruction, so a failing REQUIRE meanwhile fails
// the test instead of destroying a joinable std::thread (std::terminate); an exception
// in it is kept in thrown(), not let out.
class background_waiter {
 public:
  background_waiter(lock::client& client, std::string name, std::chrono::milliseconds wait,
                    std::optional<std::chrono::milliseconds> lease = std::nullopt)
      : thread_([this, &client, name = std::move(name), wait, lease] {
          try {
            auto w = client.get_lock(name);
            acquired_ = lease ? w.try_lock(wait, *lease) : w.try_lock(wait);
            acquired_at_ = std::chrono::steady_clock::now();
            if (acquired_) w.unlock();
          } catch (const std::exception& e) {
            thrown_ = e.what();
          }
        }) {}
  ~background_waiter() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  bool acquired() const noexcept { return acquired_; }
  // After join():
  std::chrono::steady_clock::time_point acquired_at() const noexcept { return acquired_at_; }
  std::chrono::steady_clock::duration waited() const noexcept { return acquired_at_ - started_; }
  const std::string& thrown() const noexcept { return thrown_; }

 private:
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> acquired_{false};
  std::chrono::steady_clock::time_point acquired_at_{};
  std::string thrown_;
  std::thread thread_;  // last: it starts once the rest is set up
};

// SSUBSCRIBEd clients of `channel` on node i, once there are `expected` (or after 5 s).
long long shard_subscribers(redis_cluster& cluster, std::size_t i, const std::string& channel, long long expected = 1) {
  auto c = cluster.connect(i);
  const auto count = [&] { return c.command("PUBSUB", "SHARDNUMSUB", channel).elements.at(1).integer; };
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (count() != expected && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  return count();
}

}  // namespace

// Started on first use, a few seconds: once per test process, for every SECTION.
redis_cluster& shared_cluster() {
  static redis_cluster cluster;
  return cluster;
}

TEST_CASE("Redis Cluster (3 masters, 3 replicas): CLUSTER KEYSLOT, routing, sharded pub/sub, MultiLock, wrong URLs",
          "[lock][cluster][redis]") {
  if (auto why = redis_cluster::unsupported()) {
    WARN(*why);
    return;
  }
  redis_cluster& cluster = shared_cluster();

  SECTION("key_slot agrees with redis-server's CLUSTER KEYSLOT") {
    auto c = cluster.connect(0);
    for (const std::string key : {"foo", "bar", "", "myLock", "redisson_lock__channel:{myLock}", "a{b}c", "{}x",
                                  "x{", "{{y}}", "orders:42", "\xff\x01\x80"})
      CHECK(c.command("CLUSTER", "KEYSLOT", key).integer == lock::key_slot(key));
  }

  SECTION("client: each lock on its slot's master, a waiter woken through SSUBSCRIBE/SPUBLISH, MultiLock") {
    lock::client holder(lock::client_config::from_url(cluster.url()));
    lock::client waiter(lock::client_config::from_url(cluster.url()));
    holder.connect();
    const auto names = names_on_distinct_masters(cluster, "route", 3);
    for (const std::string& name : names) {
      INFO(name);
      const std::size_t master = cluster.master_of(lock::key_slot(name));
      auto l = holder.get_lock(name);
      l.lock();
      CHECK(exists_on_its_master(cluster, name) == 1);
      CHECK(l.is_held_by_current_thread());

      // The waiter subscribes on the shard (SSUBSCRIBE), the unlock SPUBLISHes: it
      // wakes at once, not after its 10 s wait.
      background_waiter w(waiter, name, 10s);
      CHECK(shard_subscribers(cluster, master, lock::channel_name(name)) == 1);
      l.unlock();
      w.join();
      CHECK(w.thrown() == "");
      CHECK(w.acquired());
      CHECK(w.waited() < 5s);
    }
    // One MultiLock over three shards: each key on its own master.
    auto all = lock::get_multi_lock({holder.get_lock(names[0]), holder.get_lock(names[1]), holder.get_lock(names[2])});
    REQUIRE(all.try_lock(5s, 10s));
    for (const std::string& name : names)
      CHECK(exists_on_its_master(cluster, name) == 1);
    all.unlock();
    for (const std::string& name : names)
      CHECK(exists_on_its_master(cluster, name) == 0);
  }

  SECTION("dialects: fair, read and write waiters SSUBSCRIBE from Redisson 3.22 (4.7.0), SUBSCRIBE in 3.16.8") {
    for (const std::string release : {"4.7.0", "3.16.8"}) {
      INFO(release);
      const bool sharded = release == "4.7.0";
      auto config = lock::client_config::from_url(cluster.url());
      config.redisson_dialect = release;
      lock::client holder(config);
      lock::client waiter(config);
      const std::string name = "dialect-" + release;
      // A lost wake-up would leave each waiter asleep for the holder's whole TTL (30 s).
      const auto woken_at_once = [&](auto& held, auto waiting, const std::string& channel) {
        const std::size_t master = cluster.master_of(lock::key_slot(held.name()));
        held.lock();
        const auto started = std::chrono::steady_clock::now();
        auto acquired = std::async(std::launch::async, [&] {
          const bool ok = waiting.try_lock(20s);
          if (ok) waiting.unlock();
          return ok;
        });
        CHECK(shard_subscribers(cluster, master, channel, sharded ? 1 : 0) == (sharded ? 1 : 0));
        std::this_thread::sleep_for(200ms);  // the waiter is subscribed and asleep
        held.unlock();
        CHECK(acquired.get());
        CHECK(std::chrono::steady_clock::now() - started < 5s);
      };
      auto fair_holder = holder.get_fair_lock(name + "-fair");
      auto fair_waiter = waiter.get_fair_lock(name + "-fair");
      woken_at_once(fair_holder, fair_waiter, "redisson_lock__channel:{" + name + "-fair}:" + fair_waiter.owner());
      auto writer = holder.get_read_write_lock(name + "-rw").write_lock();
      woken_at_once(writer, waiter.get_read_write_lock(name + "-rw").read_lock(), "redisson_rwlock:{" + name + "-rw}");
      auto reader = holder.get_read_write_lock(name + "-rw").read_lock();
      woken_at_once(reader, waiter.get_read_write_lock(name + "-rw").write_lock(), "redisson_rwlock:{" + name + "-rw}");
    }
  }

  SECTION("dialects: semaphore and latch wake-ups SPUBLISH/SSUBSCRIBE from Redisson 3.22 (4.7.0), PUBLISH/SUBSCRIBE "
          "in 3.16.8, as Java's waiters of each release listen") {
    for (const std::string release : {"4.7.0", "3.16.8"}) {
      INFO(release);
      const bool sharded = release == "4.7.0";
      auto config = lock::client_config::from_url(cluster.url());
      config.redisson_dialect = release;
      lock::client holder(config);
      lock::client waiter(config);
      const std::string name = "sem-dialect-" + release;
      auto held = holder.get_semaphore(name);
      REQUIRE(held.try_set_permits(1));
      REQUIRE(held.try_acquire(1));
      const std::size_t master = cluster.master_of(lock::key_slot(name));
      // Java's waiter of this release, played by a raw connection: SSUBSCRIBE on the
      // shard master from 3.22, SUBSCRIBE on any node before (PUBLISH reaches every node).
      auto java = cluster.connect(sharded ? master : (master + 1) % cluster.size());
      java.command(sharded ? "SSUBSCRIBE" : "SUBSCRIBE", held.channel());
      auto acquired = std::async(std::launch::async, [&] {
        auto w = waiter.get_semaphore(name);
        const bool ok = w.try_acquire(1, 20s);
        if (ok) w.release(1);
        return ok;
      });
      // lockscope's waiter listens as Java's would: on the shard from 3.22, else classic.
      CHECK(shard_subscribers(cluster, master, held.channel(), sharded ? 2 : 0) == (sharded ? 2 : 0));
      const auto classic = [&] {
        long long n = 0;
        for (std::size_t i = 0; i < cluster.size(); ++i)
          n += cluster.connect(i).command("PUBSUB", "NUMSUB", held.channel()).elements.at(1).integer;
        return n;
      };
      for (int i = 0; i < 500 && classic() != (sharded ? 0 : 2); ++i) std::this_thread::sleep_for(5ms);
      CHECK(classic() == (sharded ? 0 : 2));
      std::this_thread::sleep_for(100ms);
      const auto released = std::chrono::steady_clock::now();
      held.release(1);
      // Java's waiter hears the release...
      const auto message = java.read_value(5000ms);
      REQUIRE(message.elements.size() == 3);
      CHECK(message.elements[0].text == (sharded ? "smessage" : "message"));
      // ...and lockscope's wakes at once, not at the end of its wait.
      CHECK(acquired.get());
      CHECK(std::chrono::steady_clock::now() - released < 2s);

      // The latch: a lockscope await woken by a count-down, heard by Java's waiter too.
      auto latch = holder.get_count_down_latch(name + "-latch");
      REQUIRE(latch.try_set_count(1));
      auto java_latch = cluster.connect(sharded ? cluster.master_of(lock::key_slot(latch.channel())) : master);
      java_latch.command(sharded ? "SSUBSCRIBE" : "SUBSCRIBE", latch.channel());
      auto awaited = std::async(std::launch::async, [&] { return waiter.get_count_down_latch(name + "-latch").await(20s); });
      std::this_thread::sleep_for(300ms);
      const auto counted = std::chrono::steady_clock::now();
      latch.count_down();
      const auto zero = java_latch.read_value(5000ms);
      REQUIRE(zero.elements.size() == 3);
      CHECK(zero.elements[0].text == (sharded ? "smessage" : "message"));
      CHECK(awaited.get());
      CHECK(std::chrono::steady_clock::now() - counted < 2s);
    }
  }

  SECTION("wrong URLs: redis:// on a cluster node says to use redis-cluster://, and the reverse") {
    // A key node 0 does not serve: a plain client gets MOVED, with the hint.
    std::string key;
    for (int i = 0; key.empty(); ++i)
      if (cluster.master_of(lock::key_slot("plain" + std::to_string(i))) != 0) key = "plain" + std::to_string(i);
    lock::client plain(lock::client_config::from_url("redis://127.0.0.1:" + std::to_string(cluster.node(0).port())));
    try {
      plain.get_lock(key).lock();
      FAIL("a plain client followed a redirect");
    } catch (const lock::lock_error& e) {
      CHECK(std::string(e.what()).starts_with("MOVED " + std::to_string(lock::key_slot(key)) + " "));
      CHECK_THAT(e.what(), Catch::EndsWith("(the server is a Redis Cluster node: use a redis-cluster:// URL)"));
    }
    lockscope::test::redis_server single;
    auto config = lock::client_config::from_url("redis-cluster://127.0.0.1:" + std::to_string(single.port()));
    config.connect_timeout = 1s;
    lock::client wrong(config);
    try {
      wrong.connect();
      FAIL("connected to a server without cluster support");
    } catch (const lock::lock_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("is not a cluster node (ERR This instance has cluster support disabled): "
                                           "use a redis:// URL for a single server"));
    }
  }

}

// Many `lockscope lock` processes: left out of the ASan run (.ci/run), whose start-up
// cost makes them minutes; the client code they run is the test case above's.
TEST_CASE("Redis Cluster (3 masters, 3 replicas): lockscope lock processes, a live resharding, a failover",
          "[lock][cluster][redis][process]") {
  if (auto why = redis_cluster::unsupported()) {
    WARN(*why);
    return;
  }
  redis_cluster& cluster = shared_cluster();

  SECTION("lockscope lock: mutual exclusion on locks spread over all three masters") {
    cluster_temp_dir dir;
    const auto names = names_on_distinct_masters(cluster, "spread", 3);
    worker_list workers;
    for (const std::string& name : names) {
      start_counter(dir.path / name);
      for (int w = 0; w < 2; ++w) workers.push_back(worker(cluster.url(), name, dir.path / name, 10));
    }
    check_all_succeed(workers, 120s);
    for (const std::string& name : names) {
      INFO(name);
      check_sections(dir.path / name, 20);
    }
  }

  SECTION("a live resharding of a contended lock's slot: no overlap, no lost waiter") {
    const std::uint16_t slot = lock::key_slot("reshard");
    contend(cluster, "reshard", [&] {
      // Away and back; each step pauses so that commands meet the MIGRATING/IMPORTING
      // (ASK) state.
      const std::size_t home = cluster.master_of(slot);
      const auto masters = cluster.masters();
      const std::size_t other = masters[0] == home ? masters[1] : masters[0];
      // While the slot is migrating, the contenders' commands for it are redirected:
      // ASK (the key already moved), TRYAGAIN (an unlock's keys split between the two
      // nodes: the channel "key" is never there). Wait until that has happened.
      const auto met_migration = [&](std::size_t from) {
        cluster.connect(from).command("CONFIG", "RESETSTAT");
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (migration_redirects(cluster, from) == 0 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(5ms);
        CHECK(migration_redirects(cluster, from) > 0);
      };
      cluster.move_slot(slot, other, 50ms, met_migration);
      CHECK(cluster.master_of(slot) == other);
      std::this_thread::sleep_for(200ms);
      cluster.move_slot(slot, home, 50ms, met_migration);
    });
  }

  SECTION("a master failover (CLUSTER FAILOVER on its replica) mid-contention") {
    const std::uint16_t slot = lock::key_slot("failover");
    contend(cluster, "failover", [&] {
      const std::size_t replica = cluster.replica_of(cluster.master_of(slot));
      cluster.failover(replica);
      CHECK(cluster.master_of(slot) == replica);
    });
  }
}

namespace {

// Every node serves TLS, and the cluster bus and replication run over it.
redis_cluster& shared_tls_cluster() {
  static redis_cluster cluster(3, 1, [] {
    const auto& certs = lockscope::test::tls_certificates::shared();
    return lockscope::test::redis_cluster_tls{certs.server_tls(), certs.file("client.pem"), certs.file("client.key")};
  }());
  return cluster;
}

lock::client_config tls_cluster_config(const redis_cluster& cluster) {
  auto config = lock::client_config::from_url(cluster.url());
  config.tls.ca = lockscope::test::tls_certificates::shared().file("ca.pem");
  return config;
}

// The local ports of node i's clients named `name` (CLIENT LIST's laddr), asked on
// its plain port.
std::multiset<std::string> client_ports(redis_cluster& cluster, std::size_t i, const std::string& name) {
  std::multiset<std::string> ports;
  std::istringstream lines(cluster.connect(i).command("CLIENT", "LIST").text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" name=" + name + " ") == std::string::npos) continue;
    const std::size_t at = line.find(" laddr=");
    const std::size_t end = line.find(' ', at + 1);
    const std::string laddr = line.substr(at + 7, end - at - 7);
    ports.insert(laddr.substr(laddr.rfind(':') + 1));
  }
  return ports;
}

}  // namespace

TEST_CASE("Redis Cluster over TLS (rediss-cluster://, 3 masters, 3 replicas): routing, sharded pub/sub, MOVED, "
          "a killed master",
          "[lock][cluster][redis][tls]") {
  if (auto why = redis_cluster::unsupported()) {
    WARN(*why);
    return;
  }
  if (!lockscope::test::openssl_cli_available()) {
    WARN("the openssl CLI is not installed: skipping");
    return;
  }
  redis_cluster& cluster = shared_tls_cluster();
  REQUIRE(cluster.url().starts_with("rediss-cluster://"));

  SECTION("each lock on its slot's master, reached on its TLS port; a waiter woken by SPUBLISH; MultiLock") {
    auto config = tls_cluster_config(cluster);
    config.client_name = "tls-holder";
    lock::client holder(config);
    config.client_name = "tls-waiter";
    lock::client waiter(config);
    holder.connect();
    const auto names = names_on_distinct_masters(cluster, "tls", 3);
    for (const std::string& name : names) {
      INFO(name);
      const std::size_t master = cluster.master_of(lock::key_slot(name));
      auto l = holder.get_lock(name);
      l.lock();
      CHECK(exists_on_its_master(cluster, name) == 1);
      // The seeds are TLS ports; every other master's address came from CLUSTER SHARDS
      // (its tls-port): the client's connection to this master arrived there.
      const auto ports = client_ports(cluster, master, "tls-holder");
      CHECK(ports.size() == 1);
      CHECK(ports.count(std::to_string(cluster.node(master).tls_port())) == 1);

      background_waiter w(waiter, name, 10s);
      CHECK(shard_subscribers(cluster, master, lock::channel_name(name)) == 1);
      CHECK(client_ports(cluster, master, "tls-waiter:sub") ==
            std::multiset<std::string>{std::to_string(cluster.node(master).tls_port())});
      l.unlock();
      w.join();
      CHECK(w.thrown() == "");
      CHECK(w.acquired());
      CHECK(w.waited() < 5s);
    }
    auto all = lock::get_multi_lock({holder.get_lock(names[0]), holder.get_lock(names[1]), holder.get_lock(names[2])});
    REQUIRE(all.try_lock(5s, 10s));
    for (const std::string& name : names)
      CHECK(exists_on_its_master(cluster, name) == 1);
    all.unlock();
    for (const std::string& name : names)
      CHECK(exists_on_its_master(cluster, name) == 0);
  }

  SECTION("a held lock's slot moved to another master: the MOVED names its TLS port, the unlock follows") {
    lock::client holder(tls_cluster_config(cluster));
    const std::string name = "tls-moved";
    const std::uint16_t slot = lock::key_slot(name);
    auto l = holder.get_lock(name);
    l.lock(60s);
    const std::size_t home = cluster.master_of(slot);
    const auto masters = cluster.masters();
    const std::size_t other = masters[0] == home ? masters[1] : masters[0];
    cluster.move_slot(slot, other);
    CHECK(cluster.connect(other).command("EXISTS", name).integer == 1);
    l.unlock();  // sent to `home`, answered MOVED <slot> 127.0.0.1:<other's TLS port>
    CHECK(cluster.connect(other).command("EXISTS", name).integer == 0);
    REQUIRE(l.try_lock(0ms, 60s));
    CHECK(cluster.connect(other).command("EXISTS", name).integer == 1);
    l.unlock();
    cluster.move_slot(slot, home);
  }

  SECTION("a master killed mid-hold: its replica is promoted, the watchdog renews there, the unlock wakes a waiter") {
    // Node 1: a seed of the URL (not node 0: the test asks it who serves what).
    REQUIRE(cluster.masters() == std::vector<std::size_t>{0, 1, 2});
    std::string name;
    for (int i = 0; name.empty(); ++i)
      if (cluster.master_of(lock::key_slot("tls-killed" + std::to_string(i))) == 1) name = "tls-killed" + std::to_string(i);
    const std::uint16_t slot = lock::key_slot(name);
    const std::size_t master = cluster.master_of(slot);
    const std::size_t replica = cluster.replica_of(master);
    std::atomic<int> lost{0};
    auto config = tls_cluster_config(cluster);
    config.watchdog_timeout = 9s;  // renewed every 3 s; the failover takes ~3 s (cluster-node-timeout 2 s)
    config.on_lock_lost = [&](const std::string&) { ++lost; };
    config.client_name = "tls-killed";
    lock::client holder(config);
    lock::client waiter(config);
    auto l = holder.get_lock(name);
    l.lock();
    // The replica has the hold before the master dies.
    REQUIRE(cluster.connect(master).command("WAIT", "1", "5000").integer == 1);

    background_waiter first(waiter, name, 60s, 5s);
    shard_subscribers(cluster, master, lock::channel_name(name));
    // The waiter attempts once more when its subscription is confirmed; an attempt in
    // flight at the crash fails with connection_lost (it may have run: README). Kill
    // the master once that attempt is answered and the waiter sleeps on the lease.
    std::this_thread::sleep_for(500ms);

    cluster.node(master).kill();
    const auto killed_at = std::chrono::steady_clock::now();
    // A waiter that starts now, whose commands time out (1 s) before the failover is
    // done (~3 s): each attempt fails with not_connected (never ran), and the acquire
    // tries again within its wait instead of failing.
    auto late_config = tls_cluster_config(cluster);
    late_config.command_timeout = 1s;
    late_config.client_name = "tls-killed";
    lock::client late(late_config);
    background_waiter second(late, name, 60s, 5s);
    auto promoted = cluster.connect(replica);
    while (promoted.command("ROLE").elements.at(0).text != "master") {
      REQUIRE(std::chrono::steady_clock::now() - killed_at < 30s);
      std::this_thread::sleep_for(20ms);
    }
    INFO("promoted after " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - killed_at).count() << " ms");
    // A renewal after the kill can only have reached the promoted replica: its lease
    // back near 9 s, at least 1.5 s after the kill (unrenewed, it would be below 7.5 s).
    bool renewed = false;
    while (!renewed && std::chrono::steady_clock::now() - killed_at < 30s) {
      const long long pttl = promoted.command("PTTL", name).integer;
      renewed = pttl > 8000 && std::chrono::steady_clock::now() - killed_at > 1500ms;
      if (pttl < 0) break;  // expired: the hold was lost
      std::this_thread::sleep_for(20ms);
    }
    CHECK(renewed);
    CHECK(lost == 0);
    CHECK(promoted.command("EXISTS", name).integer == 1);
    CHECK_FALSE(first.acquired());
    CHECK_FALSE(second.acquired());

    const auto unlocked_at = std::chrono::steady_clock::now();
    l.unlock();  // to the promoted replica; its SPUBLISH reaches the waiters' moved subscriptions
    first.join();
    second.join();
    CHECK(first.thrown() == "");
    CHECK(second.thrown() == "");
    CHECK(first.acquired());
    CHECK(second.acquired());
    // Woken, not waiting out a 9 s or 5 s lease (each waiter unlocks at once).
    CHECK(first.acquired_at() - unlocked_at < 4s);
    CHECK(second.acquired_at() - unlocked_at < 4s);
    CHECK(promoted.command("EXISTS", name).integer == 0);
    CHECK(lost == 0);

    // Back as a replica of the promoted one (its nodes.conf kept), for sections after this.
    cluster.node(master).start();
    cluster.wait_until_consistent(30s);
    // The clients closed their connections to the node once the map stopped naming it:
    // none reconnected (they would within reconnect_backoff_max, 2 s).
    std::this_thread::sleep_for(3s);
    CHECK(client_ports(cluster, master, "tls-killed").empty());
    CHECK(client_ports(cluster, master, "tls-killed:sub").empty());
  }
}

// Redis 6 has no CLUSTER SHARDS, and an ACL or a managed service may deny it: the client
// loads the map with CLUSTER SLOTS, and its waiters SUBSCRIBE classically (an unlock's
// PUBLISH reaches every node of a cluster).
// (No ": " in the name: Catch2 v2 indents a failure header's wrapped lines to it, and
// past column 70 or so that loops forever printing one-character lines.)
TEST_CASE("Redis Cluster that denies CLUSTER SHARDS (an ACL, or Redis 6) is mapped by CLUSTER SLOTS, with classic "
          "pub/sub",
          "[lock][cluster][redis]") {
  if (auto why = redis_cluster::unsupported()) {
    WARN(*why);
    return;
  }
  static redis_cluster cluster(3, 0);
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    auto c = cluster.connect(i);
    REQUIRE(c.command("ACL", "SETUSER", "default", "-cluster|shards").text == "OK");
  }
  REQUIRE(cluster.connect(0).command("CLUSTER", "SHARDS").is_error());
  for (std::size_t i = 0; i < cluster.size(); ++i) cluster.connect(i).command("CONFIG", "RESETSTAT");

  auto config = lock::client_config::from_url(cluster.url());
  config.client_name = "slots-only";
  lock::client holder(config);
  lock::client waiter(config);
  holder.connect();
  const auto names = names_on_distinct_masters(cluster, "slots", 3);
  for (const std::string& name : names) {
    INFO(name);
    const std::size_t master = cluster.master_of(lock::key_slot(name));
    auto l = holder.get_lock(name);
    l.lock();
    CHECK(exists_on_its_master(cluster, name) == 1);

    background_waiter w(waiter, name, 10s);
    // One classic subscriber somewhere in the cluster, none sharded on the lock's master.
    const auto subscribers = [&] {
      long long n = 0;
      for (std::size_t i = 0; i < cluster.size(); ++i)
        n += cluster.connect(i).command("PUBSUB", "NUMSUB", lock::channel_name(name)).elements.at(1).integer;
      return n;
    };
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (subscribers() != 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    CHECK(subscribers() == 1);
    CHECK(shard_subscribers(cluster, master, lock::channel_name(name), 0) == 0);
    l.unlock();
    w.join();
    CHECK(w.thrown() == "");
    CHECK(w.acquired());
    CHECK(w.waited() < 5s);  // woken by the unlock's PUBLISH, not by its 30 s lease
  }
  // The clients did ask for CLUSTER SHARDS, and were refused.
  long long refused = 0;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const std::string stats = cluster.connect(i).command("INFO", "errorstats").text;
    const std::size_t at = stats.find("errorstat_NOPERM:count=");
    if (at != std::string::npos) refused += std::stoll(stats.substr(at + 23));
  }
  CHECK(refused >= 2);  // holder and waiter, one refusal each at least
}
