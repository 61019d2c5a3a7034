// The recognizer, one script family at a time: Redisson's lock, fair lock, read/write,
// spin and fenced locks in their various spellings, SET-based locks of other clients,
// plain commands, pub/sub, and EVALSHA resolution and inference.
#include <filesystem>

#include <fmt/format.h>

#include "helpers.hpp"
#include "lockscope/locks/lock_analysis.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;
using locks::script_op;

namespace {

constexpr std::string_view recognizer_owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
const std::string ch = lock::channel_name("myLock");

std::string text_of(lock::script_kind k) { return std::string(lock::script(k).text); }

// One EVAL through a fresh recognizer; returns the operations.
std::vector<recorded_op> run_eval(const std::string& script, std::vector<std::string> keys,
                                  std::vector<std::string> argv, std::string_view reply) {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::vector<std::string> args{"EVAL", script, std::to_string(keys.size())};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  feed(r, args, reply);
  return rec.ops;
}

const std::string one_branch_acquire(locks::known_scripts()[0].text);
const std::string latch_unlock(locks::known_scripts()[1].text);
const std::string batched_renew(locks::known_scripts()[2].text);
const std::string force_unlock_argv(locks::known_scripts()[3].text);
const std::string spin_unlock(locks::known_scripts()[4].text);

const std::string fair_acquire =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); if firstThreadId2 == false then break; end; "
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2)); if timeout <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or "
    "(redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2]); "
    "local keys = redis.call('zrange', KEYS[3], 0, -1); for i = 1, #keys, 1 do "
    "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end; redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2],1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]); if timeout ~= false then "
    "return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]); end; local lastThreadId = redis.call('lindex', KEYS[2], -1); "
    "local ttl; if lastThreadId ~= false and lastThreadId ~= ARGV[2] then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]); else "
    "ttl = redis.call('pttl', KEYS[1]); end; local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]); "
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]); end; return ttl;";
const std::string fair_unlock =
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); if (redis.call('exists', KEYS[1]) == 0) then "
    "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; redis.call('del', KEYS[1]); "
    "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1;";
const std::string read_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'read') or (mode == 'write' and "
    "redis.call('hexists', KEYS[1], ARGV[3]) == 1) then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local key = KEYS[2] .. ':' .. ind; redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); "
    "local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); "
    "return nil; end;return redis.call('pttl', KEYS[1]);";
const std::string write_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local currentExpire = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
    "return nil; end; end;return redis.call('pttl', KEYS[1]);";
const std::string write_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; end;if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then return nil;else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; return 1; end; end; end; return nil;";
const std::string read_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; end; local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then "
    "redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then return 0; end; redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1;";
const std::string fenced_acquire =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, redis.call('get', KEYS[2])}; end; return {redis.call('pttl', KEYS[1]), -1};";
const std::string redis_py_release =
    "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= ARGV[1] then\n"
    "            return 0\n        end\n        redis.call('del', KEYS[1])\n        return 1\n    ";
const std::string redis_py_extend =
    "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= ARGV[1] then\n"
    "            return 0\n        end\n        local expiration = redis.call('pttl', KEYS[1])\n"
    "        if not expiration then\n            expiration = 0\n        end\n        if expiration < 0 then\n"
    "            return 0\n        end\n        redis.call('pexpire', KEYS[1], expiration + ARGV[2])\n        return 1\n    ";
const std::string redsync_delete =
    "\n\tlocal val = redis.call(\"GET\", KEYS[1])\n\tif val == ARGV[1] then\n\t\treturn redis.call(\"DEL\", KEYS[1])\n"
    "\telseif val == false then\n\t\treturn -1\n\telse\n\t\treturn 0\n\tend\n";
const std::string redsync_touch =
    "\n\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n\t\treturn redis.call(\"PEXPIRE\", KEYS[1], ARGV[2])\n"
    "\telse\n\t\treturn 0\n\tend\n";
const std::string redlock_acquire =
    "\n      -- Return 0 if an entry already exists.\n      for i, key in ipairs(KEYS) do\n"
    "        if redis.call(\"exists\", key) == 1 then\n          return 0\n        end\n      end\n\n"
    "      -- Create an entry for each provided key.\n      for i, key in ipairs(KEYS) do\n"
    "        redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n      end\n\n"
    "      -- Return the number of entries added.\n      return #KEYS\n    ";
const std::string redlock_extend =
    "\n      -- Return 0 if an entry exists with a *different* lock value.\n      for i, key in ipairs(KEYS) do\n"
    "        if redis.call(\"get\", key) ~= ARGV[1] then\n          return 0\n        end\n      end\n\n"
    "      for i, key in ipairs(KEYS) do\n        redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n      end\n\n"
    "      return #KEYS\n    ";
const std::string redlock_release =
    "\n      local count = 0\n      for i, key in ipairs(KEYS) do\n"
    "        -- Only remove entries for *this* lock value.\n        if redis.call(\"get\", key) == ARGV[1] then\n"
    "          redis.pcall(\"del\", key)\n          count = count + 1\n        end\n      end\n\n      return count\n    ";

}  // namespace

TEST_CASE("classify_script: the seed's Redisson scripts", "[recognizer]") {
  const auto acquire = locks::classify_script(text_of(lock::script_kind::acquire));
  CHECK(acquire.op == script_op::acquire);
  CHECK(acquire.family == lock_family::redisson);
  CHECK(acquire.owner_argv == 2);
  CHECK(acquire.lease_argv == 1);
  const auto unlock = locks::classify_script(text_of(lock::script_kind::unlock));
  CHECK(unlock.op == script_op::unlock);
  CHECK(unlock.owner_argv == 3);
  CHECK(unlock.lease_argv == 2);
  CHECK(unlock.channel_key == 2);
  const auto renew = locks::classify_script(text_of(lock::script_kind::renew));
  CHECK(renew.op == script_op::renew);
  CHECK(renew.owner_argv == 2);
  const auto force = locks::classify_script(text_of(lock::script_kind::force_unlock));
  CHECK(force.op == script_op::force_unlock);
  CHECK(force.channel_key == 2);
}

TEST_CASE("classify_script: whitespace, case, quotes and comments do not matter", "[recognizer]") {
  const std::string reformatted =
      "-- acquire\nIF (redis.call(\"EXISTS\", KEYS[1]) == 0) THEN\n  redis.call(\"HINCRBY\", KEYS[1], ARGV[2], 1)\n"
      "  redis.call(\"PEXPIRE\", KEYS[1], ARGV[1])\n  return nil\nend\nreturn redis.call(\"PTTL\", KEYS[1])\n";
  const auto c = locks::classify_script(reformatted);
  CHECK(c.op == script_op::acquire);
  CHECK(c.owner_argv == 2);
  CHECK(locks::classify_script("return redis.call('get', KEYS[1])").op == script_op::none);
  CHECK(locks::classify_script("").op == script_op::none);
  CHECK(locks::classify_script("redis.call(").op == script_op::none);  // cut short: no crash
}

TEST_CASE("recognizer: Redisson acquire in both forms, with the reply deciding the outcome", "[recognizer]") {
  for (const std::string& script : {text_of(lock::script_kind::acquire), one_branch_acquire}) {
    auto ops = run_eval(script, {"myLock"}, {"6000", std::string(recognizer_owner)}, "$-1\r\n");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].kind == lock_op_kind::acquire);
    CHECK(ops[0].outcome == op_outcome::ok);
    CHECK(ops[0].lock == "myLock");
    CHECK(ops[0].owner == recognizer_owner);
    CHECK(ops[0].lease_ms == 6000);
    CHECK_FALSE(ops[0].inferred);
    ops = run_eval(script, {"myLock"}, {"6000", std::string(recognizer_owner)}, ":5432\r\n");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].outcome == op_outcome::contended);
    CHECK(ops[0].ttl_ms == 5432);
    ops = run_eval(script, {"myLock"}, {"6000", std::string(recognizer_owner)}, "_\r\n");  // RESP3 null
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].outcome == op_outcome::ok);
  }
}

TEST_CASE("recognizer: unlock in the seed form and with a latch and PUBLISH/SPUBLISH as ARGV", "[recognizer]") {
  auto ops = run_eval(text_of(lock::script_kind::unlock), {"myLock", ch}, {"0", "6000", std::string(recognizer_owner)}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].outcome == op_outcome::ok);
  CHECK(ops[0].channel == ch);
  CHECK(ops[0].owner == recognizer_owner);
  CHECK(run_eval(text_of(lock::script_kind::unlock), {"myLock", ch}, {"0", "6000", std::string(recognizer_owner)}, ":0\r\n")[0]
            .outcome == op_outcome::partial);
  CHECK(run_eval(text_of(lock::script_kind::unlock), {"myLock", ch}, {"0", "6000", std::string(recognizer_owner)}, "$-1\r\n")[0]
            .outcome == op_outcome::rejected);
  for (const char* publish : {"PUBLISH", "SPUBLISH"}) {
    ops = run_eval(latch_unlock, {"myLock", ch, "redisson_unlock_latch:{myLock}:0123456789abcdef0123456789abcdef"},
                   {"0", "30000", std::string(recognizer_owner), publish, "13500"}, ":1\r\n");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].kind == lock_op_kind::unlock);
    CHECK(ops[0].owner == recognizer_owner);
    CHECK(ops[0].lease_ms == 30000);
    CHECK(ops[0].channel == ch);
    CHECK(ops[0].outcome == op_outcome::ok);
  }
  // The follow-up DEL of the latch key is not a lock release.
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"DEL", "redisson_unlock_latch:{myLock}:0123456789abcdef0123456789abcdef"}, ":1\r\n");
  CHECK(rec.ops.empty());
}

TEST_CASE("recognizer: renew single, batched (list reply) and plain PEXPIRE", "[recognizer]") {
  auto ops = run_eval(text_of(lock::script_kind::renew), {"myLock"}, {"30000", std::string(recognizer_owner)}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::renew);
  CHECK(ops[0].outcome == op_outcome::ok);
  CHECK(ops[0].lease_ms == 30000);
  CHECK(run_eval(text_of(lock::script_kind::renew), {"myLock"}, {"30000", std::string(recognizer_owner)}, ":0\r\n")[0].outcome ==
        op_outcome::rejected);
  ops = run_eval(batched_renew, {"a", "b", "c"}, {"30000", "u:1", "u:2", "u:3"}, "*3\r\n:1\r\n:0\r\n:1\r\n");
  REQUIRE(ops.size() == 3);
  CHECK(ops[0].lock == "a");
  CHECK(ops[0].owner == "u:1");
  CHECK(ops[0].outcome == op_outcome::ok);
  CHECK(ops[1].lock == "b");
  CHECK(ops[1].owner == "u:2");
  CHECK(ops[1].outcome == op_outcome::rejected);
  CHECK(ops[2].outcome == op_outcome::ok);
  CHECK(ops[2].lease_ms == 30000);
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"PEXPIRE", "myLock", "30000"}, ":1\r\n");
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].kind == lock_op_kind::expire);
  CHECK(rec.ops[0].lease_ms == 30000);
}

TEST_CASE("recognizer: forceUnlock in both forms", "[recognizer]") {
  auto ops = run_eval(text_of(lock::script_kind::force_unlock), {"myLock", ch}, {"0"}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::force_unlock);
  CHECK(ops[0].outcome == op_outcome::ok);
  ops = run_eval(force_unlock_argv, {"myLock", ch}, {"0", "PUBLISH"}, ":0\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::force_unlock);
  CHECK(ops[0].outcome == op_outcome::none);
}

TEST_CASE("recognizer: fair lock acquire and unlock", "[recognizer]") {
  auto ops = run_eval(fair_acquire, {"fair", "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}"},
                      {"30000", std::string(recognizer_owner), "300000", "1717209303000"}, ":29000\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_fair);
  CHECK(ops[0].kind == lock_op_kind::acquire);
  CHECK(ops[0].outcome == op_outcome::contended);
  CHECK(ops[0].owner == recognizer_owner);
  CHECK(ops[0].lease_ms == 30000);
  ops = run_eval(fair_unlock,
                 {"fair", "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}", "redisson_lock__channel:{fair}"},
                 {"0", "30000", std::string(recognizer_owner), "1717209303000", "PUBLISH"}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_fair);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].owner == recognizer_owner);
  CHECK(ops[0].channel == "redisson_lock__channel:{fair}");
}

TEST_CASE("recognizer: read and write locks", "[recognizer]") {
  const std::string w = std::string(recognizer_owner) + ":write";
  auto ops = run_eval(read_acquire, {"rw", "{rw}:" + std::string(recognizer_owner) + ":rwlock_timeout"},
                      {"30000", std::string(recognizer_owner), w}, "$-1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_read);
  CHECK(ops[0].kind == lock_op_kind::acquire);
  CHECK(ops[0].owner == recognizer_owner);
  ops = run_eval(write_acquire, {"rw"}, {"30000", w}, ":1200\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_write);
  CHECK(ops[0].outcome == op_outcome::contended);
  CHECK(ops[0].owner == w);
  ops = run_eval(write_unlock, {"rw", "redisson_rwlock:{rw}"}, {"1", "30000", w}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_write);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].owner == w);
  ops = run_eval(read_unlock, {"rw", "redisson_rwlock:{rw}", "{rw}:x:rwlock_timeout", "{rw}"}, {"0", std::string(recognizer_owner)},
                 ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_read);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].owner == recognizer_owner);
}

TEST_CASE("recognizer: spin lock unlock and fenced lock acquire with its token", "[recognizer]") {
  auto ops = run_eval(spin_unlock, {"spin"}, {"30000", std::string(recognizer_owner)}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_spin);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].owner == recognizer_owner);
  ops = run_eval(fenced_acquire, {"fenced", "redisson_lock_token:{fenced}"}, {"30000", std::string(recognizer_owner)},
                 "*2\r\n:-1\r\n:42\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::redisson_fenced);
  CHECK(ops[0].outcome == op_outcome::ok);
  CHECK(ops[0].token == 42);
  ops = run_eval(fenced_acquire, {"fenced", "redisson_lock_token:{fenced}"}, {"30000", std::string(recognizer_owner)},
                 "*2\r\n:2500\r\n:-1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].outcome == op_outcome::contended);
  CHECK(ops[0].ttl_ms == 2500);
}

TEST_CASE("recognizer: SET NX PX and the get==token scripts of redis-py and redsync", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SET", "job", "tok1", "NX", "PX", "10000"}, "+OK\r\n");
  feed(r, {"SET", "job", "tok2", "PX", "10000", "NX"}, "$-1\r\n");
  feed(r, {"SET", "job", "tok3", "EX", "10", "NX"}, "$-1\r\n");
  feed(r, {"SET", "plain", "v"}, "+OK\r\n");  // not a lock
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].owner == "tok1");
  CHECK(rec.ops[0].lease_ms == 10000);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].lease_ms == 10000);

  auto ops = run_eval(redis_py_release, {"job"}, {"tok1"}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].family == lock_family::set_based);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].owner == "tok1");
  CHECK(ops[0].outcome == op_outcome::ok);
  ops = run_eval(redis_py_extend, {"job"}, {"tok1", "5000"}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::renew);
  CHECK(ops[0].lease_ms == 5000);
  ops = run_eval(redsync_delete, {"job"}, {"dG9rZW4="}, ":-1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].outcome == op_outcome::expired);
  ops = run_eval(redsync_touch, {"job"}, {"dG9rZW4=", "8000"}, ":1\r\n");
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == lock_op_kind::renew);
  CHECK(ops[0].lease_ms == 8000);
  CHECK(ops[0].owner == "dG9rZW4=");
}

TEST_CASE("recognizer: node-redlock's multi-key acquire, extend and release", "[recognizer]") {
  auto ops = run_eval(redlock_acquire, {"a", "b"}, {"v1", "5000"}, ":2\r\n");
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].family == lock_family::redlock_multi);
  CHECK(ops[0].kind == lock_op_kind::acquire);
  CHECK(ops[0].outcome == op_outcome::ok);
  CHECK(ops[1].lock == "b");
  CHECK(ops[1].owner == "v1");
  CHECK(ops[1].lease_ms == 5000);
  ops = run_eval(redlock_acquire, {"a", "b"}, {"v2", "5000"}, ":0\r\n");
  CHECK(ops.at(0).outcome == op_outcome::contended);
  ops = run_eval(redlock_extend, {"a", "b"}, {"v1", "5000"}, ":2\r\n");
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].kind == lock_op_kind::renew);
  CHECK(ops[0].outcome == op_outcome::ok);
  ops = run_eval(redlock_release, {"a", "b"}, {"v1"}, ":2\r\n");
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].kind == lock_op_kind::unlock);
  CHECK(ops[0].outcome == op_outcome::ok);
}

TEST_CASE("recognizer: SETNX, EXPIRE, DEL, SUBSCRIBE and message pushes", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SETNX", "user:1", "1"}, ":1\r\n");
  feed(r, {"EXPIRE", "user:1", "15"}, ":1\r\n");
  feed(r, {"DEL", "user:1"}, ":1\r\n");
  feed(r, {"SUBSCRIBE", ch}, "*3\r\n$9\r\nsubscribe\r\n$31\r\nredisson_lock__channel:{myLock}\r\n:1\r\n");
  feed(r, {"SUBSCRIBE", "news"}, "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:2\r\n");  // not a lock channel
  feed_push(r, "*3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n");
  feed_push(r, ">3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n");  // RESP3
  feed(r, {"UNSUBSCRIBE", ch}, "*3\r\n$11\r\nunsubscribe\r\n$31\r\nredisson_lock__channel:{myLock}\r\n:0\r\n");
  REQUIRE(rec.ops.size() == 7);
  CHECK(rec.ops[0].family == lock_family::setnx);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[1].kind == lock_op_kind::expire);
  CHECK(rec.ops[1].lease_ms == 15000);
  CHECK(rec.ops[2].kind == lock_op_kind::del);
  CHECK(rec.ops[3].kind == lock_op_kind::subscribe);
  CHECK(rec.ops[3].lock == "myLock");
  CHECK(rec.ops[4].kind == lock_op_kind::message);
  CHECK(rec.ops[5].kind == lock_op_kind::message);
  CHECK(rec.ops[6].kind == lock_op_kind::unsubscribe);
  CHECK(rec.ops[3].sub_count == 1);
  CHECK(rec.ops[6].sub_count == 0);
}

TEST_CASE("recognizer: (un)subscribe confirmations pass their count, RESP2 and RESP3, per channel", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string other = lock::channel_name("other");
  // RESP3: the confirmation is a push paired with the command.
  feed(r, {"UNSUBSCRIBE", ch}, ">3\r\n$11\r\nunsubscribe\r\n$31\r\nredisson_lock__channel:{myLock}\r\n:2\r\n");
  // Two channels: the paired confirmation names the first; the second's comes as a push.
  feed(r, {"UNSUBSCRIBE", ch, other}, "*3\r\n$11\r\nunsubscribe\r\n$31\r\nredisson_lock__channel:{myLock}\r\n:1\r\n");
  feed(r, {"UNSUBSCRIBE", ch}, "");  // no reply captured
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[0].sub_count == 2);
  CHECK(rec.ops[1].lock == "myLock");
  CHECK(rec.ops[1].sub_count == 1);
  CHECK(rec.ops[2].lock == "other");
  CHECK(rec.ops[2].sub_count == -1);
  CHECK(rec.ops[3].sub_count == -1);
}

TEST_CASE("recognizer: an UNSUBSCRIBE naming no channel, or a RESET, leaves the lock channels the connection was "
          "seen subscribed to",
          "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  auto confirm = [](std::string_view kind, std::string_view channel, int count) {
    return "*3\r\n$" + std::to_string(kind.size()) + "\r\n" + std::string(kind) + "\r\n$" +
           std::to_string(channel.size()) + "\r\n" + std::string(channel) + "\r\n:" + std::to_string(count) + "\r\n";
  };
  const std::string a = lock::channel_name("a"), b = lock::channel_name("b"), s = lock::channel_name("s");
  const std::string m = lock::channel_name("m");
  feed(r, {"SUBSCRIBE", a, b, "news"}, confirm("subscribe", a, 1));
  feed(r, {"SSUBSCRIBE", s}, confirm("ssubscribe", s, 1));
  feed_push(r, confirm("message", m, 0));  // connection 2: subscribed before the capture
  rec.ops.clear();
  // Connection 1 leaves a and b (the confirmation names a, with its count); not the
  // shard channel, not "news".
  feed(r, {"UNSUBSCRIBE"}, confirm("unsubscribe", a, 2));
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::unsubscribe);
  CHECK(rec.ops[0].lock == "a");
  CHECK(rec.ops[0].sub_count == 2);
  CHECK(rec.ops[1].lock == "b");
  CHECK(rec.ops[1].sub_count == -1);
  feed(r, {"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:1\r\n");  // nothing left: no channel
  CHECK(rec.ops.size() == 2);
  feed(r, {"SUNSUBSCRIBE"}, confirm("sunsubscribe", s, 0));
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[2].lock == "s");
  // RESET leaves everything: connection 2's channel, known by its message.
  feed(r, {"RESET"}, "+RESET\r\n", 2'000'000, 2);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[3].kind == lock_op_kind::unsubscribe);
  CHECK(rec.ops[3].lock == "m");
  feed(r, {"RESET"}, "+RESET\r\n", 2'000'000, 2);  // once
  CHECK(rec.ops.size() == 4);
  // A named UNSUBSCRIBE is forgotten too; a connection that ended leaves nothing behind.
  feed(r, {"SUBSCRIBE", a}, confirm("subscribe", a, 1), 3'000'000, 3);
  feed(r, {"UNSUBSCRIBE", a}, confirm("unsubscribe", a, 0), 3'000'000, 3);
  feed(r, {"SUBSCRIBE", b}, confirm("subscribe", b, 1), 3'000'000, 4);
  r.on_connection_end(4, 3'500'000);
  feed(r, {"RESET"}, "+RESET\r\n", 4'000'000, 3);
  feed(r, {"RESET"}, "+RESET\r\n", 4'000'000, 4);
  CHECK(rec.ops.size() == 7);  // the two SUBSCRIBEs and the UNSUBSCRIBE: ops of their own
  CHECK(rec.ops.back().kind == lock_op_kind::subscribe);
  // At most 256 channels a connection are remembered.
  rec.ops.clear();
  for (int i = 0; i < 300; ++i) {
    const std::string c = lock::channel_name("many" + std::to_string(i));
    feed(r, {"SUBSCRIBE", c}, confirm("subscribe", c, i + 1), 5'000'000, 5);
  }
  rec.ops.clear();
  feed(r, {"RESET"}, "+RESET\r\n", 6'000'000, 5);
  REQUIRE(rec.ops.size() == 256);
  CHECK(rec.ops.front().lock == "many44");
}

TEST_CASE("recognizer: EVALSHA resolves built-in SHA1s, earlier EVALs and SCRIPT LOAD", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string acquire_sha(lock::script(lock::script_kind::acquire).sha1);
  feed(r, {"EVALSHA", acquire_sha, "1", "myLock", "6000", std::string(recognizer_owner)}, "$-1\r\n");
  // Upper-case SHA1 of the batched renew form, a known script.
  std::string renew_sha = lock::sha1_hex(batched_renew);
  for (char& c : renew_sha) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  feed(r, {"EVALSHA", renew_sha, "1", "myLock", "30000", std::string(recognizer_owner)}, "*1\r\n:1\r\n");
  // A script first seen as EVAL, then called by SHA1.
  feed(r, {"EVAL", redis_py_release, "1", "job", "tok"}, ":0\r\n");
  feed(r, {"EVALSHA", lock::sha1_hex(redis_py_release), "1", "job", "tok"}, ":1\r\n");
  // SCRIPT LOAD, then EVALSHA.
  const std::string sha = lock::sha1_hex(redsync_touch);
  feed(r, {"SCRIPT", "LOAD", redsync_touch}, "$40\r\n" + sha + "\r\n");
  feed(r, {"EVALSHA", sha, "1", "job", "tok", "9000"}, ":1\r\n");
  REQUIRE(rec.ops.size() == 5);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].outcome == op_outcome::rejected);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[4].kind == lock_op_kind::renew);
  CHECK(rec.ops[4].lease_ms == 9000);
  for (const auto& op : rec.ops) CHECK_FALSE(op.inferred);
  CHECK(r.stats().unknown_shas == 0);
}

TEST_CASE("recognizer: an unknown SHA1 is inferred from arguments and reply", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string a(40, 'a'), b(40, 'b'), c(40, 'c'), d(40, 'd'), e(40, 'e');
  feed(r, {"EVALSHA", a, "1", "myLock", "30000", std::string(recognizer_owner)}, ":1\r\n");   // renew-shaped: 0/1
  feed(r, {"EVALSHA", b, "1", "myLock", "30000", std::string(recognizer_owner)}, "$-1\r\n");  // nil: an acquire
  feed(r, {"EVALSHA", b, "1", "myLock", "30000", std::string(recognizer_owner)}, ":1\r\n");   // proven acquire: ttl 1
  feed(r, {"EVALSHA", c, "2", "myLock", ch, "0", "30000", std::string(recognizer_owner)}, ":0\r\n");
  feed(r, {"EVALSHA", d, "2", "myLock", ch, "0"}, ":1\r\n");
  feed(r, {"EVALSHA", e, "1", "job", "tok"}, ":1\r\n");
  feed(r, {"EVALSHA", e, "2", "k1", "k2", "x"}, "+OK\r\n");  // no lock shape: nothing
  REQUIRE(rec.ops.size() == 6);
  CHECK(rec.ops[0].kind == lock_op_kind::renew);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[2].kind == lock_op_kind::acquire);
  CHECK(rec.ops[2].outcome == op_outcome::contended);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::partial);
  CHECK(rec.ops[4].kind == lock_op_kind::force_unlock);
  CHECK(rec.ops[5].kind == lock_op_kind::unlock);
  CHECK(rec.ops[5].family == lock_family::set_based);
  for (const auto& op : rec.ops) CHECK(op.inferred);
}

TEST_CASE("recognizer: EVALs that are not lock scripts and malformed calls are ignored", "[recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"}, ":5\r\n");
  feed(r, {"EVAL", text_of(lock::script_kind::acquire), "7", "myLock"}, "-ERR Number of keys can't be greater\r\n");
  feed(r, {"EVAL", text_of(lock::script_kind::acquire), "x"}, "-ERR value is not an integer\r\n");
  feed(r, {"EVALSHA", "nothex", "1", "k"}, "-NOSCRIPT No matching script\r\n");
  feed(r, {"EVAL"}, "-ERR wrong number of arguments\r\n");
  CHECK(rec.ops.empty());
  CHECK(r.stats().unknown_scripts == 1);
}

TEST_CASE("recognizer: random scripts, arguments and replies never crash it", "[recognizer][random]") {
  std::uint64_t seed = 12345;
  auto next = [&](std::uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  const std::vector<std::string> pieces{"redis.call(", "redis.pcall(", "'hincrby'", "'hexists'", "'pexpire'", "'del'",
                                        "'publish'", "'get'", "'set'", "KEYS[1]", "KEYS[2]", "KEYS[3]", "ARGV[1]",
                                        "ARGV[2]", "ARGV[3]", "ARGV[i + 1]", ", ", ")", "(", "'", "\"", "-1", "1",
                                        " == ", "ipairs(KEYS)", "'mode'", "'px'", "'nx'", "--", "\n", "{", "}", "[", "]"};
  const std::vector<std::string> replies{"$-1\r\n", ":1\r\n", ":0\r\n", ":-1\r\n", ":5000\r\n", "+OK\r\n",
                                         "-ERR x\r\n", "*2\r\n:-1\r\n:7\r\n", "*0\r\n", "_\r\n", "#t\r\n", ""};
  const std::vector<std::string> words{"myLock", "redisson_lock__channel:{myLock}", "redisson_lock_queue:{x}",
                                       "redisson_lock_token:{x}", "30000", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1",
                                       "0", "PUBLISH", "tok", "", "-5", "99999999999999999999"};
  op_recorder rec;
  locks::lock_recognizer r(rec);
  for (int i = 0; i < 5000; ++i) {
    std::string script;
    for (std::uint64_t k = next(30); k > 0; --k) script += pieces[next(pieces.size())];
    std::vector<std::string> args;
    const bool sha = next(3) == 0;
    args.push_back(sha ? "EVALSHA" : "EVAL");
    args.push_back(sha ? (next(2) == 0 ? std::string(40, "0123456789abcdef"[next(16)]) : lock::sha1_hex(script))
                       : script);
    const std::uint64_t nkeys = next(4);
    args.push_back(next(10) == 0 ? "x" : std::to_string(nkeys));
    for (std::uint64_t k = next(7); k > 0; --k) args.push_back(words[next(words.size())]);
    feed(r, args, replies[next(replies.size())]);
  }
  CHECK(r.stats().exchanges == 5000);
}

namespace {

// The i-th spelling of redis-py's release script: the same classification, another SHA1.
std::string release_variant(std::size_t i) { return redis_py_release + "\n-- variant " + std::to_string(i); }

}  // namespace

TEST_CASE("recognizer: learnt SHA1s are an LRU of sha_cache_entries, and built-ins are never forgotten",
          "[recognizer][memory]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::size_t n = locks::sha_cache_entries + 1;
  std::vector<std::string> shas;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string script = release_variant(i);
    shas.push_back(lock::sha1_hex(script));
    feed(r, {"SCRIPT", "LOAD", script}, "$40\r\n" + shas.back() + "\r\n");
    if (i == n - 2) feed(r, {"EVALSHA", shas[0], "1", "job", "tok"}, ":1\r\n");  // 0 is recent again
  }
  CHECK(r.stats().scripts_seen == n);
  CHECK(r.stats().shas_evicted == 1);
  CHECK(r.stats().scripts_evicted == n - locks::script_cache_entries);
  rec.ops.clear();
  feed(r, {"EVALSHA", shas[0], "1", "job", "tok"}, ":1\r\n");      // kept: used recently
  feed(r, {"EVALSHA", shas[n - 1], "1", "job", "tok"}, ":1\r\n");  // kept: the newest
  feed(r, {"EVALSHA", shas[1], "1", "job", "tok"}, ":1\r\n");      // forgotten: inferred again
  const std::string acquire_sha(lock::script(lock::script_kind::acquire).sha1);
  feed(r, {"EVALSHA", acquire_sha, "1", "myLock", "6000", std::string(recognizer_owner)}, "$-1\r\n");  // built-in
  REQUIRE(rec.ops.size() == 4);
  CHECK_FALSE(rec.ops[0].inferred);
  CHECK_FALSE(rec.ops[1].inferred);
  CHECK(rec.ops[2].inferred);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK_FALSE(rec.ops[3].inferred);
  CHECK(rec.ops[3].kind == lock_op_kind::acquire);
  CHECK(r.stats().unknown_shas == 1);
}

TEST_CASE("recognizer: EVAL'd script texts are an LRU capped by count and by bytes", "[recognizer][memory]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::size_t n = locks::script_cache_entries + 1;
  for (std::size_t i = 0; i < n; ++i) feed(r, {"EVAL", release_variant(i), "1", "job", "tok"}, ":1\r\n");
  CHECK(r.stats().scripts_seen == n);
  CHECK(r.stats().scripts_evicted == 1);
  feed(r, {"EVAL", release_variant(n - 1), "1", "job", "tok"}, ":1\r\n");  // still known
  CHECK(r.stats().scripts_seen == n);
  feed(r, {"EVAL", release_variant(0), "1", "job", "tok"}, ":1\r\n");  // forgotten: classified again
  CHECK(r.stats().scripts_seen == n + 1);
  CHECK(rec.ops.size() == n + 2);
  for (const auto& op : rec.ops) CHECK(op.kind == lock_op_kind::unlock);

  // Two scripts bigger than half the byte cap: the second pushes the first out.
  op_recorder big_rec;
  locks::lock_recognizer big(big_rec);
  const std::string padding(locks::script_cache_bytes / 2 + 1, ' ');
  feed(big, {"EVAL", redis_py_release + padding, "1", "job", "tok"}, ":1\r\n");
  feed(big, {"EVAL", redis_py_release + padding + " ", "1", "job", "tok"}, ":1\r\n");
  CHECK(big.stats().scripts_evicted == 1);
  CHECK(big_rec.ops.size() == 2);
}

// The lock client's own scripts (lockscope::lock_scripts) for the fair, fenced and
// read/write locks, exactly as it sends them: recognised as EVAL, and as an EVALSHA the
// recognizer has not seen before in the stream (a fresh recognizer each time).
// read_unlock is Redisson 3.x's full read unlock: it compares the mode with 'write' after
// counting the hold down (only to keep the key), which once made it a write unlock.
TEST_CASE("recognizer: the client's fair, fenced and read/write scripts as EVAL and as unseen EVALSHA",
          "[recognizer]") {
  using k = lock::script_kind;
  const std::string o(recognizer_owner);
  const std::string w = o + ":write";
  struct expectation {
    k script;
    std::vector<std::string> keys, argv;
    std::string reply;
    lock_family family;
    lock_op_kind kind;
    std::string op_owner;
  };
  const std::vector<std::string> fair_keys{"fair", "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}"};
  const std::vector<expectation> cases{
      {k::fair_acquire, fair_keys, {"30000", o, "300000", "1717209303000"}, "$-1\r\n", lock_family::redisson_fair,
       lock_op_kind::acquire, o},
      {k::fair_unlock,
       {"fair", "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}", "redisson_lock__channel:{fair}"},
       {"0", "30000", o, "1717209303000"}, ":1\r\n", lock_family::redisson_fair, lock_op_kind::unlock, o},
      {k::fenced_acquire, {"fenced", "redisson_lock_token:{fenced}"}, {"30000", o}, "*2\r\n:-1\r\n:7\r\n",
       lock_family::redisson_fenced, lock_op_kind::acquire, o},
      {k::read_acquire, {"rw", "{rw}:" + o + ":rwlock_timeout"}, {"30000", o, w}, "$-1\r\n",
       lock_family::redisson_read, lock_op_kind::acquire, o},
      {k::write_acquire, {"rw"}, {"30000", w}, "$-1\r\n", lock_family::redisson_write, lock_op_kind::acquire, w},
      {k::write_unlock, {"rw", "redisson_rwlock:{rw}"}, {"1", "30000", w}, ":1\r\n", lock_family::redisson_write,
       lock_op_kind::unlock, w},
      {k::read_unlock, {"rw", "redisson_rwlock:{rw}", "{rw}:" + o + ":rwlock_timeout", "{rw}"}, {"1", o}, ":1\r\n",
       lock_family::redisson_read, lock_op_kind::unlock, o},
  };
  for (const auto& c : cases) {
    const lock::script_info& s = lock::script(c.script);
    for (const bool by_sha : {false, true}) {
      INFO(s.name << (by_sha ? " as EVALSHA" : " as EVAL"));
      op_recorder rec;
      locks::lock_recognizer r(rec);
      std::vector<std::string> args{by_sha ? "EVALSHA" : "EVAL", std::string(by_sha ? s.sha1 : s.text),
                                    std::to_string(c.keys.size())};
      args.insert(args.end(), c.keys.begin(), c.keys.end());
      args.insert(args.end(), c.argv.begin(), c.argv.end());
      feed(r, args, c.reply);
      REQUIRE(rec.ops.size() == 1);
      CHECK(rec.ops[0].family == c.family);
      CHECK(rec.ops[0].kind == c.kind);
      CHECK(rec.ops[0].owner == c.op_owner);
      CHECK(rec.ops[0].outcome == op_outcome::ok);
      CHECK_FALSE(rec.ops[0].inferred);
      if (c.script == k::fenced_acquire) CHECK(rec.ops[0].token == 7);
    }
  }
}

namespace {

std::string describe_ops(const std::vector<recorded_op>& ops, const locks::recognizer_stats& s) {
  std::string out;
  for (const recorded_op& o : ops) {
    out += fmt::format("{} {} {} {} {} {} {} {} {}\n", static_cast<int>(o.kind), static_cast<int>(o.family),
                       static_cast<int>(o.outcome), o.inferred, o.lock, o.owner, o.lease_ms, o.ttl_ms, o.token);
  }
  out += fmt::format("ops {} seen {} unknown {} evicted {}", s.operations, s.scripts_seen, s.unknown_scripts,
                     s.scripts_evicted);
  return out;
}

constexpr std::uint64_t script_load = ~std::uint64_t{0};

// EVALs of (script, identity) in turn, the identity passed as the session's interner
// would (0: none) or not at all (identity script_load: a SCRIPT LOAD of the text);
// returns what the recognizer made of them.
std::string run_evals(const std::vector<std::pair<std::string, std::uint64_t>>& calls, bool identities) {
  static const ingest::endpoint client = ingest::make_endpoint("10.0.0.1", 50000);
  static const ingest::endpoint server = ingest::make_endpoint("10.0.0.2", 6379);
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::int64_t at = 1'000'000;
  for (const auto& [script, identity] : calls) {
    const std::string lease = std::to_string(at % 7 + 30000);
    const bool load = identity == script_load;
    const std::vector<std::string_view> args =
        load ? std::vector<std::string_view>{"SCRIPT", "LOAD", script}
             : std::vector<std::string_view>{"EVAL", script, "1", "myLock", lease, recognizer_owner};
    const std::string sha = "$40\r\n" + lock::sha1_hex(script) + "\r\n";
    const ingest::message reply = make_message(load ? sha : at % 3 == 0 ? ":1234\r\n" : "$-1\r\n");
    ingest::exchange e;
    e.connection = 1;
    e.client = &client;
    e.server = &server;
    e.client_text = "10.0.0.1:50000";
    e.server_text = "10.0.0.2:6379";
    e.request_us = at;
    e.reply_us = at + 100;
    e.command = args;
    e.reply = &reply;
    if (identities && !load) {
      e.interned_identity = identity;
      e.interned_argument = 1;
    }
    r.on_exchange(e);
    at += 1000;
  }
  return describe_ops(rec.ops, r.stats());
}

}  // namespace

TEST_CASE("recognizer: the same operations with and without the session's interned identities", "[recognizer]") {
  const std::string acquire = text_of(lock::script_kind::acquire);
  const std::string unlock = text_of(lock::script_kind::unlock);
  std::string near = acquire;  // one byte off: another script, not a lock script
  near[near.size() / 2] = '#';
  std::string renamed = acquire;  // the same length, a lock script all the same
  renamed.replace(renamed.find("hincrby"), 7, "HINCRBY");
  // An identity names one text; a text may have several (after an eviction, or another
  // thread's interner), or none (a split frame).
  const std::vector<std::pair<std::string, std::uint64_t>> calls{
      {acquire, 11}, {acquire, 11}, {acquire, 0},  {acquire, 11},  {near, 12},    {acquire, 11}, {near, 12},
      {near, 0},     {acquire, 14}, {unlock, 15},  {acquire, 14},  {unlock, 15},  {renamed, 16}, {renamed, 16},
      {acquire, 11}, {near, 12},    {renamed, 0},  {acquire, 17},  {acquire, 11}, {fair_acquire, 18},
      {acquire, 11}, {fair_acquire, 18}, {one_branch_acquire, 19}, {acquire, 11}, {one_branch_acquire, 19}};
  const std::string plain = run_evals(calls, false);
  CHECK(run_evals(calls, true) == plain);
  INFO(plain);
  CHECK(plain.find("seen 3 unknown 0") != std::string::npos);  // the texts not built in, learnt once
  // Many texts in turn, each new one learnt (by_text changes): the identity of the last
  // EVAL's script must be forgotten with it.
  std::vector<std::pair<std::string, std::uint64_t>> churn;
  for (int i = 0; i < 40; ++i) {
    std::string other = near;
    other[0] = static_cast<char>('A' + i % 20);
    churn.push_back({other, 100 + static_cast<std::uint64_t>(i % 20)});
    churn.push_back({acquire, 11});
    churn.push_back({near, 12});
    if (i % 5 == 0) {
      // A script learnt from SCRIPT LOAD: the last EVAL's script is forgotten too.
      churn.push_back({other + "--", script_load});
      churn.push_back({near, 12});
    }
  }
  CHECK(run_evals(churn, true) == run_evals(churn, false));
}

TEST_CASE("analyze_files: interning the session's long arguments changes no output, on every bundled capture",
          "[recognizer][captures]") {
  std::size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(LOCKSCOPE_CAPTURES_DIR)) {
    const std::string path = f.path().string();
    if (!(path.ends_with(".pcap") || path.ends_with(".pcapng"))) continue;
    ++files;
    INFO(path);
    // JSONL: every operation's and event's fields (the text report shows fewer).
    for (auto format : {locks::report_format::jsonl}) {
      std::string out[2];
      for (bool intern : {false, true}) {
        locks::analysis_options o;
        o.report.format = format;
        o.threads = 1;
        o.capture.session.intern_arguments = intern;
        locks::analyze_files({path}, o, [&](std::string_view s) { out[intern] += s; });
      }
      CHECK(out[1] == out[0]);
    }
  }
  CHECK(files > 20);
}

TEST_CASE("recognizer: calls of scripts known only by SHA1 and read as nothing are counted, for the note",
          "[recognizer]") {
  // A job queue joined after its clients loaded their scripts: EVALSHA only, a job's
  // fields answered, no argument shape of a lock. What analyze's note counts.
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string job_sha(40, 'a');
  feed(r, {"EVALSHA", job_sha, "2", "q:wait", "q:active", "q:", "1796033916071"}, "*2\r\n$2\r\n17\r\n$4\r\ndata\r\n");
  feed(r, {"EVALSHA", job_sha, "2", "q:wait", "q:active", "q:", "1796033916090"}, "*-1\r\n");
  CHECK(rec.ops.empty());
  CHECK(r.stats().unread_sha_calls == 2);
  CHECK(r.stats().unread_shas == 1);
  // Refused by the server (NOSCRIPT): the script did nothing, so nothing went unread.
  const std::string other_sha(40, 'b');
  feed(r, {"EVALSHA", other_sha, "1", "q:wait", "x"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
  CHECK(r.stats().unread_sha_calls == 2);
  CHECK(r.stats().unread_shas == 1);
  // One read as a lock operation from its arguments (a release: the holder's value, 1) is
  // no unread call.
  const std::string release_sha(40, 'c');
  feed(r, {"EVALSHA", release_sha, "1", "job", "tok-5f1c9a7e2b"}, ":1\r\n");
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].inferred);
  CHECK(r.stats().unread_sha_calls == 2);
  CHECK(r.stats().unread_shas == 1);
}
