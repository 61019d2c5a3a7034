// Replica sync (WAIT after the lock scripts): the sans-I/O joiner fed replies by hand,
// then the client against a real master and replica started here.
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/protocol.hpp"
#include "lockscope/lock/replica_sync.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "client_fixtures.hpp"
#include "replication.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lock::errc;
using lock::sync_outcome;
using lockscope::resp::value;
using lockscope::test::config_for;
using lockscope::test::eventually;
using lockscope::test::replicated_pair;
using lockscope::test::resp_connection;
using lockscope::test::since;
using steady = std::chrono::steady_clock;

namespace {

value integer(std::int64_t v) {
  value x;
  x.type = lockscope::resp::type::integer;
  x.integer = v;
  return x;
}

}  // namespace

TEST_CASE("replica sync: WAIT's reply read against the replicas asked for", "[lock][replica_sync]") {
  auto r = lock::classify_wait_reply({}, integer(2), 2);
  CHECK(r.outcome == sync_outcome::synced);
  CHECK(r.acks == 2);
  CHECK(lock::classify_wait_reply({}, integer(3), 2).ok());

  r = lock::classify_wait_reply({}, integer(1), 2);
  CHECK(r.outcome == sync_outcome::too_few);
  CHECK(r.acks == 1);
  CHECK_FALSE(r.ok());

  r = lock::classify_wait_reply(errc::server_error, value::error("ERR WAIT cannot be used with replica instances"), 1);
  CHECK(r.outcome == sync_outcome::failed);
  CHECK(r.error == errc::server_error);
  CHECK(r.text == "ERR WAIT cannot be used with replica instances");

  r = lock::classify_wait_reply(errc::timeout, value::nil(), 1);
  CHECK(r.outcome == sync_outcome::failed);
  CHECK(r.error == errc::timeout);

  r = lock::classify_wait_reply({}, value::nil(), 1);
  CHECK(r.outcome == sync_outcome::failed);
  CHECK(r.error == errc::unexpected_reply);
}

TEST_CASE("replica sync: WAIT is encoded as Redis takes it", "[lock][replica_sync]") {
  std::string out;
  lock::append_wait(out, 2, 500ms);
  CHECK(out == "*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$3\r\n500\r\n");
}

TEST_CASE("replica sync: the joiner pairs a script's reply with the WAIT behind it", "[lock][replica_sync]") {
  SECTION("script, then WAIT: complete at the WAIT, the script's reply kept") {
    lock::synced_write w(1);
    CHECK_FALSE(w.on_script_reply({}, value::nil()));
    CHECK_FALSE(w.done());
    CHECK(w.on_wait_reply({}, integer(1)));
    CHECK(w.done());
    CHECK_FALSE(w.script_error());
    CHECK(w.script_reply().is_null());
    CHECK(w.sync().ok());
  }
  SECTION("a failed script completes at once; its WAIT is not looked at") {
    lock::synced_write w(1);
    CHECK(w.on_script_reply(errc::server_error, value::error("WRONGTYPE Operation against a key")));
    CHECK(w.script_error() == errc::server_error);
    CHECK(w.sync().outcome == sync_outcome::not_checked);
    CHECK_FALSE(w.on_wait_reply({}, integer(0)));
    CHECK(w.sync().outcome == sync_outcome::not_checked);
  }
  SECTION("a WAIT before any script reply (behind a NOSCRIPT that was retried) is skipped") {
    lock::synced_write w(2);
    CHECK_FALSE(w.on_wait_reply({}, integer(0)));  // behind the dropped EVALSHA
    CHECK_FALSE(w.done());
    CHECK_FALSE(w.on_script_reply({}, integer(1500)));
    CHECK(w.on_wait_reply({}, integer(1)));
    CHECK(w.sync().outcome == sync_outcome::too_few);
    CHECK(w.sync().acks == 1);
    CHECK(w.script_reply().integer == 1500);
  }
  SECTION("through a request pipeline: one read holding both replies") {
    lock::request_pipeline p;
    lock::synced_write w(1);
    int completions = 0;
    const auto deadline = lock::clock_type::now() + 10s;
    p.send(deadline, [&](std::error_code ec, value&& v) { completions += w.on_script_reply(ec, std::move(v)); },
           "EVALSHA", "sha", "1", "k");
    std::string wait;
    lock::append_wait(wait, 1, 1000ms);
    p.send_encoded(wait, deadline, [&](std::error_code ec, value&& v) { completions += w.on_wait_reply(ec, v); });
    CHECK(p.output().ends_with("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$4\r\n1000\r\n"));
    REQUIRE_FALSE(p.feed("$-1\r\n:0\r\n"));
    CHECK(completions == 1);
    CHECK(w.sync().outcome == sync_outcome::too_few);
    CHECK(w.sync().acks == 0);
  }
  SECTION("the script timed out: complete with its error; the late WAIT changes nothing") {
    lock::request_pipeline p;
    lock::synced_write w(1);
    int completions = 0;
    const auto now = lock::clock_type::now();
    p.send(now + 1s, [&](std::error_code ec, value&& v) { completions += w.on_script_reply(ec, std::move(v)); },
           "EVALSHA", "sha", "1", "k");
    p.send(now + 2s, [&](std::error_code ec, value&& v) { completions += w.on_wait_reply(ec, v); }, "WAIT", 1, 1000);
    p.expire(now + 1s);
    CHECK(completions == 1);
    CHECK(w.script_error() == errc::timeout);
    p.expire(now + 2s);
    CHECK(completions == 1);
  }
}

TEST_CASE("replica sync: what an acquisition does with its script's reply and WAIT's", "[lock][replica_sync]") {
  using lock::acquire_reply;
  using lock::synced_acquire;
  const acquire_reply acquired{acquire_reply::kind::acquired};
  const acquire_reply busy{acquire_reply::kind::busy, 1200};
  const lock::sync_result enough = lock::classify_wait_reply({}, integer(1), 1);
  const lock::sync_result too_few = lock::classify_wait_reply({}, integer(0), 2);
  const lock::sync_result failed = lock::classify_wait_reply(errc::timeout, value::nil(), 1);
  CHECK(lock::after_acquire_sync(acquired, enough) == synced_acquire::keep);
  CHECK(lock::after_acquire_sync(acquired, too_few) == synced_acquire::release_and_fail);
  CHECK(lock::after_acquire_sync(acquired, failed) == synced_acquire::release_and_fail);
  // Busy wrote nothing that matters: the acquire loop goes on whatever WAIT said.
  CHECK(lock::after_acquire_sync(busy, too_few) == synced_acquire::not_acquired);
  CHECK(lock::after_acquire_sync(busy, enough) == synced_acquire::not_acquired);

  CHECK(lock::describe_sync_failure("lock 'orders:42'", too_few, 2, 500ms) ==
        "lock 'orders:42' reached 0 of 2 replicas within 500 ms (WAIT)");
  const lock::sync_result refused = lock::classify_wait_reply(
      errc::server_error, value::error("ERR WAIT cannot be used with replica instances"), 1);
  CHECK(lock::describe_sync_failure("lock 'a'", refused, 1, 1000ms) ==
        "lock 'a': WAIT 1 1000 failed: ERR WAIT cannot be used with replica instances");
}

TEST_CASE("replica sync: the config is checked", "[lock][replica_sync]") {
  lock::client_config c;
  CHECK_FALSE(lock::check_replica_sync(c));
  c.sync_replicas = 1;
  CHECK_FALSE(lock::check_replica_sync(c));
  c.sync_timeout = 0ms;
  std::string why;
  CHECK(lock::check_replica_sync(c, &why) == errc::invalid_argument);
  CHECK(why.find("WAIT 0 blocks forever") != std::string::npos);
  c.sync_replicas = -1;
  CHECK(lock::check_replica_sync(c) == errc::invalid_argument);
  CHECK_THROWS_AS(lock::client(c), lock::lock_error);
}

// --- against a real master and replica ---------------------------------------------

namespace {

lock::client_config synced_config(const lockscope::test::redis_server& master, int replicas,
                                  std::chrono::milliseconds timeout) {
  lock::client_config c = config_for(master);
  c.sync_replicas = replicas;
  c.sync_timeout = timeout;
  return c;
}

std::int64_t exists(const lockscope::test::redis_server& s, const std::string& key) {
  resp_connection c(s.host(), s.port());
  return c.command("EXISTS", key).integer;
}

}  // namespace

TEST_CASE("replica sync: with a live replica, acquire waits for it and the replica has the lock",
          "[lock][replica_sync][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  replicated_pair redis;
  lock::client client(synced_config(redis.master, 1, 5s));
  client.connect();
  lock::rlock l = client.get_lock("sync:one");

  // The replica sleeps 1 s: its acknowledgement, so the acquisition, must wait.
  resp_connection sleeper = lockscope::test::put_to_sleep(*redis.replica, "1");
  const auto start = steady::now();
  l.lock();
  const auto took = since(start);
  CHECK(took >= 500ms);
  // Read from the replica at once: the hold is there, with this owner.
  resp_connection replica(redis.replica->host(), redis.replica->port());
  CHECK(replica.command("HEXISTS", "sync:one", l.owner()).integer == 1);

  SECTION("unlock waits too, and the replica has lost the lock when it returns") {
    sleeper.read_value(5s);  // the first sleep's +OK
    sleeper = lockscope::test::put_to_sleep(*redis.replica, "1");
    const auto unlock_start = steady::now();
    l.unlock_or_throw();
    CHECK(since(unlock_start) >= 500ms);
    CHECK(replica.command("EXISTS", "sync:one").integer == 0);
  }
  SECTION("a NOSCRIPT retry sends its own WAIT, and the first one's answer is skipped") {
    l.unlock_or_throw();
    resp_connection(redis.master.host(), redis.master.port()).command("SCRIPT", "FLUSH");
    sleeper.read_value(5s);
    sleeper = lockscope::test::put_to_sleep(*redis.replica, "1");
    const auto again = steady::now();
    l.lock();
    CHECK(since(again) >= 500ms);
    CHECK(replica.command("HEXISTS", "sync:one", l.owner()).integer == 1);
    l.unlock_or_throw();
  }
}

TEST_CASE("replica sync: too few replicas: the acquisition fails within the sync timeout, the lock is given back",
          "[lock][replica_sync][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  replicated_pair redis;
  SECTION("2 asked, 1 replica: lock() and try_lock() throw replica_sync_failed naming the acks") {
    lock::client client(synced_config(redis.master, 2, 300ms));
    lock::rlock l = client.get_lock("sync:two");
    for (int i = 0; i < 2; ++i) {
      const auto start = steady::now();
      try {
        if (i == 0) {
          l.lock();
        } else {
          (void)l.try_lock();
        }
        FAIL("acquired with 1 replica of 2");
      } catch (const lock::lock_error& e) {
        CHECK(e.code() == errc::replica_sync_failed);
        CHECK(std::string(e.what()) == "lock 'sync:two' reached 1 of 2 replicas within 300 ms (WAIT); released");
      }
      const auto took = since(start);
      CHECK(took >= 290ms);
      CHECK(took < 3s);
      CHECK(exists(redis.master, "sync:two") == 0);
      CHECK(eventually([&] { return exists(*redis.replica, "sync:two") == 0; }, 2s));
    }
  }
  SECTION("async_try_lock completes with replica_sync_failed, not with false") {
    lock::client client(synced_config(redis.master, 2, 200ms));
    lock::rlock l = client.get_lock("sync:async");
    std::future<bool> acquired = l.async_try_lock(boost::asio::use_future);
    try {
      (void)acquired.get();
      FAIL("acquired with 1 replica of 2");
    } catch (const boost::system::system_error& e) {
      CHECK(e.code() == errc::replica_sync_failed);
    }
    CHECK(exists(redis.master, "sync:async") == 0);
  }
  SECTION("a re-entry that does not reach the replicas gives back only itself") {
    lock::client plain(config_for(redis.master));
    lock::client synced(synced_config(redis.master, 2, 200ms));
    plain.get_lock("sync:reenter", "owner-1").lock();
    lock::rlock again = synced.get_lock("sync:reenter", "owner-1");
    CHECK_THROWS_AS(again.lock(), lock::lock_error);
    CHECK(again.hold_count() == 1);
    CHECK(again.remain_time_to_live() > 0ms);
  }
  SECTION("the replica killed: 0 of 1") {
    redis.replica->kill();
    lock::client client(synced_config(redis.master, 1, 300ms));
    lock::rlock l = client.get_lock("sync:dead");
    try {
      (void)l.try_lock(2s);
      FAIL("acquired without a replica");
    } catch (const lock::lock_error& e) {
      CHECK(e.code() == errc::replica_sync_failed);
      CHECK(std::string(e.what()).starts_with("lock 'sync:dead' reached 0 of 1 replicas within 300 ms"));
    }
    CHECK(exists(redis.master, "sync:dead") == 0);
  }
  SECTION("a fair lock: given back, and out of the queue") {
    lock::client client(synced_config(redis.master, 2, 200ms));
    lock::fair_lock l = client.get_fair_lock("sync:fair");
    CHECK_THROWS_AS(l.try_lock(), lock::lock_error);
    CHECK(exists(redis.master, "sync:fair") == 0);
    CHECK(exists(redis.master, "redisson_lock_queue:{sync:fair}") == 0);
  }
}

TEST_CASE("replica sync: an unlock that reaches too few replicas is reported, and done on the master",
          "[lock][replica_sync][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  replicated_pair redis;
  lock::client plain(config_for(redis.master));
  lock::client_config c = synced_config(redis.master, 2, 200ms);
  std::vector<std::string> reported;
  c.on_unlock_error = [&](const std::string&, const std::string& message) { reported.push_back(message); };
  lock::client synced(c);
  lock::rlock holder = plain.get_lock("sync:unlock", "owner-1");
  lock::rlock releaser = synced.get_lock("sync:unlock", "owner-1");

  holder.lock();
  try {
    releaser.unlock_or_throw();
    FAIL("no error for an unlock seen by 1 replica of 2");
  } catch (const lock::lock_error& e) {
    INFO(lockscope::test::info_replication(redis.master));
    INFO(lockscope::test::info_replication(*redis.replica));
    CHECK(e.code() == errc::replica_sync_failed);
    CHECK(std::string(e.what()) == "unlock of 'sync:unlock' (done on the master) reached 1 of 2 replicas within 200 ms (WAIT)");
  }
  CHECK(exists(redis.master, "sync:unlock") == 0);

  holder.lock();
  releaser.unlock();  // never throws: the hook hears of it
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].find("reached 1 of 2 replicas") != std::string::npos);
  CHECK(exists(redis.master, "sync:unlock") == 0);

  holder.lock();
  CHECK_THROWS_AS(releaser.force_unlock(), lock::lock_error);
  CHECK(exists(redis.master, "sync:unlock") == 0);

  // Not the owner: that error comes first (nothing was written).
  try {
    releaser.unlock_or_throw();
    FAIL("unlocked a free lock");
  } catch (const lock::lock_error& e) {
    CHECK(e.code() == errc::not_owner);
  }
}
