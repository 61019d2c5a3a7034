// Sorted-set locks read by their effect (recognize/script_effect.hpp over the sandbox's
// sorted sets, recognize/lua_sandbox.hpp): symfony/lock 5.4's RedisStore scripts byte
// for byte as Debian's php-symfony-lock sends them (tests/locks/data/symfony_lock/, taken
// from Store/RedisStore.php with its TIME clause, the texts the recording carries), the
// same with the caller's clock instead of TIME (its Redis < 5 form), a semaphore of two
// permits written here, replies the probes did not foresee, and scripts that loop or
// allocate on sorted sets.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "effect_calls.hpp"
#include "helpers.hpp"
#include "lockscope/locks/command_words.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "recognize/lua_sandbox.hpp"
#include "recognize/script_effect.hpp"

using namespace lockscope::locks;
using effect::lua_reply;
using effect::observed_reply;
using effect::shadow_key;
using effect::shadow_store;

namespace {

std::string symfony_script(const std::string& name) {
  std::ifstream in(std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/data/symfony_lock/" + name + ".lua",
                   std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// symfony's Redis < 5 form: `now` from the caller's ARGV[1] (microtime) instead of TIME.
std::string with_caller_clock(std::string text) {
  const std::string time_clause =
      "local now = redis.call(\"TIME\")\n                now = now[1] * 1000 + math.floor(now[2] / 1000)";
  const std::size_t at = text.find(time_clause);
  REQUIRE(at != std::string::npos);
  text.replace(at, time_clause.size(), "local now = tonumber(ARGV[1])\n            now = math.floor(now * 1000)");
  return text;
}


effect::run_result zrun(std::string_view text, shadow_store& store, const std::vector<std::string>& keys = {"z"},
                        const std::vector<std::string>& argv = {}, const effect::sandbox_limits& limits = {}) {
  const std::vector<std::string_view> k(keys.begin(), keys.end()), a(argv.begin(), argv.end());
  return effect::run_script(text, k, a, store, limits);
}

std::vector<std::string> texts(const lua_reply& r) {
  std::vector<std::string> out;
  for (const lua_reply& i : r.items) out.push_back(i.type == lua_reply::kind::integer ? std::to_string(i.integer) : i.text);
  return out;
}

// A release by ZREM of the member ARGV[1] names (or one built from it): read as the
// unlock of that member, 1 removed it, 0 refused.
void check_member_release(const std::string& text, const effect_call& r) {
  const auto rel = effect_of(text, r);
  INFO(rel.finding);
  REQUIRE(rel.op == script_op::unlock);
  CHECK(rel.member_based);
  CHECK(rel.owner_argv == 1);
  CHECK(eff_reading(rel, eff_integer_reply(1), r).outcome == op_outcome::ok);
  CHECK(eff_reading(rel, eff_integer_reply(0), r).outcome == op_outcome::rejected);
}

const effect_call symfony_save{{"lock:orders"}, {"1795982171.1101", "XV+8x3n58C4Oi0/PvJDxwuWsuwaQ3potBM2Ttyba0Ac=", "300000"}};
const effect_call symfony_refresh{{"lock:orders"}, {"1795982171.1139", "XV+8x3n58C4Oi0/PvJDxwuWsuwaQ3potBM2Ttyba0Ac=", "1000"}};
const effect_call symfony_delete{{"lock:orders"}, {"XV+8x3n58C4Oi0/PvJDxwuWsuwaQ3potBM2Ttyba0Ac="}};

}  // namespace

TEST_CASE("sandbox: sorted sets answer and change as Redis does", "[effect][sandbox][zset]") {
  shadow_store s;
  s.now_ms = 1'795'982'171'110;
  // ZADD's forms: added counts, CH, NX, XX, GT, LT, INCR; scores printed shortest.
  auto r = zrun("return {redis.call('zadd', KEYS[1], 10, 'a', 20, 'b'), redis.call('zadd', KEYS[1], 'NX', 5, 'a'),"
                " redis.call('zadd', KEYS[1], 'XX', 'CH', 15, 'a', 1, 'c'), redis.call('zadd', KEYS[1], 'GT', 'CH', 12, 'a'),"
                " redis.call('zadd', KEYS[1], 'LT', 'CH', 12, 'a'), redis.call('zadd', KEYS[1], 'INCR', 2.5, 'b'),"
                " redis.call('zscore', KEYS[1], 'a'), redis.call('zcard', KEYS[1])}",
                s);
  REQUIRE(r.outcome == effect::run_result::status::ok);
  CHECK(texts(r.reply) == std::vector<std::string>{"2", "0", "1", "0", "1", "22.5", "12", "2"});
  REQUIRE(s.keys.count("z") == 1);
  CHECK(s.keys["z"].kind == shadow_key::type::zset);
  // Ranges: by rank, reversed, by score with open bounds, WITHSCORES, LIMIT; ZCOUNT.
  r = zrun("redis.call('zadd', KEYS[1], 30, 'c', 30, 'bb')\n"
           "return {redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[1], redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[2],"
           " redis.call('zcount', KEYS[1], '-inf', '+inf'), redis.call('zcount', KEYS[1], '(12', 30),"
           " table.concat(redis.call('zrangebyscore', KEYS[1], '(12', '+inf', 'LIMIT', 1, 2), ','),"
           " table.concat(redis.call('zrange', KEYS[1], 0, -1), ','), redis.call('type', KEYS[1]).ok,"
           " redis.call('zrank', KEYS[1], 'bb'), redis.call('zrevrank', KEYS[1], 'a')}",
           s);
  REQUIRE(r.outcome == effect::run_result::status::ok);
  CHECK(texts(r.reply) == std::vector<std::string>{"c", "30", "4", "3", "bb,c", "a,b,bb,c", "zset", "2", "3"});
  // ZREM, ZREMRANGEBYSCORE; a set left empty is dropped; the writes name each member.
  r = zrun("return {redis.call('zremrangebyscore', KEYS[1], '-inf', 22.5), redis.call('zrem', KEYS[1], 'c', 'nope'),"
           " redis.call('zrem', KEYS[1], 'bb'), redis.call('exists', KEYS[1])}",
           s);
  CHECK(texts(r.reply) == std::vector<std::string>{"2", "1", "1", "0"});
  CHECK(s.keys.count("z") == 0);
  std::size_t removed = 0;
  for (const auto& w : r.writes) removed += w.kind == effect::shadow_write::what::member_del ? 1 : 0;
  CHECK(removed == 4);
  // PEXPIREAT against the store's clock (which TIME answers); a passed deadline deletes.
  r = zrun("local t = redis.call('TIME')\nlocal now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
           "redis.call('zadd', KEYS[1], now + 5000, 'x')\n"
           "local a = redis.call('pexpireat', KEYS[1], redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[2])\n"
           "return {now, a, redis.call('pttl', KEYS[1]), redis.call('pexpiretime', KEYS[1]),"
           " redis.call('pexpireat', KEYS[1], now - 1), redis.call('exists', KEYS[1])}",
           s);
  REQUIRE(r.outcome == effect::run_result::status::ok);
  CHECK(texts(r.reply) == std::vector<std::string>{"1795982171110", "1", "5000", "1795982176110", "1", "0"});
  // Wrong types and bad scores answer Redis's errors.
  shadow_store t;
  t.keys["s"] = shadow_key{};
  r = zrun("return redis.pcall('zadd', KEYS[1], 1, 'a')", t, {"s"});
  CHECK(r.reply.type == lua_reply::kind::error);
  r = zrun("return redis.call('zadd', KEYS[1], 'x', 'a')", t, {"y"});
  CHECK(r.outcome == effect::run_result::status::script_error);
  CHECK(t.keys.count("y") == 0);
  CHECK(effect::score_text(1795982471110.0) == "1795982471110");
  CHECK(effect::score_text(22.5) == "22.5");
  CHECK(effect::score_text(-HUGE_VAL) == "-inf");
}

TEST_CASE("effect: symfony/lock's save() is an exclusive acquire of a sorted-set member", "[effect][zset]") {
  const std::string text = symfony_script("save");
  for (const std::string& t : {text, with_caller_clock(text)}) {
    const auto e = effect_of(t, symfony_save);
    INFO(e.finding);
    REQUIRE(e.op == script_op::acquire);
    CHECK(e.family == lock_family::set_based);
    CHECK(e.member_based);
    CHECK_FALSE(e.shared);
    CHECK(e.lock_key == 1);
    CHECK(e.owner_argv == 2);
    CHECK(e.lease_argv == 3);
    CHECK_FALSE(e.lease_seconds);
    CHECK(e.renews_own);  // saved again by its holder: re-scored
    CHECK(eff_reading(e, eff_integer_reply(1), symfony_save).outcome == op_outcome::ok);
    const auto refused = eff_reading(e, eff_nil_reply(), symfony_save);
    CHECK_FALSE(refused.ambiguous);
    CHECK(refused.outcome == op_outcome::contended);
  }
}

TEST_CASE("effect: symfony/lock's putOffExpiration() renews its member, delete() releases it", "[effect][zset]") {
  const auto extend = effect_of(symfony_script("putOffExpiration"), symfony_refresh);
  INFO(extend.finding);
  REQUIRE(extend.op == script_op::extend);
  CHECK(extend.member_based);
  CHECK(extend.owner_argv == 2);
  CHECK(extend.lease_argv == 3);
  CHECK(eff_reading(extend, eff_integer_reply(1), symfony_refresh).outcome == op_outcome::ok);
  CHECK(eff_reading(extend, eff_nil_reply(), symfony_refresh).outcome == op_outcome::rejected);

  const auto release = effect_of(symfony_script("delete"), symfony_delete);
  INFO(release.finding);
  REQUIRE(release.op == script_op::unlock);
  CHECK(release.member_based);
  CHECK(release.owner_argv == 1);
  CHECK(eff_reading(release, eff_integer_reply(1), symfony_delete).outcome == op_outcome::ok);
  CHECK(eff_reading(release, eff_nil_reply(), symfony_delete).outcome == op_outcome::rejected);

  // exists() only asks: it runs to its end and is no lock.
  const auto asks = effect_of(symfony_script("exists"), symfony_save);
  INFO(asks.finding);
  CHECK_FALSE(asks.is_lock());
  CHECK(asks.ran);
}

TEST_CASE("effect: symfony/lock's saveRead() is a shared acquire refused by the writer's flag", "[effect][zset]") {
  const std::string text = symfony_script("saveRead");
  for (const std::string& t : {text, with_caller_clock(text)}) {
    const auto e = effect_of(t, symfony_save);
    INFO(e.finding);
    REQUIRE(e.op == script_op::acquire);
    CHECK(e.member_based);
    CHECK(e.shared);
    CHECK(e.limit == 0);
    CHECK(e.family == lock_family::set_based);  // a read hold, not a semaphore's permit
    CHECK(e.owner_argv == 2);
    CHECK(e.lease_argv == 3);
    CHECK(eff_reading(e, eff_integer_reply(1), symfony_save).outcome == op_outcome::ok);
    CHECK(eff_reading(e, eff_nil_reply(), symfony_save).outcome == op_outcome::contended);
  }
}

TEST_CASE("effect: a sorted-set semaphore of N permits is read by its effect, its limit from ARGV", "[effect][zset]") {
  // Written here, unlike any client's: the holder id first, the clock last, members
  // scored by when their permit runs out, answers 'OK' / false.
  const std::string acquire =
      "local sem, id, permits, lease, now = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
      "redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)\n"
      "if redis.call('ZSCORE', sem, id) then redis.call('ZADD', sem, 'XX', now + lease, id) return 'OK' end\n"
      "if redis.call('ZCARD', sem) >= permits then return false end\n"
      "redis.call('ZADD', sem, now + lease, id)\nredis.call('PEXPIRE', sem, lease)\nreturn 'OK'\n";
  for (const char* permits : {"2", "3"}) {
    const effect_call c{{"sem:pool"}, {"worker-7", permits, "5000", "1764000000000"}};
    const auto e = effect_of(acquire, c);
    INFO(e.finding);
    REQUIRE(e.op == script_op::acquire);
    CHECK(e.family == lock_family::semaphore);
    CHECK(e.shared);
    CHECK(e.member_based);
    CHECK(e.limit == std::stoi(permits));
    CHECK(e.limit_argv == 2);
    CHECK(e.owner_argv == 1);
    CHECK(e.lease_argv == 3);
    observed_reply ok;
    ok.kind = observed_reply::form::status;
    ok.text = "OK";
    CHECK(eff_reading(e, ok, c).outcome == op_outcome::ok);
    CHECK(eff_reading(e, eff_nil_reply(), c).outcome == op_outcome::contended);
  }
  check_member_release("local n = redis.call('ZREM', KEYS[1], ARGV[1])\nreturn n", {{"sem:pool"}, {"worker-7"}});
}

TEST_CASE("effect: a reply no probe path gave is left to the caller, not guessed", "[effect][zset]") {
  const auto e = effect_of(symfony_script("save"), symfony_save);
  REQUIRE(e.op == script_op::acquire);
  observed_reply text;
  text.kind = observed_reply::form::text;
  text.text = "something else";
  const auto odd = eff_reading(e, text, symfony_save);
  CHECK(odd.ambiguous);
  CHECK(odd.outcome == op_outcome::none);
  CHECK(eff_reading(e, eff_integer_reply(7), symfony_save).ambiguous);
}

TEST_CASE("sandbox: scripts that loop or allocate on sorted sets are stopped by the limits", "[effect][sandbox][zset]") {
  effect::sandbox_limits limits;
  const auto started = std::chrono::steady_clock::now();
  // A set grown without end: the shadow's bytes (or the writes) run out.
  shadow_store a;
  auto r = zrun("local i = 0\nwhile true do i = i + 1\n redis.call('zadd', KEYS[1], i, string.rep('m', 200) .. i) end", a,
                {"z"}, {}, limits);
  CHECK(r.outcome == effect::run_result::status::limit);
  // Cheap calls on a large set, in a loop: each call's scan is charged.
  shadow_store b;
  shadow_key big;
  big.kind = shadow_key::type::zset;
  for (int i = 0; i < 20000; ++i) big.members.emplace_back("m" + std::to_string(100000 + i), i);
  b.keys["z"] = big;
  r = zrun("while true do redis.call('zcount', KEYS[1], '-inf', '+inf') redis.call('zscore', KEYS[1], 'none') end", b,
           {"z"}, {}, limits);
  CHECK(r.outcome == effect::run_result::status::limit);
  // A range of every member, again and again: bounded answers, then the limit.
  r = zrun("local t = {}\nwhile true do t[#t + 1] = redis.call('zrange', KEYS[1], 0, -1, 'WITHSCORES') end", b, {"z"}, {},
           limits);
  CHECK(r.outcome == effect::run_result::status::limit);
  // Scores that are not numbers, NaN increments, BYLEX: errors or "not modelled", no crash.
  shadow_store c;
  r = zrun("redis.call('zadd', KEYS[1], 'inf', 'a') return redis.call('zincrby', KEYS[1], '-inf', 'a')", c);
  CHECK(r.outcome == effect::run_result::status::script_error);
  r = zrun("return redis.call('zrange', KEYS[1], '[a', '[z', 'BYLEX')", c);
  CHECK(r.outcome == effect::run_result::status::unsupported);
  // The probes of such a script end too, and find no lock.
  const effect_call call{{"z"}, {"tok", "1000"}};
  const auto e = effect_of("while true do redis.call('zadd', KEYS[1], ARGV[2], ARGV[1] .. math.random()) end", call);
  CHECK_FALSE(e.is_lock());
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
}

// ---- The shadow's sorted sets against a real redis-server ----

namespace {

// A probe state of the differential test: the key absent, a string, or a sorted set of
// these members, each scored `ahead_ms` from the server's clock.
struct zstate {
  std::string kind;  // "none", "string", "zset"
  std::vector<std::pair<std::string, std::int64_t>> members;
};

bool zsame_reply(const lua_reply& mine, const lockscope::resp::value& real, std::string& why) {
  namespace resp = lockscope::resp;
  // A score or a time within 2 s (the server's clock runs on from the shadow's).
  auto close = [](std::int64_t a, std::int64_t b) { return a == b || (a > 100000 && b > 100000 && std::llabs(a - b) < 2000); };
  auto close_text = [&](const std::string& a, const std::string& b) {
    std::int64_t x = 0, y = 0;
    return a == b || (lockscope::locks::parse_wire_int(a, x) && lockscope::locks::parse_wire_int(b, y) && close(x, y));
  };
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
      if (real.type == resp::type::bulk_string && close_text(real.text, mine.text)) return true;
      break;
    case lua_reply::kind::array:
      if (real.type == resp::type::array && real.elements.size() == mine.items.size()) {
        for (std::size_t i = 0; i < mine.items.size(); ++i) {
          if (!zsame_reply(mine.items[i], real.elements[i], why)) return false;
        }
        return true;
      }
      break;
  }
  why = "sandbox kind " + std::to_string(static_cast<int>(mine.type)) + " (" + mine.text + " " +
        std::to_string(mine.integer) + "), server type " + std::to_string(static_cast<int>(real.type)) + " (" + real.text +
        ")";
  return false;
}

}  // namespace

TEST_CASE("effect sandbox: sorted sets and PEXPIREAT answer and change keys as redis-server does",
          "[effect][sandbox][zset][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  const std::string token = "XV+8x3n58C4Oi0/PvJDxwuWsuwaQ3potBM2Ttyba0Ac=";
  struct zcase {
    std::string script;
    std::vector<std::string> argv;
  };
  std::vector<zcase> cases;
  for (const char* name : {"save", "saveRead", "putOffExpiration", "exists"}) {
    cases.push_back({symfony_script(name), {"0", token, "1000"}});
    cases.push_back({with_caller_clock(symfony_script(name)), {"<now>", token, "1000"}});
  }
  cases.push_back({symfony_script("delete"), {token}});
  cases.push_back({"return {redis.call('zadd', KEYS[1], 'GT', 'CH', 5, ARGV[1]), redis.call('zadd', KEYS[1], 'NX', 1, 'n'),"
                   " redis.call('zadd', KEYS[1], 'XX', 'INCR', 2, 'n'), redis.call('zincrby', KEYS[1], 1.5, 'm'),"
                   " redis.call('zrange', KEYS[1], 0, -1, 'WITHSCORES'), redis.call('zrevrangebyscore', KEYS[1], '+inf', '(1',"
                   " 'WITHSCORES', 'LIMIT', 0, 2), redis.call('zmscore', KEYS[1], ARGV[1], 'nope'),"
                   " redis.call('zremrangebyrank', KEYS[1], 0, 0), redis.call('zpopmax', KEYS[1]), redis.call('zcard', KEYS[1])}",
                   {token}});
  cases.push_back({"local t = redis.call('TIME')\nlocal now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
                   "redis.call('zremrangebyscore', KEYS[1], '-inf', now)\n"
                   "return {redis.call('zcount', KEYS[1], now, '+inf'), redis.call('zrem', KEYS[1], ARGV[1]),"
                   " redis.call('expireat', KEYS[1], math.floor(now / 1000) + 30), redis.call('ttl', KEYS[1]),"
                   " redis.call('type', KEYS[1]).ok}",
                   {token}});
  const std::vector<zstate> states{
      {"none", {}},
      {"string", {}},
      {"zset", {{token, 5000}}},
      {"zset", {{"someone-else", 5000}}},
      {"zset", {{"someone-else", 5000}, {"__write__", 5000}}},
      {"zset", {{token, 5000}, {"__write__", 5000}}},
      {"zset", {{token, -3000}, {"someone-else", 8000}}},  // the caller's member expired
  };
  for (const zcase& zc : cases) {
    for (const zstate& st : states) {
      INFO("script:\n" << zc.script << "\nstate " << st.kind << " of " << st.members.size());
      REQUIRE(c.command("FLUSHALL").text == "OK");
      const lockscope::resp::value time = c.command("TIME");
      REQUIRE(time.elements.size() == 2);
      const std::int64_t now_ms = std::stoll(time.elements[0].text) * 1000 + std::stoll(time.elements[1].text) / 1000;
      shadow_store store;
      store.now_ms = now_ms;
      if (st.kind == "string") {
        c.command("SET", "lock:orders", "x");
        store.keys["lock:orders"] = shadow_key{};
        store.keys["lock:orders"].value = "x";
      } else if (st.kind == "zset") {
        shadow_key k;
        k.kind = shadow_key::type::zset;
        std::int64_t top = 0;
        std::vector<std::pair<double, std::string>> sorted;
        for (const auto& [m, ahead] : st.members) {
          c.command("ZADD", "lock:orders", std::to_string(now_ms + ahead), m);
          sorted.emplace_back(static_cast<double>(now_ms + ahead), m);
          top = std::max(top, now_ms + ahead);
        }
        std::sort(sorted.begin(), sorted.end());
        for (const auto& [score, m] : sorted) k.members.emplace_back(m, score);
        c.command("PEXPIREAT", "lock:orders", std::to_string(top));
        k.pttl_ms = top - now_ms;
        store.keys["lock:orders"] = k;
      }
      std::vector<std::string> argv = zc.argv;
      for (std::string& a : argv) {
        if (a == "<now>") a = std::to_string(now_ms / 1000) + "." + std::to_string(now_ms % 1000 / 100);
      }
      const std::vector<std::string> keys{"lock:orders"};
      const effect::run_result mine = zrun(zc.script, store, keys, argv);
      REQUIRE(mine.outcome != effect::run_result::status::unsupported);
      REQUIRE(mine.outcome != effect::run_result::status::limit);
      std::vector<std::string> eval{"EVAL", zc.script, "1", "lock:orders"};
      eval.insert(eval.end(), argv.begin(), argv.end());
      const lockscope::resp::value real = c.command_argv(eval);
      std::string why;
      INFO("server reply: " << real.text << " " << real.integer);
      CHECK(zsame_reply(mine.reply, real, why));
      INFO(why);
      // The key after: type, members and scores (within 2 s), expiry.
      const auto it = store.keys.find("lock:orders");
      const std::string type = c.command("TYPE", "lock:orders").text;
      if (it == store.keys.end()) {
        CHECK(type == "none");
        continue;
      }
      if (it->second.kind != shadow_key::type::zset) {
        CHECK(type == "string");
        continue;
      }
      REQUIRE(type == "zset");
      const lockscope::resp::value all = c.command("ZRANGE", "lock:orders", "0", "-1", "WITHSCORES");
      REQUIRE(all.elements.size() == it->second.members.size() * 2);
      for (std::size_t i = 0; i < it->second.members.size(); ++i) {
        CHECK(all.elements[2 * i].text == it->second.members[i].first);
        CHECK(std::fabs(std::stod(all.elements[2 * i + 1].text) - it->second.members[i].second) < 2000);
      }
      const std::int64_t pttl = c.command("PTTL", "lock:orders").integer;
      if (it->second.pttl_ms < 0) CHECK(pttl == -1);
      else CHECK(std::llabs(pttl - it->second.pttl_ms) < 2000);
    }
  }
}

// ---- Through the recognizer: the operations each call makes ----

namespace {

struct zop {
  lock_op_kind kind{};
  lock_family family{};
  op_outcome outcome{};
  bool shared = false, inferred = false;
  std::string lock, owner;
  std::int64_t lease_ms = -1, permits = -1, limit = -1;
};

class zop_recorder final : public lock_operation_sink {
 public:
  void on_operation(const lock_operation& op) override {
    ops.push_back({op.kind, op.family, op.outcome, op.shared, op.inferred, std::string(op.lock), std::string(op.owner),
                   op.lease_ms, op.permits, op.limit});
  }
  std::vector<zop> ops;
};

std::vector<std::string> zeval(const std::string& script, const std::string& key, std::vector<std::string> argv) {
  std::vector<std::string> args{"EVAL", script, "1", key};
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

constexpr std::int64_t zt0 = 1'795'982'171'000'000;

}  // namespace

TEST_CASE("effect pipeline: symfony/lock's scripts by EVAL make its lock's operations", "[effect][zset][pipeline]") {
  using lockscope::timeline_test::feed;
  zop_recorder rec;
  lock_recognizer r(rec);
  const std::string save = symfony_script("save"), refresh = symfony_script("putOffExpiration"),
                    del = symfony_script("delete"), exists = symfony_script("exists"), read = symfony_script("saveRead");
  feed(r, zeval(save, "lock:orders", {"1795982171.1101", "tok-A", "300000"}), ":1\r\n", zt0 + 110'000, 1);
  feed(r, zeval(save, "lock:orders", {"1795982171.1139", "tok-B", "300000"}), "$-1\r\n", zt0 + 114'000, 2);
  feed(r, zeval(refresh, "lock:orders", {"1795982171.1140", "tok-A", "1000"}), ":1\r\n", zt0 + 114'100, 1);
  feed(r, zeval(del, "lock:orders", {"tok-A"}), ":1\r\n", zt0 + 160'000, 1);
  feed(r, zeval(exists, "lock:orders", {"1795982171.1601", "tok-A"}), "$-1\r\n", zt0 + 160'100, 1);
  feed(r, zeval(save, "lock:orders", {"1795982171.2103", "tok-B", "300000"}), ":1\r\n", zt0 + 210'000, 2);
  feed(r, zeval(del, "lock:orders", {"tok-A"}), "$-1\r\n", zt0 + 220'000, 1);  // long gone: refused
  feed(r, zeval(read, "lock:report", {"1795982171.3000", "tok-R", "300000"}), ":1\r\n", zt0 + 300'000, 3);
  REQUIRE(rec.ops.size() == 7);
  const auto& a = rec.ops[0];
  CHECK(a.kind == lock_op_kind::acquire);
  CHECK(a.outcome == op_outcome::ok);
  CHECK(a.owner == "tok-A");
  CHECK(a.lease_ms == 300000);
  CHECK_FALSE(a.shared);
  CHECK_FALSE(a.inferred);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[1].owner == "tok-B");
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(rec.ops[2].lease_ms == 1000);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[4].kind == lock_op_kind::acquire);
  CHECK(rec.ops[4].outcome == op_outcome::ok);
  CHECK(rec.ops[4].owner == "tok-B");
  CHECK(rec.ops[5].kind == lock_op_kind::unlock);
  CHECK(rec.ops[5].outcome == op_outcome::rejected);
  CHECK(rec.ops[6].kind == lock_op_kind::acquire);
  CHECK(rec.ops[6].shared);  // a read hold
  CHECK(rec.ops[6].family == lock_family::set_based);
}

TEST_CASE("effect pipeline: a sorted-set semaphore's acquires, refusal and releases are its permits",
          "[effect][zset][pipeline]") {
  using lockscope::timeline_test::feed;
  const std::string acquire =
      "local sem, id, permits, lease, now = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
      "redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)\n"
      "if redis.call('ZSCORE', sem, id) then redis.call('ZADD', sem, 'XX', now + lease, id) return 'OK' end\n"
      "if redis.call('ZCARD', sem) >= permits then return false end\n"
      "redis.call('ZADD', sem, now + lease, id)\nredis.call('PEXPIRE', sem, lease)\nreturn 'OK'\n";
  const std::string release = "local n = redis.call('ZREM', KEYS[1], ARGV[1])\nreturn n";
  zop_recorder rec;
  lock_recognizer r(rec);
  feed(r, zeval(acquire, "sem:pool", {"w1", "2", "5000", "1795982171000"}), "+OK\r\n", zt0 + 1'000, 1);
  feed(r, zeval(acquire, "sem:pool", {"w2", "2", "5000", "1795982171010"}), "+OK\r\n", zt0 + 11'000, 2);
  feed(r, zeval(acquire, "sem:pool", {"w3", "2", "5000", "1795982171020"}), "$-1\r\n", zt0 + 21'000, 3);
  feed(r, zeval(release, "sem:pool", {"w1"}), ":1\r\n", zt0 + 31'000, 1);
  feed(r, zeval(acquire, "sem:pool", {"w3", "2", "5000", "1795982171040"}), "+OK\r\n", zt0 + 41'000, 3);
  REQUIRE(rec.ops.size() == 5);
  for (const zop& o : rec.ops) {
    INFO(static_cast<int>(o.kind) << " " << o.owner);
    CHECK(o.family == lock_family::semaphore);
    CHECK(o.shared);
    CHECK(o.permits == 1);
  }
  CHECK(rec.ops[0].limit == 2);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].lease_ms == 5000);
  CHECK(rec.ops[2].outcome == op_outcome::contended);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[3].owner == "w1");
  CHECK(rec.ops[4].outcome == op_outcome::ok);
}

TEST_CASE("effect: a semaphore whose members are built from the holder's argument, its limit 1 or more", "[effect][zset]") {
  // Written here, unlike any client's: each permit a member `permit:<id>:<n>` made in Lua
  // from the holder's id, scored by the caller's clock; the limit an argument that may
  // be 1 and equal to the permit count (repeated arguments: raised, one refuses itself).
  const std::string acquire =
      "local sem = KEYS[1]\n"
      "local id, limit, count, lease, clock = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])\n"
      "redis.call('ZREMRANGEBYSCORE', sem, '-inf', clock - lease)\n"
      "if redis.call('ZCARD', sem) + count > limit then return 0 end\n"
      "for n = 1, count do redis.call('ZADD', sem, clock, 'permit:' .. id .. ':' .. n) end\n"
      "redis.call('PEXPIRE', sem, lease)\nreturn 1\n";
  for (const char* limit : {"1", "3"}) {
    const effect_call c{{"sem:pool"}, {"c0ffee42-worker", limit, "1", "5000", "1764000000000"}};
    const auto e = effect_of(acquire, c);
    INFO(limit << ": " << e.finding);
    REQUIRE(e.op == script_op::acquire);
    CHECK(e.family == lock_family::semaphore);
    CHECK(e.member_based);
    CHECK(e.shared);
    CHECK(e.limit == std::stoi(limit));
    CHECK(e.limit_argv == 2);
    CHECK(e.owner_argv == 1);
    CHECK(e.lease_argv == 4);
    CHECK(eff_reading(e, eff_integer_reply(1), c).outcome == op_outcome::ok);
    CHECK(eff_reading(e, eff_integer_reply(0), c).outcome == op_outcome::contended);
  }
  const std::string refresh =
      "local member = 'permit:' .. ARGV[1] .. ':1'\n"
      "if redis.call('ZSCORE', KEYS[1], member) then\n"
      "  redis.call('ZADD', KEYS[1], ARGV[2], member)\n  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n  return 1\nend\nreturn 0\n";
  const effect_call f{{"sem:pool"}, {"c0ffee42-worker", "1764000000200", "5000"}};
  const auto ext = effect_of(refresh, f);
  INFO(ext.finding);
  REQUIRE(ext.op == script_op::extend);
  CHECK(ext.member_based);
  CHECK(ext.owner_argv == 1);
  CHECK(ext.lease_argv == 3);
  CHECK(eff_reading(ext, eff_integer_reply(1), f).outcome == op_outcome::ok);
  CHECK(eff_reading(ext, eff_integer_reply(0), f).outcome == op_outcome::rejected);
  check_member_release("return redis.call('ZREM', KEYS[1], 'permit:' .. ARGV[1] .. ':1')",
                       {{"sem:pool"}, {"c0ffee42-worker"}});
}
