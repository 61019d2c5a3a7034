// `lockscope semaphore` and `lockscope latch` as processes against a real redis-server:
// concurrent processes each log the interval their CMD ran (taken after the acquire,
// before the release: inside the hold), and at no instant do more CMDs run than there
// are permits. The exit statuses are `lockscope lock`'s.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/permit_expirable_semaphore.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "client_fixtures.hpp"
#include "process.hpp"

using namespace std::chrono_literals;
using lockscope::test::child_process;
using lockscope::test::eventually;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using lockscope::test::spawn;
namespace lock = lockscope::lock;

namespace {

const std::string cli = LOCKSCOPE_CLI;

std::string url(const redis_server& s) { return "redis://" + s.host() + ":" + std::to_string(s.port()); }

// The most intervals open at one instant, from "+ <ns>" / "- <ns>" lines.
int most_at_once(const std::string& log_path, int& intervals, const std::string& suffix = "") {
  std::ifstream in(log_path);
  std::vector<std::pair<long long, int>> events;
  std::string sign;
  long long at = 0;
  while (in >> sign >> at) {
    if (sign == "+" + suffix || sign == "-" + suffix) events.emplace_back(at, sign[0] == '+' ? 1 : -1);
  }
  // An end and a start at the same nanosecond: the end first.
  std::sort(events.begin(), events.end());
  int open = 0, most = 0;
  intervals = 0;
  for (const auto& [t, d] : events) {
    open += d;
    if (d > 0) ++intervals;
    most = std::max(most, open);
  }
  return most;
}

}  // namespace

TEST_CASE("lockscope semaphore: concurrent processes never run more CMDs than permits", "[lock][semaphore][cli][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  char log_template[] = "/tmp/lockscope-semaphore-log-XXXXXX";
  const int fd = ::mkstemp(log_template);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string log = log_template;
  constexpr int permits = 2;
  constexpr int processes = 6;
  constexpr int rounds = 4;
  const std::string body = "for i in 1 2 3 4; do " + cli + " semaphore pool --permits " + std::to_string(permits) +
                           " --redis " + url(server) +
                           " -- sh -c 'echo \"+ $(date +%s%N)\" >> " + log +
                           "; sleep 0.05; echo \"- $(date +%s%N)\" >> " + log + "' || exit $?; done";
  std::vector<std::unique_ptr<child_process>> children;
  for (int p = 0; p < processes; ++p) children.push_back(spawn({"sh", "-c", body}));
  for (auto& c : children) CHECK(c->wait(60s) == 0);
  int intervals = 0;
  const int most = most_at_once(log, intervals);
  CHECK(intervals == processes * rounds);
  CHECK(most <= permits);
  CHECK(most == permits);  // they did share the semaphore, not run one by one
  CHECK(raw.command("GET", "pool").text == std::to_string(permits));
  std::remove(log.c_str());
}

TEST_CASE("lockscope semaphore and latch: exit statuses and interrupted waits", "[lock][semaphore][cli][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const std::string u = url(server);
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), cli);
    auto c = spawn(args);
    const int status = c->wait(20s);
    return std::pair{status, c->output()};
  };
  CHECK(run({"semaphore", "s", "--permits", "1", "--redis", u, "--", "sh", "-c", "exit 7"}).first == 7);
  CHECK(raw.command("GET", "s").text == "1");
  raw.command("SET", "s", "0");
  auto [timed_out, why] = run({"semaphore", "s", "--wait", "100ms", "--redis", u, "--", "true"});
  CHECK(timed_out == 75);
  CHECK_THAT(why, Catch::Contains("timed out after 100ms"));
  CHECK(run({"semaphore", "s", "--wait", "5", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "s", "--count", "0", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "s", "--redis", "redis://127.0.0.1:1", "--", "true"}).first == 69);
  raw.command("SET", "s", "1");
  CHECK(run({"semaphore", "s", "--redis", u, "--", "no-such-program-lockscope"}).first == 127);
  CHECK(raw.command("GET", "s").text == "1");  // released all the same

  // SIGTERM while waiting: no permit taken, no subscription left.
  raw.command("SET", "s", "0");
  auto waiter = spawn({cli, "semaphore", "s", "--redis", u, "--", "true"});
  REQUIRE(eventually([&] { return raw.command("PUBSUB", "NUMSUB", "redisson_sc:{s}").elements.at(1).integer == 1; }, 5s));
  ::kill(waiter->pid, SIGTERM);
  CHECK(waiter->wait(10s) == 128 + SIGTERM);
  CHECK(raw.command("GET", "s").text == "0");
  CHECK(raw.command("PUBSUB", "NUMSUB", "redisson_sc:{s}").elements.at(1).integer == 0);

  // The latch verbs.
  CHECK(run({"latch", "l", "--count", "2", "--redis", u}).first == 0);
  CHECK(run({"latch", "l", "--count", "2", "--redis", u}).first == 1);
  CHECK(run({"latch", "l", "--await", "--wait", "100ms", "--redis", u}).first == 75);
  auto awaiting = spawn({cli, "latch", "l", "--await", "--wait", "20s", "--redis", u});
  REQUIRE(eventually(
      [&] {
        return raw.command("PUBSUB", "NUMSUB", "redisson_countdownlatch__channel__{l}").elements.at(1).integer == 1;
      },
      5s));
  CHECK(run({"latch", "l", "--count-down", "--redis", u}).first == 0);
  CHECK(run({"latch", "l", "--get", "--redis", u}).second == "1\n");
  CHECK(run({"latch", "l", "--count-down", "--redis", u}).first == 0);
  CHECK(awaiting->wait(5s) == 0);
  CHECK(run({"latch", "l", "--await", "--redis", u}).first == 0);  // gone: nothing to wait for
  CHECK(run({"latch", "l", "--count-down", "--await", "--redis", u}).first == 64);
}

TEST_CASE("lockscope semaphore --lease: Redisson's permit-expirable semaphore, a permit id with its own expiry",
          "[lock][semaphore][cli][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const std::string u = url(server);
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), cli);
    auto c = spawn(args);
    const int status = c->wait(20s);
    return std::pair{status, c->output()};
  };
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  // CMD's status; the permit comes back when CMD ends, its id leaves the timeout set.
  CHECK(run({"semaphore", "x", "--permits", "1", "--lease", "10s", "--redis", u, "--", "sh", "-c", "exit 7"}).first == 7);
  CHECK(raw.command("GET", "x").text == "1");
  CHECK(raw.command("ZCARD", "{x}:timeout").integer == 0);

  // While CMD runs: one id expiring a lease from now, no free permit,
  // and another process with --wait gives up with 75.
  auto holder = spawn({cli, "semaphore", "x", "--lease", "10s", "--redis", u, "--", "sleep", "1"});
  REQUIRE(eventually([&] { return raw.command("ZCARD", "{x}:timeout").integer == 1; }, 5s));
  const auto ids = raw.command("ZRANGE", "{x}:timeout", "0", "-1", "WITHSCORES");
  REQUIRE(ids.elements.size() == 2);
  CHECK(ids.elements[0].text.size() == 16);  // Redisson stores the 16 random bytes, the API shows hex
  const long long expires_in = std::stoll(ids.elements[1].text) - now_ms();
  CHECK(expires_in > 8000);
  CHECK(expires_in <= 10000);
  CHECK(raw.command("GET", "x").text == "0");
  auto [busy, busy_why] = run({"semaphore", "x", "--lease", "10s", "--wait", "100ms", "--redis", u, "--", "true"});
  CHECK(busy == 75);
  CHECK_THAT(busy_why, Catch::Contains("timed out after 100ms"));
  CHECK(holder->wait(10s) == 0);
  CHECK(raw.command("GET", "x").text == "1");
  CHECK(raw.command("ZCARD", "{x}:timeout").integer == 0);

  // A lease shorter than CMD: the permit came back on its own while CMD ran, so a waiter
  // got it then; the release finds it gone and says so (70 when CMD succeeded).
  auto overrun = spawn({cli, "semaphore", "x", "--lease", "300ms", "--redis", u, "--", "sleep", "1"});
  REQUIRE(eventually([&] { return raw.command("ZCARD", "{x}:timeout").integer == 1; }, 5s));
  const auto waited_from = std::chrono::steady_clock::now();
  CHECK(run({"semaphore", "x", "--lease", "10s", "--wait", "5s", "--redis", u, "--", "true"}).first == 0);
  CHECK(std::chrono::steady_clock::now() - waited_from < 1500ms);  // within the lease, plus a poll
  CHECK(overrun->wait(10s) == 70);
  CHECK_THAT(overrun->output(), Catch::Contains("expired after its lease of 300ms while CMD ran"));

  // Arguments.
  CHECK(run({"semaphore", "x", "--lease", "0", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "x", "--lease", "5", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "x", "--lease", "1s", "--count", "2", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "x", "--lease", "1s", "--redisson", "2.0.0", "--redis", u, "--", "true"}).first == 64);
  CHECK(run({"semaphore", "x", "--lease", "1s", "--redis", u, "--", "no-such-program-lockscope"}).first == 127);

  // SIGTERM while waiting (no --wait): no permit taken, no subscription left.
  raw.command("SET", "x", "0");
  auto waiter = spawn({cli, "semaphore", "x", "--lease", "10s", "--redis", u, "--", "true"});
  REQUIRE(eventually([&] { return raw.command("PUBSUB", "NUMSUB", "redisson_sc:{x}").elements.at(1).integer == 1; }, 5s));
  const auto signalled = std::chrono::steady_clock::now();
  ::kill(waiter->pid, SIGTERM);
  CHECK(waiter->wait(10s) == 128 + SIGTERM);
  CHECK(std::chrono::steady_clock::now() - signalled < 2s);  // cancelled, not left to the 5 s bound
  CHECK(raw.command("GET", "x").text == "0");
  CHECK(raw.command("ZCARD", "{x}:timeout").integer == 0);
  CHECK(raw.command("PUBSUB", "NUMSUB", "redisson_sc:{x}").elements.at(1).integer == 0);
}

namespace {

// /work/shared/redisson (or $LOCKSCOPE_REDISSON_DIR): real Redisson built offline.
std::optional<std::filesystem::path> redisson_dir() {
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("LOCKSCOPE_REDISSON_DIR"); env != nullptr && *env != '\0') candidates.emplace_back(env);
  candidates.emplace_back(std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / ".." / "shared" / "redisson");
  candidates.emplace_back("/work/shared/redisson");
  for (const auto& c : candidates) {
    if (std::filesystem::exists(c / "redisson-4.7.0-offline.jar")) return c;
  }
  return std::nullopt;
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

std::string redisson_classpath(const std::filesystem::path& dir, const std::string& release) {
  std::string cp = (dir / ("redisson-" + release + "-offline.jar")).string();
  for (const char* j : {"netty-buffer", "netty-codec", "netty-codec-dns", "netty-common", "netty-handler",
                        "netty-resolver", "netty-resolver-dns", "netty-transport", "netty-transport-native-epoll",
                        "netty-transport-native-kqueue", "netty-transport-native-unix-common", "jackson-databind",
                        "jackson-core", "jackson-annotations", "jackson-dataformat-yaml", "snakeyaml", "byte-buddy",
                        "slf4j-api", "geronimo-jcache-1.0-spec", "slf4j-simple"})
    cp += std::string(":/usr/share/java/") + j + ".jar";
  return cp;
}

}  // namespace

TEST_CASE("lockscope semaphore and latch beside real Redisson: permits never exceeded, wake-ups both ways",
          "[lock][semaphore][cli][redis][redisson]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto dir = redisson_dir();
  if (!dir || !on_path("java") || !on_path("javac")) {
    WARN("real Redisson needs /work/shared/redisson (or $LOCKSCOPE_REDISSON_DIR) and a JDK (java, javac; "
         "scripts/install-deps --test): skipping");
    return;
  }
  for (const std::string release : {"4.7.0", "3.16.8"}) {
    DYNAMIC_SECTION("Redisson " << release) {
      const std::string cp = redisson_classpath(*dir, release);
      char work_template[] = "/tmp/lockscope-redisson-sem-XXXXXX";
      REQUIRE(::mkdtemp(work_template) != nullptr);
      const std::filesystem::path work = work_template;
      const std::string classes = (work / "classes").string();
      auto javac = spawn({"javac", "-nowarn", "-cp", cp, "-d", classes,
                          std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/RedissonSemaphoreDriver.java"});
      REQUIRE(javac->wait(120s) == 0);
      redis_server server;
      resp_connection raw(server.host(), server.port());
      const std::string u = url(server);
      const std::string log = (work / "holds.log").string();
      constexpr int permits = 2;
      auto run = [&](std::vector<std::string> args) {
        args.insert(args.begin(), cli);
        auto c = spawn(args);
        return c->wait(120s);
      };
      REQUIRE(run({"latch", "go", "--count", "1", "--redis", u}) == 0);
      REQUIRE(run({"latch", "back", "--count", "1", "--redis", u}) == 0);
      auto java = spawn({"java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classes + ":" + cp,
                         "RedissonSemaphoreDriver", std::to_string(server.port()), "pool", std::to_string(permits), "3",
                         "4", "go", "back", log});
      // Redisson waits on the latch's channel once its JVM is up (seconds on 2 cores).
      REQUIRE(eventually(
          [&] {
            return raw.command("PUBSUB", "NUMSUB", "redisson_countdownlatch__channel__{go}").elements.at(1).integer == 1;
          },
          120s, 50ms));
      // lockscope waits for Redisson's count-down meanwhile.
      auto back = spawn({cli, "latch", "back", "--await", "--wait", "120s", "--redis", u});
      const std::string body = "for i in 1 2 3 4; do " + cli + " semaphore pool --permits " + std::to_string(permits) +
                               " --redis " + u + " -- sh -c 'echo \"+ $(date +%s%N)\" >> " + log +
                               "; sleep 0.05; echo \"- $(date +%s%N)\" >> " + log + "' || exit $?; done";
      std::vector<std::unique_ptr<child_process>> ours;
      for (int p = 0; p < 3; ++p) ours.push_back(spawn({"sh", "-c", body}));
      const auto released = std::chrono::system_clock::now();
      REQUIRE(run({"latch", "go", "--count-down", "--redis", u}) == 0);
      const auto counted_down = std::chrono::system_clock::now();  // the count-down process has exited
      for (auto& c : ours) CHECK(c->wait(120s) == 0);
      // The permit-expirable semaphore pool-x: lockscope threads beside Redisson's.
      {
        lock::client redis(lockscope::test::config_for(server));
        std::vector<std::thread> threads;
        std::mutex log_mutex;
        auto mark = [&](const char* what) {
          const auto ns =
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
          std::lock_guard guard(log_mutex);
          std::ofstream(log, std::ios::app) << what << " " << ns.count() << "\n";
        };
        redis.get_permit_expirable_semaphore("pool-x").try_set_permits(permits);
        for (int t = 0; t < 3; ++t) {
          threads.emplace_back([&] {
            auto pes = redis.get_permit_expirable_semaphore("pool-x");
            for (int i = 0; i < 4; ++i) {
              const std::string id = pes.acquire(std::chrono::seconds(10));
              mark("+x");
              std::this_thread::sleep_for(50ms);
              mark("-x");
              pes.release(id);
            }
          });
        }
        for (auto& t : threads) t.join();
      }
      CHECK(java->wait(120s) == 0);
      CHECK(back->wait(10s) == 0);  // Redisson's count-down woke lockscope's await
      int intervals = 0;
      const int most = most_at_once(log, intervals);
      CHECK(intervals == 3 * 4 + 3 * 4);
      CHECK(most <= permits);
      CHECK(raw.command("GET", "pool").text == std::to_string(permits));
      int expirable_intervals = 0;
      const int most_expirable = most_at_once(log, expirable_intervals, "x");
      CHECK(expirable_intervals > 12);  // ours (12) and some of Redisson's, at least
      CHECK(most_expirable <= permits);
      // Redisson's await woke on lockscope's count-down message.
      std::ifstream in(log);
      std::string sign;
      long long at = 0;
      long long woke = 0;
      while (in >> sign >> at) {
        if (sign == "woke") woke = at;
      }
      const long long sent = std::chrono::duration_cast<std::chrono::nanoseconds>(released.time_since_epoch()).count();
      const long long exited =
          std::chrono::duration_cast<std::chrono::nanoseconds>(counted_down.time_since_epoch()).count();
      INFO("count-down process started at " << sent << ", exited at " << exited << ", Redisson woke at " << woke
                                            << " (" << (woke - exited) / 1000000 << " ms after the exit)");
      CHECK(woke > sent);
      // From the count-down process's exit, not its start: a sanitizer build takes
      // 250-350 ms to start it on 2 busy cores, and a JVM on 2 loaded cores took 304 ms to
      // wake. A lost wake-up shows as Redisson's await timing out: 120 s.
      CHECK(woke - exited < 1'000'000'000LL);
      std::filesystem::remove_all(work);
    }
  }
}
