// The async API as an application embeds it: its own io_context or a thread pool, the
// default handle (no explicit owner), coroutines, callbacks, use_future, and
// cancellation. The server's own state (EXISTS, HEXISTS, PTTL, PUBSUB NUMSUB, the fair
// queue) is the truth: a cancelled or finished operation must leave nothing there.
// A small executable of its own, so that the ASan and TSan builds of it stay cheap.
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/multi_lock.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "client_fixtures.hpp"

using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::config_for;
using lockscope::test::eventually;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;

namespace {

std::int64_t numsub(resp_connection& raw, const std::string& channel) {
  return raw.command("PUBSUB", "NUMSUB", channel).elements.at(1).integer;
}

// Rethrows a coroutine's exception on the thread that runs the test.
auto rethrow(std::promise<void>& done) {
  return [&done](std::exception_ptr e) {
    if (e) {
      done.set_exception(e);
    } else {
      done.set_value();
    }
  };
}

}  // namespace

TEST_CASE("async on the caller's io_context: the coroutine resumes on its own thread, the lock is released",
          "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));  // its own I/O thread
  asio::io_context io;                     // the application's
  const auto main_thread = std::this_thread::get_id();
  std::vector<std::string> wrong_thread;
  const std::vector<std::string> ping{"PING"};  // GCC 12: no initializer list in a coroutine
  std::vector<std::string> failures;  // no Catch macros in a coroutine: GCC 12 cannot compile them
  std::string owner;
  bool finished = false;
  std::promise<void> done;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto l = redis.get_lock("x");  // the README's: the default handle
        owner = l.owner();
        const auto check = [&](std::string after) {
          if (std::this_thread::get_id() != main_thread) wrong_thread.push_back(std::move(after));
        };
        co_await l.async_lock(asio::use_awaitable);
        check("async_lock");
        if (l.owner() != owner) failures.push_back("the owner changed");  // wherever it resumes
        const bool held = co_await l.async_is_held_by_current_thread(asio::use_awaitable);
        check("async_is_held_by_current_thread");
        if (!held) failures.push_back("not held");
        const bool again = co_await l.async_try_lock(0ms, asio::use_awaitable);  // re-entry
        check("async_try_lock");
        if (!again) failures.push_back("no re-entry");
        const std::int64_t count = co_await l.async_hold_count(asio::use_awaitable);
        check("async_hold_count");
        if (count != 2) failures.push_back("hold count " + std::to_string(count));
        const auto ttl = co_await l.async_remain_time_to_live(asio::use_awaitable);
        check("async_remain_time_to_live");
        if (ttl <= 25s) failures.push_back("ttl " + std::to_string(ttl.count()));  // the watchdog's 30 s lease
        co_await l.async_unlock(asio::use_awaitable);
        check("async_unlock");
        co_await l.async_unlock(asio::use_awaitable);
        check("async_unlock (last)");
        const bool locked = co_await l.async_is_locked(asio::use_awaitable);
        check("async_is_locked");
        if (locked) failures.push_back("still locked");
        co_await redis.async_connect(asio::use_awaitable);
        check("async_connect");
        const auto pong = co_await redis.async_command(ping, asio::use_awaitable);
        check("async_command");
        if (pong.text != "PONG") failures.push_back("PING: " + pong.text);
        finished = true;
      },
      rethrow(done));
  // Work tracking: run() returns only when the coroutine is done, though nothing but
  // the client's replies was pending on `io` while it waited.
  io.run();
  CHECK(finished);
  done.get_future().get();
  CHECK(wrong_thread.empty());
  CHECK(failures.empty());
  REQUIRE(lock::parse_owner_id(owner));
  CHECK(owner != redis.thread_owner());
  // Released: no key, no renewal.
  CHECK(raw.command("EXISTS", "x").integer == 0);
  std::this_thread::sleep_for(200ms);
  CHECK(raw.command("EXISTS", "x").integer == 0);
}

TEST_CASE("two coroutines on one thread, each with its own handle, never both hold the lock",
          "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  asio::io_context io;
  int holders = 0;
  int most = 0;
  int rounds = 0;
  std::set<std::string> owners;
  std::promise<void> done_a, done_b;
  auto worker = [&]() -> asio::awaitable<void> {
    auto l = redis.get_lock("shared");
    owners.insert(l.owner());
    asio::steady_timer pause(co_await asio::this_coro::executor);
    for (int i = 0; i < 5; ++i) {
      co_await l.async_lock(asio::use_awaitable);
      most = std::max(most, ++holders);
      pause.expires_after(20ms);
      co_await pause.async_wait(asio::use_awaitable);
      --holders;
      ++rounds;
      co_await l.async_unlock(asio::use_awaitable);
    }
  };
  asio::co_spawn(io, worker, rethrow(done_a));
  asio::co_spawn(io, worker, rethrow(done_b));
  io.run();
  done_a.get_future().get();
  done_b.get_future().get();
  CHECK(rounds == 10);
  CHECK(most == 1);
  CHECK(owners.size() == 2);
  CHECK(raw.command("EXISTS", "shared").integer == 0);
}

TEST_CASE("a thread pool: coroutines resume on the pool, unlock from another thread of it works",
          "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  asio::thread_pool pool(4);
  std::atomic<int> holders{0};
  std::atomic<int> most{0};
  std::atomic<int> off_pool{0};
  std::atomic<int> rounds{0};
  constexpr int tasks = 6;
  std::vector<std::promise<void>> done(tasks);
  for (int t = 0; t < tasks; ++t) {
    asio::co_spawn(
        pool,
        [&]() -> asio::awaitable<void> {
          auto l = redis.get_lock("pooled");
          for (int i = 0; i < 4; ++i) {
            co_await l.async_lock(asio::use_awaitable);
            if (!pool.get_executor().running_in_this_thread()) ++off_pool;
            const int now = ++holders;
            int seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            asio::steady_timer pause(co_await asio::this_coro::executor, 2ms);
            co_await pause.async_wait(asio::use_awaitable);  // may resume on another pool thread
            --holders;
            co_await l.async_unlock(asio::use_awaitable);
            if (!pool.get_executor().running_in_this_thread()) ++off_pool;
            ++rounds;
          }
        },
        rethrow(done[t]));
  }
  for (auto& d : done) d.get_future().get();
  pool.join();
  CHECK(rounds == tasks * 4);
  CHECK(most == 1);
  CHECK(off_pool == 0);
  CHECK(raw.command("EXISTS", "pooled").integer == 0);
}

TEST_CASE("callbacks: on their bound executor, or the client's strand, and an unlock from a completion callback works",
          "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  auto l = redis.get_lock("cb");

  SECTION("a plain callback runs on the client's strand and unlocks from there") {
    std::promise<std::string> result;
    l.async_lock([&](boost::system::error_code ec) {
      if (ec) return result.set_value("lock: " + ec.message());
      if (!redis.get_executor().running_in_this_thread()) return result.set_value("not on the client's strand");
      l.async_unlock([&](boost::system::error_code uec) { result.set_value(uec ? "unlock: " + uec.message() : "ok"); });
    });
    auto f = result.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get() == "ok");
    CHECK(raw.command("EXISTS", "cb").integer == 0);
  }
  SECTION("a callback bound to the application's io_context runs there") {
    asio::io_context io;
    const auto main_thread = std::this_thread::get_id();
    std::vector<std::string> steps;
    l.async_try_lock(1s, asio::bind_executor(io, [&](boost::system::error_code ec, bool acquired) {
                       steps.push_back(std::this_thread::get_id() == main_thread && !ec && acquired ? "locked"
                                                                                                    : "wrong");
                       l.async_unlock(asio::bind_executor(io, [&](boost::system::error_code uec) {
                         steps.push_back(std::this_thread::get_id() == main_thread && !uec ? "unlocked" : "wrong");
                       }));
                     }));
    io.run();  // returns once both ran: the operations keep it busy
    CHECK(steps == std::vector<std::string>{"locked", "unlocked"});
    CHECK(raw.command("EXISTS", "cb").integer == 0);
  }
  SECTION("use_future") {
    l.async_lock(asio::use_future).get();
    CHECK(raw.command("HEXISTS", "cb", l.owner()).integer == 1);
    CHECK(l.async_hold_count(asio::use_future).get() == 1);
    l.async_unlock(asio::use_future).get();
    CHECK(raw.command("EXISTS", "cb").integer == 0);
  }
}

TEST_CASE("a wait cancelled by `||` with a timer leaves no waiter, subscription or hold behind",
          "[lock][async][redis][cancel]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  const std::string kind = GENERATE("rlock", "fair", "fenced", "write");
  CAPTURE(kind);
  raw.command("HSET", "busy", "someone-else:1", 1);  // held by another owner, no expiry
  asio::io_context io;
  std::promise<void> done;
  std::size_t winner = 99;
  std::string owner, channel;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
        if (kind == "fair") {
          auto l = redis.get_fair_lock("busy");
          owner = l.owner();
          channel = l.channel() + ":" + owner;
          winner = (co_await (l.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable))).index();
        } else if (kind == "fenced") {
          auto l = redis.get_fenced_lock("busy");
          owner = l.owner();
          channel = l.channel();
          winner = (co_await (l.async_lock_and_get_token(asio::use_awaitable) || timer.async_wait(asio::use_awaitable)))
                       .index();
        } else if (kind == "write") {
          raw.command("HSET", "busy", "mode", "read");
          auto l = redis.get_read_write_lock("busy").write_lock();
          owner = l.owner();
          channel = l.channel();
          winner = (co_await (l.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable))).index();
        } else {
          auto l = redis.get_lock("busy");
          owner = l.owner();
          channel = l.channel();
          winner = (co_await (l.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable))).index();
        }
      },
      rethrow(done));
  io.run();
  done.get_future().get();
  CHECK(winner == 1);
  // `||` resumes once the cancelled acquire completed: the server is clean already.
  CHECK(numsub(raw, channel) == 0);
  CHECK(raw.command("EXISTS", "redisson_lock_queue:{busy}", "redisson_lock_timeout:{busy}").integer == 0);
  CHECK(raw.command("HEXISTS", "busy", owner).integer == 0);
  // The holder leaves: nobody takes the lock for the cancelled waiter.
  raw.command("DEL", "busy");
  std::this_thread::sleep_for(300ms);
  CHECK(raw.command("EXISTS", "busy").integer == 0);
}

TEST_CASE("a cancellation_signal ends a wait with operation_aborted, and a later lock works",
          "[lock][async][redis][cancel]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  raw.command("HSET", "sig", "someone-else:1", 1);
  asio::io_context io;
  asio::cancellation_signal cancel;
  auto l = redis.get_fair_lock("sig");
  boost::system::error_code result;
  bool called = false;
  l.async_lock(asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [&](boost::system::error_code ec) {
                                              called = true;
                                              result = ec;
                                            })));
  asio::steady_timer timer(io, 200ms);
  timer.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  CHECK(called);
  CHECK(result == asio::error::operation_aborted);
  CHECK(raw.command("EXISTS", "redisson_lock_queue:{sig}", "redisson_lock_timeout:{sig}").integer == 0);
  CHECK(numsub(raw, l.channel() + ":" + l.owner()) == 0);
  raw.command("DEL", "sig");
  l.async_lock(asio::use_future).get();
  CHECK(raw.command("HEXISTS", "sig", l.owner()).integer == 1);
  l.async_unlock(asio::use_future).get();
  CHECK(raw.command("EXISTS", "sig").integer == 0);
}

TEST_CASE("cancellation racing a free lock's acquisition: acquired and reported, or given back",
          "[lock][async][redis][cancel]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  const bool fair = GENERATE(false, true);
  CAPTURE(fair);
  asio::io_context io;
  std::promise<void> done;
  int acquired = 0, cancelled = 0;
  std::vector<std::string> leaks;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::mt19937 random(42);
        auto l = fair ? lock::rlock(redis.get_fair_lock("race")) : redis.get_lock("race");
        asio::steady_timer timer(co_await asio::this_coro::executor);
        for (int i = 0; i < 150; ++i) {
          // From before the request leaves to after its reply came back.
          timer.expires_after(std::chrono::microseconds(random() % 400));
          const auto won = co_await (l.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
          if (won.index() == 0) {
            ++acquired;
            if (raw.command("HGET", "race", l.owner()).text != "1") leaks.push_back("acquired but not held");
            co_await l.async_unlock(asio::use_awaitable);
          } else {
            ++cancelled;
          }
          if (raw.command("EXISTS", "race").integer != 0)
            leaks.push_back("the key outlived round " + std::to_string(i));
          if (fair && raw.command("EXISTS", "redisson_lock_queue:{race}").integer != 0) leaks.push_back("queued");
        }
      },
      rethrow(done));
  io.run();
  done.get_future().get();
  CHECK(leaks.empty());
  CHECK(acquired + cancelled == 150);
  CHECK(cancelled > 0);
  WARN(acquired << " acquired, " << cancelled << " cancelled");
}

TEST_CASE("a multi-lock cancelled while waiting for its second lock gives back the first",
          "[lock][async][redis][cancel]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  raw.command("HSET", "second", "someone-else:1", 1);
  const bool red = GENERATE(false, true);
  CAPTURE(red);
  std::vector<lock::rlock> parts{redis.get_lock("first"), redis.get_lock("second")};
  auto m = red ? lock::multi_lock(lock::get_red_lock({redis.get_lock("first"), redis.get_lock("second"),
                                                      redis.get_lock("third")}))
               : lock::get_multi_lock(parts);
  if (red) raw.command("HSET", "third", "someone-else:1", 1);  // a majority is out of reach
  asio::io_context io;
  std::promise<void> done;
  std::size_t winner = 99;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
        winner = (co_await (m.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable))).index();
      },
      rethrow(done));
  io.run();
  done.get_future().get();
  CHECK(winner == 1);
  CHECK(raw.command("EXISTS", "first").integer == 0);
  std::this_thread::sleep_for(300ms);  // no round after the cancellation takes it again
  CHECK(raw.command("EXISTS", "first").integer == 0);
  CHECK(raw.command("HLEN", "second").integer == 1);
}

TEST_CASE("owner models: per handle by default, Redisson's per thread on request", "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  SECTION("per handle: two handles on one thread exclude each other; copies share their owner") {
    lock::client redis(config_for(server));
    auto a = redis.get_lock("o");
    auto b = redis.get_lock("o");
    auto a_copy = a;
    CHECK(a.owner() != b.owner());
    CHECK(a_copy.owner() == a.owner());
    const std::string owner = a.owner();
    CHECK(lock::parse_owner_id(owner)->client_id == redis.id());
    a.lock();
    CHECK_FALSE(b.try_lock());
    CHECK(a_copy.try_lock());  // a re-entry
    CHECK(a.hold_count() == 2);
    // Unlocked from another thread: the handle is the owner.
    std::thread([&] {
      a.unlock_or_throw();
      a_copy.unlock_or_throw();
    }).join();
    CHECK(raw.command("EXISTS", "o").integer == 0);
    // A read/write lock's two sides are one owner: the writer may downgrade.
    auto rw = redis.get_read_write_lock("rw");
    CHECK(rw.read_lock().owner() == rw.write_lock().owner());
    rw.write_lock().lock();
    CHECK(rw.read_lock().try_lock());
    rw.write_lock().unlock_or_throw();
    rw.read_lock().unlock_or_throw();
    CHECK(raw.command("EXISTS", "rw").integer == 0);
  }
  SECTION("per thread: one handle shared by two threads excludes them, as Redisson's RLock") {
    auto cfg = config_for(server);
    cfg.owners = lock::owner_model::per_thread;
    lock::client redis(cfg);
    auto l = redis.get_lock("o");
    CHECK(l.owner() == redis.thread_owner());
    l.lock();
    bool other = true;
    std::thread([&] { other = l.try_lock(); }).join();
    CHECK_FALSE(other);
    l.unlock_or_throw();
    CHECK(raw.command("EXISTS", "o").integer == 0);
  }
}

TEST_CASE("abandon_waits with a fair attempt in flight: the waiter has left the queue when the wait completes",
          "[lock][async][redis][cancel][fair]") {
  // The race behind `lockscope lock --fair` interrupted by SIGTERM: the server queued the
  // waiter, the client had not read that reply yet. The start and abandon_waits() reach
  // the strand in that order, so the attempt is always in flight here.
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  lock::client redis(config_for(server));
  raw.command("HSET", "fq", "someone-else:1", 1);
  for (int i = 0; i < 20; ++i) {
    auto l = redis.get_fair_lock("fq");
    std::promise<boost::system::error_code> result;
    l.async_lock([&](boost::system::error_code ec) { result.set_value(ec); });
    redis.abandon_waits();
    auto f = result.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get() == lock::errc::shut_down);
    CHECK(raw.command("EXISTS", "redisson_lock_queue:{fq}", "redisson_lock_timeout:{fq}").integer == 0);
    CHECK(numsub(raw, l.channel() + ":" + l.owner()) == 0);
  }
  CHECK(raw.command("HLEN", "fq").integer == 1);
}

TEST_CASE("the README's async example: two tasks on one thread take turns", "[lock][async][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  resp_connection raw(server.host(), server.port());
  namespace lk = lockscope::lock;
  lk::client redis(config_for(server));
  const auto main_thread = std::this_thread::get_id();
  int holders = 0, most = 0, turns = 0, elsewhere = 0;
  // Holds the lock a while, and counts who holds it meanwhile.
  auto write_order = [&](int) -> asio::awaitable<void> {
    if (std::this_thread::get_id() != main_thread) ++elsewhere;
    most = std::max(most, ++holders);
    asio::steady_timer pause(co_await asio::this_coro::executor, 50ms);
    co_await pause.async_wait(asio::use_awaitable);
    --holders;
    ++turns;
  };
  // The README's lines, word for word (tests/docs checks that they are these):
  boost::asio::io_context io;                        // yours: each task resumes on its thread
  for (int task = 1; task <= 2; ++task) {
    boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
      lk::rlock mine = redis.get_lock("orders:42");  // a handle per task: an owner per task
      co_await mine.async_lock(boost::asio::use_awaitable);
      co_await write_order(42);                      // one task at a time
      co_await mine.async_unlock(boost::asio::use_awaitable);
    }, boost::asio::detached);
  }
  io.run();                                          // returns once both are done
  CHECK(turns == 2);
  CHECK(most == 1);
  CHECK(elsewhere == 0);
  CHECK(raw.command("EXISTS", "orders:42").integer == 0);
}
