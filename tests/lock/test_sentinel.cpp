// Sentinel: the URL, the sans-I/O discovery fed by hand, then the client against a
// real master, replica and three redis-sentinel processes started here (the master
// killed mid-contention), with redis-py's own Sentinel client as the independent
// judge of which server is the master.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/sentinel.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "lockscope/test/tls_certificates.hpp"
#include "client_fixtures.hpp"
#include "process.hpp"
#include "sentinel_group.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lock::errc;
using lock::sentinel_discovery;
using lock::sentinel_step;
using lock::server_address;
using lockscope::resp::value;
using lockscope::test::eventually;
using lockscope::test::find_free_port;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using lockscope::test::sentinel_group;
using step_kind = sentinel_step::kind_type;

namespace {

std::string url_error(const std::string& url) {
  lock::client_config c;
  std::string why;
  const std::error_code ec = lock::parse_url(url, c, &why);
  return ec ? why : std::string("(parsed)");
}

value array(std::vector<value> elements) { return value::aggregate(lockscope::resp::type::array, std::move(elements)); }

lock::sentinel_config three_sentinels() {
  lock::sentinel_config c;
  c.master_name = "mymaster";
  c.sentinels = {{"10.0.0.1", 26379}, {"10.0.0.2", 26379}, {"10.0.0.3", 26380}};
  return c;
}

bool sentinel_available() { return redis_server::available() && redis_server::find_sentinel_executable(); }

#define LOCKSCOPE_REQUIRE_SENTINEL()                                                    \
  do {                                                                                  \
    if (!sentinel_available()) {                                                        \
      WARN("redis-server or redis-sentinel is not installed: skipping");               \
      return;                                                                           \
    }                                                                                   \
  } while (false)

lock::client_config sentinel_client_config(const std::string& url) {
  lock::client_config c = lock::client_config::from_url(url);
  c.connect_timeout = 1s;
  c.command_timeout = 10s;  // above the failover time: commands queued meanwhile wait for the new master
  c.reconnect_backoff_max = 500ms;
  return c;
}

// redis-py's Sentinel client (Debian's python3-redis) on the same sentinels: which
// master it finds, as "host:port".
std::string master_according_to_redis_py(const sentinel_group& group) {
  std::string sentinels;
  for (const auto& s : group.sentinels) sentinels += fmt::format("('{}', {}),", s->host(), s->port());
  const std::string script = fmt::format(
      "from redis.sentinel import Sentinel\n"
      "s = Sentinel([{}], socket_timeout=1.0)\n"
      "host, port = s.discover_master('{}')\n"
      "r = s.master_for('{}', socket_timeout=1.0)\n"
      "assert r.execute_command('ROLE')[0] in (b'master', 'master')\n"
      "print('master %s:%d' % (host, port))\n",
      sentinels, lockscope::test::sentinel_master_name, lockscope::test::sentinel_master_name);
  auto child = lockscope::test::spawn({"/usr/bin/python3", "-c", script});
  const int status = child->wait(20s);
  const std::string out = child->output();
  INFO("redis-py said: " << out);
  REQUIRE(status == 0);
  const std::size_t at = out.find("master ");
  REQUIRE(at != std::string::npos);
  std::string address = out.substr(at + 7);
  while (!address.empty() && (address.back() == '\n' || address.back() == '\r')) address.pop_back();
  return address;
}

std::string address_of(const redis_server& s) { return fmt::format("{}:{}", s.host(), s.port()); }

long long monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct interval {
  long long start;
  long long end;
  int client;  // -1: a lockscope lock process
};

}  // namespace

// --- URL ----------------------------------------------------------------------------

TEST_CASE("sentinel URL: several sentinels, default port, database, master name, TLS", "[sentinel][url]") {
  const auto c = lock::client_config::from_url("redis-sentinel://:se%40cret@10.0.0.1,10.0.0.2:26380,[::1]/3#my%20master");
  CHECK(c.sentinel.enabled());
  CHECK(c.sentinel.master_name == "my master");
  REQUIRE(c.sentinel.sentinels.size() == 3);
  CHECK(c.sentinel.sentinels[0] == server_address{"10.0.0.1", 26379});
  CHECK(c.sentinel.sentinels[1] == server_address{"10.0.0.2", 26380});
  CHECK(c.sentinel.sentinels[2] == server_address{"::1", 26379});
  CHECK(c.database == 3);
  CHECK(c.password == std::optional<std::string>("se@cret"));  // the data nodes' password, as Lettuce reads it
  CHECK_FALSE(c.sentinel.password.has_value());
  CHECK_FALSE(c.tls.enabled);

  const auto t = lock::client_config::from_url("rediss-sentinel://user:pw@s1:1,s2#m");
  CHECK(t.tls.enabled);
  CHECK(t.username == "user");
  CHECK(t.sentinel.sentinels == std::vector<server_address>{{"s1", 1}, {"s2", 26379}});

  // A plain URL after a Sentinel one leaves Sentinel mode.
  lock::client_config reused = c;
  REQUIRE_FALSE(lock::parse_url("redis://h:7000", reused));
  CHECK_FALSE(reused.sentinel.enabled());
  CHECK(reused.host == "h");
}

TEST_CASE("sentinel URL: a bad part is named", "[sentinel][url]") {
  CHECK(url_error("redis-sentinel://a,b") == "no master name in 'redis-sentinel://a,b': end a Sentinel URL with #mastername");
  CHECK(url_error("redis-sentinel://a#") .find("no master name") != std::string::npos);
  CHECK(url_error("redis-sentinel://a,,b#m") == "sentinel 2 in the URL: empty host");
  CHECK(url_error("redis-sentinel://a,b:99999#m") == "sentinel 2 in the URL: 'b:99999': port '99999' is not a number in 1..65535");
  CHECK(url_error("redis-sentinel://a,[::1#m") == "sentinel 2 in the URL: '[::1': unterminated [IPv6] host");
  CHECK(url_error("redis-sentinel://a/x#m") == "database 'x' is not a non-negative number");
  CHECK(url_error("sentinel://a#m").find("redis-sentinel://") != std::string::npos);
  CHECK_THROWS_AS(lock::client_config::from_url("redis-sentinel://a:0#m"), lock::lock_error);
}

// --- discovery, sans-I/O ------------------------------------------------------------

TEST_CASE("sentinel discovery: asks in order, skips the down and the unknowing, names them all", "[sentinel]") {
  sentinel_discovery d(three_sentinels());
  sentinel_step s = d.begin();
  REQUIRE(s.kind == step_kind::ask);
  CHECK(s.sentinel == 0);
  s = d.on_unreachable(0, "connect to 10.0.0.1:26379: Connection refused");
  REQUIRE(s.kind == step_kind::ask);
  CHECK(s.sentinel == 1);
  s = d.on_reply(1, {}, value::nil());  // does not monitor that name
  REQUIRE(s.kind == step_kind::ask);
  CHECK(s.sentinel == 2);
  s = d.on_reply(2, errc::server_error, value::error("NOAUTH Authentication required."));
  REQUIRE(s.kind == step_kind::failed);
  CHECK(s.why ==
        "no sentinel gave the address of master 'mymaster' (tried 10.0.0.1:26379: connect to 10.0.0.1:26379: "
        "Connection refused; 10.0.0.2:26379: does not know master 'mymaster'; 10.0.0.3:26380: NOAUTH "
        "Authentication required.)");
  CHECK_FALSE(d.in_round());

  // A new round tries them all again; the one that answers is asked first next time.
  s = d.begin();
  CHECK(s.sentinel == 0);
  s = d.on_unreachable(0, "timed out");
  s = d.on_reply(1, {}, array({value::bulk("10.0.0.9"), value::bulk("6380")}));
  REQUIRE(s.kind == step_kind::found);
  CHECK(s.master == server_address{"10.0.0.9", 6380});
  CHECK(d.preferred() == 1);
  s = d.begin();
  CHECK(s.sentinel == 1);
  s = d.on_unreachable(1, "refused");
  CHECK(s.sentinel == 0);
  s = d.on_unreachable(0, "refused");
  CHECK(s.sentinel == 2);
}

TEST_CASE("sentinel discovery: malformed replies are skipped, not trusted", "[sentinel]") {
  sentinel_discovery d(three_sentinels());
  sentinel_step s = d.begin();
  s = d.on_reply(0, {}, array({value::bulk("10.0.0.9"), value::bulk("port")}));
  REQUIRE(s.kind == step_kind::ask);
  s = d.on_reply(1, {}, value::bulk("10.0.0.9:6379"));
  REQUIRE(s.kind == step_kind::ask);
  s = d.on_reply(2, {}, array({value::bulk(""), value::bulk("6379")}));
  REQUIRE(s.kind == step_kind::failed);
  CHECK(s.why.find("unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME (type bulk_string)") != std::string::npos);

  sentinel_discovery none(lock::sentinel_config{{}, "m", {}, {}});
  CHECK(none.begin().kind == step_kind::failed);
}

TEST_CASE("sentinel discovery: +switch-master, ROLE and READONLY", "[sentinel]") {
  const sentinel_discovery d(three_sentinels());
  CHECK(d.on_switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380") == server_address{"127.0.0.1", 6380});
  CHECK_FALSE(d.on_switch_master("other 127.0.0.1 6379 127.0.0.1 6380"));
  CHECK_FALSE(d.on_switch_master("mymaster 127.0.0.1 6379 127.0.0.1"));
  CHECK_FALSE(d.on_switch_master("mymaster 127.0.0.1 6379 127.0.0.1 0"));
  CHECK_FALSE(d.on_switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380 extra"));

  const server_address at{"10.0.0.9", 6380};
  CHECK(lock::check_master_role(array({value::bulk("master"), value::number(0), array({})}), at).empty());
  CHECK(lock::check_master_role(array({value::bulk("slave"), value::bulk("10.0.0.1"), value::number(6379)}), at) ==
        "10.0.0.9:6380 answers ROLE with 'slave', not master: the sentinels' view is out of date");
  CHECK(lock::check_master_role(value::error("ERR unknown command 'ROLE'"), at) ==
        "ROLE on 10.0.0.9:6380 failed: ERR unknown command 'ROLE'");

  CHECK(lock::is_readonly_error(value::error("READONLY You can't write against a read only replica.")));
  CHECK_FALSE(lock::is_readonly_error(value::error("ERR READONLY")));
  CHECK_FALSE(lock::is_readonly_error(value::bulk("READONLY")));
}

// --- against real sentinels -----------------------------------------------------------

TEST_CASE("sentinel client: all sentinels down, or none knows the master: the error names each", "[sentinel][redis]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  // A sentinel that watches another name (its master need not exist for this).
  auto other = lockscope::test::start_sentinel(lockscope::test::sentinel_conf("othermaster", "127.0.0.1", find_free_port()));
  const std::uint16_t dead = find_free_port();

  auto config = sentinel_client_config(
      fmt::format("redis-sentinel://127.0.0.1:{},127.0.0.1:{}#mymaster", dead, other->port()));
  {
    lock::client c(config);
    try {
      c.connect();
      FAIL("connected without a master");
    } catch (const lock::lock_error& e) {
      const std::string text = e.what();
      INFO(text);
      CHECK(e.code() == errc::no_master);
      CHECK(text.starts_with("no sentinel gave the address of master 'mymaster' (tried "));
      CHECK(text.find(fmt::format("127.0.0.1:{}: connect to 127.0.0.1:{}: Connection refused", dead, dead)) !=
            std::string::npos);
      CHECK(text.find(fmt::format("127.0.0.1:{}: does not know master 'mymaster'", other->port())) != std::string::npos);
    }
  }
  // A lock operation does not hang: it fails when its command's deadline passes.
  config.command_timeout = 500ms;
  config.sentinel.sentinels = {{"127.0.0.1", dead}, {"127.0.0.1", find_free_port()}};
  lock::client c(config);
  auto l = c.get_lock("sentinel:nowhere");
  const auto started = std::chrono::steady_clock::now();
  try {
    l.try_lock(0ms);
    FAIL("acquired without a master");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == errc::not_connected);
    CHECK(std::string(e.what()).find("Connection refused") != std::string::npos);
  }
  CHECK(lockscope::test::since(started) < 5s);
}

TEST_CASE("sentinel client: failover mid-contention, waiters continue on the new master", "[sentinel][redis][failover]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  sentinel_group group;
  const std::string old_master = address_of(group.data.master);
  const std::string new_master = address_of(*group.data.replica);
  CHECK(group.master_according_to(0) == old_master);
  CHECK(master_according_to_redis_py(group) == old_master);

  const std::string url = group.url();
  std::mutex mutex;
  std::vector<interval> intervals;
  std::vector<std::pair<int, long long>> losses;  // client, when
  std::vector<std::string> errors;

  // A holder that keeps its lock through the failover (watchdog on).
  auto holder_config = sentinel_client_config(url);
  holder_config.watchdog_timeout = 3s;
  std::atomic<bool> holder_lost{false};
  holder_config.on_lock_lost = [&](const std::string& name) {
    if (name == "sentinel:held") holder_lost = true;
  };
  lock::client holder(holder_config);
  holder.connect();
  auto held = holder.get_lock("sentinel:held", "holder");
  held.lock();

  // Contenders: in-process clients in threads, each with its own connection pair.
  constexpr int clients = 3;
  std::atomic<bool> stop{false};
  std::atomic<int> acquired_after_kill{0};
  std::atomic<long long> killed_at{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < clients; ++id) {
    threads.emplace_back([&, id] {
      auto config = sentinel_client_config(url);
      config.watchdog_timeout = 3s;
      config.on_lock_lost = [&, id](const std::string&) {
        std::lock_guard guard(mutex);
        losses.emplace_back(id, monotonic_ns());
      };
      config.on_unlock_error = [](const std::string&, const std::string&) {};
      lock::client c(config);
      auto l = c.get_lock("sentinel:contended", fmt::format("client-{}", id));
      const auto end_by = std::chrono::steady_clock::now() + 40s;
      while (!stop && std::chrono::steady_clock::now() < end_by) {
        try {
          if (!l.try_lock(15s)) continue;
        } catch (const lock::lock_error& e) {
          // An attempt in flight when the master died may have run: connection_lost.
          std::lock_guard guard(mutex);
          errors.push_back(fmt::format("client {} lock: {}", id, e.what()));
          continue;
        }
        const long long start = monotonic_ns();
        std::this_thread::sleep_for(20ms);
        const long long end = monotonic_ns();
        if (killed_at != 0 && start > killed_at) ++acquired_after_kill;
        {
          std::lock_guard guard(mutex);
          intervals.push_back({start, end, id});
        }
        // A failed release leaves the hold (and its watchdog): try again until it goes.
        for (const auto give_up = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < give_up;) {
          try {
            l.unlock_or_throw();
            break;
          } catch (const lock::lock_error& e) {
            if (e.code() == errc::not_owner) break;  // lost meanwhile (reported to on_lock_lost)
            std::lock_guard guard(mutex);
            errors.push_back(fmt::format("client {} unlock: {}", id, e.what()));
          }
        }
        // Work outside the lock before the next try, as a real worker does. Without it the
        // releasing thread asks again before the unlock message reaches anyone, wins the
        // (non-fair) lock nearly every time, and a loaded machine's lockscope lock
        // processes could starve for their whole 15 s wait (seen once in CI).
        std::this_thread::sleep_for(20ms);
      }
    });
  }

  // Critical sections the lockscope lock processes logged that began after `after_ns`.
  std::function<int(long long)> cli_runs_after = [](long long) { return 1000; };
#ifdef LOCKSCOPE_CLI
  // `lockscope lock` processes contend on the same lock, each in a shell loop.
  char dir_template[] = "/tmp/lockscope-sentinel-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  std::vector<std::unique_ptr<lockscope::test::child_process>> cli;
  for (int i = 0; i < 2; ++i) {
    const std::string loop = fmt::format(
        "end=$(($(date +%s)+40)); while [ ! -e {0}/stop ] && [ $(date +%s) -lt $end ]; do "
        "{1} lock sentinel:contended --redis '{2}' --wait 15s --lease 5s -- {3} critical {0} "
        ">>{0}/cli.err 2>&1; done",
        dir, LOCKSCOPE_CLI, url, LOCK_TEST_HELPER);
    cli.push_back(lockscope::test::spawn({"/bin/sh", "-c", loop}));
  }
  cli_runs_after = [dir](long long after_ns) {
    std::ifstream log(dir + "/log");
    long long s = 0;
    long long e = 0;
    int n = 0;
    while (log >> s >> e) n += s > after_ns ? 1 : 0;
    return n;
  };
#endif

  // Let them contend, then kill the master.
  REQUIRE(eventually([&] { std::lock_guard g(mutex); return intervals.size() >= 10 && cli_runs_after(0) >= 4; }, 20s, 20ms));
  killed_at = monotonic_ns();
  const auto kill_time = std::chrono::steady_clock::now();
  group.data.master.kill();

  // The sentinels fail over to the replica, and the clients follow.
  REQUIRE(group.wait_for_master(new_master, 20s));
  const bool continued =
      eventually([&] { return acquired_after_kill >= 5 && cli_runs_after(killed_at) >= 3; }, 20s, 20ms);
  const auto recovered_in = lockscope::test::since(kill_time);
  WARN("failover to " << new_master << ": contenders acquiring again " << recovered_in.count()
                      << " ms after the kill");
  CHECK(continued);
  CHECK(master_according_to_redis_py(group) == new_master);

  // The lock held through the failover is still held on the new master, or its loss
  // was reported; nothing in between.
  const bool still_held = eventually([&] { return holder_lost || held.is_held_by_current_thread(); }, 10s, 50ms);
  CHECK(still_held);
  if (!holder_lost) {
    resp_connection on_new(group.data.replica->host(), group.data.replica->port());
    CHECK(on_new.command("HEXISTS", "sentinel:held", "holder").integer == 1);
    held.unlock_or_throw();
  }

  stop = true;
#ifdef LOCKSCOPE_CLI
  { std::ofstream(dir + "/stop") << "stop\n"; }
  for (auto& child : cli) child->wait(40s);  // bounded: each run waits at most 15 s
  {
    std::ifstream log(dir + "/log");
    long long s = 0;
    long long e = 0;
    int cli_runs = 0;
    int cli_after_kill = 0;
    while (log >> s >> e) {
      intervals.push_back({s, e, -1});
      ++cli_runs;
      if (s > killed_at) ++cli_after_kill;
    }
    std::ifstream err(dir + "/cli.err");
    std::stringstream err_text;
    err_text << err.rdbuf();
    INFO("lockscope lock's stderr:\n" << err_text.str());
    WARN(cli_runs << " lockscope lock runs, " << cli_after_kill << " after the kill; their stderr:\n" << err_text.str());
    CHECK(cli_runs > 0);
    CHECK(cli_after_kill > 0);
  }
  std::filesystem::remove_all(dir);
#endif
  for (auto& t : threads) t.join();

  // Mutual exclusion, as the clients' own logs tell it: no two critical sections
  // overlap, unless the earlier one's client was told it lost the lock.
  std::sort(intervals.begin(), intervals.end(), [](const interval& a, const interval& b) { return a.start < b.start; });
  int overlaps = 0;
  std::size_t latest = 0;  // the interval seen so far that ends last
  for (std::size_t i = 1; i < intervals.size(); ++i) {
    const interval& prev = intervals[latest];
    const interval& cur = intervals[i];
    if (cur.end > prev.end) latest = i;
    if (cur.start >= prev.end) continue;
    const bool reported = std::any_of(losses.begin(), losses.end(),
                                      [&](const auto& l) { return l.first == prev.client && l.second >= prev.start; });
    if (!reported) ++overlaps;
  }
  std::string error_text;
  for (const auto& e : errors) error_text += e + "\n";
  INFO("client errors:\n" << error_text);
  WARN(intervals.size() << " critical sections, " << losses.size() << " losses reported, holder lost: " << holder_lost
                        << "; client errors:\n" << error_text);
  CHECK(overlaps == 0);
  CHECK(intervals.size() >= 20);
}

TEST_CASE("sentinel client: a demoted master (SENTINEL FAILOVER) is left for the promoted replica",
          "[sentinel][redis][failover]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  sentinel_group group;
  const std::string new_master = address_of(*group.data.replica);
  auto config = sentinel_client_config(group.url());
  std::atomic<int> lost{0};
  config.on_lock_lost = [&](const std::string&) { ++lost; };
  lock::client c(config);
  c.connect();
  auto l = c.get_lock("sentinel:demoted", "me");
  l.lock();
  // The old master stays up, demoted to a replica of the promoted one: a client still
  // talking to it would get READONLY on every write.
  resp_connection sentinel(group.sentinels[0]->host(), group.sentinels[0]->port());
  REQUIRE(sentinel.command("SENTINEL", "FAILOVER", lockscope::test::sentinel_master_name).text == "OK");
  REQUIRE(group.wait_for_master(new_master, 20s));
  // The client follows the announcement: its commands reach the promoted replica (a
  // command in flight while it moves fails, and the next one goes there).
  CHECK(eventually(
      [&] {
        try {
          return c.command({"ROLE"}).elements.at(0).text == "master";
        } catch (const lock::lock_error&) {
          return false;
        }
      },
      10s, 20ms));
  // The hold replicated before the switch (a graceful failover waits for the replica).
  l.unlock_or_throw();
  CHECK(l.try_lock(5s));
  resp_connection on_new(group.data.replica->host(), group.data.replica->port());
  CHECK(on_new.command("HEXISTS", "sentinel:demoted", "me").integer == 1);
  l.unlock_or_throw();
  CHECK(lost == 0);
}

TEST_CASE("sentinel client: a master demoted behind the sentinels' back gets READONLY, then ROLE keeps the client off it",
          "[sentinel][redis]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  lockscope::test::replicated_pair data;
  // One sentinel that will not fail over during the test: its view stays "A is master".
  auto sentinel = lockscope::test::start_sentinel(lockscope::test::sentinel_conf(
      lockscope::test::sentinel_master_name, data.master.host(), data.master.port(), 60000));
  auto config = sentinel_client_config(fmt::format("redis-sentinel://{}:{}#{}", sentinel->host(), sentinel->port(),
                                                   lockscope::test::sentinel_master_name));
  config.command_timeout = 1500ms;
  lock::client c(config);
  c.connect();
  auto l = c.get_lock("sentinel:readonly", "me");
  REQUIRE(l.try_lock(0ms));
  l.unlock_or_throw();

  // Swap the roles by hand, as an old master that came back as a replica would be.
  resp_connection a(data.master.host(), data.master.port());
  resp_connection b(data.replica->host(), data.replica->port());
  REQUIRE(b.command("REPLICAOF", "NO", "ONE").text == "OK");
  REQUIRE(a.command("REPLICAOF", data.replica->host(), std::to_string(data.replica->port())).text == "OK");

  // The connection still open to A gets READONLY for the acquire...
  try {
    l.try_lock(0ms);
    FAIL("acquired on a replica");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == errc::server_error);
    CHECK(std::string(e.what()).starts_with("READONLY"));
  }
  // ...and the client does not go back to A while the sentinel still names it: the
  // handshake's ROLE says slave, so commands fail with that reason, not on A.
  try {
    c.command({"ROLE"});
    FAIL("a command ran on the demoted master");
  } catch (const lock::lock_error& e) {
    INFO(e.what());
    CHECK(e.code() == errc::not_connected);
    CHECK(std::string(e.what()).find("answers ROLE with 'slave', not master") != std::string::npos);
  }

  // Roles back as the sentinel has them: the client is on A again.
  REQUIRE(a.command("REPLICAOF", "NO", "ONE").text == "OK");
  REQUIRE(b.command("REPLICAOF", data.master.host(), std::to_string(data.master.port())).text == "OK");
  CHECK(l.try_lock(5s));
  CHECK(a.command("HEXISTS", "sentinel:readonly", "me").integer == 1);
  l.unlock_or_throw();
}

TEST_CASE("sentinel client: rediss-sentinel:// speaks TLS to the sentinel and to the master", "[sentinel][redis][tls]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  if (!lockscope::test::openssl_cli_available()) {
    WARN("the openssl CLI is not installed: skipping");
    return;
  }
  const auto& certs = lockscope::test::tls_certificates::shared();
  // Plain ports too, for the start-up probe and the check below; the client gets only
  // the TLS ones.
  lockscope::test::redis_server_options master_options;
  master_options.tls = certs.server_tls();
  master_options.tls->plain_port_too = true;
  redis_server master(master_options);
  lockscope::test::redis_server_options sentinel_options = master_options;
  sentinel_options.sentinel_config = lockscope::test::sentinel_conf(lockscope::test::sentinel_master_name,
                                                                    master.host(), master.tls_port(), 60000);
  sentinel_options.extra_args = {"--tls-replication", "yes"};  // the sentinel's own links to the master
  redis_server sentinel(sentinel_options);

  auto config = sentinel_client_config(fmt::format("rediss-sentinel://127.0.0.1:{}#{}", sentinel.tls_port(),
                                                   lockscope::test::sentinel_master_name));
  config.tls.ca = certs.file("ca.pem");
  {
    lock::client c(config);
    c.connect();
    auto l = c.get_lock("sentinel:tls", "me");
    REQUIRE(l.try_lock(0ms));
    resp_connection plain(master.host(), master.port());
    CHECK(plain.command("HEXISTS", "sentinel:tls", "me").integer == 1);
    l.unlock_or_throw();
  }
  // The sentinel's TLS port is checked like the master's: an unknown CA is refused
  // there, and the error names the sentinel.
  config.tls.ca = certs.file("other-ca.pem");
  lock::client refused(config);
  try {
    refused.connect();
    FAIL("connected through an untrusted sentinel");
  } catch (const lock::lock_error& e) {
    INFO(e.what());
    CHECK(e.code() == errc::no_master);
    CHECK(std::string(e.what()).find(fmt::format("127.0.0.1:{}: TLS: certificate not trusted", sentinel.tls_port())) !=
          std::string::npos);
  }
}

TEST_CASE("after a reconnect the watchdog re-checks held locks at once: one the server lost is reported",
          "[sentinel][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;  // no persistence: a restart loses every lock
  auto config = lockscope::test::config_for(server);
  config.reconnect_backoff_max = 200ms;
  std::atomic<bool> lost{false};
  config.on_lock_lost = [&](const std::string& name) {
    if (name == "recheck:lost") lost = true;
  };
  lock::client c(config);
  auto l = c.get_lock("recheck:lost", "me");
  l.lock();  // watchdog 30 s: the next regular renewal is 10 s away
  server.restart();
  // Reported once the client is back, long before the regular renewal would notice.
  CHECK(eventually([&] { return lost.load(); }, 5s, 10ms));
}

TEST_CASE("sentinel client: a hung sentinel is skipped after connect_timeout, the next one answers", "[sentinel][redis]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  redis_server master;
  const std::string conf = lockscope::test::sentinel_conf(lockscope::test::sentinel_master_name, master.host(),
                                                          master.port(), 60000);
  auto hung = lockscope::test::start_sentinel(conf);
  auto answering = lockscope::test::start_sentinel(conf);
  hung->suspend();  // accepts connections (the kernel does), never answers
  auto config = sentinel_client_config(fmt::format("redis-sentinel://127.0.0.1:{},127.0.0.1:{}#{}", hung->port(),
                                                   answering->port(), lockscope::test::sentinel_master_name));
  config.connect_timeout = 300ms;
  // Before the client: it may start asking the sentinels as it is made, and the hung one's
  // timeout runs from that question.
  const auto started = std::chrono::steady_clock::now();
  lock::client c(config);
  c.connect();
  CHECK(lockscope::test::since(started) >= 300ms);
  CHECK(lockscope::test::since(started) < 3s);
  auto l = c.get_lock("sentinel:hung", "me");
  REQUIRE(l.try_lock(0ms));
  resp_connection on_master(master.host(), master.port());
  CHECK(on_master.command("HEXISTS", "sentinel:hung", "me").integer == 1);
  l.unlock_or_throw();
  hung->resume();
}

TEST_CASE("sentinel client: the sentinels' password is separate from the master's", "[sentinel][redis]") {
  LOCKSCOPE_REQUIRE_SENTINEL();
  redis_server master(std::vector<std::string>{"--requirepass", "data-secret"});
  auto sentinel = lockscope::test::start_sentinel(
      lockscope::test::sentinel_conf(lockscope::test::sentinel_master_name, master.host(), master.port(), 60000) +
      "sentinel auth-pass mymaster data-secret\nrequirepass sentinel-secret\n");
  const std::string url = fmt::format("redis-sentinel://:data-secret@127.0.0.1:{}#{}", sentinel->port(),
                                      lockscope::test::sentinel_master_name);
  auto config = sentinel_client_config(url);
  SECTION("both right") {
    config.sentinel.password = "sentinel-secret";
    lock::client c(config);
    c.connect();
    auto l = c.get_lock("sentinel:auth", "me");
    CHECK(l.try_lock(0ms));
    l.unlock_or_throw();
  }
  SECTION("no sentinel password: the sentinel's refusal is named") {
    lock::client c(config);
    try {
      c.connect();
      FAIL("connected without the sentinel's password");
    } catch (const lock::lock_error& e) {
      INFO(e.what());
      CHECK(e.code() == errc::no_master);
      CHECK(std::string(e.what()).find("NOAUTH") != std::string::npos);
    }
  }
  SECTION("the master's password given to the sentinel: WRONGPASS") {
    config.sentinel.password = "data-secret";
    lock::client c(config);
    CHECK_THROWS_WITH(c.connect(), Catch::Contains("WRONGPASS"));
  }
#ifdef LOCKSCOPE_CLI
  SECTION("lockscope lock --sentinel-password, and $LOCKSCOPE_SENTINEL_PASSWORD") {
    auto flag = lockscope::test::spawn({LOCKSCOPE_CLI, "lock", "sentinel:auth", "--redis", url, "--sentinel-password",
                                        "sentinel-secret", "--", "true"});
    CHECK(flag->wait(20s) == 0);
    INFO(flag->output());
    auto env = lockscope::test::spawn({LOCKSCOPE_CLI, "lock", "sentinel:auth", "--redis", url, "--", "true"},
                                      {"LOCKSCOPE_SENTINEL_PASSWORD=sentinel-secret"});
    CHECK(env->wait(20s) == 0);
    auto none = lockscope::test::spawn({LOCKSCOPE_CLI, "lock", "sentinel:auth", "--redis", url, "--", "true"},
                                       {"LOCKSCOPE_SENTINEL_PASSWORD="});
    CHECK(none->wait(20s) == 69);
    CHECK(none->output().find("NOAUTH") != std::string::npos);
  }
#endif
}
