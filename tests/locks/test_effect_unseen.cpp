// Scripts of the npm clients recorded in tests/locks/effect_clients (redis-lock,
// node-redis-warlock, ioredfour), byte for byte as their packages ship them, read by
// their effect (script_effect.hpp) as the recordings need them.
#include <catch2/catch.hpp>

#include "recognize/lua_sandbox.hpp"
#include "recognize/script_effect.hpp"

using namespace lockscope::locks;

namespace {

effect::script_effect effect_of(std::string_view text, std::vector<std::string_view> keys,
                                std::vector<std::string_view> argv) {
  return effect::analyse_script(text, keys, argv);
}

// node-redis-warlock 1.0.2, lib/lua/parityRelock.lua: the TTL and the id come as KEYS.
constexpr std::string_view warlock_relock =
    "--\n-- Extend the key if content is equal\n-- This will extend the lock on the\n--\n-- KEYS[1]   - key\n"
    "-- KEYS[2]   - content\n-- KEYS[3]   - lock id\nlocal key = KEYS[1]\nlocal ttl = KEYS[2]\nlocal id  = KEYS[3]\n\n"
    "local value = redis.call('GET', key)\n\nif value == id then\n  return redis.call('SET', key, id, 'PX', ttl, 'XX');\n"
    "else\n  return 0\nend";

// node-redis-warlock 1.0.2, lib/lua/parityDel.lua.
constexpr std::string_view warlock_del =
    "--\n-- Delete a key if content is equal\n--\n-- KEYS[1]   - key\n-- ARGV[1]   - content\nlocal key     = KEYS[1]\n"
    "local content = ARGV[1]\n\nlocal value = redis.call('get', key)\n\nif value == content then\n  return "
    "redis.call('del', key);\nend\n\nreturn 0";

}  // namespace

TEST_CASE("effect unseen: warlock's touch, an extend whose TTL and id are KEYS, by SET XX PX", "[effect][unseen]") {
  const effect::script_effect e = effect_of(warlock_relock, {"stock:lock", "1000", "Gn0C8Ou+EfGuhDnGEyxVIw=="}, {});
  INFO(e.finding);
  CHECK(e.op == script_op::extend);
  CHECK(e.lock_key == 1);
  CHECK(e.owner_argv == effect::keys_position + 3);
  CHECK(e.lease_argv == effect::keys_position + 2);
}

TEST_CASE("effect unseen: warlock's release with Lua locals", "[effect][unseen]") {
  const effect::script_effect e = effect_of(warlock_del, {"stock:lock"}, {"Gn0C8Ou+EfGuhDnGEyxVIw=="});
  INFO(e.finding);
  CHECK(e.op == script_op::unlock);
  CHECK(e.owner_argv == 1);
}

namespace {
// ioredfour 1.4.3, lib/scripts.js (namespace "rf", not sharded).
constexpr std::string_view ioredfour_acquire = R"(
        local ttl=tonumber(ARGV[1]);
        if redis.call("EXISTS", KEYS[1]) == 1 then
            return {0, -1, redis.call("PTTL", KEYS[1])};
        end;
        --[[
            Use a global incrementing counter
            It is a signed 64bit integer, so it should not overflow any time soon.
            The number gets converted to JS which uses 64bit floats but even if the
            boundary would be much smaller Number.MAX_SAFE_INTEGER it would take thousands
            of years to reach that limit assuming we make 100k incrementations in a second
        --]]
        local index = redis.call("INCR", KEYS[2]);
        redis.call("HMSET", KEYS[1], "index", index);
        redis.call("PEXPIRE", KEYS[1], ttl);
        return {1, index, ttl};
    )";
constexpr std::string_view ioredfour_release = R"(
        local index = tonumber(ARGV[1]);
        if redis.call("EXISTS", KEYS[1]) == 0 then
            return {1, "expired", 0};
        end;
        local data = {
            ["index"]=tonumber(redis.call("HGET", KEYS[1], "index"))
        };
        if data.index == index then
            redis.call("DEL", KEYS[1]);
            -- Notify potential queue that this lock is now freed
            redis.call("PUBLISH", "rf-release", KEYS[1]);
            return {1, "released", data.index};
        end;
        return {0, "conflict", data.index};
    )";
}  // namespace

TEST_CASE("effect unseen: ioredfour's acquire draws its owner and answers it in a list, and its release checks the "
          "key exists before it reads the owner's field",
          "[effect][unseen]") {
  const effect::script_effect acquire = effect_of(ioredfour_acquire, {"rf:orders", "rfindex"}, {"1000"});
  INFO("acquire: " << acquire.finding);
  CHECK(acquire.op == script_op::acquire);
  CHECK(acquire.lock_key == 1);
  CHECK(acquire.owner_argv == 0);
  CHECK(acquire.owner_reply == 2);  // {1, index, ttl}
  CHECK(acquire.lease_argv == 1);
  const effect::script_effect release = effect_of(ioredfour_release, {"rf:orders"}, {"7"});
  INFO("release: " << release.finding);
  CHECK(release.op == script_op::unlock);
  CHECK(release.owner_argv == 1);
  // A counter the script only bumps is no drawn owner: a rate limiter is no lock.
  const effect::script_effect counter =
      effect_of("local n = redis.call('INCR', KEYS[1]); redis.call('PEXPIRE', KEYS[1], ARGV[1]); return {n, ARGV[1]}",
                {"rate:user"}, {"1000"});
  INFO("counter: " << counter.finding);
  CHECK_FALSE(counter.is_lock());
}

#include "helpers.hpp"

TEST_CASE("effect unseen: an unseen SHA1 carrying a held value among its KEYS is that holder's extend or release",
          "[effect][unseen][recognizer]") {
  using lockscope::timeline_test::feed;
  using lockscope::timeline_test::op_recorder;
  const std::string unseen_touch(40, 'a'), unseen_del(40, 'b'), unseen_other(40, 'c');
  op_recorder rec;
  lockscope::locks::lock_recognizer r(rec);
  // A capture joined after the client loaded its scripts: only their SHA1s.
  feed(r, {"SET", "stock:lock", "Gn0C8O==", "PX", "1000", "NX"}, "+OK\r\n", 1'000'000);
  feed(r, {"EVALSHA", unseen_touch, "3", "stock:lock", "1000", "Gn0C8O=="}, "+OK\r\n", 1'600'000);
  feed(r, {"EVALSHA", unseen_del, "1", "stock:lock", "Gn0C8O=="}, ":1\r\n", 1'900'000);
  // A value that never held the lock is no operation.
  feed(r, {"EVALSHA", unseen_touch, "3", "stock:lock", "1000", "never-held"}, "+OK\r\n", 2'000'000);
  // KEYS after the first from a number on are arguments (test_arguments_in_keys.cpp): a
  // script refusing `[ttl, value]` for a value that holds nothing now is read as its ARGV
  // form is, a refused attempt to acquire.
  feed(r, {"EVALSHA", unseen_other, "3", "stock:lock", "1000", "Gn0C8O=="}, ":0\r\n", 2'100'000);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[3].kind == lock_op_kind::acquire);
  CHECK(rec.ops[3].outcome == op_outcome::contended);
  CHECK(rec.ops[1].kind == lock_op_kind::renew);
  CHECK(rec.ops[1].owner == "Gn0C8O==");
  CHECK(rec.ops[1].lease_ms == 1000);
  CHECK(rec.ops[1].inferred);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(rec.ops[2].owner == "Gn0C8O==");
}

// A capture joined after the client loaded its scripts, whose acquire draws the
// holder's value itself and answers it in a list: the value is learnt from where it
// comes back (a later script's argument on the same key), in either reply layout.
TEST_CASE("effect unseen: an unseen SHA1 answering a list is learnt as an acquire when an item of its reply comes "
          "back as another unseen script's argument",
          "[effect][unseen][recognizer]") {
  using lockscope::timeline_test::feed;
  using lockscope::timeline_test::op_recorder;
  const std::string acquire(40, 'a'), extend(40, 'e'), release(40, 'f');
  op_recorder rec;
  lockscope::locks::lock_recognizer r(rec);
  std::int64_t t = 1'000'000;
  auto next = [&] { return t += 100'000; };
  SECTION("the value first, nil when busy: {token, ttl} / {nil, pttl}; the lease an ARGV; the extend [ttl, value]") {
    feed(r, {"EVALSHA", acquire, "1", "jobs:lock", "5000"}, "*2\r\n$8\r\ntok-7f3a\r\n:5000\r\n", next());
    feed(r, {"EVALSHA", acquire, "1", "jobs:lock", "5000"}, "*2\r\n$-1\r\n:4800\r\n", next());
    REQUIRE(rec.ops.empty());  // nothing known yet
    feed(r, {"EVALSHA", extend, "1", "jobs:lock", "5000", "tok-7f3a"}, "*1\r\n:1\r\n", next());
    feed(r, {"EVALSHA", release, "1", "jobs:lock", "tok-7f3a"}, ":1\r\n", next());
    feed(r, {"EVALSHA", acquire, "1", "jobs:lock", "5000"}, "*2\r\n$6\r\ntok-99\r\n:5000\r\n", next());
    feed(r, {"EVALSHA", acquire, "1", "jobs:lock", "5000"}, "*2\r\n$-1\r\n:4900\r\n", next());
    feed(r, {"EVALSHA", extend, "1", "jobs:lock", "5000", "tok-99"}, "*1\r\n:1\r\n", next());
    feed(r, {"EVALSHA", release, "1", "jobs:lock", "tok-99"}, ":1\r\n", next());
    // A value never seen holding is no operation.
    feed(r, {"EVALSHA", extend, "1", "jobs:lock", "5000", "tok-old"}, "*1\r\n:1\r\n", next());
    REQUIRE(rec.ops.size() == 6);
    CHECK(rec.ops[0].kind == lock_op_kind::renew);
    CHECK(rec.ops[0].owner == "tok-7f3a");
    CHECK(rec.ops[0].lease_ms == 5000);
    CHECK(rec.ops[1].kind == lock_op_kind::unlock);
    CHECK(rec.ops[1].outcome == op_outcome::ok);
    CHECK(rec.ops[2].kind == lock_op_kind::acquire);
    CHECK(rec.ops[2].outcome == op_outcome::ok);
    CHECK(rec.ops[2].owner == "tok-99");
    CHECK(rec.ops[2].lease_ms == 5000);
    CHECK(rec.ops[2].inferred);
    CHECK(rec.ops[3].kind == lock_op_kind::acquire);
    CHECK(rec.ops[3].outcome == op_outcome::contended);
    CHECK(rec.ops[4].kind == lock_op_kind::renew);
    CHECK(rec.ops[4].outcome == op_outcome::ok);
    CHECK(rec.ops[5].kind == lock_op_kind::unlock);
    CHECK(rec.ops[5].owner == "tok-99");
  }
  SECTION("a status first: {1, index, ttl} / {0, -1, pttl}; the counter a KEYS; numeric values; list answers") {
    feed(r, {"EVALSHA", acquire, "2", "rf:stock", "rfindex", "1000"}, "*3\r\n:1\r\n:11\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", extend, "1", "rf:stock", "11", "1000"}, "*3\r\n:1\r\n:11\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", release, "1", "rf:stock", "11"}, "*3\r\n:1\r\n$8\r\nreleased\r\n:11\r\n", next());
    feed(r, {"EVALSHA", acquire, "2", "rf:stock", "rfindex", "1000"}, "*3\r\n:1\r\n:12\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", acquire, "2", "rf:stock", "rfindex", "1000"}, "*3\r\n:0\r\n:-1\r\n:900\r\n", next());
    feed(r, {"EVALSHA", extend, "1", "rf:stock", "12", "1000"}, "*3\r\n:0\r\n:-1\r\n:0\r\n", next());
    REQUIRE(rec.ops.size() == 5);
    CHECK(rec.ops[0].kind == lock_op_kind::renew);
    CHECK(rec.ops[0].owner == "11");
    CHECK(rec.ops[0].lease_ms == 1000);
    CHECK(rec.ops[1].kind == lock_op_kind::unlock);
    CHECK(rec.ops[1].outcome == op_outcome::ok);
    CHECK(rec.ops[2].kind == lock_op_kind::acquire);
    CHECK(rec.ops[2].owner == "12");
    CHECK(rec.ops[2].outcome == op_outcome::ok);
    CHECK(rec.ops[2].lease_ms == 1000);
    CHECK(rec.ops[3].kind == lock_op_kind::acquire);
    CHECK(rec.ops[3].outcome == op_outcome::contended);
    CHECK(rec.ops[3].owner.empty());
    CHECK(rec.ops[4].kind == lock_op_kind::renew);
    CHECK(rec.ops[4].outcome == op_outcome::rejected);
  }
  SECTION("a number that comes back only to the script that answered it (a counter, a rate limiter) is no lock") {
    feed(r, {"EVALSHA", acquire, "1", "rate:user", "1000"}, "*2\r\n:7\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", acquire, "1", "rate:user", "7"}, "*2\r\n:8\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", acquire, "1", "rate:other", "1000"}, "*2\r\n:9\r\n:1000\r\n", next());
    feed(r, {"EVALSHA", release, "1", "rate:user", "9"}, "*1\r\n:1\r\n", next());  // another key's item
    CHECK(rec.ops.empty());
  }
  SECTION("a script answering lists that nothing matches stops keeping candidates (the value table is shared)") {
    for (int i = 0; i < 600; ++i) {
      const std::string item = "job-" + std::to_string(i);
      feed(r, {"EVALSHA", acquire, "1", "queue", "30"}, "*2\r\n$" + std::to_string(item.size()) + "\r\n" + item + "\r\n:30\r\n",
           next());
    }
    feed(r, {"EVALSHA", release, "1", "queue", "job-599"}, "*1\r\n:1\r\n", next());  // kept no more
    CHECK(rec.ops.empty());
    feed(r, {"EVALSHA", release, "1", "queue", "job-500"}, "*1\r\n:1\r\n", next());  // still kept
    CHECK(rec.ops.size() == 1);
  }
}
