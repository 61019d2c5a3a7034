// The fair lock (RedissonFairLock's scripts) against a real redis-server: the queue and
// timeout set, FIFO order, per-waiter wake-up, giving up, and the lease fix.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

#include "client_fixtures.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using steady = std::chrono::steady_clock;
using lockscope::test::config_for;
using lockscope::test::eventually;

namespace {

const std::string queue_key = "redisson_lock_queue:{fair}";
const std::string timeout_key = "redisson_lock_timeout:{fair}";

}  // namespace

TEST_CASE("fair lock: reentrancy, the Redisson keys, and nothing left behind", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto mode = GENERATE(lock::script_mode::evalsha, lock::script_mode::eval);
  redis_server server;
  auto cfg = config_for(server);
  cfg.scripts = mode;
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  lock::fair_lock l = client.get_fair_lock("fair");
  CHECK(l.channel() == "redisson_lock__channel:{fair}");
  l.lock();
  l.lock();
  CHECK(raw.command("HGET", "fair", l.owner()).text == "2");
  CHECK(l.hold_count() == 2);
  CHECK(l.remain_time_to_live() > 25s);
  l.unlock_or_throw();
  CHECK(l.is_locked());
  l.unlock_or_throw();
  CHECK_FALSE(l.is_locked());
  CHECK(raw.command("EXISTS", queue_key, timeout_key).integer == 0);
}

TEST_CASE("fair lock: a waiter queues, and an unlock wakes it on its own channel", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client a(config_for(server));
  lock::client b(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto la = a.get_fair_lock("fair");
  auto lb = b.get_fair_lock("fair", "waiter-b");
  la.lock();  // watchdog: a 30 s TTL that a TTL-sleeping waiter would wait out
  auto acquired = lb.async_lock(asio::use_future);
  REQUIRE(eventually([&] { return raw.command("LLEN", queue_key).integer == 1; }, 5s));
  CHECK(raw.command("LINDEX", queue_key, 0).text == "waiter-b");
  // Its give-up time: the holder's TTL plus the thread wait time (5 min) from now.
  const double score = std::stod(raw.command("ZSCORE", timeout_key, "waiter-b").text);
  const double now_ms = static_cast<double>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  CHECK(score > now_ms + 300000 + 20000);
  CHECK(score < now_ms + 300000 + 31000);
  REQUIRE(eventually(
      [&] { return raw.command("PUBSUB", "NUMSUB", "redisson_lock__channel:{fair}:waiter-b").elements.at(1).integer == 1; },
      5s));
  const auto t = steady::now();
  la.unlock_or_throw();
  REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
  acquired.get();
  CHECK(steady::now() - t < 2s);  // the message, not the 30 s TTL
  CHECK(raw.command("EXISTS", queue_key, timeout_key).integer == 0);
  lb.unlock_or_throw();
}

TEST_CASE("fair lock: waiters acquire in the order they queued", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client holder_client(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto holder = holder_client.get_fair_lock("fair");
  holder.lock();

  constexpr int waiters = 5;
  std::vector<std::unique_ptr<lock::client>> clients;
  std::vector<std::thread> threads;
  std::mutex m;
  std::vector<int> order;
  for (int i = 0; i < waiters; ++i) {
    clients.push_back(std::make_unique<lock::client>(config_for(server)));
    threads.emplace_back([&, i] {
      auto l = clients[static_cast<std::size_t>(i)]->get_fair_lock("fair");
      l.lock();
      {
        std::lock_guard g(m);
        order.push_back(i);
      }
      std::this_thread::sleep_for(20ms);
      l.unlock_or_throw();
    });
    // The next one starts only once this one is in the queue: a known order.
    REQUIRE(eventually([&] { return raw.command("LLEN", queue_key).integer == i + 1; }, 10s));
  }
  holder.unlock_or_throw();
  for (auto& t : threads) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(raw.command("EXISTS", "fair", queue_key, timeout_key).integer == 0);
}

TEST_CASE("fair lock: a waiter that gives up leaves the queue at once", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client a(config_for(server));
  lock::client b(config_for(server));
  lock::client c(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto la = a.get_fair_lock("fair");
  auto lb = b.get_fair_lock("fair", "quitter");
  auto lc = c.get_fair_lock("fair", "patient");
  la.lock();
  CHECK_FALSE(lb.try_lock());  // one attempt: Redisson's tryLock() form never queues
  CHECK(raw.command("EXISTS", queue_key, timeout_key).integer == 0);

  auto gave_up = lb.async_try_lock(300ms, asio::use_future);
  REQUIRE(eventually([&] { return raw.command("LLEN", queue_key).integer == 1; }, 5s));
  auto acquired = lc.async_lock(asio::use_future);
  REQUIRE(eventually([&] { return raw.command("LLEN", queue_key).integer == 2; }, 5s));
  const double patient_before = std::stod(raw.command("ZSCORE", timeout_key, "patient").text);
  REQUIRE(gave_up.wait_for(5s) == std::future_status::ready);
  CHECK_FALSE(gave_up.get());
  REQUIRE(eventually([&] { return raw.command("LLEN", queue_key).integer == 1; }, 5s));
  CHECK(raw.command("LINDEX", queue_key, 0).text == "patient");
  // The waiter behind moved up by the quitter's thread wait, which is its own wait
  // (Redisson's acquireFailed(waitTime): 300 ms), not the default 300000 ms.
  CHECK(std::stod(raw.command("ZSCORE", timeout_key, "patient").text) == patient_before - 300);
  la.unlock_or_throw();
  REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
  acquired.get();
  lc.unlock_or_throw();
}

TEST_CASE("fair lock: a vanished waiter is purged after the thread wait time", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.fair_lock_thread_wait = 300ms;
  lock::client a(cfg);
  lock::client b(cfg);
  resp_connection raw(server.host(), server.port());
  auto la = a.get_fair_lock("fair");
  la.lock(400ms);
  // A waiter that crashed: queued with a give-up time, never coming back.
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  raw.command("ZADD", timeout_key, std::to_string(now_ms + 400 + 300), "ghost:1");
  raw.command("RPUSH", queue_key, "ghost:1");
  auto lb = b.get_fair_lock("fair");
  const auto t = steady::now();
  REQUIRE(lb.try_lock(10s));  // not before the ghost's give-up time, not long after
  CHECK(steady::now() - t >= 500ms);
  CHECK(steady::now() - t < 5s);
  CHECK(raw.command("EXISTS", queue_key, timeout_key).integer == 0);
  lb.unlock_or_throw();
}

TEST_CASE("fair lock: the lease is forgotten after a full release", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client client(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto l = client.get_fair_lock("fair");
  l.lock(200ms);
  l.unlock_or_throw();
  l.lock();
  l.lock();
  l.unlock_or_throw();
  CHECK(raw.command("PTTL", "fair").integer > 25000);
  CHECK(l.force_unlock());
  CHECK_FALSE(l.is_locked());
}

// Each thread its own handle (the default owner model: a handle is one owner, so
// threads sharing one would be one reentrant owner), and one shared handle under
// Redisson's per-thread model. The yield widens the window an overlap would need.
TEST_CASE("fair lock: mutual exclusion across threads", "[lock][fair][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  for (const bool shared_handle : {false, true}) {
    INFO((shared_handle ? "one handle, owner_model::per_thread" : "a handle per thread"));
    auto cfg = config_for(server);
    if (shared_handle) cfg.owners = lock::owner_model::per_thread;
    lock::client client(cfg);
    auto shared = client.get_fair_lock("fair");
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    int counter = 0;  // deliberately not atomic: the lock protects it
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        auto l = shared_handle ? shared : client.get_fair_lock("fair");
        for (int i = 0; i < 25; ++i) {
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
    CHECK(overlaps == 0);
    CHECK(counter == 100);
    CHECK_FALSE(shared.is_locked());
  }
}
