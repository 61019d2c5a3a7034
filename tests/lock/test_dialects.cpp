// Redisson's dialects (client_config::redisson_dialect): what goes on the wire is, byte
// for byte, what that release sends (checked against the catalogue extracted from every
// Redisson release tag, tests/redisson/extract_scripts.py), with its unlock latch, its
// publish command argument and its lease-reset rule.
#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

#include "client_fixtures.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lockscope::test::config_for;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;

namespace {

// The arguments of one MONITOR line: `<time> [<db> <addr>] "ARG" "ARG" ...`, each
// quoted as sdscatrepr does (\" \\ \n \r \t \a \b \xHH).
std::vector<std::string> monitor_arguments(const std::string& line) {
  std::vector<std::string> args;
  std::size_t i = line.find(']');
  if (i == std::string::npos) return args;
  while ((i = line.find('"', i + 1)) != std::string::npos) {
    std::string arg;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\' || i + 1 >= line.size()) {
        arg += line[i];
        continue;
      }
      const char c = line[++i];
      switch (c) {
        case 'n': arg += '\n'; break;
        case 'r': arg += '\r'; break;
        case 't': arg += '\t'; break;
        case 'a': arg += '\a'; break;
        case 'b': arg += '\b'; break;
        case 'x':
          arg += static_cast<char>(std::stoi(line.substr(i + 1, 2), nullptr, 16));
          i += 2;
          break;
        default: arg += c;
      }
    }
    args.push_back(std::move(arg));
  }
  return args;
}

std::set<std::string> catalogue_texts(const std::string& release) {
  std::set<std::string> texts;
  for (const auto* row : lock::redisson_scripts_of(release)) texts.emplace(row->text);
  return texts;
}

// Every lock type through its paths: acquire, re-entry, busy, wait, unlock, force unlock.
void exercise_every_lock_type(lock::client& a, lock::client& b) {
  auto l = a.get_lock("plain");
  l.lock();
  l.lock();
  CHECK_FALSE(b.get_lock("plain").try_lock());
  l.unlock_or_throw();
  l.unlock_or_throw();
  l.lock(5000ms);
  CHECK(b.get_lock("plain").force_unlock());

  auto f = a.get_fair_lock("fair");
  f.lock();
  auto fb = b.get_fair_lock("fair");
  CHECK_FALSE(fb.try_lock());
  CHECK_FALSE(fb.try_lock(200ms));  // queued, then leaves the queue
  f.unlock_or_throw();
  f.lock();
  CHECK(fb.force_unlock());

  auto rw = a.get_read_write_lock("rw");
  auto r = rw.read_lock();
  r.lock();
  CHECK_FALSE(b.get_read_write_lock("rw").write_lock().try_lock());
  r.unlock_or_throw();
  auto w = rw.write_lock();
  w.lock();
  w.unlock_or_throw();
  r.lock();
  CHECK(r.force_unlock());
  w.lock();
  CHECK(w.force_unlock());

  auto fenced = a.get_fenced_lock("fenced");
  const std::int64_t token = fenced.lock_and_get_token();
  CHECK(token > 0);
  fenced.unlock_or_throw();
}

}  // namespace

TEST_CASE("dialects: every script sent is that Redisson release's own text", "[lock][dialect][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const std::string release = GENERATE(as<std::string>{}, "4.7.0", "3.27.2", "3.16.8");
  CAPTURE(release);
  redis_server server;
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  auto cfg = config_for(server, lock::script_mode::eval);
  cfg.redisson_dialect = release;
  cfg.fair_lock_thread_wait = 60000ms;
  {
    lock::client a(cfg);
    lock::client b(cfg);
    exercise_every_lock_type(a, b);
  }
  const std::set<std::string> texts = catalogue_texts(release);
  REQUIRE(!texts.empty());
  int evals = 0;
  int latched_unlocks = 0;
  int latch_deletes = 0;
  bool fair_wait_is_callers = false;
  bool fair_lock_sends_configured = false;
  bool sent_spublish = false;
  std::set<std::string> latches;
  while (auto line = monitor.try_read_value(300ms)) {
    const std::vector<std::string> args = monitor_arguments(line->text);
    if (args.empty()) continue;
    if (args[0] == "DEL" && args.size() == 2 && args[1].starts_with("redisson_unlock_latch:{")) {
      CHECK(latches.count(args[1]) == 1);  // the latch its unlock named, deleted after the reply
      ++latch_deletes;
    }
    if (args[0] != "EVAL" || args.size() < 3) continue;
    ++evals;
    const std::string& text = args[1];
    const bool fenced_before_3_19 = release == "3.16.8" && text == lock::script(lock::script_kind::fenced_acquire).text;
    INFO(text);
    CHECK((texts.count(text) == 1 || fenced_before_3_19));
    for (const std::string& arg : args)
      if (arg.starts_with("redisson_unlock_latch:")) {
        latches.insert(arg);
        ++latched_unlocks;
      }
    if (std::find(args.begin(), args.end(), "SPUBLISH") != args.end()) sent_spublish = true;
    // EVAL text 3 fair queue timeouts lease owner <thread wait> now: the 200 ms waiter's
    // thread wait is its wait; lock() sends the configured one.
    const bool fair_acquire = args[2] == "3" && args.size() == 10 && args[3] == "fair";
    if (fair_acquire && args[8] == "200") fair_wait_is_callers = true;
    if (fair_acquire && args[8] == "60000") fair_lock_sends_configured = true;
  }
  CHECK(evals >= 20);
  CHECK(fair_wait_is_callers);
  CHECK(fair_lock_sends_configured);
  CHECK_FALSE(sent_spublish);  // a single server: PUBLISH
  if (release == "3.16.8") {
    CHECK(latched_unlocks == 0);
    CHECK(latch_deletes == 0);
  } else {
    CHECK(latched_unlocks >= 6);  // every unlock of every type
    CHECK(latch_deletes == latched_unlocks);
  }
  // The latches are gone.
  resp_connection raw(server.host(), server.port());
  CHECK(raw.command("KEYS", "redisson_unlock_latch:*").elements.empty());
}

TEST_CASE("dialects: the lease reset after an unlock follows the release", "[lock][dialect][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  // RedissonLock.cancelExpirationRenewal: no reset before 3.19.2; after every unlock in
  // 3.19.2-3.27.1; from 3.27.2 only when the unlock answered nil or 1 (not 0: still held).
  struct expectation {
    std::string release;
    bool reset_after_partial_unlock;
  };
  const auto e = GENERATE(expectation{"4.7.0", false}, expectation{"3.27.2", false}, expectation{"3.20.0", true},
                          expectation{"3.16.8", false});
  CAPTURE(e.release);
  redis_server server;
  auto cfg = config_for(server);
  cfg.redisson_dialect = e.release;
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto l = client.get_lock("lease");
  l.lock(5000ms);
  l.lock(5000ms);
  l.lock(5000ms);
  l.unlock_or_throw();  // 0: still held; the key's TTL re-armed with internalLockLeaseTime
  l.unlock_or_throw();  // again, with the lease as the first unlock left it
  const std::int64_t pttl = raw.command("PTTL", "lease").integer;
  if (e.reset_after_partial_unlock) {
    CHECK(pttl > 5000);  // the watchdog timeout (30 s)
  } else {
    CHECK(pttl <= 5000);
    CHECK(pttl > 0);
  }
  l.unlock_or_throw();
}

TEST_CASE("dialects: an unknown release is refused up front", "[lock][dialect]") {
  lock::client_config cfg;
  cfg.redisson_dialect = "3.99.0";
  try {
    lock::client c(cfg);
    FAIL("constructed");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == lock::errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("3.99.0"));
  }
  cfg.redisson_dialect = "3.16";  // a release is named by its tag
  CHECK_THROWS_AS(lock::client{cfg}, lock::lock_error);
  cfg.redisson_dialect = "3.10.6";  // its fair lock passes other arguments
  CHECK_THROWS_AS(lock::client{cfg}, lock::lock_error);
}

TEST_CASE("dialects: a fair waiter's thread wait is its own wait from 3.13.3, threadWaitTime before",
          "[lock][dialect][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  // RedissonFairLock.tryLockInnerAsync: `wait = threadWaitTime; if (waitTime != -1)`
  // (3.13.3) / `if (waitTime > 0)` (3.17.1) `wait = unit.toMillis(waitTime)`; none before.
  struct expectation {
    std::string release;
    std::string thread_wait;
  };
  const auto e = GENERATE(expectation{"3.13.0", "60000"}, expectation{"3.13.3", "200"}, expectation{"4.7.0", "200"});
  CAPTURE(e.release);
  redis_server server;
  auto cfg = config_for(server, lock::script_mode::eval);
  cfg.redisson_dialect = e.release;
  cfg.fair_lock_thread_wait = 60000ms;
  lock::client a(cfg);
  lock::client b(cfg);
  auto held = a.get_fair_lock("fair");
  held.lock();
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  CHECK_FALSE(b.get_fair_lock("fair").try_lock(200ms));
  held.unlock_or_throw();
  std::vector<std::string> sent;
  while (auto line = monitor.try_read_value(300ms)) {
    const std::vector<std::string> args = monitor_arguments(line->text);
    // EVAL text 3 fair queue timeouts lease owner <thread wait> now
    if (args.size() == 10 && args[0] == "EVAL" && args[2] == "3" && args[3] == "fair") sent.push_back(args[8]);
  }
  REQUIRE(!sent.empty());
  for (const std::string& wait : sent) CHECK(wait == e.thread_wait);
}
