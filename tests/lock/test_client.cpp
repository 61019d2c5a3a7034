// The lock client against a real redis-server on a free loopback port.
//
// Timing bounds are generous (a loaded 2-core machine) but still prove the property:
// e.g. a pub/sub handoff is bounded far below the holder's TTL, which a waiter that
// slept until the TTL would exceed.
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "client_fixtures.hpp"
#include "process.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using steady = std::chrono::steady_clock;
using lockscope::test::config_for;
using lockscope::test::eventually;
using lockscope::test::since;

namespace {

std::int64_t numsub(resp_connection& raw, const std::string& channel) {
  const auto v = raw.command("PUBSUB", "NUMSUB", channel);
  return v.elements.at(1).integer;
}

}  // namespace

TEST_CASE("reentrancy: hold count 2, 1, 0 and the key is gone at 0", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto mode = GENERATE(lock::script_mode::evalsha, lock::script_mode::eval);
  redis_server server;
  auto cfg = config_for(server);
  cfg.scripts = mode;
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto l = client.get_lock("myLock");

  l.lock();
  l.lock();
  CHECK(l.hold_count() == 2);
  // The hash Redisson builds: owner -> count, owner = <uuid>:<n>, n the handle's own
  // number (the default owner model), never the calling thread's.
  const auto field = raw.command("HGET", "myLock", l.owner());
  CHECK(field.text == "2");
  const std::string owner = l.owner();
  const auto parts = lock::parse_owner_id(owner);  // views into `owner`
  REQUIRE(parts);
  CHECK(parts->client_id == client.id());
  CHECK(l.owner() != client.thread_owner());
  CHECK(raw.command("HEXISTS", "myLock", client.thread_owner()).integer == 0);
  CHECK(l.is_held_by_current_thread());
  CHECK(l.is_locked());

  l.unlock_or_throw();
  CHECK(l.hold_count() == 1);
  CHECK(raw.command("EXISTS", "myLock").integer == 1);
  l.unlock_or_throw();
  CHECK(l.hold_count() == 0);
  CHECK(raw.command("EXISTS", "myLock").integer == 0);
  CHECK_FALSE(l.is_locked());
  CHECK(l.remain_time_to_live() == -2ms);
}

TEST_CASE("the watchdog lease and the explicit lease", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 30s;
  lock::client client(cfg);
  auto l = client.get_lock("leases");
  l.lock();
  const auto ttl = l.remain_time_to_live();
  CHECK(ttl > 25s);
  CHECK(ttl <= 30s);
  l.unlock();
  CHECK(l.try_lock(0ms, 5s));
  CHECK(l.remain_time_to_live() <= 5s);
  CHECK(l.remain_time_to_live() > 3s);
  l.unlock();
}

// Issue 11: a handle remembered its last explicit lease after a full release, so a later
// watchdog hold's partial unlock re-armed the key with that short lease, and the key
// expired under a live owner. Redisson 3.20 resets the lease on a full release and on
// force-unlock; so does lockscope.
TEST_CASE("an explicit lease is forgotten after a full release and after force_unlock", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 30s;
  lock::client client(cfg);
  lock::client other(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto l = client.get_lock("k");
  auto rival = other.get_lock("k");
  const auto partial_unlock_ttl = [&](auto release) {
    l.lock(200ms);
    release();
    l.lock();  // watchdog hold
    l.lock();  // re-entered
    l.unlock_or_throw();  // one level released: PEXPIRE k <lease>
    return raw.command("PTTL", "k").integer;
  };

  SECTION("full release") {
    const std::int64_t ttl = partial_unlock_ttl([&] { l.unlock_or_throw(); });
    CHECK(ttl > 25000);  // the watchdog lease, not 200 ms
  }
  SECTION("force_unlock") {
    const std::int64_t ttl = partial_unlock_ttl([&] { CHECK(l.force_unlock()); });
    CHECK(ttl > 25000);
  }
  // The scenario end to end: 500 ms later the owner still holds its level.
  std::this_thread::sleep_for(500ms);
  CHECK(l.is_held_by_current_thread());
  CHECK(l.hold_count() == 1);
  CHECK_FALSE(rival.try_lock());
  l.unlock_or_throw();
  CHECK_FALSE(l.is_locked());
}

TEST_CASE("a lease <= 0 or a negative wait is rejected, and nothing is sent", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client client(config_for(server));
  auto l = client.get_lock("args");
  const auto code_of = [](auto call) {
    try {
      call();
    } catch (const lock::lock_error& e) {
      return e.code();
    }
    return std::error_code();
  };
  CHECK(code_of([&] { l.lock(0ms); }) == lock::errc::invalid_argument);
  CHECK(code_of([&] { l.lock(-5ms); }) == lock::errc::invalid_argument);
  CHECK(code_of([&] { l.try_lock(-1ms); }) == lock::errc::invalid_argument);
  CHECK(code_of([&] { l.try_lock(1s, 0ms); }) == lock::errc::invalid_argument);
  CHECK_FALSE(l.is_locked());
  CHECK(l.try_lock(0ms, 1s));
  l.unlock_or_throw();
}

TEST_CASE("unlock by a non-owner fails with Redisson's message", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  std::mutex m;
  std::vector<std::string> reported;
  cfg.on_unlock_error = [&](const std::string& name, const std::string& message) {
    std::lock_guard g(m);
    reported.push_back(name + ": " + message);
  };
  cfg.owners = lock::owner_model::per_thread;  // Redisson's: threads sharing a handle exclude each other
  lock::client client(cfg);
  auto l = client.get_lock("owned");
  std::thread([&] { l.lock(); }).join();  // held by another thread, which is gone

  const std::string expected = "attempt to unlock lock, not locked by current thread by node id: " + client.id() +
                               " thread-id: " + std::to_string(lock::client::current_thread_id());
  try {
    l.unlock_or_throw();
    FAIL("unlock by a non-owner succeeded");
  } catch (const lock::lock_error& e) {
    CHECK(std::string(e.what()) == expected);
    CHECK(e.code() == lock::errc::not_owner);
  }
  // The Lockable unlock() never throws; the failure goes to the hook.
  l.unlock();
  REQUIRE(reported.size() == 1);
  CHECK(reported[0] == "owned: " + expected);
  // Async: the code, and the same text from not_owner_message.
  auto f = l.async_unlock(asio::use_future);
  try {
    f.get();
    FAIL("async unlock by a non-owner succeeded");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == lock::errc::not_owner);
  }
  CHECK(lock::not_owner_message(l.owner()) == expected);
  CHECK(l.is_locked());  // none of that released it
  CHECK(l.force_unlock());
  CHECK_FALSE(l.is_locked());
  CHECK_FALSE(l.force_unlock());
}

TEST_CASE("try_lock gives up at its wait time", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client holder(config_for(server));
  lock::client other(config_for(server));
  auto held = holder.get_lock("busy");
  held.lock();
  auto l = other.get_lock("busy");

  auto t = steady::now();
  CHECK_FALSE(l.try_lock());  // one attempt: no waiting
  CHECK(since(t) < 1000ms);

  t = steady::now();
  CHECK_FALSE(l.try_lock(300ms));
  const auto waited = since(t);
  CHECK(waited >= 300ms);
  CHECK(waited < 2000ms);
  held.unlock_or_throw();
  CHECK(l.try_lock(300ms));
  l.unlock_or_throw();
}

TEST_CASE("a lease expires without a watchdog", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client a(config_for(server));
  lock::client b(config_for(server));
  auto la = a.get_lock("leased");
  auto lb = b.get_lock("leased");
  la.lock(400ms);
  CHECK(la.remain_time_to_live() <= 400ms);
  const auto t = steady::now();
  REQUIRE(lb.try_lock(5s));  // waits for the TTL: nobody unlocks
  const auto waited = since(t);
  CHECK(waited >= 250ms);
  CHECK(waited < 1500ms);
  CHECK_FALSE(la.is_held_by_current_thread());
  lb.unlock_or_throw();
}

TEST_CASE("the watchdog keeps the lock for 3x its timeout while the holder lives", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 600ms;
  std::atomic<int> lost{0};
  cfg.on_lock_lost = [&](const std::string&) { ++lost; };
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto l = client.get_lock("dog");
  l.lock();
  l.lock();  // reentrant: the same renewal entry

  // Count renewals on the wire: one entry per lock, not one per hold.
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  const auto start = steady::now();
  while (since(start) < 3 * 600ms + 200ms) {
    REQUIRE(raw.command("EXISTS", "dog").integer == 1);
    std::this_thread::sleep_for(50ms);
  }
  // The default dialect (4.7.0) renews with LockTask's batch script, one lock per call here.
  std::string renew_sha;
  for (const auto* row : lock::redisson_scripts_of(cfg.redisson_dialect))
    if (row->type == lock::redisson_lock_type::lock && row->role == lock::redisson_role::renew_batch)
      renew_sha = std::string(row->sha1);
  REQUIRE(!renew_sha.empty());
  int renewals = 0;
  while (auto line = monitor.try_read_value(100ms)) {
    if (line->text.find(renew_sha) != std::string::npos) ++renewals;
  }
  // Every 200 ms over ~2 s: about 10. Two entries would make about 20.
  CHECK(renewals >= 5);
  CHECK(renewals <= 14);

  l.unlock_or_throw();
  CHECK(raw.command("EXISTS", "dog").integer == 1);
  std::this_thread::sleep_for(900ms);  // past the lease: only a renewal keeps it
  CHECK(raw.command("EXISTS", "dog").integer == 1);
  l.unlock_or_throw();
  CHECK(raw.command("EXISTS", "dog").integer == 0);
  // Stopped on the final unlock: no renewal is sent any more. Skip what MONITOR showed
  // up to now (a marker sent after the unlock returned), then watch for a while.
  raw.command("ECHO", "after-final-unlock");
  while (auto line = monitor.try_read_value(2s)) {
    if (line->text.find("after-final-unlock") != std::string::npos) break;
  }
  int after = 0;
  const auto quiet = steady::now();
  while (since(quiet) < 700ms) {
    if (auto line = monitor.try_read_value(100ms)) {
      if (line->text.find(lock::script(lock::script_kind::renew).sha1) != std::string::npos) ++after;
    }
  }
  CHECK(after == 0);
  CHECK(lost == 0);
}

TEST_CASE("contention across threads: mutual exclusion", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client c1(config_for(server));
  lock::client c2(config_for(server));
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int counter = 0;  // deliberately not atomic: the lock protects it
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto l = (t % 2 == 0 ? c1 : c2).get_lock("contended");
      for (int i = 0; i < 50; ++i) {
        std::scoped_lock hold(l);
        if (inside.fetch_add(1) != 0) ++overlaps;
        const int seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(counter == 200);
  CHECK(overlaps == 0);
  CHECK_FALSE(c1.get_lock("contended").is_locked());
}

TEST_CASE("one handle shared by two threads: the second thread's acquire is refused, not a silent re-entry",
          "[lock][client][redis][owner]") {
  // A handle is one owner by default, so without the refusal thread B's lock() would
  // re-enter thread A's hold and both would be inside.
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  auto l = redis.get_lock("shared");
  l.lock();
  l.lock();  // the same thread re-enters
  auto from_other_thread = [&](auto call) {
    std::string error;
    std::thread([&] {
      try {
        call();
      } catch (const std::logic_error& e) {
        error = e.what();
      }
    }).join();
    return error;
  };
  CHECK_THAT(from_other_thread([&] { l.lock(); }),
             Catch::Contains("lock 'shared': this handle is held by another thread") &&
                 Catch::Contains("give each thread its own handle"));
  CHECK_THAT(from_other_thread([&] { (void)l.try_lock(); }), Catch::Contains("held by another thread"));
  CHECK(l.hold_count() == 2);  // the refused calls sent nothing that re-entered
  // Unlocking from another thread stays allowed (a task may end elsewhere); once fully
  // released, another thread may take it.
  CHECK(from_other_thread([&] { l.unlock_or_throw(); }).empty());
  CHECK(from_other_thread([&] { l.lock(); }).find("held by another thread") != std::string::npos);
  l.unlock_or_throw();
  CHECK(raw.command("EXISTS", "shared").integer == 0);
  CHECK(from_other_thread([&] { l.lock(); l.unlock_or_throw(); }).empty());
  // A hold whose lease ran out is not held: the server is asked before refusing.
  l.lock(std::chrono::milliseconds(100));
  REQUIRE(eventually([&] { return raw.command("EXISTS", "shared").integer == 0; }, 5s));
  CHECK(from_other_thread([&] { l.lock(); l.unlock_or_throw(); }).empty());
  // force_unlock clears the handle's holds.
  l.lock();
  CHECK(l.force_unlock());
  CHECK(from_other_thread([&] { l.lock(); l.unlock_or_throw(); }).empty());
  // A handle per thread: no refusal, mutual exclusion by Redis.
  auto mine = redis.get_lock("shared");
  mine.lock();
  CHECK(from_other_thread([&] { CHECK_FALSE(redis.get_lock("shared").try_lock()); }).empty());
  mine.unlock_or_throw();
}

TEST_CASE("waiters are woken by the unlock message, not by the TTL", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const int protocol = GENERATE(2, 3);  // RESP2 arrays or RESP3 pushes on the subscriber
  redis_server server;
  auto cfg = config_for(server);
  cfg.protocol = protocol;
  lock::client holder(cfg);  // watchdog 30 s: the TTL a sleeper would wait
  lock::client waiter(cfg);
  resp_connection raw(server.host(), server.port());
  auto h = holder.get_lock("handoff");
  auto w = waiter.get_lock("handoff");
  std::vector<std::chrono::microseconds> gaps;
  for (int round = 0; round < 5; ++round) {
    h.lock();
    std::promise<steady::time_point> acquired;
    std::thread t([&] {
      w.lock();
      acquired.set_value(steady::now());
      w.unlock();
    });
    REQUIRE(eventually([&] { return numsub(raw, w.channel()) == 1; }, 5s));
    const auto released = steady::now();
    h.unlock_or_throw();
    auto f = acquired.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    gaps.push_back(std::chrono::duration_cast<std::chrono::microseconds>(f.get() - released));
    t.join();
  }
  const auto worst = *std::max_element(gaps.begin(), gaps.end());
  INFO("worst handoff " << worst.count() << " us");
  CHECK(worst < 1000ms);  // the TTL was ~30 s
  // The last waiter left: the channel is unsubscribed.
  CHECK(eventually([&] { return numsub(raw, w.channel()) == 0; }, 5s));
}

TEST_CASE("abandon_waits: a waiter stops, and the release that follows does not hand it the lock",
          "[lock][client][redis]") {
  // `lockscope lock` interrupted while waiting abandons its wait before giving back: a
  // wake-up after that must not send another attempt (one that did took the lock for a
  // process on its way out: held by nobody alive for 30 s).
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const bool fair = GENERATE(false, true);
  CAPTURE(fair);
  redis_server server;
  auto cfg = config_for(server);
  lock::client holder(cfg);
  lock::client waiter(cfg);
  resp_connection raw(server.host(), server.port());
  auto check = [&](auto h, auto w) {
    h.lock();
    auto outcome = w.async_lock(asio::use_future);
    // A fair waiter is woken on a channel of its own.
    const std::string channel = fair ? w.channel() + ":" + w.owner() : w.channel();
    REQUIRE(eventually([&] { return numsub(raw, channel) == 1; }, 5s));
    waiter.abandon_waits();
    REQUIRE(outcome.wait_for(5s) == std::future_status::ready);
    CHECK_THROWS(outcome.get());  // errc::shut_down
    CHECK(eventually([&] { return numsub(raw, channel) == 0; }, 5s));  // it left the channel
    if (fair) CHECK(eventually([&] { return raw.command("LLEN", "redisson_lock_queue:{abandoned}").integer == 0; }, 5s));
    h.unlock_or_throw();  // publishes the wake-up
    std::this_thread::sleep_for(300ms);
    CHECK(raw.command("EXISTS", "abandoned").integer == 0);  // nobody took it
  };
  if (fair) check(holder.get_fair_lock("abandoned"), waiter.get_fair_lock("abandoned"));
  else check(holder.get_lock("abandoned"), waiter.get_lock("abandoned"));
  // The client still works: the next lock() is its own.
  auto again = waiter.get_lock("abandoned-next");
  CHECK(again.try_lock());
  again.unlock();
}

TEST_CASE("no lost wake-up when the unlock lands before the waiter's SUBSCRIBE", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection holder(server.host(), server.port());
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  const std::string acquire(lock::scripts::acquire);
  const std::string unlock(lock::scripts::unlock);
  for (int round = 0; round < 5; ++round) {
    REQUIRE(holder.command("EVAL", acquire, 1, "race", 30000, "holder:1").is_null());
    // A fresh client: its subscriber connection is opened only when it first waits, so
    // its SUBSCRIBE lands several round trips after its failed attempt.
    lock::client waiter(config_for(server));
    waiter.connect();
    const std::string owner = "waiter:" + std::to_string(round);
    auto w = waiter.get_lock("race", owner);
    auto acquired = w.async_lock(asio::use_future);
    // Release the moment the server has run the waiter's (failed) attempt: the unlock
    // message is published before the waiter is subscribed, and is lost to it.
    for (;;) {
      const auto line = monitor.read_value(5s);
      if (line.text.find(owner) != std::string::npos) break;
    }
    REQUIRE(holder.command("EVAL", unlock, 2, "race", "redisson_lock__channel:{race}", 0, 30000, "holder:1").integer == 1);
    // Only the retry after the SUBSCRIBE confirmation gets it; a waiter that slept on
    // the holder's 30 s TTL would miss this by far.
    REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
    acquired.get();
    w.unlock_or_throw();
  }
}

TEST_CASE("the subscriber connection is killed while waiting: resubscribe, still woken by the message",
          "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  const std::string acquire(lock::scripts::acquire);
  const std::string unlock(lock::scripts::unlock);
  REQUIRE(raw.command("EVAL", acquire, 1, "resub", 30000, "holder:1").is_null());
  auto cfg = config_for(server);
  cfg.reconnect_backoff_max = 100ms;
  lock::client waiter(cfg);
  auto w = waiter.get_lock("resub", "waiter:1");
  auto acquired = w.async_lock(asio::use_future);
  REQUIRE(eventually([&] { return numsub(raw, w.channel()) == 1; }, 5s));
  raw.command("CLIENT", "KILL", "TYPE", "pubsub");
  CHECK(numsub(raw, w.channel()) == 0);
  REQUIRE(eventually([&] { return numsub(raw, w.channel()) == 1; }, 5s));  // resubscribed
  CHECK(acquired.wait_for(100ms) == std::future_status::timeout);          // still held
  const auto released = steady::now();
  REQUIRE(raw.command("EVAL", unlock, 2, "resub", w.channel(), 0, 30000, "holder:1").integer == 1);
  REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
  CHECK(since(released) < 1000ms);  // by the message, not the 30 s TTL
  acquired.get();
  w.unlock_or_throw();
}

TEST_CASE("waiters on one channel share one subscription", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client holder(config_for(server));
  lock::client waiters(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto h = holder.get_lock("shared");
  h.lock();
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      auto l = waiters.get_lock("shared");
      l.lock();
      std::this_thread::sleep_for(20ms);
      ++done;
      l.unlock();
    });
  }
  const std::string channel = lock::channel_name("shared");
  CHECK(eventually([&] { return numsub(raw, channel) == 1; }, 5s));
  std::this_thread::sleep_for(100ms);
  CHECK(numsub(raw, channel) == 1);  // three waiters, one SUBSCRIBE
  h.unlock_or_throw();
  for (auto& t : threads) t.join();
  CHECK(done == 3);
  CHECK(eventually([&] { return numsub(raw, channel) == 0; }, 5s));
}

TEST_CASE("kill -9 of the holder: the next waiter gets the lock within lease + 200 ms",
          "[lock][client][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  constexpr auto lease = 1000ms;
  auto holder = lockscope::test::spawn(
      {LOCK_TEST_HELPER, "hold", std::to_string(server.port()), "killed", std::to_string(lease.count())});
  lockscope::test::wait_for_output(*holder, "locked", 10s);
  lock::client client(config_for(server));
  auto l = client.get_lock("killed");
  REQUIRE(l.is_locked());
  std::this_thread::sleep_for(500ms);  // let the watchdog renew at least once
  ::kill(holder->pid, SIGKILL);
  const auto killed = steady::now();
  REQUIRE(l.try_lock(10s));
  const auto gap = since(killed);
  INFO("acquired " << gap.count() << " ms after kill -9");
  CHECK(gap <= lease + 200ms);
  l.unlock_or_throw();
}

TEST_CASE("redis-server restarted during a hold: reconnect, then renewal resumes or on_lock_lost fires",
          "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 900ms;
  cfg.reconnect_backoff_max = 200ms;
  std::atomic<int> lost{0};
  cfg.on_lock_lost = [&](const std::string& name) {
    if (name == "restarted") ++lost;
  };
  lock::client client(cfg);
  auto l = client.get_lock("restarted");
  l.lock();
  server.restart();  // no persistence: the key is gone
  resp_connection raw(server.host(), server.port());
  const bool resolved = eventually(
      [&] { return lost > 0 || raw.command("HEXISTS", "restarted", l.owner()).integer == 1; }, 5s);
  CHECK(resolved);
  CHECK(lost == 1);  // the data was lost with the restart, so renewal cannot resume
  // The client reconnected by itself.
  CHECK(l.try_lock(2s));
  CHECK(l.hold_count() == 1);
  l.unlock_or_throw();
}

TEST_CASE("wrong or missing password: a clear error at connect", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server({"--requirepass", "Root@123"});
  auto cfg = config_for(server);
  SECTION("wrong") {
    cfg.password = "nope";
    lock::client client(cfg);
    try {
      client.connect();
      FAIL("connected with a wrong password");
    } catch (const lock::lock_error& e) {
      CHECK(e.code() == lock::errc::auth_failed);
      CHECK_THAT(e.what(), Catch::StartsWith("AUTH to 127.0.0.1:") && Catch::Contains("WRONGPASS"));
    }
  }
  SECTION("missing") {
    lock::client client(cfg);
    try {
      client.connect();
      FAIL("connected without a password");
    } catch (const lock::lock_error& e) {
      CHECK(e.code() == lock::errc::auth_failed);
      CHECK_THAT(e.what(), Catch::Contains("NOAUTH"));
    }
  }
  SECTION("right, as AUTH and as HELLO 3 AUTH default, with SELECT") {
    cfg.password = "Root@123";
    cfg.protocol = GENERATE(2, 3);
    cfg.database = 3;
    lock::client client(cfg);
    client.connect();
    auto l = client.get_lock("authed");
    l.lock();
    resp_connection raw(server.host(), server.port());
    raw.command("AUTH", "Root@123");
    raw.command("SELECT", 3);
    CHECK(raw.command("EXISTS", "authed").integer == 1);
    l.unlock_or_throw();
  }
}

TEST_CASE("server down: a clear error within the connect timeout", "[lock][client]") {
  lock::client_config cfg;
  cfg.port = lockscope::test::find_free_port();  // nothing listens there
  cfg.connect_timeout = 1s;
  cfg.command_timeout = 1s;
  lock::client client(cfg);
  const auto t = steady::now();
  try {
    client.connect();
    FAIL("connected to a closed port");
  } catch (const lock::lock_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("Connection refused") && Catch::Contains(std::to_string(cfg.port)));
  }
  CHECK(since(t) < 1500ms);
  // An operation meanwhile fails at its deadline, naming the connect error.
  try {
    client.get_lock("x").try_lock();
    FAIL("locked without a server");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == lock::errc::not_connected);
    CHECK_THAT(e.what(), Catch::Contains("Connection refused"));
  }
  CHECK(since(t) < 3000ms);
}

TEST_CASE("script_mode on the wire: eval sends the seed's EVAL, evalsha loads on NOSCRIPT", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  auto read_lines = [&] {
    std::vector<std::string> lines;
    while (auto v = monitor.try_read_value(300ms)) lines.push_back(v->text);
    return lines;
  };
  auto contains = [](const std::vector<std::string>& lines, const std::string& needle) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != std::string::npos; });
  };
  SECTION("eval") {
    auto cfg = config_for(server);
    cfg.scripts = lock::script_mode::eval;
    cfg.redisson_dialect = "3.16.8";  // the seeds' release
    lock::client client(cfg);
    auto l = client.get_lock("myLock");
    l.lock(6000ms);
    l.unlock_or_throw();
    const auto lines = read_lines();
    // MONITOR quotes each argument: the acquire of seed §4.2.1, with our owner.
    const std::string acquire = "\"EVAL\" \"" + std::string(lock::scripts::acquire) + "\" \"1\" \"myLock\" \"6000\" \"" +
                                l.owner() + "\"";
    const std::string unlock = "\"EVAL\" \"" + std::string(lock::scripts::unlock) +
                               "\" \"2\" \"myLock\" \"redisson_lock__channel:{myLock}\" \"0\" \"6000\" \"" + l.owner() + "\"";
    CHECK(contains(lines, acquire));
    CHECK(contains(lines, unlock));
    CHECK_FALSE(contains(lines, "EVALSHA"));
  }
  SECTION("evalsha") {
    resp_connection raw(server.host(), server.port());
    raw.command("SCRIPT", "FLUSH");
    auto cfg = config_for(server);
    cfg.redisson_dialect = "3.16.8";
    lock::client client(cfg);
    auto l = client.get_lock("myLock");
    l.lock();
    l.unlock_or_throw();
    const auto lines = read_lines();
    CHECK(contains(lines, "\"EVALSHA\" \"" + std::string(lock::script(lock::script_kind::acquire).sha1) + "\""));
    CHECK(contains(lines, "\"SCRIPT\" \"LOAD\""));  // after the NOSCRIPT
    CHECK_FALSE(contains(lines, "\"EVAL\" "));
    CHECK_FALSE(l.is_locked());
  }
}

TEST_CASE("interop: a raw client sending the seed's EVAL scripts and lockscope exclude each other",
          "[lock][client][redis][interop]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  // The exact scripts of seed 000 §4.2.1 and §4.2.3, sent as plain RESP over a socket.
  const std::string seed_acquire =
      "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
  const std::string seed_unlock =
      "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";
  const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";

  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> raw_holds{0};
  std::atomic<int> lockscope_holds{0};
  auto critical = [&](std::atomic<int>& holds) {
    if (inside.fetch_add(1) != 0) ++overlaps;
    std::this_thread::sleep_for(1ms);
    inside.fetch_sub(1);
    ++holds;
  };

  std::atomic<int> bad_releases{0};
  std::thread raw_client([&] {
    resp_connection c(server.host(), server.port());
    int held = 0;
    while (held < 40) {
      const auto reply = c.command("EVAL", seed_acquire, 1, "myLock", 6000, owner);
      if (!reply.is_null()) {
        std::this_thread::sleep_for(200us);  // a simple client: poll
        continue;
      }
      critical(raw_holds);
      const auto released = c.command("EVAL", seed_unlock, 2, "myLock", "redisson_lock__channel:{myLock}", 0, 6000, owner);
      if (released.integer != 1) ++bad_releases;  // (Catch2 assertions are not thread-safe)
      ++held;
    }
  });
  lock::client client(config_for(server));
  std::vector<std::thread> ours;
  for (int t = 0; t < 2; ++t) {
    ours.emplace_back([&] {
      auto l = client.get_lock("myLock");
      for (int i = 0; i < 40; ++i) {
        std::scoped_lock hold(l);  // woken by the raw client's publish
        critical(lockscope_holds);
      }
    });
  }
  raw_client.join();
  for (auto& t : ours) t.join();
  CHECK(raw_holds == 40);
  CHECK(lockscope_holds == 80);
  CHECK(overlaps == 0);
  CHECK(bad_releases == 0);
}

TEST_CASE("async API: callbacks, use_future and use_awaitable", "[lock][client][redis][async]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  asio::io_context io;
  lock::client client(io, config_for(server));
  auto l = client.get_lock("async", "coroutine-owner:1");
  std::vector<std::string> steps;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await l.async_lock(asio::use_awaitable);
        steps.push_back("locked");
        steps.push_back("count " + std::to_string(co_await l.async_hold_count(asio::use_awaitable)));
        const bool again = co_await l.async_try_lock(0ms, asio::use_awaitable);
        steps.push_back(again ? "reentered" : "not reentered");
        co_await l.async_unlock(asio::use_awaitable);
        co_await l.async_unlock(asio::use_awaitable);
        steps.push_back((co_await l.async_is_locked(asio::use_awaitable)) ? "still locked" : "released");
        try {
          co_await l.async_unlock(asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
          steps.push_back(e.code() == lock::errc::not_owner ? "not owner" : e.what());
        }
        // A callback too, on the coroutine's io_context.
        l.async_try_lock(0ms, 2s, [&](boost::system::error_code ec, bool ok) {
          steps.push_back(!ec && ok ? "callback locked" : "callback failed");
          l.async_remain_time_to_live([&](boost::system::error_code, std::chrono::milliseconds ttl) {
            steps.push_back(ttl > 0ms && ttl <= 2s ? "ttl ok" : "ttl wrong");
            l.async_force_unlock([&](boost::system::error_code, bool deleted) {
              steps.push_back(deleted ? "forced" : "not forced");
              client.close();
            });
          });
        });
      },
      asio::detached);
  io.run_for(10s);
  CHECK(steps == std::vector<std::string>{"locked", "count 1", "reentered", "released", "not owner",
                                          "callback locked", "ttl ok", "forced"});
}

TEST_CASE("std::unique_lock and a blocking call on the I/O thread", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client client(config_for(server));
  auto l = client.get_lock("lockable");
  {
    std::unique_lock hold(l, std::try_to_lock);
    REQUIRE(hold.owns_lock());
    CHECK(l.is_locked());
  }
  CHECK_FALSE(l.is_locked());
  std::promise<std::string> seen;
  l.async_is_locked([&](boost::system::error_code, bool) {
    try {
      l.lock();  // would wait for the thread it runs on
      seen.set_value("no error");
    } catch (const lock::lock_error& e) {
      seen.set_value(e.code() == lock::errc::would_deadlock ? "would_deadlock" : e.what());
    }
  });
  CHECK(seen.get_future().get() == "would_deadlock");
}

TEST_CASE("after close (which sends QUIT), operations fail with shut_down", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection monitor(server.host(), server.port());
  monitor.command("MONITOR");
  lock::client client(config_for(server));
  auto l = client.get_lock("closing");
  l.lock();
  client.close();
  bool quit = false;
  while (auto line = monitor.try_read_value(500ms)) quit = quit || line->text.find("\"QUIT\"") != std::string::npos;
  CHECK(quit);
  try {
    l.is_locked();
    FAIL("worked after close");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == lock::errc::shut_down);
  }
}

TEST_CASE("the PING health check replaces a connection to a server that stopped answering", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.ping_interval = 200ms;
  cfg.connect_timeout = 300ms;
  cfg.reconnect_backoff_max = 100ms;
  cfg.client_name = "health-checked";
  lock::client client(cfg);
  client.connect();
  resp_connection raw(server.host(), server.port());
  auto client_id = [&] {
    // CLIENT LIST: "id=5 addr=... name=health-checked ..."
    const std::string list = raw.command("CLIENT", "LIST").text;
    const auto at = list.find("name=health-checked ");
    if (at == std::string::npos) return std::string();
    const auto line = list.rfind("id=", at);
    return list.substr(line, list.find(' ', line) - line);
  };
  const std::string before = client_id();
  REQUIRE_FALSE(before.empty());
  server.suspend();  // accepts bytes, answers nothing
  std::this_thread::sleep_for(800ms);
  server.resume();
  // The unanswered PING dropped the connection; a new one replaced it.
  CHECK(eventually([&] {
    const std::string now = client_id();
    return !now.empty() && now != before;
  }, 5s));
  auto l = client.get_lock("after-health-check");
  CHECK(l.try_lock());
  l.unlock_or_throw();
}

TEST_CASE("a lock handle that outlives its client fails cleanly", "[lock][client][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  std::optional<lock::rlock> l;
  std::atomic<int> reported{0};
  {
    auto cfg = config_for(server);
    cfg.on_unlock_error = [&](const std::string&, const std::string&) { ++reported; };
    lock::client client(cfg);
    l = client.get_lock("orphan");
    l->lock();
  }
  try {
    l->is_locked();
    FAIL("worked after the client was destroyed");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == lock::errc::shut_down);
  }
  CHECK_THROWS_AS(l->async_try_lock(0ms, [](boost::system::error_code, bool) {}), lock::lock_error);
  l->unlock();  // noexcept: goes to the hook
  CHECK(reported == 1);
}
