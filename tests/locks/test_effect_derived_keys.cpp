// Keys a script builds from its KEYS (recognize/script_effect.cpp, learn_derived) and the
// sorted-set commands that combine sets (recognize/lua_sandbox.cpp, zstore):
// symfony/semaphore 5.4's RedisStore scripts byte for byte as Debian's
// php-symfony-semaphore sends them (tests/locks/data/symfony_semaphore/, taken from
// Store/RedisStore.php: the permits in KEYS[1] .. ":time" and KEYS[1] .. ":weight"), the
// same keys built by string.format, a key with a part the text does not spell, and
// ZINTERSTORE / ZUNIONSTORE / ZDIFFSTORE against redis-server.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "effect_calls.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "recognize/lua_sandbox.hpp"
#include "recognize/script_effect.hpp"

using namespace lockscope::locks;
using effect::lua_reply;
using effect::shadow_key;
using effect::shadow_store;

namespace {

std::string semaphore_script(const std::string& name) {
  std::ifstream in(std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/data/symfony_semaphore/" + name + ".lua",
                   std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The recording's calls: the token, time() in seconds, a TTL of 2 s, a limit, a weight of 1.
const std::string token = "ksW1i0uizV5bYK8cc1PxrVcLE7gxnZFw1GjuYmYJ9k0=";
effect_call save_call(const char* limit) { return {{"{sem:orders}"}, {token, "1796106358", "2", limit, "1"}}; }
const effect_call refresh_call{{"{sem:orders}"}, {"1796106361", token}};
const effect_call delete_call{{"{sem:orders}"}, {token}};

// The same scripts with their keys built by string.format instead of `..`.
std::string formatted(std::string text) {
  for (const char* part : {"weight", "time"}) {
    const std::string from = std::string("key .. \":") + part + "\"";
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), std::string("string.format(\"%s:") + part + "\", key)");
  }
  return text;
}

}  // namespace

TEST_CASE("effect: symfony/semaphore's save() takes a permit in the sets it builds from KEYS[1]", "[effect][zset][derived]") {
  for (const std::string& text : {semaphore_script("save"), formatted(semaphore_script("save"))}) {
    for (const char* limit : {"1", "2"}) {
      const effect_call c = save_call(limit);
      const auto e = effect_of(text, c);
      INFO(e.finding);
      REQUIRE(e.op == script_op::acquire);  // not multi: both sets stand for KEYS[1]
      CHECK(e.family == lock_family::semaphore);
      CHECK(e.member_based);
      CHECK(e.shared);
      CHECK(e.lock_key == 1);
      CHECK(e.owner_argv == 1);
      CHECK(e.lease_argv == 3);  // the ":time" member's score less the clock, in seconds
      CHECK(e.lease_seconds);
      // Read from ARGV[4] on each call (the probes raise a 2 equal to the TTL to 3).
      CHECK(e.limit_argv == 4);
      if (std::string(limit) == "1") CHECK(e.limit == 1);
      // true (1) also when the caller already held its permit: taken unless it did.
      const auto taken = eff_reading(e, eff_integer_reply(1), c);
      CHECK((taken.outcome == op_outcome::ok || taken.ok_unless_own_hold));
      CHECK(eff_reading(e, eff_nil_reply(), c).outcome == op_outcome::contended);
    }
  }
}

TEST_CASE("effect: symfony/semaphore's putOffExpiration() renews and delete() releases that permit", "[effect][zset][derived]") {
  for (const bool by_format : {false, true}) {
    const std::string refresh = by_format ? formatted(semaphore_script("putOffExpiration")) : semaphore_script("putOffExpiration");
    const auto extend = effect_of(refresh, refresh_call);
    INFO(extend.finding);
    REQUIRE(extend.op == script_op::extend);
    CHECK(extend.member_based);
    CHECK(extend.lock_key == 1);
    CHECK(extend.owner_argv == 2);
    // 0: re-scored (renewed); 1: its member was gone, added and taken out again.
    CHECK(eff_reading(extend, eff_integer_reply(0), refresh_call).outcome == op_outcome::ok);
    CHECK(eff_reading(extend, eff_integer_reply(1), refresh_call).outcome == op_outcome::rejected);

    const std::string del = by_format ? formatted(semaphore_script("delete")) : semaphore_script("delete");
    const auto release = effect_of(del, delete_call);
    INFO(release.finding);
    REQUIRE(release.op == script_op::unlock);
    CHECK(release.member_based);
    CHECK(release.lock_key == 1);
    CHECK(release.owner_argv == 1);
    CHECK(eff_reading(release, eff_integer_reply(1), delete_call).outcome == op_outcome::ok);
    const auto refused = eff_reading(release, eff_integer_reply(0), delete_call);
    CHECK((refused.outcome == op_outcome::rejected || refused.ambiguous));
  }
}

TEST_CASE("effect: a key with a part the script does not spell is no key built from KEYS", "[effect][zset][derived]") {
  // The key's middle comes from a list the script pops (an id), not from its text: its
  // member there is no function of KEYS[1] alone, and no probe holds it.
  const std::string text =
      "local id = redis.call('LPOP', KEYS[1] .. ':queue') or 'none'\n"
      "local n = redis.call('ZREM', KEYS[1] .. ':' .. id, ARGV[1])\n"
      "return n\n";
  const effect_call c{{"jobs"}, {"worker-1234567"}};
  const auto e = effect_of(text, c);
  INFO(e.finding);
  CHECK_FALSE(e.is_lock());
  // The same removal from a key the text spells whole is a release.
  const auto spelled = effect_of("return redis.call('ZREM', KEYS[1] .. ':none', ARGV[1])\n", c);
  INFO(spelled.finding);
  CHECK(spelled.op == script_op::unlock);
}

TEST_CASE("sandbox: ZINTERSTORE, ZUNIONSTORE and ZDIFFSTORE answer and store as redis-server does",
          "[effect][sandbox][zset][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  const std::vector<std::string> scripts{
      "return redis.call('ZINTERSTORE', KEYS[1], 2, KEYS[1], KEYS[2], 'WEIGHTS', 1, 0)",
      "return redis.call('ZINTERSTORE', KEYS[3], 2, KEYS[1], KEYS[2])",
      "return redis.call('ZINTERSTORE', KEYS[3], 2, KEYS[1], KEYS[2], 'AGGREGATE', 'MAX')",
      "return redis.call('ZUNIONSTORE', KEYS[3], 2, KEYS[1], KEYS[2], 'WEIGHTS', 2, '-inf', 'AGGREGATE', 'min')",
      "return redis.call('ZUNIONSTORE', KEYS[1], 3, KEYS[1], KEYS[2], KEYS[3])",
      "return redis.call('ZUNIONSTORE', KEYS[3], 2, KEYS[1], KEYS[2], 'WEIGHTS', 'inf', 0)",
      "return redis.call('ZDIFFSTORE', KEYS[3], 2, KEYS[1], KEYS[2])",
      "return redis.call('ZINTERSTORE', KEYS[3], 0, KEYS[1])",
      "return redis.call('ZINTERSTORE', KEYS[3], 3, KEYS[1], KEYS[2])",
      "return redis.call('ZUNIONSTORE', KEYS[3], 1, KEYS[1], 'WEIGHTS', 'x')",
      "return redis.call('ZDIFFSTORE', KEYS[3], 1, KEYS[1], 'WEIGHTS', 1)",
  };
  struct state {
    std::vector<std::pair<std::string, double>> a, b, dest;
  };
  const std::vector<state> states{
      {{}, {}, {}},
      {{{"p1", 1}, {"p2", 2}}, {{"p1", 1796106360}, {"p3", 1796106361}}, {}},
      {{{"p1", 1}, {"p2", 2}}, {{"p2", 5}}, {{"old", 7}}},
      {{{"p1", 3}}, {}, {{"p1", 3}}},
      {{{"p1", -2.5}, {"p2", 0}}, {{"p1", 4}, {"p2", 0}}, {}},
  };
  const std::vector<std::string> keys{"{s}:weight", "{s}:time", "{s}:out"};
  for (const std::string& script : scripts) {
    for (const state& st : states) {
      INFO("script: " << script << "\nstate of " << st.a.size() << ", " << st.b.size() << ", " << st.dest.size());
      REQUIRE(c.command("FLUSHALL").text == "OK");
      shadow_store store;
      const std::vector<std::pair<std::string, double>>* sets[] = {&st.a, &st.b, &st.dest};
      for (std::size_t i = 0; i < 3; ++i) {
        if (sets[i]->empty()) continue;
        shadow_key k;
        k.kind = shadow_key::type::zset;
        std::vector<std::pair<double, std::string>> sorted;
        for (const auto& [m, score] : *sets[i]) {
          std::ostringstream s;
          s.precision(17);
          s << score;
          c.command("ZADD", keys[i], s.str(), m);
          sorted.emplace_back(score, m);
        }
        std::sort(sorted.begin(), sorted.end());
        for (const auto& [score, m] : sorted) k.members.emplace_back(m, score);
        c.command("PEXPIRE", keys[i], "50000");
        k.pttl_ms = 50000;
        store.keys[keys[i]] = k;
      }
      const std::vector<std::string_view> k(keys.begin(), keys.end());
      const effect::run_result mine = effect::run_script(script, k, {}, store);
      REQUIRE(mine.outcome != effect::run_result::status::unsupported);
      std::vector<std::string> eval{"EVAL", script, "3"};
      eval.insert(eval.end(), keys.begin(), keys.end());
      const lockscope::resp::value real = c.command_argv(eval);
      if (mine.outcome == effect::run_result::status::script_error) {
        CHECK(real.is_error());
        continue;
      }
      REQUIRE(mine.reply.type == lua_reply::kind::integer);
      CHECK(real.integer == mine.reply.integer);
      for (const std::string& key : keys) {
        const auto it = store.keys.find(key);
        const std::string type = c.command("TYPE", key).text;
        INFO("key " << key);
        if (it == store.keys.end()) {
          CHECK(type == "none");
          continue;
        }
        REQUIRE(type == "zset");
        const lockscope::resp::value all = c.command("ZRANGE", key, "0", "-1", "WITHSCORES");
        REQUIRE(all.elements.size() == it->second.members.size() * 2);
        for (std::size_t i = 0; i < it->second.members.size(); ++i) {
          CHECK(all.elements[2 * i].text == it->second.members[i].first);
          CHECK(all.elements[2 * i + 1].text == effect::score_text(it->second.members[i].second));
        }
        const std::int64_t pttl = c.command("PTTL", key).integer;
        if (it->second.pttl_ms < 0) CHECK(pttl == -1);
        else CHECK(pttl > 0);
      }
    }
  }
}
