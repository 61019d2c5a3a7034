// MultiLock and RedLock across three real redis-servers, each with its own client.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/multi_lock.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

#include "client_fixtures.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::config_for;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;
using steady = std::chrono::steady_clock;

namespace {

// Three servers and one client per server, with short timeouts so that a stopped
// server costs an attempt little.
struct three_servers {
  std::vector<std::unique_ptr<redis_server>> servers;
  three_servers() {
    for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<redis_server>());
  }
  std::vector<std::unique_ptr<lock::client>> clients() const {
    std::vector<std::unique_ptr<lock::client>> out;
    for (const auto& s : servers) {
      auto cfg = config_for(*s);
      cfg.command_timeout = 400ms;
      cfg.connect_timeout = 400ms;
      out.push_back(std::make_unique<lock::client>(cfg));
    }
    return out;
  }
  std::int64_t exists(const std::string& key) const {
    std::int64_t n = 0;
    for (const auto& s : servers) {
      if (!s->running()) continue;
      resp_connection raw(s->host(), s->port());
      n += raw.command("EXISTS", key).integer;
    }
    return n;
  }
};

std::vector<lock::rlock> locks_of(const std::vector<std::unique_ptr<lock::client>>& clients, const std::string& name) {
  std::vector<lock::rlock> out;
  for (const auto& c : clients) out.push_back(c->get_lock(name));
  return out;
}

// Three servers, our clients with the multi-lock "m" over them, and another owner's clients.
struct multi_setup {
  three_servers s;
  std::vector<std::unique_ptr<lock::client>> mine = s.clients();
  std::vector<std::unique_ptr<lock::client>> theirs = s.clients();
  lock::multi_lock all = lock::get_multi_lock(locks_of(mine, "m"));
};

}  // namespace

TEST_CASE("MultiLock: all or nothing over three servers, a failure releases what was taken",
          "[lock][multi][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  multi_setup setup;
  auto& [s, mine, theirs, all] = setup;
  CHECK(all.size() == 3);
  CHECK(all.required() == 3);
  all.lock();
  CHECK(s.exists("m") == 3);
  auto other = lock::get_multi_lock(locks_of(theirs, "m"));
  CHECK_FALSE(other.try_lock());
  all.unlock_or_throw();
  CHECK(s.exists("m") == 0);

  // Someone else holds the lock on the third server only: the multi-lock takes the first
  // two, fails on the third, and gives the first two back.
  auto third = theirs[2]->get_lock("m");
  third.lock();
  const auto t = steady::now();
  CHECK_FALSE(all.try_lock(300ms));
  CHECK(steady::now() - t >= 300ms);
  CHECK(s.exists("m") == 1);
  // When the third is released during the wait, the multi-lock gets all three.
  auto acquired = all.async_try_lock(5s, asio::use_future);
  std::this_thread::sleep_for(100ms);
  third.unlock_or_throw();
  REQUIRE(acquired.wait_for(10s) == std::future_status::ready);
  CHECK(acquired.get());
  CHECK(s.exists("m") == 3);
  all.unlock();
  CHECK(s.exists("m") == 0);
}

TEST_CASE("MultiLock: a failed try_lock returns once its releases are answered, not before",
          "[lock][multi][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  multi_setup setup;
  auto& [s, mine, theirs, all] = setup;
  auto third = theirs[2]->get_lock("m");
  third.lock();
  // The first server holds back writes from 150 ms to 400 ms: the multi-lock has taken
  // it by then, and its release (sent when the 300 ms wait runs out) waits for the end
  // of the pause. Reads go on, so the key can be seen there meanwhile.
  // A name, not the structured binding: clang 14 cannot capture bindings in a lambda.
  three_servers& three = s;
  std::thread pause([&] {
    std::this_thread::sleep_for(150ms);
    resp_connection raw(three.servers[0]->host(), three.servers[0]->port());
    raw.command("CLIENT", "PAUSE", "250", "WRITE");
  });
  const auto t = steady::now();
  const bool acquired = all.try_lock(300ms);
  const auto returned_after = steady::now() - t;
  pause.join();
  CHECK_FALSE(acquired);
  INFO("try_lock returned after " << std::chrono::duration_cast<std::chrono::milliseconds>(returned_after).count()
                                  << " ms");
  CHECK(returned_after >= 390ms);
  CHECK(s.exists("m") == 1);  // the other client's, on the third server
  third.unlock_or_throw();
}

TEST_CASE("MultiLock: a lock whose answer timed out is released, and try_lock returns once that is answered",
          "[lock][multi][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  three_servers s;  // command_timeout 400 ms
  auto mine = s.clients();
  auto all = lock::get_multi_lock(locks_of(mine, "m"));
  all.lock();  // every connection up and its scripts loaded before the pause
  all.unlock_or_throw();
  // The second server holds every client's commands for 700 ms: the acquire sent there
  // times out at 400 ms, and may still succeed once the pause ends. Its release is
  // queued behind it and answered after the pause.
  resp_connection raw(s.servers[1]->host(), s.servers[1]->port());
  raw.command("CLIENT", "PAUSE", "700");
  const auto t = steady::now();
  const bool acquired = all.try_lock();
  const auto returned_after = steady::now() - t;
  CHECK_FALSE(acquired);
  INFO("try_lock returned after " << std::chrono::duration_cast<std::chrono::milliseconds>(returned_after).count()
                                  << " ms");
  CHECK(returned_after >= 600ms);
  CHECK(s.exists("m") == 0);  // the late grant on the second server was released, the first one's too
}

TEST_CASE("RedLock: a majority of three, validity, works with one server stopped, refuses with two",
          "[lock][redlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  three_servers s;
  auto mine = s.clients();
  auto red = lock::get_red_lock(locks_of(mine, "r"));
  CHECK(red.required() == 2);
  REQUIRE(red.try_lock(2s, 10s));
  CHECK(red.validity() > 9500ms);
  CHECK(red.validity() <= 10000ms - 102ms);
  CHECK(s.exists("r") == 3);
  red.unlock_or_throw();
  CHECK(s.exists("r") == 0);

  // Another holder on two servers: no majority, and nothing left on the third.
  auto theirs = s.clients();
  auto other = lock::get_red_lock(locks_of(theirs, "r"));
  REQUIRE(other.try_lock(2s));
  CHECK_FALSE(red.try_lock(300ms));
  CHECK(s.exists("r") == 3);
  other.unlock_or_throw();

  s.servers[1]->stop();
  const auto t = steady::now();
  REQUIRE(red.try_lock(3s, 10s));
  INFO("acquired with one server down in " << lockscope::test::since(t).count() << " ms");
  CHECK(steady::now() - t < 2s);
  CHECK(s.exists("r") == 2);
  red.unlock_or_throw();  // the stopped server's release is not a failure
  CHECK(s.exists("r") == 0);

  s.servers[2]->stop();
  CHECK_FALSE(red.try_lock(1s));
  CHECK(s.exists("r") == 0);  // the one lock taken was given back
}

TEST_CASE("RedLock: mutual exclusion between clients and threads", "[lock][redlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  three_servers s;
  auto set_a = s.clients();
  auto set_b = s.clients();
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto red = lock::get_red_lock(locks_of(t % 2 == 0 ? set_a : set_b, "x"));
      for (int i = 0; i < 8; ++i) {
        std::scoped_lock hold(red);
        if (inside.fetch_add(1) != 0) ++overlaps;
        ++counter;
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(counter == 32);
  CHECK(s.exists("x") == 0);
}
