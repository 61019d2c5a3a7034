// The fenced lock (RedissonFencedLock's acquire) against a real redis-server: tokens from
// `redisson_lock_token:{name}` grow across re-entries, holders, threads and a holder
// process killed and started again.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

#include "client_fixtures.hpp"
#include "process.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace lock = lockscope::lock;
using lockscope::test::config_for;
using lockscope::test::redis_server;
using lockscope::test::resp_connection;

namespace {

const std::string token_key = "redisson_lock_token:{fenced}";

std::int64_t token_in_output(const std::string& output) {
  const auto at = output.find("token ");
  REQUIRE(at != std::string::npos);
  return std::stoll(output.substr(at + 6));
}

}  // namespace

TEST_CASE("fenced lock: every hold takes a larger token, a busy attempt none", "[lock][fenced][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto mode = GENERATE(lock::script_mode::evalsha, lock::script_mode::eval);
  redis_server server;
  const auto cfg = config_for(server, mode);
  lock::client a(cfg);
  lock::client b(cfg);
  resp_connection raw(server.host(), server.port());
  auto la = a.get_fenced_lock("fenced");
  auto lb = b.get_fenced_lock("fenced");
  CHECK(la.token_name() == token_key);
  CHECK(la.get_token() == 0);

  CHECK(la.lock_and_get_token() == 1);
  CHECK(la.lock_and_get_token() == 2);  // a re-entry is a new acquisition: a new token
  CHECK(raw.command("GET", token_key).text == "2");
  CHECK(raw.command("HGET", "fenced", la.owner()).text == "2");
  CHECK(la.remain_time_to_live() > 25s);  // the watchdog's lease

  CHECK_FALSE(lb.try_lock_and_get_token());
  const auto t = std::chrono::steady_clock::now();
  CHECK_FALSE(lb.try_lock_and_get_token(200ms));
  CHECK(std::chrono::steady_clock::now() - t >= 200ms);
  CHECK(raw.command("GET", token_key).text == "2");  // failed attempts take no token

  auto waiting = lb.async_lock_and_get_token(asio::use_future);
  la.unlock_or_throw();
  CHECK(la.is_locked());
  la.unlock_or_throw();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK(waiting.get() == 3);
  CHECK(lb.get_token() == 3);
  CHECK(lb.async_get_token(asio::use_future).get() == 3);
  auto busy = la.async_try_lock_and_get_token(0ms, asio::use_future);
  CHECK(busy.get() == 0);
  lb.unlock_or_throw();

  // A lease instead of the watchdog; the Lockable calls take (and drop) a token too.
  CHECK(la.try_lock_and_get_token(1s, 5s) == 4);
  CHECK(la.remain_time_to_live() <= 5s);
  la.unlock_or_throw();
  {
    std::scoped_lock hold(lb);
    CHECK(raw.command("GET", token_key).text == "5");
  }
  CHECK_FALSE(la.is_locked());
}

TEST_CASE("fenced lock: the holders' tokens increase in the order they held, across threads and clients",
          "[lock][fenced][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client c1(config_for(server));
  lock::client c2(config_for(server));
  std::mutex m;
  std::vector<std::int64_t> seen;  // appended inside the critical section: its order is the holders' order
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto l = (t % 2 == 0 ? c1 : c2).get_fenced_lock("fenced");
      for (int i = 0; i < 15; ++i) {
        const std::int64_t token = l.lock_and_get_token();
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard g(m);
          seen.push_back(token);
        }
        inside.fetch_sub(1);
        l.unlock_or_throw();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  REQUIRE(seen.size() == 60);
  for (std::size_t i = 1; i < seen.size(); ++i) {
    INFO("holder " << i);
    CHECK(seen[i] > seen[i - 1]);
  }
}

TEST_CASE("fenced lock: a holder killed and started again gets a larger token",
          "[lock][fenced][redis][process]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  const std::string port = std::to_string(server.port());
  auto first = lockscope::test::spawn({LOCK_TEST_HELPER, "fenced", port, "fenced", "600"});
  lockscope::test::wait_for_output(*first, "token", 10s);
  const std::int64_t first_token = token_in_output(first->output());
  ::kill(first->pid, SIGKILL);
  first->wait(10s);

  // The same program started again: it waits out the dead holder's lease (600 ms).
  auto second = lockscope::test::spawn({LOCK_TEST_HELPER, "fenced", port, "fenced", "600"});
  lockscope::test::wait_for_output(*second, "token", 10s);
  const std::int64_t second_token = token_in_output(second->output());
  CHECK(second_token > first_token);

  ::kill(second->pid, SIGKILL);
  second->wait(10s);
  lock::client client(config_for(server));
  auto l = client.get_fenced_lock("fenced");
  const auto third = l.try_lock_and_get_token(10s);
  REQUIRE(third);
  CHECK(*third > second_token);
  l.unlock_or_throw();
}

TEST_CASE("fenced lock: the watchdog keeps it", "[lock][fenced][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 600ms;
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto l = client.get_fenced_lock("fenced");
  l.lock_and_get_token();
  std::this_thread::sleep_for(1500ms);  // 2.5 leases: only renewals keep the key
  CHECK(raw.command("EXISTS", "fenced").integer == 1);
  l.unlock_or_throw();
  CHECK(raw.command("EXISTS", "fenced").integer == 0);
  CHECK(raw.command("GET", token_key).text == "1");  // the token outlives the lock
}
