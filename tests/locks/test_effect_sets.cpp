// Sets in the script shadow (recognize/lua_sandbox.hpp): SADD, SREM, SISMEMBER, SCARD,
// SMEMBERS and TYPE answer and change keys as redis-server does, checked against a real
// one on the same state; tooz 3.1's group scripts (tooz/drivers/redis.py, the texts its
// driver loads) among them.
#include <algorithm>

#include <catch2/catch.hpp>

#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "recognize/lua_sandbox.hpp"
#include "tooz_scripts.hpp"

using namespace lockscope::locks;
using effect::lua_reply;
using effect::shadow_key;
using effect::shadow_store;

namespace {

using lockscope::test_texts::tooz_create_group;
using lockscope::test_texts::tooz_delete_group;
// (SMEMBERS sorted: a server's order for a set is its hash table's.)
const std::string set_commands =
    "local function members(k) local m = redis.call('smembers', k); table.sort(m); return m end\n"
    "return {redis.call('sadd', KEYS[2], ARGV[1], 'b', ARGV[1]), redis.call('sadd', KEYS[2], 'b'),"
    " redis.call('sismember', KEYS[2], ARGV[1]), redis.call('sismember', KEYS[2], 'zz'), redis.call('scard', KEYS[2]),"
    " redis.call('type', KEYS[2]).ok, redis.call('srem', KEYS[2], 'b', 'zz'), members(KEYS[2]),"
    " redis.call('srem', KEYS[2], ARGV[1]), redis.call('exists', KEYS[2]), redis.call('scard', KEYS[2]),"
    " redis.call('sismember', KEYS[2], ARGV[1]), #redis.call('smembers', KEYS[2])}";

bool same_reply(const lua_reply& mine, const lockscope::resp::value& real) {
  namespace resp = lockscope::resp;
  switch (mine.type) {
    case lua_reply::kind::nil: return real.is_null();
    case lua_reply::kind::integer: return real.type == resp::type::integer && real.integer == mine.integer;
    case lua_reply::kind::status: return real.type == resp::type::simple_string && real.text == mine.text;
    case lua_reply::kind::error: return real.is_error();
    case lua_reply::kind::bulk: return real.type == resp::type::bulk_string && real.text == mine.text;
    case lua_reply::kind::array:
      if (real.type != resp::type::array || real.elements.size() != mine.items.size()) return false;
      for (std::size_t i = 0; i < mine.items.size(); ++i) {
        if (!same_reply(mine.items[i], real.elements[i])) return false;
      }
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("effect sandbox: sets answer and change keys as redis-server does", "[effect][sandbox][sets][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  const std::vector<std::string> keys{"_tooz_group:workers", "_tooz_groups"};
  struct state {
    const char* name;
    bool group_hash, member, other_member, set_is_string, hash_has_member;
  };
  const std::vector<state> states{
      {"none", false, false, false, false, false},
      {"group made", true, true, false, false, false},
      {"group made, a member joined", true, true, true, false, true},
      {"index lists others only", false, false, true, false, false},
      {"hash without index entry", true, false, false, false, false},
      {"index key a string", true, false, false, true, false},
  };
  for (const std::string* script : {&tooz_create_group, &tooz_delete_group, &set_commands}) {
    for (const state& st : states) {
      INFO("script:\n" << *script << "\nstate: " << st.name);
      REQUIRE(c.command("FLUSHALL").text == "OK");
      shadow_store store;
      if (st.group_hash) {
        c.command("HSET", keys[0], "__created__", "1");
        shadow_key h;
        h.kind = shadow_key::type::hash;
        h.fields.emplace_back("__created__", "1");
        if (st.hash_has_member) {
          c.command("HSET", keys[0], "worker-p1", "caps");
          h.fields.emplace_back("worker-p1", "caps");
        }
        store.keys[keys[0]] = h;
      }
      if (st.set_is_string) {
        c.command("SET", keys[1], "x");
        store.keys[keys[1]].value = "x";
      } else if (st.member || st.other_member) {
        shadow_key s;
        s.kind = shadow_key::type::set;
        if (st.member) {
          c.command("SADD", keys[1], "workers");
          s.items.push_back("workers");
        }
        if (st.other_member) {
          c.command("SADD", keys[1], "others");
          s.items.push_back("others");
        }
        store.keys[keys[1]] = s;
      }
      const std::vector<std::string> argv{"workers"};
      const std::vector<std::string_view> k(keys.begin(), keys.end()), a(argv.begin(), argv.end());
      const effect::run_result mine = effect::run_script(*script, k, a, store, {});
      REQUIRE(mine.outcome != effect::run_result::status::unsupported);
      REQUIRE(mine.outcome != effect::run_result::status::limit);
      const lockscope::resp::value real = c.command_argv({"EVAL", *script, "2", keys[0], keys[1], argv[0]});
      INFO("server reply: " << real.text << " " << real.integer);
      // Only a set command on the string fails (WRONGTYPE), in both.
      CHECK(real.is_error() == (st.set_is_string && script != &tooz_create_group));  // (create: the hash exists, it returns first)
      if (real.is_error()) CHECK(mine.outcome == effect::run_result::status::script_error);
      else CHECK(same_reply(mine.reply, real));
      // The keys after: type, and the set's members (any order) or the hash's fields.
      for (const std::string& key : keys) {
        const std::string type = c.command("TYPE", key).text;
        const auto it = store.keys.find(key);
        if (it == store.keys.end()) {
          CHECK(type == "none");
          continue;
        }
        if (it->second.kind == shadow_key::type::set) {
          REQUIRE(type == "set");
          const lockscope::resp::value members = c.command("SMEMBERS", key);
          std::vector<std::string> real_members, mine_members(it->second.items);
          for (const auto& m : members.elements) real_members.push_back(m.text);
          std::sort(real_members.begin(), real_members.end());
          std::sort(mine_members.begin(), mine_members.end());
          CHECK(real_members == mine_members);
        } else if (it->second.kind == shadow_key::type::hash) {
          REQUIRE(type == "hash");
          CHECK(c.command("HLEN", key).integer == static_cast<std::int64_t>(it->second.fields.size()));
        } else {
          CHECK(type == "string");
        }
      }
    }
  }
}

// A small set of integers is an intset in Redis: SMEMBERS reads it in ascending order,
// whatever order its members came in. A job queue's stalled-jobs check answers with the
// members of such a set (BullMQ's job ids), so the shadow must read it in the same order.
TEST_CASE("effect sandbox: SMEMBERS of a set of integers in Redis's order", "[effect][sandbox][sets][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  const std::string script =
      "redis.call('sadd', KEYS[1], '18', '17', '-3', '100', '9')\nredis.call('srem', KEYS[1], '100')\n"
      "redis.call('sadd', KEYS[1], '2')\nreturn redis.call('smembers', KEYS[1])";
  const std::vector<std::string_view> k{"q:stalled"}, a;
  shadow_store store;
  const effect::run_result mine = effect::run_script(script, k, a, store, {});
  REQUIRE(mine.outcome == effect::run_result::status::ok);
  const lockscope::resp::value real = c.command_argv({"EVAL", script, "1", "q:stalled"});
  REQUIRE(real.elements.size() == 5);
  CHECK(real.elements.front().text == "-3");  // the server's own order, ascending
  CHECK(same_reply(mine.reply, real));
}
