// The sandbox's shadow against a real redis-server: each lock script of the effect
// tests (and a few more commands' edge cases) run on each probe state, in the sandbox
// and by EVAL on the server; the replies and the keys' states afterwards must agree.
// This is what makes the probes' reading of a script trustworthy: what the shadow
// answers is what Redis answers.
#include <algorithm>
#include <map>

#include <catch2/catch.hpp>

#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "recognize/lua_sandbox.hpp"

using namespace lockscope;
using locks::effect::lua_reply;
using locks::effect::shadow_key;
using locks::effect::shadow_store;

namespace {

struct differential_case {
  std::string script;
  std::vector<std::string> keys, argv;
};

// A probe state: the first key (and every key when `all`) holding `value` as a string,
// or as a hash field counting `count`; absent when value is empty.
struct differential_state {
  std::string value;
  bool hash = false;
  int count = 1;
  bool all = false;
  std::int64_t pttl = 4'321'987;
};

shadow_store diff_shadow_of(const differential_state& s, const std::vector<std::string>& keys) {
  shadow_store store;
  if (s.value.empty()) return store;
  for (std::size_t i = 0; i < keys.size() && (i == 0 || s.all); ++i) {
    shadow_key k;
    k.pttl_ms = s.pttl;
    if (s.hash) {
      k.kind = shadow_key::type::hash;
      k.fields.emplace_back(s.value, std::to_string(s.count));
    } else {
      k.value = s.value;
    }
    store.keys[keys[i]] = k;
  }
  return store;
}

void diff_set_up(test::resp_connection& c, const differential_state& s, const std::vector<std::string>& keys) {
  REQUIRE(c.command("FLUSHALL").text == "OK");
  if (s.value.empty()) return;
  for (std::size_t i = 0; i < keys.size() && (i == 0 || s.all); ++i) {
    if (s.hash) c.command("HSET", keys[i], s.value, std::to_string(s.count));
    else c.command("SET", keys[i], s.value);
    c.command("PEXPIRE", keys[i], std::to_string(s.pttl));
  }
}

// Replies agree: the same kind and value (a TTL within 2 s: the server's clock runs).
bool diff_same_reply(const lua_reply& mine, const resp::value& real, std::string& why) {
  auto close = [](std::int64_t a, std::int64_t b) { return a == b || (a > 1000 && b > 1000 && std::llabs(a - b) < 2000); };
  switch (mine.type) {
    case lua_reply::kind::nil:
      if (real.is_null()) return true;
      break;
    case lua_reply::kind::integer:
      if (real.type == resp::type::integer && close(mine.integer, real.integer)) return true;
      break;
    case lua_reply::kind::status:
      if (real.type == resp::type::simple_string && real.text == mine.text) return true;
      break;
    case lua_reply::kind::error:
      if (real.is_error()) return true;
      break;
    case lua_reply::kind::bulk:
      if (real.type == resp::type::bulk_string && real.text == mine.text) return true;
      break;
    case lua_reply::kind::array:
      if (real.type == resp::type::array && real.elements.size() == mine.items.size()) {
        for (std::size_t i = 0; i < mine.items.size(); ++i) {
          if (!diff_same_reply(mine.items[i], real.elements[i], why)) return false;
        }
        return true;
      }
      break;
  }
  why = "sandbox kind " + std::to_string(static_cast<int>(mine.type)) + " (" + mine.text + std::to_string(mine.integer) +
        "), server type " + std::to_string(static_cast<int>(real.type)) + " (" + real.text + ")";
  return false;
}

// The keys' states agree: existence, type, value or fields, and whether (and about
// when) each expires.
void diff_check_state(test::resp_connection& c, const shadow_store& store, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    INFO("key " << key);
    const resp::value type = c.command("TYPE", key);
    const auto it = store.keys.find(key);
    if (it == store.keys.end()) {
      CHECK(type.text == "none");
      continue;
    }
    const shadow_key& k = it->second;
    if (k.kind == shadow_key::type::list) {
      REQUIRE(type.text == "list");
      const resp::value all = c.command("LRANGE", key, "0", "-1");
      std::vector<std::string> real;
      for (const resp::value& v : all.elements) real.push_back(v.text);
      CHECK(real == k.items);
    } else if (k.kind == shadow_key::type::hash) {
      REQUIRE(type.text == "hash");
      const resp::value all = c.command("HGETALL", key);
      std::map<std::string, std::string> real, mine(k.fields.begin(), k.fields.end());
      for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) real[all.elements[i].text] = all.elements[i + 1].text;
      CHECK(real == mine);
    } else {
      REQUIRE(type.text == "string");
      CHECK(c.command("GET", key).text == k.value);
    }
    const std::int64_t pttl = c.command("PTTL", key).integer;
    if (k.pttl_ms < 0) CHECK(pttl == -1);
    else CHECK(std::llabs(pttl - k.pttl_ms) < 2000);
  }
}

// Runs the case in the sandbox and by EVAL on the server, both from the state `st`; the
// replies and the `checked` keys' states afterwards must agree.
void diff_run_both(test::resp_connection& c, const differential_case& dc, const differential_state& st,
                   const std::vector<std::string>& checked) {
  shadow_store store = diff_shadow_of(st, dc.keys);
  const std::vector<std::string_view> keys(dc.keys.begin(), dc.keys.end()), argv(dc.argv.begin(), dc.argv.end());
  const locks::effect::run_result mine = locks::effect::run_script(dc.script, keys, argv, store);
  INFO("sandbox: " << mine.message);
  REQUIRE(mine.outcome != locks::effect::run_result::status::unsupported);
  REQUIRE(mine.outcome != locks::effect::run_result::status::limit);
  diff_set_up(c, st, dc.keys);
  std::vector<std::string> eval{"EVAL", dc.script, std::to_string(dc.keys.size())};
  eval.insert(eval.end(), dc.keys.begin(), dc.keys.end());
  eval.insert(eval.end(), dc.argv.begin(), dc.argv.end());
  const resp::value real = c.command_argv(eval);
  std::string why;
  INFO("server reply: " << real.text << " " << real.integer);
  CHECK(diff_same_reply(mine.reply, real, why));
  INFO(why);
  diff_check_state(c, store, checked);
}

}  // namespace

TEST_CASE("effect sandbox: the shadow answers and changes keys as redis-server does", "[effect][sandbox][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  test::redis_server server;
  test::resp_connection c(server.host(), server.port());
  const std::vector<differential_case> cases{
      {"local key = KEYS[1]\nlocal token = ARGV[1]\n"
       "if redis.call('get', key) == token then return redis.call('del', key) end\nreturn 0\n",
       {"orders:lock"}, {"tok-1"}},
      {"local ttl, token = ARGV[1], ARGV[2]\nlocal k = KEYS[1]\n"
       "if redis.call('SET', k, token, 'NX', 'PX', ttl) then return 1 end\nreturn 0",
       {"jobs:7"}, {"30000", "tok-1"}},
      {"redis.call('select', ARGV[1])\nreturn redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3])",
       {"res"}, {"0", "tok-1", "10000"}},
      {"local key, value = KEYS[1], ARGV[1]\nlocal minTTL, newTTL = tonumber(ARGV[2]), ARGV[3]\n"
       "if redis.call('get', key) ~= value then return {0, redis.call('pttl', key)} end\n"
       "local ttl = redis.call('pttl', key)\n"
       "if ttl < minTTL then redis.call('pexpire', key, newTTL) return {1, tonumber(newTTL)} end\n"
       "return {1, ttl}",
       {"cron"}, {"tok-1", "5000", "30000"}},
      {"local k = KEYS[1]\nif redis.call(\"GET\", k) == ARGV[1] then redis.call(\"DEL\", k) end\nreturn nil",
       {"mutex"}, {"tok-1"}},
      {"local lock, owner, lease = KEYS[1], ARGV[1], ARGV[2]\n"
       "if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then\n"
       "  redis.call('hincrby', lock, owner, 1)\n  redis.call('pexpire', lock, lease)\n  return nil\nend\n"
       "return redis.call('pttl', lock)",
       {"acct"}, {"tok-1", "20000"}},
      {"local lock, channel, owner = KEYS[1], KEYS[2], ARGV[1]\n"
       "if redis.call('hexists', lock, owner) == 0 then return nil end\n"
       "local left = redis.call('hincrby', lock, owner, -1)\n"
       "if left > 0 then return 0 end\n"
       "redis.call('del', lock)\nredis.call('publish', channel, 'free')\nreturn 1",
       {"acct", "acct:free"}, {"tok-1"}},
      {"for _, key in ipairs(KEYS) do if redis.call('exists', key) == 1 then return 0 end end\n"
       "for _, key in ipairs(KEYS) do redis.call('set', key, ARGV[1], 'PX', ARGV[2]) end\nreturn #KEYS",
       {"a", "b", "c"}, {"tok-1", "8000"}},
      {"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) end return 0",
       {"lease"}, {"tok-1", "30"}},
      {"local t = redis.call('get', KEYS[1])\nif t ~= ARGV[1] then return 0 end\n"
       "local left = redis.call('pttl', KEYS[1])\nredis.call('pexpire', KEYS[1], left + ARGV[2])\nreturn 1",
       {"job"}, {"tok-1", "5000"}},
      {"return redis.call('set', KEYS[1], ARGV[1], 'NX', 'GET', 'EX', ARGV[2])", {"k"}, {"tok-1", "60"}},
      {"return {redis.call('ttl', KEYS[1]), redis.call('exists', KEYS[1]), redis.call('hlen', KEYS[1])}", {"k"}, {}},
      {"return redis.pcall('get', KEYS[1])", {"k"}, {}},
      {"return redis.call('hget', KEYS[1], ARGV[1])", {"k"}, {"tok-1"}},
      {"redis.call('hdel', KEYS[1], ARGV[1]) return redis.call('exists', KEYS[1])", {"k"}, {"tok-1"}},
      {"return redis.call('pexpire', KEYS[1], 100, 'GT')", {"k"}, {}},
      {"return redis.call('setnx', KEYS[1], ARGV[1])", {"k"}, {"tok-1"}},
      {"return redis.call('incrby', KEYS[1], 5)", {"k"}, {}},
      {"return redis.call('persist', KEYS[1])", {"k"}, {}},
      // python-redis-lock 3.3's unlock and extend, byte for byte.
      {"\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n        return 1\n    else\n"
       "        redis.call(\"del\", KEYS[2])\n        redis.call(\"lpush\", KEYS[2], 1)\n"
       "        redis.call(\"del\", KEYS[1])\n        return 0\n    end\n",
       {"lock:r", "lock-signal:r"}, {"tok-1"}},
      {"\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[2] then\n        return 1\n"
       "    elseif redis.call(\"ttl\", KEYS[1]) < 0 then\n        return 2\n    else\n"
       "        redis.call(\"expire\", KEYS[1], ARGV[1])\n        return 0\n    end\n",
       {"lock:r"}, {"5", "tok-1"}},
      {"redis.call('rpush', KEYS[1], 'a', 'b') return {redis.call('lpop', KEYS[1]), redis.call('llen', KEYS[1]), "
       "redis.call('rpop', KEYS[1]), redis.call('exists', KEYS[1])}",
       {"q"}, {}},
  };
  const std::vector<differential_state> states{
      {},
      {"tok-1"},
      {"someone-else"},
      {"tok-1", true, 1},
      {"tok-1", true, 2},
      {"someone-else", true, 1},
      {"tok-1", false, 1, true},
      {"tok-1", false, 1, false, 1500},  // a lease about to run out
      {"41"},
  };
  for (const differential_case& dc : cases) {
    for (const differential_state& st : states) {
      INFO("script:\n" << dc.script << "\nstate: '" << st.value << "' hash " << st.hash << " count " << st.count
                       << " all " << st.all << " pttl " << st.pttl);
      diff_run_both(c, dc, st, dc.keys);
    }
  }
}

// The codecs Redis gives scripts (cmsgpack, cjson) and the list moves of a job queue
// (RPOPLPUSH, LMOVE, LREM) with HMGET: what a job queue's scripts unpack, move and read.
TEST_CASE("effect sandbox: cmsgpack, cjson and list moves answer as redis-server does", "[effect][sandbox][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  test::redis_server server;
  test::resp_connection c(server.host(), server.port());
  // {token: "w1-5f3a9c:7", lockDuration: 1200} and ["3", "12"], packed by hand.
  const std::string opts = std::string("\x82\xa5token\xab", 8) + "w1-5f3a9c:7" + "\xac" + "lockDuration" + "\xcd\x04\xb0";
  const std::string ids = "\x92\xa1\x33\xa2\x31\x32";
  const std::vector<differential_case> cases{
      {"return cmsgpack.pack(1, -5, 127, 128, 300, 70000, -70000, -33, 2^40, -2^40, 1.5, 0.1, 'tok', true, false, "
       "{10, 20, 'x'}, {token = ARGV[1]}, {}, string.rep('a', 40), string.rep('b', 300))",
       {"k"}, {"w1-5f3a9c:7"}},
      {"local o = cmsgpack.unpack(ARGV[1])\nlocal ids = cmsgpack.unpack(ARGV[2])\n"
       "redis.call('set', KEYS[1] .. ids[2] .. ':lock', o['token'], 'PX', o['lockDuration'])\n"
       "return {o['token'], o['lockDuration'], #ids, ids[1], select('#', cmsgpack.unpack(ARGV[2] .. ARGV[2]))}",
       {"bull:q:", "bull:q:12:lock"}, {opts, ids}},
      {"return cmsgpack.unpack(ARGV[1])", {"k"}, {"\xdc\xff"}},
      {"return cmsgpack.unpack(cmsgpack.pack({a = {b = {1, 2, {c = 'd'}}}}))['a']['b'][3]['c']", {"k"}, {}},
      {"return cjson.encode({ARGV[1], 3, 2.5, true, 'a/b\"c'})", {"k"}, {"w1-5f3a9c:7"}},
      {"return cjson.encode({attempts = 0})", {"k"}, {}},
      {"local d = cjson.decode(ARGV[1]) return {d['a']['b'], d['n'], #d['l']}", {"k"}, {"{\"a\":{\"b\":\"x\"},\"n\":4,\"l\":[1,2]}"}},
      {"return cjson.decode(ARGV[1])", {"k"}, {"{\"a\":"}},
      {"redis.call('rpush', KEYS[1], 'j1', 'j2', 'j3')\n"
       "local id = redis.call('rpoplpush', KEYS[1], KEYS[2])\n"
       "local m = redis.call('lmove', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')\n"
       "return {id, m, redis.call('lrem', KEYS[2], -1, 'j3'), redis.call('lrem', KEYS[2], 0, 'none'),"
       " redis.call('llen', KEYS[2]), redis.call('rpoplpush', 'none', KEYS[2]) or 'nil'}",
       {"q:wait", "q:active"}, {}},
      {"redis.call('rpush', KEYS[1], 'a', 'b', 'a', 'c', 'a')\n"
       "return {redis.call('lrem', KEYS[1], 2, 'a'), redis.call('lrem', KEYS[1], -1, 'c'), redis.call('lrange', KEYS[1], 0, -1),"
       " redis.call('rpoplpush', KEYS[1], KEYS[1])}",
       {"q:wait"}, {}},
      {"redis.call('hset', KEYS[1], 'a', '1', 'c', '3')\nreturn redis.call('hmget', KEYS[1], 'a', 'b', 'c')", {"job:1"}, {}},
      {"redis.call('xadd', KEYS[2], '*', 'event', 'active')\nreturn redis.call('xtrim', KEYS[2], 'MAXLEN', '~', 10)",
       {"k", "q:events"}, {}},
  };
  for (const differential_case& dc : cases) {
    INFO("script:\n" << dc.script);
    std::vector<std::string> checked;
    for (const std::string& k : dc.keys) {
      if (k != "q:events") checked.push_back(k);  // a stream: not kept by the shadow
    }
    diff_run_both(c, dc, differential_state{}, checked);
  }
}
