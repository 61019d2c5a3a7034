// The read/write lock (RedissonReadLock / RedissonWriteLock scripts) against a real
// redis-server: readers share, writers exclude, a writer waits for the readers, the
// downgrade, the read holds' timeout keys and their renewal.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
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

TEST_CASE("read/write lock: readers share, with Redisson's hash and timeout keys", "[lock][rwlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto mode = GENERATE(lock::script_mode::evalsha, lock::script_mode::eval);
  redis_server server;
  const auto cfg = config_for(server, mode);
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto rw = client.get_read_write_lock("rw");
  auto a = client.get_read_write_lock("rw", "reader-a").read_lock();
  auto b = client.get_read_write_lock("rw", "reader-b").read_lock();
  auto w = client.get_read_write_lock("rw", "writer").write_lock();
  CHECK(rw.name() == "rw");
  CHECK(a.channel() == "redisson_rwlock:{rw}");

  a.lock();
  a.lock();  // reentrant: a second timeout key
  REQUIRE(b.try_lock());  // a second reader at once
  CHECK(raw.command("HGET", "rw", "mode").text == "read");
  CHECK(raw.command("HGET", "rw", "reader-a").text == "2");
  CHECK(raw.command("HGET", "rw", "reader-b").text == "1");
  CHECK(raw.command("EXISTS", "{rw}:reader-a:rwlock_timeout:1", "{rw}:reader-a:rwlock_timeout:2",
                    "{rw}:reader-b:rwlock_timeout:1")
            .integer == 3);
  CHECK(raw.command("PTTL", "{rw}:reader-a:rwlock_timeout:2").integer > 25000);
  CHECK(a.hold_count() == 2);
  CHECK(a.is_held_by_current_thread());
  CHECK(a.is_locked());
  CHECK_FALSE(w.is_locked());
  CHECK_FALSE(w.try_lock());
  CHECK_FALSE(w.try_lock(150ms));

  a.unlock_or_throw();
  CHECK(raw.command("EXISTS", "{rw}:reader-a:rwlock_timeout:2").integer == 0);
  a.unlock_or_throw();
  b.unlock_or_throw();
  CHECK(raw.command("EXISTS", "rw").integer == 0);
  CHECK_FALSE(a.is_locked());
  // Nothing held at all: Redisson 4.7's read unlock answers nil ("not owner", as its
  // RedissonReadLock throws); 3.24-3.27's answered 1 (and published).
  CHECK_THROWS_AS(a.unlock_or_throw(), lock::lock_error);
  auto old_cfg = cfg;
  old_cfg.redisson_dialect = "3.27.2";
  lock::client old_client(old_cfg);
  CHECK_NOTHROW(old_client.get_read_write_lock("rw", "reader-a").read_lock().unlock_or_throw());
}

TEST_CASE("read/write lock: a writer waits for every reader, woken by the last unlock", "[lock][rwlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client readers(config_for(server));
  lock::client writers(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto r1 = readers.get_read_write_lock("rw", "r1").read_lock();
  auto r2 = readers.get_read_write_lock("rw", "r2").read_lock();
  auto w = writers.get_read_write_lock("rw", "w").write_lock();
  r1.lock();
  r2.lock();
  auto acquired = w.async_lock(asio::use_future);
  REQUIRE(eventually(
      [&] { return raw.command("PUBSUB", "NUMSUB", "redisson_rwlock:{rw}").elements.at(1).integer == 1; }, 5s));
  r1.unlock_or_throw();
  CHECK(acquired.wait_for(300ms) == std::future_status::timeout);  // r2 still reads
  const auto t = steady::now();
  r2.unlock_or_throw();
  REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
  acquired.get();
  CHECK(steady::now() - t < 2s);  // the unlock's message, not the 30 s TTL
  CHECK(raw.command("HGET", "rw", "mode").text == "write");
  CHECK(raw.command("HGET", "rw", "w:write").text == "1");
  CHECK(w.is_locked());
  CHECK(w.is_held_by_current_thread());
  CHECK(w.hold_count() == 1);

  // Writers exclude readers and writers; the write unlock ("1") wakes both waiting readers.
  auto other_writer = writers.get_read_write_lock("rw", "w2").write_lock();
  CHECK_FALSE(other_writer.try_lock());
  CHECK_FALSE(r1.try_lock(100ms));
  auto read1 = r1.async_lock(asio::use_future);
  auto read2 = r2.async_lock(asio::use_future);
  REQUIRE(eventually(
      [&] { return raw.command("PUBSUB", "NUMSUB", "redisson_rwlock:{rw}").elements.at(1).integer == 1; }, 5s));
  std::this_thread::sleep_for(50ms);
  w.unlock_or_throw();
  REQUIRE(read1.wait_for(5s) == std::future_status::ready);
  REQUIRE(read2.wait_for(5s) == std::future_status::ready);
  read1.get();
  read2.get();
  CHECK(raw.command("HGET", "rw", "mode").text == "read");
  r1.unlock_or_throw();
  r2.unlock_or_throw();
  CHECK(raw.command("EXISTS", "rw").integer == 0);
}

TEST_CASE("read/write lock: reentrant writer, downgrade to read, no upgrade", "[lock][rwlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client client(config_for(server));
  resp_connection raw(server.host(), server.port());
  auto mine = client.get_read_write_lock("rw", "me");
  auto w = mine.write_lock();
  auto r = mine.read_lock();
  w.lock();
  w.lock();
  CHECK(w.hold_count() == 2);
  CHECK(r.try_lock());  // the writer may read
  CHECK(raw.command("HGET", "rw", "mode").text == "write");
  auto other = client.get_read_write_lock("rw", "other").read_lock();
  CHECK_FALSE(other.try_lock());
  w.unlock_or_throw();
  w.unlock_or_throw();
  // The write hold went, the read hold stays: the lock is now a read lock (downgraded).
  CHECK(raw.command("HGET", "rw", "mode").text == "read");
  CHECK(r.is_locked());
  CHECK(other.try_lock());
  other.unlock_or_throw();
  // A reader asking for the write lock waits (no upgrade), even for itself.
  CHECK_FALSE(w.try_lock(100ms));
  r.unlock_or_throw();
  CHECK(raw.command("EXISTS", "rw").integer == 0);

  // A non-owner's write unlock is refused with Redisson's text; force-unlock works per mode.
  w.lock();
  auto intruder = client.get_read_write_lock("rw", "intruder").write_lock();
  CHECK_THROWS_AS(intruder.unlock_or_throw(), lock::lock_error);
  CHECK_FALSE(r.force_unlock());  // mode is write: the read side's force-unlock does nothing
  CHECK(w.force_unlock());
  CHECK(raw.command("EXISTS", "rw").integer == 0);
}

TEST_CASE("read/write lock: the watchdog renews the hash and each read hold's timeout key",
          "[lock][rwlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  auto cfg = config_for(server);
  cfg.watchdog_timeout = 600ms;
  lock::client client(cfg);
  resp_connection raw(server.host(), server.port());
  auto r = client.get_read_write_lock("rw", "reader").read_lock();
  auto w = client.get_read_write_lock("wl", "writer").write_lock();
  r.lock();
  r.lock();
  w.lock();
  std::this_thread::sleep_for(1500ms);  // 2.5 leases
  CHECK(raw.command("EXISTS", "rw", "{rw}:reader:rwlock_timeout:1", "{rw}:reader:rwlock_timeout:2", "wl").integer ==
        4);
  r.unlock_or_throw();
  r.unlock_or_throw();
  w.unlock_or_throw();
  CHECK(raw.command("EXISTS", "rw", "wl").integer == 0);

  // With a lease, no renewal: the read hold expires with its timeout key.
  r.lock(300ms);
  CHECK(eventually([&] { return raw.command("EXISTS", "rw").integer == 0; }, 3s));
}

TEST_CASE("read/write lock: threads, readers together and writers alone", "[lock][rwlock][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  redis_server server;
  lock::client c1(config_for(server));
  lock::client c2(config_for(server));
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::atomic<int> violations{0};
  int written = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto rw = (t % 2 == 0 ? c1 : c2).get_read_write_lock("rw");
      for (int i = 0; i < 12; ++i) {
        if ((t + i) % 3 == 0) {
          auto w = rw.write_lock();
          std::scoped_lock hold(w);
          if (writers.fetch_add(1) != 0 || readers.load() != 0) ++violations;
          ++written;
          std::this_thread::sleep_for(1ms);
          writers.fetch_sub(1);
        } else {
          auto r = rw.read_lock();
          std::scoped_lock hold(r);
          readers.fetch_add(1);
          if (writers.load() != 0) ++violations;
          std::this_thread::sleep_for(1ms);
          readers.fetch_sub(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(violations == 0);
  CHECK(written == 16);
  resp_connection raw(server.host(), server.port());
  CHECK(raw.command("EXISTS", "rw").integer == 0);
}
