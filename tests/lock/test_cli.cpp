// `lockscope lock` as a process, against a real redis-server.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "lockscope/test/tls_certificates.hpp"
#include "process.hpp"
#include "replication.hpp"

using namespace std::chrono_literals;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using lockscope::test::spawn;

namespace {

std::string url_of(const redis_server& s) { return "redis://" + s.host() + ":" + std::to_string(s.port()); }

std::vector<std::string> lock_command(const std::string& url, const std::string& name, std::vector<std::string> extra,
                                      std::vector<std::string> cmd) {
  std::vector<std::string> args{LOCKSCOPE_CLI, "lock", name, "--redis", url};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), cmd.begin(), cmd.end());
  return args;
}

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    char name[] = "/tmp/lockscope-cli-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

// A CMD that runs until the test opens the gate: holds that outlast any slow process
// start (ASan, a loaded machine), where `sleep 1` would end too early.
struct gate {
  temp_dir dir;
  std::vector<std::string> wait_command() const {
    return {"sh", "-c", "while [ ! -e '" + (dir.path / "open").string() + "' ]; do sleep 0.02; done"};
  }
  void open() const { std::ofstream(dir.path / "open") << '\n'; }
};

int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

using worker_list = std::vector<std::unique_ptr<lockscope::test::child_process>>;

// A shell loop running `command` `times` times in a row; exits 9 at the first failure.
std::unique_ptr<lockscope::test::child_process> repeat(const std::string& command, int times,
                                                       const std::vector<std::string>& env = {}) {
  return spawn({"sh", "-c", "i=0; while [ $i -lt " + std::to_string(times) + " ]; do " + command +
                                " || exit 9; i=$((i+1)); done"},
               env);
}

void check_all_succeed(worker_list& workers) {
  for (auto& w : workers) {
    const int status = w->wait(std::chrono::seconds(240));
    INFO(w->output());
    CHECK(status == 0);
  }
}

long long counter_in(const temp_dir& dir) {
  std::ifstream counter(dir.path / "counter");
  long long count = 0;
  counter >> count;
  return count;
}

// "<start ns> <end ns>" lines, as lock_test_helper logs its sections.
std::vector<std::pair<long long, long long>> intervals(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::pair<long long, long long>> out;
  long long start = 0, end = 0;
  while (in >> start >> end) out.emplace_back(start, end);
  return out;
}

bool overlap(const std::pair<long long, long long>& a, const std::pair<long long, long long>& b) {
  return a.first < b.second && b.first < a.second;
}

}  // namespace

TEST_CASE("lockscope lock: 4 processes x 50 iterations keep an exact counter", "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  temp_dir dir;
  {
    std::ofstream(dir.path / "counter") << 0 << '\n';
  }
  // Each worker is a shell loop running `lockscope lock` 50 times in a row.
  const std::string one = std::string(LOCKSCOPE_CLI) + " lock counter --redis " + url_of(server) + " -- " +
                          LOCK_TEST_HELPER + " critical " + dir.path.string();
  worker_list workers;
  for (int w = 0; w < 4; ++w) workers.push_back(repeat(one, 50));
  check_all_succeed(workers);
  CHECK(counter_in(dir) == 200);

  // Critical sections, by start: none may begin before the previous one ended.
  auto sections = intervals(dir.path / "log");
  REQUIRE(sections.size() == 200);
  std::sort(sections.begin(), sections.end());
  int overlaps = 0;
  for (std::size_t i = 1; i < sections.size(); ++i) {
    if (sections[i].first < sections[i - 1].second) ++overlaps;
  }
  CHECK(overlaps == 0);
  resp_connection raw(server.host(), server.port());
  CHECK(raw.command("EXISTS", "counter").integer == 0);
}

TEST_CASE("lockscope lock: exit status, timeout 75, try once, release", "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const std::string url = url_of(server);

  SECTION("CMD's status is ours, and the lock is released") {
    auto p = spawn(lock_command(url, "job", {}, {"sh", "-c", "exit 3"}));
    CHECK(p->wait(20s) == 3);
    CHECK(raw.command("EXISTS", "job").integer == 0);
  }
  SECTION("the lock is held while CMD runs, with the watchdog's lease") {
    auto p = spawn(lock_command(url, "job", {}, {"sleep", "1"}));
    // Polled until CMD's second is over: the CLI's start-up alone can take a second
    // under ASan on a loaded machine.
    bool seen = false;
    for (const auto end = std::chrono::steady_clock::now() + 15s; !seen && std::chrono::steady_clock::now() < end;) {
      seen = raw.command("EXISTS", "job").integer == 1;
      if (!seen) std::this_thread::sleep_for(5ms);
    }
    CHECK(seen);
    CHECK(raw.command("PTTL", "job").integer > 20000);  // 30 s watchdog lease
    CHECK(p->wait(20s) == 0);
    CHECK(raw.command("EXISTS", "job").integer == 0);
  }
  SECTION("not acquired in time: 75 and one line") {
    raw.command("HSET", "job", "someone-else:1", 1);
    const auto t = std::chrono::steady_clock::now();
    auto p = spawn(lock_command(url, "job", {"--wait", "300ms"}, {"true"}));
    CHECK(p->wait(20s) == 75);
    CHECK(std::chrono::steady_clock::now() - t >= 300ms);
    CHECK(p->output() == "lockscope lock: timed out after 300ms waiting for lock 'job'\n");
    auto once = spawn(lock_command(url, "job", {"--wait", "0"}, {"true"}));
    CHECK(once->wait(20s) == 75);
    CHECK(raw.command("HGET", "job", "someone-else:1").text == "1");  // untouched
  }
  SECTION("--lease and --owner") {
    auto p = spawn(lock_command(url, "job", {"--lease", "10s", "--owner", "ops:7"},
                                {"sh", "-c", "sleep 0.5"}));
    bool seen = false;
    for (const auto end = std::chrono::steady_clock::now() + 15s; !seen && std::chrono::steady_clock::now() < end;) {
      seen = raw.command("HGET", "job", "ops:7").text == "1";
      if (!seen) std::this_thread::sleep_for(5ms);
    }
    CHECK(seen);
    const auto pttl = raw.command("PTTL", "job").integer;
    CHECK(pttl <= 10000);
    CHECK(pttl > 5000);
    CHECK(p->wait(20s) == 0);
    CHECK(raw.command("EXISTS", "job").integer == 0);
  }
  SECTION("CMD not found: 127, lock released") {
    auto p = spawn(lock_command(url, "job", {}, {"/nonexistent/cmd"}));
    CHECK(p->wait(20s) == 127);
    CHECK(line_count(p->output()) == 1);
    CHECK(raw.command("EXISTS", "job").integer == 0);
  }
  SECTION("CMD searched on PATH as execvp does: found, missing (127), or not executable (126)") {
    temp_dir dir;
    const std::string not_executable = (dir.path / "plain-file").string();
    std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
    auto found = spawn(lock_command(url, "job", {}, {"sh", "-c", "exit 3"}));
    CHECK(found->wait(20s) == 3);
    auto missing = spawn(lock_command(url, "job", {}, {"lockscope-no-such-command"}));
    CHECK(missing->wait(20s) == 127);
    CHECK_THAT(missing->output(), Catch::Contains("No such file or directory"));
    auto denied = spawn(lock_command(url, "job", {}, {not_executable}));
    CHECK(denied->wait(20s) == 126);
    CHECK_THAT(denied->output(), Catch::Contains("Permission denied"));
    // On PATH: a directory where it is not executable, then one where it is.
    const std::filesystem::path bin = dir.path / "bin";
    std::filesystem::create_directory(bin);
    std::ofstream(bin / "plain-file") << "#!/bin/sh\nexit 5\n";
    std::filesystem::permissions(bin / "plain-file", std::filesystem::perms::owner_all);
    auto later = spawn(lock_command(url, "job", {}, {"plain-file"}),
                       {"PATH=" + dir.path.string() + ":" + bin.string() + ":/usr/bin:/bin"});
    CHECK(later->wait(20s) == 5);
    CHECK(raw.command("EXISTS", "job").integer == 0);
  }
}

TEST_CASE("lockscope lock: SIGTERM and SIGINT are forwarded to CMD and the lock is released",
          "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const int sig = GENERATE(SIGTERM, SIGINT);
  temp_dir dir;
  const std::string marker = (dir.path / "got").string();
  // The shell records the signal it receives, then exits with 128+signal.
  auto p = spawn(lock_command(url_of(server), "sig", {},
                              {"sh", "-c", "trap 'echo $1 > " + marker + "; exit 99' TERM INT; echo started; "
                                           "while true; do sleep 0.05; done"}));
  lockscope::test::wait_for_output(*p, "started", 10s);
  CHECK(raw.command("EXISTS", "sig").integer == 1);
  ::kill(p->pid, sig);
  CHECK(p->wait(20s) == 99);
  CHECK(std::filesystem::exists(marker));
  CHECK(raw.command("EXISTS", "sig").integer == 0);
}

TEST_CASE("lockscope lock: killed with SIGKILL while CMD runs, CMD gets SIGTERM and the lock runs out",
          "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  temp_dir dir;
  const std::string marker = (dir.path / "got").string();
  const std::string pid_file = (dir.path / "pid").string();
  // CMD records its pid, and SIGTERM when it comes; without it, it would run on forever.
  auto p = spawn(lock_command(url_of(server), "orphaned", {"--lease", "20s"},
                              {"sh", "-c", "trap 'echo term > " + marker + "; exit 0' TERM; echo $$ > " + pid_file +
                                               "; echo started; while true; do sleep 0.05; done"}));
  lockscope::test::wait_for_output(*p, "started", 10s);
  pid_t cmd = 0;
  std::ifstream(pid_file) >> cmd;
  REQUIRE(cmd > 0);
  CHECK(raw.command("EXISTS", "orphaned").integer == 1);
  ::kill(p->pid, SIGKILL);
  CHECK(p->wait(20s) == 128 + SIGKILL);
  bool terminated = false;
  for (int i = 0; i < 500 && !terminated; ++i) {
    terminated = std::filesystem::exists(marker);
    if (!terminated) std::this_thread::sleep_for(10ms);
  }
  if (!terminated) ::kill(cmd, SIGKILL);  // not left running after a failed check
  CHECK(terminated);
  // Nobody released it: the lock is still there, and runs out within its lease.
  CHECK(raw.command("EXISTS", "orphaned").integer == 1);
  const long long ttl = raw.command("PTTL", "orphaned").integer;
  CHECK(ttl > 0);
  CHECK(ttl <= 20000);
}

TEST_CASE("lockscope lock: a signal while waiting stops the wait", "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  raw.command("HSET", "waited", "someone-else:1", 1);
  auto p = spawn(lock_command(url_of(server), "waited", {}, {"true"}));
  // Wait until it is subscribed, then interrupt it.
  for (int i = 0; i < 500; ++i) {
    if (raw.command("PUBSUB", "NUMSUB", "redisson_lock__channel:{waited}").elements.at(1).integer == 1) break;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(p->pid, SIGTERM);
  CHECK(p->wait(20s) == 128 + SIGTERM);
  CHECK(line_count(p->output()) == 1);
  CHECK(raw.command("HGET", "waited", "someone-else:1").text == "1");
}

TEST_CASE("lockscope lock: exit 70 when the lock was lost while CMD ran, or Redis refused the acquire script",
          "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  SECTION("lost while CMD ran: CMD's 0 becomes 70") {
    // The --lease runs out while CMD sleeps (no watchdog renews a --lease): the release
    // after CMD is refused. A watchdog's loss (a deleted key) takes its 10 s renewal
    // period to be seen, and ends the same way.
    auto p = spawn(lock_command(url_of(server), "lost", {"--lease", "300ms"}, {"sleep", "1"}));
    CHECK(p->wait(20s) == 70);
    CHECK(p->output().find("releasing 'lost' failed: attempt to unlock lock, not locked by current thread") !=
          std::string::npos);
  }
  SECTION("a key of another kind: WRONGTYPE") {
    raw.command("SET", "a-string", "redis-py's lock token");
    auto p = spawn(lock_command(url_of(server), "a-string", {}, {"true"}));
    CHECK(p->wait(20s) == 70);
    // Redis's own text (it goes on to name the script), on one line.
    CHECK(p->output().starts_with(
        "lockscope lock: acquiring 'a-string' failed: WRONGTYPE Operation against a key holding the wrong kind of value"));
    CHECK(line_count(p->output()) == 1);
    CHECK(raw.command("GET", "a-string").text == "redis-py's lock token");
  }
}

TEST_CASE("lockscope lock: one-line errors for a bad URL, a refused connection, a wrong password",
          "[lock][cli][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  SECTION("bad URL") {
    auto p = spawn(lock_command("http://localhost", "x", {}, {"true"}));
    CHECK(p->wait(20s) == 64);
    CHECK(p->output() ==
          "lockscope lock: bad Redis URL: 'http://localhost' does not start with redis://, rediss://, "
          "redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://\n");
    auto tls = spawn(lock_command("redis://localhost", "x", {"--insecure"}, {"true"}));
    CHECK(tls->wait(20s) == 64);
    CHECK(tls->output() == "lockscope lock: --tls-ca, --tls-cert, --tls-key and --insecure need a rediss:// URL\n");
    auto sentinel = spawn(lock_command("redis-sentinel://s1,s2:0#m", "x", {}, {"true"}));
    CHECK(sentinel->wait(20s) == 64);
    CHECK(sentinel->output() ==
          "lockscope lock: bad Redis URL: sentinel 2 in the URL: 's2:0': port '0' is not a number in 1..65535\n");
    auto no_name = spawn(lock_command("redis-sentinel://s1", "x", {}, {"true"}));
    CHECK(no_name->wait(20s) == 64);
    CHECK(no_name->output() == "lockscope lock: bad Redis URL: no master name in 'redis-sentinel://s1': end a "
                               "Sentinel URL with #mastername\n");
    auto auth = spawn(lock_command("redis://localhost", "x", {"--sentinel-password", "p"}, {"true"}));
    CHECK(auth->wait(20s) == 64);
    CHECK(auth->output() ==
          "lockscope lock: --sentinel-user and --sentinel-password need a redis-sentinel:// or rediss-sentinel:// URL\n");
    auto dialect = spawn(lock_command("redis://localhost", "x", {"--redisson", "3.16"}, {"true"}));
    CHECK(dialect->wait(20s) == 64);
    CHECK(dialect->output() == "lockscope lock: --redisson: '3.16' is not a Redisson release this client knows "
                               "(3.11.1 to 4.7.0, as tagged: e.g. 4.7.0, 3.27.2, 3.16.8)\n");
  }
  SECTION("no sentinel answers: exit 69 at once, naming each one tried") {
    const auto a = lockscope::test::find_free_port();
    const auto b = lockscope::test::find_free_port();
    const auto started = std::chrono::steady_clock::now();
    auto p = spawn(lock_command(fmt::format("redis-sentinel://127.0.0.1:{},127.0.0.1:{}#mymaster", a, b), "x", {},
                                {"true"}));
    CHECK(p->wait(20s) == 69);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(p->output() ==
          fmt::format("lockscope lock: no sentinel gave the address of master 'mymaster' (tried 127.0.0.1:{0}: connect "
                      "to 127.0.0.1:{0}: Connection refused; 127.0.0.1:{1}: connect to 127.0.0.1:{1}: Connection "
                      "refused)\n",
                      a, b));
  }
  SECTION("bad duration") {
    auto p = spawn(lock_command("redis://127.0.0.1:1", "x", {"--wait", "5x"}, {"true"}));
    CHECK(p->wait(20s) == 64);
    CHECK(line_count(p->output()) == 1);
  }
  SECTION("a duration without its unit: refused the same way by --wait, --lease and --sync-timeout") {
    for (const char* option : {"--wait", "--lease", "--sync-timeout"}) {
      CAPTURE(option);
      std::vector<std::string> args = {option, "5"};
      if (std::string(option) == "--sync-timeout") args.insert(args.end(), {"--sync-replicas", "1"});
      auto p = spawn(lock_command("redis://127.0.0.1:1", "x", args, {"true"}));
      CHECK(p->wait(20s) == 64);
      CHECK(p->output() == fmt::format("lockscope lock: {}: '5' needs a unit: 5ms or 5s (units: ms, s, m, h)\n", option));
    }
  }
  SECTION("an unknown option: the nearest one named") {
    auto p = spawn({LOCKSCOPE_CLI, "lock", "x", "--wiat", "5s", "--", "true"});
    CHECK(p->wait(20s) == 64);
    CHECK(p->output() ==
          "lockscope lock: unknown option --wiat (did you mean --wait?)\nRun 'lockscope lock --help' for the options.\n");
  }
  SECTION("refused") {
    const auto port = lockscope::test::find_free_port();
    auto p = spawn(lock_command("redis://127.0.0.1:" + std::to_string(port), "x", {}, {"true"}));
    CHECK(p->wait(20s) == 69);
    CHECK(p->output() == "lockscope lock: connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused\n");
  }
  SECTION("wrong password, and the URL from LOCKSCOPE_REDIS") {
    redis_server server({"--requirepass", "Root@123"});
    auto p = spawn({LOCKSCOPE_CLI, "lock", "x", "--", "true"},
                   {"LOCKSCOPE_REDIS=redis://:wrong@127.0.0.1:" + std::to_string(server.port())});
    CHECK(p->wait(20s) == 77);
    CHECK_THAT(p->output(), Catch::StartsWith("lockscope lock: AUTH to 127.0.0.1:") && Catch::Contains("WRONGPASS"));
    CHECK(line_count(p->output()) == 1);
    auto ok = spawn({LOCKSCOPE_CLI, "lock", "x", "--", "true"},
                    {"LOCKSCOPE_REDIS=redis://:Root%40123@127.0.0.1:" + std::to_string(server.port())});
    CHECK(ok->wait(20s) == 0);
  }
}

TEST_CASE("lockscope lock --fair: processes queued in a known order acquire in that order",
          "[lock][cli][redis][process][fair]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  temp_dir dir;
  const std::string url = url_of(server);
  const std::string release = (dir.path / "release").string();
  const std::string order = (dir.path / "order").string();
  auto holder = spawn(lock_command(url, "fifo", {"--fair"},
                                   {"sh", "-c", "while [ ! -e " + release + " ]; do sleep 0.01; done"}));
  bool held = false;
  for (int i = 0; i < 500 && !held; ++i) {
    held = raw.command("EXISTS", "fifo").integer == 1;
    if (!held) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(held);
  constexpr int waiters = 4;
  std::vector<std::unique_ptr<lockscope::test::child_process>> queued;
  for (int i = 0; i < waiters; ++i) {
    queued.push_back(spawn(lock_command(url, "fifo", {"--fair"}, {"sh", "-c", "echo " + std::to_string(i) + " >> " + order})));
    bool in_queue = false;
    for (int k = 0; k < 500 && !in_queue; ++k) {
      in_queue = raw.command("LLEN", "redisson_lock_queue:{fifo}").integer == i + 1;
      if (!in_queue) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(in_queue);
  }
  std::ofstream(release) << "go\n";
  CHECK(holder->wait(30s) == 0);
  for (auto& p : queued) {
    INFO(p->output());
    CHECK(p->wait(30s) == 0);
  }
  std::ifstream in(order);
  std::stringstream got;
  got << in.rdbuf();
  CHECK(got.str() == "0\n1\n2\n3\n");
  CHECK(raw.command("EXISTS", "fifo", "redisson_lock_queue:{fifo}", "redisson_lock_timeout:{fifo}").integer == 0);
}

TEST_CASE("lockscope lock --fair: a waiter interrupted by SIGTERM leaves the queue", "[lock][cli][redis][process][fair]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  raw.command("HSET", "fq", "someone-else:1", 1);  // held, no expiry
  auto p = spawn(lock_command(url_of(server), "fq", {"--fair"}, {"true"}));
  bool in_queue = false;
  for (int k = 0; k < 500 && !in_queue; ++k) {
    in_queue = raw.command("LLEN", "redisson_lock_queue:{fq}").integer == 1;
    if (!in_queue) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(in_queue);
  ::kill(p->pid, SIGTERM);
  CHECK(p->wait(20s) == 128 + SIGTERM);
  // Otherwise the waiters behind it would wait out its 5-minute thread wait time.
  CHECK(raw.command("EXISTS", "redisson_lock_queue:{fq}", "redisson_lock_timeout:{fq}").integer == 0);
}

TEST_CASE("lockscope lock over rediss://: --tls-ca, --tls-cert/--tls-key, --insecure, and TLS failures exit 69",
          "[lock][cli][redis][process][tls]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  if (!lockscope::test::openssl_cli_available()) {
    WARN("the openssl CLI is not installed: skipping");
    return;
  }
  const auto& certs = lockscope::test::tls_certificates::shared();
  const auto tls_server = [&](const std::string& certificate, bool auth_clients) {
    lockscope::test::redis_server_options o;
    o.tls = certs.server_tls(certificate, auth_clients);
    o.tls->plain_port_too = true;
    return std::make_unique<redis_server>(std::move(o));
  };
  const auto tls_url = [](const redis_server& s) { return "rediss://127.0.0.1:" + std::to_string(s.tls_port()); };
  const std::vector<std::string> trust{"--tls-ca", certs.file("ca.pem")};
  // CMD checks, over the plain port, that the lock is held while it runs.
  const auto held_check = [](const redis_server& s, const std::string& name) {
    return std::vector<std::string>{"sh", "-c",
                                    "[ \"$(redis-cli -p " + std::to_string(s.port()) + " EXISTS " + name +
                                        ")\" = 1 ] && exit 7"};
  };

  SECTION("verified TLS, the URL on the command line and from LOCKSCOPE_REDIS") {
    auto server = tls_server("server", false);
    auto p = spawn(lock_command(tls_url(*server), "tls-cli", trust, held_check(*server, "tls-cli")));
    CHECK(p->wait(20s) == 7);
    CHECK(p->output().empty());
    std::vector<std::string> args{LOCKSCOPE_CLI, "lock", "tls-env", "--tls-ca", certs.file("ca-dir"), "--"};
    for (auto& a : held_check(*server, "tls-env")) args.push_back(a);
    auto env = spawn(args, {"LOCKSCOPE_REDIS=" + tls_url(*server)});
    CHECK(env->wait(20s) == 7);
    resp_connection raw(server->host(), server->port());
    CHECK(raw.command("EXISTS", "tls-cli", "tls-env").integer == 0);
  }
  SECTION("mutual TLS") {
    auto server = tls_server("server", true);
    auto with_cert = trust;
    with_cert.insert(with_cert.end(), {"--tls-cert", certs.file("client.pem"), "--tls-key", certs.file("client.key")});
    auto ok = spawn(lock_command(tls_url(*server), "mtls", with_cert, held_check(*server, "mtls")));
    CHECK(ok->wait(20s) == 7);
    auto refused = spawn(lock_command(tls_url(*server), "mtls", trust, {"true"}));
    CHECK(refused->wait(20s) == 69);
    CHECK_THAT(refused->output(), Catch::StartsWith("lockscope lock: TLS"));
    CHECK(line_count(refused->output()) == 1);
    auto half = spawn(lock_command(tls_url(*server), "mtls", {"--tls-cert", certs.file("client.pem")}, {"true"}));
    CHECK(half->wait(20s) == 64);
    CHECK(half->output() == "lockscope lock: --tls-cert needs --tls-key\n");
  }
  SECTION("an untrusted server certificate: exit 69, one line; --insecure accepts it") {
    auto server = tls_server("other-ca-server", false);
    auto p = spawn(lock_command(tls_url(*server), "untrusted", trust, {"true"}));
    CHECK(p->wait(20s) == 69);
    CHECK_THAT(p->output(), Catch::StartsWith("lockscope lock: TLS: certificate not trusted (unknown CA)"));
    CHECK(line_count(p->output()) == 1);
    auto insecure = spawn(lock_command(tls_url(*server), "untrusted", {"--insecure"}, {"true"}));
    CHECK(insecure->wait(20s) == 0);
  }
  SECTION("an expired server certificate") {
    auto server = tls_server("expired", false);
    auto p = spawn(lock_command(tls_url(*server), "expired", trust, {"true"}));
    CHECK(p->wait(20s) == 69);
    CHECK_THAT(p->output(), Catch::StartsWith("lockscope lock: TLS: certificate expired"));
  }
  SECTION("a CA file that does not exist is a usage error") {
    auto server = tls_server("server", false);
    auto p = spawn(lock_command(tls_url(*server), "x", {"--tls-ca", "/nonexistent/ca.pem"}, {"true"}));
    CHECK(p->wait(20s) == 64);
    CHECK(p->output() ==
          "lockscope lock: TLS: cannot load the CA file '/nonexistent/ca.pem': no such file or directory\n");
  }
}

TEST_CASE("lockscope lock --fenced: CMD gets LOCKSCOPE_FENCE_TOKEN, larger for every holder",
          "[lock][cli][redis][process][fenced]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  temp_dir dir;
  const std::string log = (dir.path / "tokens").string();
  // Three processes looping over `lockscope lock --fenced`: each appends its token under
  // the lock, so the file's order is the holders' order.
  const std::string one = std::string(LOCKSCOPE_CLI) + " lock --fenced tok --redis " + url_of(server) +
                          " -- sh -c 'echo $LOCKSCOPE_FENCE_TOKEN >> " + log + "'";
  worker_list workers;
  for (int w = 0; w < 3; ++w) workers.push_back(repeat(one, 10, {"LOCKSCOPE_FENCE_TOKEN=999999"}));  // not inherited
  check_all_succeed(workers);
  std::ifstream in(log);
  std::vector<long long> tokens;
  long long t = 0;
  while (in >> t) tokens.push_back(t);
  REQUIRE(tokens.size() == 30);
  for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(tokens[i] > tokens[i - 1]);
  resp_connection raw(server.host(), server.port());
  CHECK(raw.command("GET", "redisson_lock_token:{tok}").text == std::to_string(tokens.back()));

  SECTION("without --fenced, no token; with --fair, a usage error") {
    auto plain = spawn(lock_command(url_of(server), "tok", {}, {"sh", "-c", "echo \"[$LOCKSCOPE_FENCE_TOKEN]\""}));
    CHECK(plain->wait(20s) == 0);
    CHECK(plain->output() == "[]\n");
    auto both = spawn(lock_command(url_of(server), "tok", {"--fair", "--fenced"}, {"true"}));
    CHECK(both->wait(20s) == 64);
  }
}


TEST_CASE("lockscope lock --read/--write: readers run together, writers alone, from several processes",
          "[lock][cli][redis][process][rwlock]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const std::string url = url_of(server);

  SECTION("two readers hold at once; a writer times out meanwhile, then runs") {
    const gate readers_done;
    auto r1 = spawn(lock_command(url, "rwj", {"--read"}, readers_done.wait_command()));
    auto r2 = spawn(lock_command(url, "rwj", {"--read"}, readers_done.wait_command()));
    bool both = false;
    for (int i = 0; i < 400 && !both; ++i) {
      both = raw.command("HLEN", "rwj").integer == 3;  // mode + two readers
      if (!both) std::this_thread::sleep_for(5ms);
    }
    CHECK(both);
    CHECK(raw.command("HGET", "rwj", "mode").text == "read");
    auto w = spawn(lock_command(url, "rwj", {"--write", "--wait", "200ms"}, {"true"}));
    CHECK(w->wait(20s) == 75);
    auto waiting = spawn(lock_command(url, "rwj", {"--write"}, {"sh", "-c", "exit 4"}));
    readers_done.open();
    CHECK(r1->wait(20s) == 0);
    CHECK(r2->wait(20s) == 0);
    CHECK(waiting->wait(20s) == 4);  // it ran once both readers were gone
    CHECK(raw.command("EXISTS", "rwj").integer == 0);
    auto both_flags = spawn(lock_command(url, "rwj", {"--read", "--write"}, {"true"}));
    CHECK(both_flags->wait(20s) == 64);
  }
  SECTION("2 writer and 2 reader processes x 8: no writer overlaps anyone, the counter is exact") {
    temp_dir dir;
    {
      std::ofstream(dir.path / "counter") << 0 << '\n';
    }
    auto loop = [&](const std::string& flag, const std::string& mode) {
      const std::string one = std::string(LOCKSCOPE_CLI) + " lock rwc " + flag + " --redis " + url + " -- " +
                              LOCK_TEST_HELPER + " " + mode + " " + dir.path.string();
      return repeat(one, 8);
    };
    worker_list workers;
    workers.push_back(loop("--write", "critical"));
    workers.push_back(loop("--read", "reader"));
    workers.push_back(loop("--write", "critical"));
    workers.push_back(loop("--read", "reader"));
    check_all_succeed(workers);
    CHECK(counter_in(dir) == 16);
    const auto writes = intervals(dir.path / "log");
    const auto reads = intervals(dir.path / "readlog");
    REQUIRE(writes.size() == 16);
    REQUIRE(reads.size() == 16);
    int overlaps = 0;
    for (std::size_t i = 0; i < writes.size(); ++i) {
      for (std::size_t j = i + 1; j < writes.size(); ++j) overlaps += overlap(writes[i], writes[j]);
      for (const auto& r : reads) overlaps += overlap(writes[i], r);
    }
    CHECK(overlaps == 0);
    CHECK(raw.command("EXISTS", "rwc").integer == 0);
  }
}

TEST_CASE("lockscope lock with three --redis: a RedLock (or --multi), 75 without a majority in time, 69 unreachable",
          "[lock][cli][redis][process][redlock]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  std::vector<std::unique_ptr<redis_server>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<redis_server>());
  std::vector<std::string> redis_args;
  for (const auto& s : servers) {
    redis_args.push_back("--redis");
    redis_args.push_back(url_of(*s));
  }
  auto red_command = [&](const std::string& name, std::vector<std::string> extra, std::vector<std::string> cmd) {
    std::vector<std::string> args{LOCKSCOPE_CLI, "lock", name};
    args.insert(args.end(), redis_args.begin(), redis_args.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return args;
  };
  auto keys_on = [&](const std::string& key) {
    int n = 0;
    for (const auto& s : servers) {
      if (!s->running()) continue;
      resp_connection raw(s->host(), s->port());
      n += static_cast<int>(raw.command("EXISTS", key).integer);
    }
    return n;
  };

  // 3 processes x 8 RedLock critical sections: an exact counter, no overlap.
  temp_dir dir;
  {
    std::ofstream(dir.path / "counter") << 0 << '\n';
  }
  std::string one = std::string(LOCKSCOPE_CLI) + " lock rc";
  for (const auto& a : redis_args) one += " " + a;
  one += std::string(" -- ") + LOCK_TEST_HELPER + " critical " + dir.path.string();
  worker_list workers;
  for (int w = 0; w < 3; ++w) workers.push_back(repeat(one, 8));
  check_all_succeed(workers);
  CHECK(counter_in(dir) == 24);
  CHECK(keys_on("rc") == 0);

  // Held by one RedLock: another gets no majority within --wait.
  const gate holder_done;
  auto holder = spawn(red_command("rl", {}, holder_done.wait_command()));
  bool held = false;
  for (int i = 0; i < 400 && !held; ++i) {
    held = keys_on("rl") == 3;
    if (!held) std::this_thread::sleep_for(5ms);
  }
  CHECK(held);
  auto late = spawn(red_command("rl", {"--wait", "200ms"}, {"true"}));
  CHECK(late->wait(20s) == 75);
  auto multi_late = spawn(red_command("rl", {"--multi", "--wait", "200ms"}, {"true"}));
  CHECK(multi_late->wait(20s) == 75);
  holder_done.open();
  CHECK(holder->wait(20s) == 0);
  CHECK(keys_on("rl") == 0);

  servers[0]->stop();
  auto with_two = spawn(red_command("rl", {"--wait", "5s"}, {"sh", "-c", "exit 5"}));
  CHECK(with_two->wait(30s) == 5);  // a majority of 2 of 3
  auto multi_two = spawn(red_command("rl", {"--multi", "--wait", "1s"}, {"true"}));
  CHECK(multi_two->wait(30s) == 69);  // a MultiLock needs every server
  servers[1]->stop();
  auto with_one = spawn(red_command("rl", {"--wait", "5s"}, {"true"}));
  CHECK(with_one->wait(30s) == 69);
  CHECK(with_one->output().find("1 of 3 servers reachable, 2 needed") != std::string::npos);
  CHECK(keys_on("rl") == 0);
}

TEST_CASE("lockscope lock --sync-replicas: waits for the replica, or gives the lock back and exits 69",
          "[lock][cli][redis][process][replica_sync]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::replicated_pair redis;
  resp_connection master(redis.master.host(), redis.master.port());
  const std::string url = url_of(redis.master);
  const std::string replica_port = std::to_string(redis.replica->port());
  temp_dir dir;
  const std::string ran = (dir.path / "ran").string();

  SECTION("1 replica asked: CMD runs only once the replica has the lock") {
    // The replica sleeps 1.5 s: without WAIT, CMD would start long before it wakes.
    resp_connection sleeper = lockscope::test::put_to_sleep(*redis.replica, "1.5");
    const auto start = std::chrono::system_clock::now();
    // CMD notes when it started, then checks the replica has the lock.
    auto p = spawn(lock_command(url, "job", {"--sync-replicas", "1", "--sync-timeout", "10s"},
                                {"sh", "-c",
                                 "date +%s%N > '" + ran + "'; [ \"$(redis-cli -p " + replica_port +
                                     " EXISTS job)\" = 1 ] || exit 5"}));
    CHECK(p->wait(30s) == 0);
    INFO(p->output());
    long long started_ns = 0;
    std::ifstream(ran) >> started_ns;
    const auto cmd_started = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(started_ns)));
    CHECK(cmd_started - start >= 1000ms);
    CHECK(master.command("EXISTS", "job").integer == 0);
    // The name for the flag works too.
    auto alias = spawn(lock_command(url, "job", {"--wait-replicas", "1"}, {"true"}));
    CHECK(alias->wait(30s) == 0);
  }
  SECTION("2 replicas asked, 1 there: 69, CMD never runs, the lock is not left held") {
    const auto start = std::chrono::steady_clock::now();
    auto p = spawn(lock_command(url, "job", {"--sync-replicas", "2", "--sync-timeout", "200ms"},
                                {"touch", ran}));
    CHECK(p->wait(30s) == 69);
    CHECK(std::chrono::steady_clock::now() - start >= 200ms);
    CHECK(p->output() ==
          "lockscope lock: acquiring 'job' failed: WAIT did not see it on 2 replicas within 200 ms; it was given back\n");
    CHECK_FALSE(std::filesystem::exists(ran));
    CHECK(master.command("EXISTS", "job").integer == 0);
  }
  SECTION("bad values: 64") {
    auto zero = spawn(lock_command(url, "job", {"--sync-replicas", "1", "--sync-timeout", "0"}, {"true"}));
    CHECK(zero->wait(30s) == 64);
    CHECK(zero->output().find("--sync-timeout") != std::string::npos);
    auto alone = spawn(lock_command(url, "job", {"--sync-timeout", "500ms"}, {"true"}));
    CHECK(alone->wait(30s) == 64);
    CHECK(alone->output() == "lockscope lock: --sync-timeout needs --sync-replicas\n");
  }
}
