// Redisson's RSemaphore and RCountDownLatch (lockscope/lock/semaphore.hpp,
// count_down_latch.hpp) against a real redis-server. The server's own state (GET of
// the permits, PUBSUB NUMSUB of the channel) is the truth; the scripts' SHA1s are
// checked against SCRIPT LOAD.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/count_down_latch.hpp"
#include "lockscope/lock/permit_expirable_semaphore.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/lock/semaphore.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "client_fixtures.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::config_for;
using lockscope::test::eventually;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using steady = std::chrono::steady_clock;

namespace {

std::int64_t numsub(resp_connection& raw, const std::string& channel) {
  return raw.command("PUBSUB", "NUMSUB", channel).elements.at(1).integer;
}
std::string get(resp_connection& raw, const std::string& key) { return raw.command("GET", key).text; }

}  // namespace

TEST_CASE("semaphore and latch scripts: SHA1s match OpenSSL and SCRIPT LOAD", "[lock][semaphore][scripts][redis]") {
  for (const auto& s : lock::all_primitive_scripts()) {
    INFO(s.name);
    CHECK(lock::sha1_hex(s.text) == s.sha1);
    CHECK(&lock::script(s.kind) == &s);
    // Redisson's scripts and the lock scripts never share a text: the analyzer counts
    // only the latter as lock operations.
    CHECK(lock::find_script_by_text(s.text) == nullptr);
  }
  CHECK(lock::semaphore_channel_name("jobs") == "redisson_sc:{jobs}");
  CHECK(lock::semaphore_channel_name("{jobs}:x") == "redisson_sc:{jobs}:x");
  CHECK(lock::latch_channel_name("batch") == "redisson_countdownlatch__channel__{batch}");
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  for (const auto& s : lock::all_primitive_scripts()) {
    INFO(s.name);
    CHECK(raw.command("SCRIPT", "LOAD", s.text).text == s.sha1);
  }
}

TEST_CASE("semaphore: set, acquire, release, drain and add, as the server counts them", "[lock][semaphore][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  for (auto mode : {lock::script_mode::evalsha, lock::script_mode::eval}) {
    raw.command("FLUSHALL");
    lock::client redis(config_for(server, mode));
    lock::semaphore s = redis.get_semaphore("slots");
    CHECK(s.channel() == "redisson_sc:{slots}");
    CHECK(s.available_permits() == 0);
    CHECK_FALSE(s.try_acquire());  // no semaphore yet: no permit
    CHECK(s.try_set_permits(3));
    CHECK_FALSE(s.try_set_permits(5));  // only the first caller sets it
    CHECK(get(raw, "slots") == "3");
    CHECK(s.try_acquire(2));
    CHECK(get(raw, "slots") == "1");
    CHECK_FALSE(s.try_acquire(2));      // all or nothing
    CHECK(get(raw, "slots") == "1");
    CHECK_FALSE(s.try_acquire(2, 50ms));
    s.release(2);
    CHECK(s.available_permits() == 3);
    s.add_permits(-1);
    CHECK(s.available_permits() == 2);
    CHECK(s.drain_permits() == 2);
    CHECK(get(raw, "slots") == "0");
    CHECK_THROWS_AS(s.try_acquire(0), lock::lock_error);
    CHECK_THROWS_AS(s.release(-1), lock::lock_error);
    CHECK(numsub(raw, s.channel()) == 0);
  }
}

TEST_CASE("semaphore: N clients never hold more than the permits", "[lock][semaphore][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  constexpr int permits = 3;
  constexpr int workers = 8;
  constexpr int rounds = 15;
  {
    lock::client setup(config_for(server));
    REQUIRE(setup.get_semaphore("pool").try_set_permits(permits));
  }
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      lock::client redis(config_for(server));  // one client per worker: separate connections
      lock::semaphore s = redis.get_semaphore("pool");
      for (int i = 0; i < rounds; ++i) {
        s.acquire();
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(2ms);
        --holding;
        s.release();
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(done == workers * rounds);
  CHECK(most <= permits);
  CHECK(most >= 2);  // they did run side by side
  CHECK(get(raw, "pool") == std::to_string(permits));
  CHECK(numsub(raw, "redisson_sc:{pool}") == 0);
}

TEST_CASE("semaphore: a waiter is woken by the release's message, not by polling", "[lock][semaphore][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client holder(config_for(server));
  lock::client waiter(config_for(server));
  lock::semaphore held = holder.get_semaphore("one");
  REQUIRE(held.try_set_permits(1));
  REQUIRE(held.try_acquire());
  for (int round = 0; round < 5; ++round) {
    auto got = std::async(std::launch::async, [&] {
      const bool ok = waiter.get_semaphore("one").try_acquire(1, 10s);
      return std::pair{ok, steady::now()};
    });
    REQUIRE(eventually([&] { return numsub(raw, "redisson_sc:{one}") == 1; }, 2s));
    // Past the waiter's first attempt and its attempt after the subscription.
    std::this_thread::sleep_for(100ms);
    const auto released = steady::now();
    held.release();
    const auto [ok, at] = got.get();
    REQUIRE(ok);
    const auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(at - released);
    INFO("release to acquire: " << latency.count() << " ms (the poll backstop is 1000 ms)");
    CHECK(latency < 100ms);
    CHECK(get(raw, "one") == "0");
    // Hand it back to the holder for the next round.
    waiter.get_semaphore("one").release();
    REQUIRE(held.try_acquire());
  }
  CHECK(numsub(raw, "redisson_sc:{one}") == 0);
}

TEST_CASE("semaphore: a cancelled async acquire takes no permit and leaves no subscription",
          "[lock][semaphore][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::semaphore s = redis.get_semaphore("cancel");
  REQUIRE(s.try_set_permits(1));
  REQUIRE(s.try_acquire());  // none left: the next acquire waits

  asio::io_context io;  // the application's
  asio::cancellation_signal signal;
  boost::system::error_code result;
  bool completed = false;
  std::thread::id completed_on;
  // The handler runs on the application's io_context, where the signal is emitted too
  // (a cancellation_signal is not thread-safe).
  s.async_acquire(1, asio::bind_cancellation_slot(
                         signal.slot(), asio::bind_executor(io, [&](boost::system::error_code ec) {
                           result = ec;
                           completed = true;
                           completed_on = std::this_thread::get_id();
                         })));
  asio::steady_timer t(io, 300ms);
  bool subscribed = false;
  t.async_wait([&](boost::system::error_code) {
    subscribed = numsub(raw, "redisson_sc:{cancel}") == 1;
    signal.emit(asio::cancellation_type::terminal);
  });
  io.run();  // returns once the handler ran: the acquire kept the io_context's work count up
  CHECK(subscribed);
  REQUIRE(completed);
  CHECK(completed_on == std::this_thread::get_id());
  CHECK(result == asio::error::operation_aborted);
  CHECK(get(raw, "cancel") == "0");
  CHECK(eventually([&] { return numsub(raw, "redisson_sc:{cancel}") == 0; }, 2s));

  // A cancellation that races with the release: whatever the outcome, the permits add up.
  for (int i = 0; i < 20; ++i) {
    auto race = std::make_shared<asio::cancellation_signal>();  // outlives a late emit
    std::promise<boost::system::error_code> p;
    // The handler runs on the client's strand (its default executor): emit there too.
    s.async_acquire(1, asio::bind_cancellation_slot(race->slot(), [&](boost::system::error_code ec) { p.set_value(ec); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(i % 5));
    s.release();
    asio::post(redis.get_executor(), [race] { race->emit(asio::cancellation_type::terminal); });
    const auto ec = p.get_future().get();
    // Acquired: it holds the permit; aborted: it took none (or gave it back).
    const std::string free = get(raw, "cancel");
    if (!ec) {
      CHECK(free == "0");
      s.release();
      REQUIRE(s.try_acquire());
    } else {
      CHECK(ec == asio::error::operation_aborted);
      CHECK(free == "1");
      REQUIRE(s.try_acquire());
    }
  }
  CHECK(get(raw, "cancel") == "0");
}

TEST_CASE("semaphore: async acquire in a coroutine on the application's io_context", "[lock][semaphore][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::semaphore s = redis.get_semaphore("co");
  REQUIRE(s.try_set_permits(2));
  asio::io_context io;
  const auto main_thread = std::this_thread::get_id();
  std::vector<std::string> failures;
  auto body = [&]() -> asio::awaitable<void> {
    co_await s.async_acquire(2, asio::use_awaitable);
    if (std::this_thread::get_id() != main_thread) failures.push_back("resumed off the io_context's thread");
    const bool again = co_await s.async_try_acquire(1, 100ms, asio::use_awaitable);
    if (again) failures.push_back("took a third permit of two");
    const std::int64_t free = co_await s.async_available_permits(asio::use_awaitable);
    if (free != 0) failures.push_back("available " + std::to_string(free));
    co_await s.async_release(2, asio::use_awaitable);
    if (std::this_thread::get_id() != main_thread) failures.push_back("resumed off the io_context's thread");
  };
  std::promise<void> done;
  asio::co_spawn(io, body(), [&](std::exception_ptr e) {
    if (e) {
      done.set_exception(e);
    } else {
      done.set_value();
    }
  });
  io.run();  // returns only once the coroutine finished: its work was counted
  done.get_future().get();
  CHECK(failures.empty());
  CHECK(get(raw, "co") == "2");
}

TEST_CASE("count_down_latch: waiters go at zero, woken by the message", "[lock][latch][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::count_down_latch latch = redis.get_count_down_latch("batch");
  CHECK(latch.channel() == "redisson_countdownlatch__channel__{batch}");
  CHECK(latch.get_count() == 0);
  CHECK(latch.await(0ms));  // no latch: nothing to wait for
  CHECK(latch.try_set_count(3));
  CHECK_FALSE(latch.try_set_count(9));
  CHECK(get(raw, "batch") == "3");
  CHECK_FALSE(latch.await(50ms));

  constexpr int waiters = 4;
  std::vector<std::future<steady::time_point>> released;
  std::vector<std::unique_ptr<lock::client>> clients;
  for (int i = 0; i < waiters; ++i) {
    clients.push_back(std::make_unique<lock::client>(config_for(server)));
    lock::count_down_latch l = clients.back()->get_count_down_latch("batch");
    released.push_back(std::async(std::launch::async, [l]() mutable {
      l.await();
      return steady::now();
    }));
  }
  REQUIRE(eventually([&] { return numsub(raw, latch.channel()) == waiters; }, 3s));
  std::this_thread::sleep_for(100ms);
  latch.count_down();
  latch.count_down();
  CHECK(get(raw, "batch") == "1");
  for (auto& f : released) CHECK(f.wait_for(50ms) == std::future_status::timeout);  // not yet
  const auto zero = steady::now();
  latch.count_down();
  for (auto& f : released) {
    const auto at = f.get();
    const auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(at - zero);
    INFO("zero to release: " << latency.count() << " ms");
    CHECK(latency < 100ms);
  }
  CHECK(raw.command("EXISTS", "batch").integer == 0);  // deleted at zero, as Redisson does
  CHECK(eventually([&] { return numsub(raw, latch.channel()) == 0; }, 2s));
  CHECK(latch.try_set_count(1));
  CHECK(latch.remove());
  CHECK_FALSE(latch.remove());
}

TEST_CASE("count_down_latch: a cancelled async await leaves no subscription", "[lock][latch][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::count_down_latch latch = redis.get_count_down_latch("gate");
  REQUIRE(latch.try_set_count(1));
  asio::cancellation_signal signal;
  std::promise<boost::system::error_code> p;
  latch.async_await(asio::bind_cancellation_slot(signal.slot(), [&](boost::system::error_code ec) { p.set_value(ec); }));
  REQUIRE(eventually([&] { return numsub(raw, latch.channel()) == 1; }, 2s));
  asio::post(redis.get_executor(), [&signal] { signal.emit(asio::cancellation_type::terminal); });
  CHECK(p.get_future().get() == asio::error::operation_aborted);
  CHECK(eventually([&] { return numsub(raw, latch.channel()) == 0; }, 2s));
  CHECK(latch.get_count() == 1);
}

TEST_CASE("permit_expirable_semaphore: ids, leases that run out, release by id", "[lock][semaphore][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::permit_expirable_semaphore s = redis.get_permit_expirable_semaphore("jobs");
  CHECK(s.channel() == "redisson_sc:{jobs}");
  CHECK(s.timeout_name() == "{jobs}:timeout");
  CHECK(s.try_set_permits(2));
  CHECK_FALSE(s.try_set_permits(7));
  const std::string leased = s.acquire(300ms);
  CHECK(leased.size() == 32);
  const std::string kept = s.acquire();
  CHECK(kept != leased);
  CHECK(get(raw, "jobs") == "0");
  CHECK(raw.command("ZCARD", "{jobs}:timeout").integer == 2);
  CHECK_FALSE(s.try_acquire(0ms).has_value());
  // The leased permit comes back at its expiry: the waiter retries then (no message
  // announces an expiry), not at the next 1 s poll.
  const auto start = steady::now();
  const auto third = s.try_acquire(3s, 5s);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start);
  REQUIRE(third.has_value());
  INFO("waited " << waited.count() << " ms for a lease of 300 ms");
  CHECK(waited < 700ms);
  CHECK_FALSE(s.try_release(leased));  // expired, and taken back
  CHECK_THROWS_AS(s.release(leased), lock::lock_error);
  CHECK_THROWS_AS(s.release("not hex"), lock::lock_error);
  s.release(*third);
  CHECK(s.available_permits() == 1);
  CHECK(s.try_release(kept));
  CHECK(s.available_permits() == 2);
  CHECK(raw.command("ZCARD", "{jobs}:timeout").integer == 0);
  s.add_permits(1);
  CHECK(s.available_permits() == 3);
}

TEST_CASE("permit_expirable_semaphore: woken by a release, a cancelled acquire holds no permit",
          "[lock][semaphore][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  lock::client other(config_for(server));
  lock::permit_expirable_semaphore s = redis.get_permit_expirable_semaphore("one");
  REQUIRE(s.try_set_permits(1));
  const std::string held = s.acquire();
  auto got = std::async(std::launch::async, [&] {
    auto id = other.get_permit_expirable_semaphore("one").try_acquire(10s);
    return std::pair{id, steady::now()};
  });
  REQUIRE(eventually([&] { return numsub(raw, "redisson_sc:{one}") == 1; }, 2s));
  std::this_thread::sleep_for(100ms);
  const auto released = steady::now();
  s.release(held);
  auto [id, at] = got.get();
  REQUIRE(id.has_value());
  CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(at - released) < 100ms);

  asio::cancellation_signal signal;
  std::promise<std::pair<boost::system::error_code, std::string>> p;
  s.async_try_acquire(10s, std::nullopt,
                      asio::bind_cancellation_slot(signal.slot(), [&](boost::system::error_code ec, std::string permit) {
                        p.set_value({ec, permit});
                      }));
  REQUIRE(eventually([&] { return numsub(raw, "redisson_sc:{one}") == 1; }, 2s));
  asio::post(redis.get_executor(), [&signal] { signal.emit(asio::cancellation_type::terminal); });
  const auto [ec, permit] = p.get_future().get();
  CHECK(ec == asio::error::operation_aborted);
  CHECK(permit.empty());
  CHECK(get(raw, "one") == "0");
  CHECK(raw.command("ZCARD", "{one}:timeout").integer == 1);  // only the other's
  CHECK(eventually([&] { return numsub(raw, "redisson_sc:{one}") == 0; }, 2s));
  CHECK(other.get_permit_expirable_semaphore("one").try_release(*id));
  CHECK(s.available_permits() == 1);
}

TEST_CASE("client::abandon_waits ends semaphore acquires and latch awaits with shut_down, the client stays usable",
          "[lock][semaphore][latch][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client c(config_for(server));
  lock::semaphore sem = c.get_semaphore("abandoned");
  REQUIRE(sem.try_set_permits(1));
  REQUIRE(sem.try_acquire());
  lock::permit_expirable_semaphore expirable = c.get_permit_expirable_semaphore("abandoned-x");
  REQUIRE(expirable.try_set_permits(1));
  const std::string held_id = expirable.acquire(std::chrono::milliseconds(60000));
  lock::count_down_latch latch = c.get_count_down_latch("abandoned-latch");
  REQUIRE(latch.try_set_count(1));
  // What each blocking wait ended with: "" when it returned normally.
  const auto ended_with = [](auto wait) {
    return std::async(std::launch::async, [wait]() mutable -> std::string {
      try {
        wait();
        return "";
      } catch (const lock::lock_error& e) {
        return e.code() == lock::errc::shut_down ? "shut_down" : e.what();
      }
    });
  };
  auto plain = ended_with([sem]() mutable { sem.acquire(1); });
  auto timed = ended_with([sem]() mutable { (void)sem.try_acquire(1, 30s); });
  auto leased = ended_with([expirable]() mutable { (void)expirable.try_acquire(30s, 10s); });
  auto awaited = ended_with([latch]() mutable { latch.await(); });
  REQUIRE(eventually([&] { return numsub(raw, "redisson_sc:{abandoned}") == 1; }, 5s));
  REQUIRE(eventually([&] { return numsub(raw, "redisson_sc:{abandoned-x}") == 1; }, 5s));
  REQUIRE(eventually([&] { return numsub(raw, latch.channel()) == 1; }, 5s));
  std::this_thread::sleep_for(50ms);
  const auto abandoned = steady::now();
  c.abandon_waits();
  CHECK(plain.get() == "shut_down");
  CHECK(timed.get() == "shut_down");
  CHECK(leased.get() == "shut_down");
  CHECK(awaited.get() == "shut_down");
  CHECK(steady::now() - abandoned < 1s);  // at once, not at a poll or the wait's end
  // Nothing taken, nothing left subscribed; the latch still counts.
  CHECK(get(raw, "abandoned") == "0");
  CHECK(get(raw, "abandoned-x") == "0");
  CHECK(raw.command("ZCARD", "{abandoned-x}:timeout").integer == 1);
  CHECK(latch.get_count() == 1);
  REQUIRE(eventually([&] {
    return numsub(raw, "redisson_sc:{abandoned}") == 0 && numsub(raw, "redisson_sc:{abandoned-x}") == 0 &&
           numsub(raw, latch.channel()) == 0;
  }, 2s));
  // The client goes on: a later wait is not abandoned.
  sem.release(1);
  CHECK(sem.try_acquire(1, 1s));
  expirable.release(held_id);
  CHECK(expirable.try_acquire(1s, 10s).has_value());
  latch.count_down();
  CHECK(latch.await(1s));
}
