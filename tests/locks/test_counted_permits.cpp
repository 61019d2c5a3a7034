// Counted semaphores (concurrency limiters) read by their effect (recognize/script_effect.hpp):
// scripts written here, each guarded as a limiter client guards its own (a record that
// must exist, a caller that must have registered), so that every probe on absent keys
// answers an error; a count kept in a hash field beside its limit, a plain key raised by
// INCRBY under an ARGV limit, their releases, a tally that no limit refuses; and their
// operations through the recognizer and the timeline, where each try draws a new value.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "effect_calls.hpp"
#include "helpers.hpp"
#include "recognize/script_effect.hpp"

using namespace lockscope;
using namespace lockscope::locks;
using effect::observed_reply;

namespace {

op_outcome outcome_of(const effect::script_effect& e, const observed_reply& r, const effect_call& c) {
  return eff_reading(e, r, c).outcome;
}

// KEYS: the holders (a sorted set scored by expiry), the pool's record (a hash: `inuse`
// beside `cap`), the registered callers (a set). ARGV: caller, holder, lease ms, now ms.
const std::string pool_take =
    "local holders, pool, callers = KEYS[1], KEYS[2], KEYS[3]\n"
    "local caller, holder, lease, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "if redis.call('exists', pool) == 0 then return redis.error_reply('NO_POOL') end\n"
    "if redis.call('sismember', callers, caller) == 0 then return redis.error_reply('NOT_REGISTERED') end\n"
    "local cap = tonumber(redis.call('hget', pool, 'cap'))\n"
    "local inuse = tonumber(redis.call('hget', pool, 'inuse'))\n"
    "if inuse + 1 > cap then return {0, inuse} end\n"
    "redis.call('hincrby', pool, 'inuse', 1)\n"
    "redis.call('zadd', holders, now + lease, holder)\n"
    "return {1, inuse + 1}\n";
const std::string pool_give =
    "local holders, pool, callers = KEYS[1], KEYS[2], KEYS[3]\n"
    "if redis.call('exists', pool) == 0 then return redis.error_reply('NO_POOL') end\n"
    "if redis.call('sismember', callers, ARGV[1]) == 0 then return redis.error_reply('NOT_REGISTERED') end\n"
    "if not redis.call('zscore', holders, ARGV[2]) then return -1 end\n"
    "redis.call('zrem', holders, ARGV[2])\n"
    "return redis.call('hincrby', pool, 'inuse', -1)\n";
const effect_call pool_take_call{{"pool:{a}:holders", "pool:{a}", "pool:{a}:callers"},
                          {"caller-77", "h-3f9a1c0e", "30000", "1795982171000"}};
const effect_call pool_give_call{{"pool:{a}:holders", "pool:{a}", "pool:{a}:callers"}, {"caller-77", "h-3f9a1c0e"}};

// A plain key of permits in use, raised by ARGV[2] while it stays within ARGV[3]; the
// holder's permits kept in a hash under its id (ARGV[1]).
const std::string plain_take =
    "local n = tonumber(redis.call('get', KEYS[1]) or '0')\n"
    "local w, most = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "if n + w > most then return false end\n"
    "redis.call('incrby', KEYS[1], w)\n"
    "redis.call('hset', KEYS[2], ARGV[1], w)\n"
    "return n + w\n";
const std::string plain_give =
    "local w = redis.call('hget', KEYS[2], ARGV[1])\n"
    "if not w then return false end\n"
    "redis.call('hdel', KEYS[2], ARGV[1])\n"
    "return redis.call('decrby', KEYS[1], w)\n";
const effect_call plain_take_call{{"slots:used", "slots:by-holder"}, {"job-5f2c9a", "2", "5"}};
const effect_call plain_give_call{{"slots:used", "slots:by-holder"}, {"job-5f2c9a"}};

// A counted release of KEYS[lock_key]'s count, its holder ARGV[owner]; `unheld` is what
// it answers for a holder it does not have.
void check_release(const std::string& text, const effect_call& c, std::uint8_t lock_key, std::uint8_t owner,
                   const observed_reply& unheld) {
  const auto r = effect_of(text, c);
  INFO(r.finding);
  REQUIRE(r.op == script_op::unlock);
  CHECK(r.counted);
  CHECK(r.lock_key == lock_key);
  CHECK(r.owner_argv == owner);
  CHECK(outcome_of(r, unheld, c) == op_outcome::rejected);
}

}  // namespace

TEST_CASE("counted permits: a guarded count in a hash field, its limit the field beside it", "[effect][permits]") {
  const auto e = effect_of(pool_take, pool_take_call);
  INFO(e.finding);
  REQUIRE(e.op == script_op::acquire);
  CHECK(e.counted);
  CHECK(e.family == lock_family::semaphore);
  CHECK(e.shared);
  CHECK(e.lock_key == 2);
  CHECK(e.counter_field == "inuse");
  CHECK(e.limit_field == "cap");
  CHECK(e.limit_argv == 0);
  CHECK(e.owner_argv == 2);  // the holder recorded, not the caller the guard checked
  CHECK(e.permits_argv == 0);
  CHECK(e.lease_argv == 3);
  observed_reply took;
  took.kind = observed_reply::form::array;
  took.first = observed_reply::form::integer;
  took.first_integer = 1;
  observed_reply refused = took;
  refused.first_integer = 0;
  CHECK(outcome_of(e, took, pool_take_call) == op_outcome::ok);
  CHECK(outcome_of(e, refused, pool_take_call) == op_outcome::contended);

  check_release(pool_give, pool_give_call, 2, 2, eff_integer_reply(-1));
}

TEST_CASE("counted permits: a plain key raised by INCRBY under an ARGV limit", "[effect][permits]") {
  const auto e = effect_of(plain_take, plain_take_call);
  INFO(e.finding);
  REQUIRE(e.op == script_op::acquire);
  CHECK(e.counted);
  CHECK(e.lock_key == 1);
  CHECK(e.counter_field.empty());
  CHECK(e.permits_argv == 2);
  CHECK(e.limit_argv == 3);
  CHECK(e.owner_argv == 1);
  observed_reply nil;
  nil.kind = observed_reply::form::nil;
  CHECK(outcome_of(e, nil, plain_take_call) == op_outcome::contended);

  check_release(plain_give, plain_give_call, 1, 1, nil);
}

TEST_CASE("counted permits: a count raised whatever it holds is a tally, no lock", "[effect][permits]") {
  const std::string tally =
      "if redis.call('exists', KEYS[1]) == 0 then return redis.error_reply('NO_STATS') end\n"
      "redis.call('hincrby', KEYS[1], 'seen', 1)\n"
      "redis.call('sadd', KEYS[2], ARGV[1])\n"
      "return 1\n";
  const auto e = effect_of(tally, {{"stats", "stats:visitors"}, {"visitor-19ab"}});
  INFO(e.finding);
  CHECK_FALSE(e.is_lock());
}

namespace {

struct permit_log final : public lock_event_sink {
  void on_event(const lock_event& e) override {
    std::string name(to_string(e.event));
    if (e.event == lock_event_kind::anomaly) name += ":" + std::string(to_string(e.kind));
    events.push_back({name, std::string(e.owner), e.wait_us, e.permits_in_use, e.permit_limit});
  }
  struct entry {
    std::string event, owner;
    std::int64_t wait_us, in_use, limit;
  };
  std::vector<entry> events;
};

std::vector<std::string> eval(const std::string& text, const effect_call& c) {
  std::vector<std::string> args{"EVAL", text, std::to_string(c.keys.size())};
  args.insert(args.end(), c.keys.begin(), c.keys.end());
  args.insert(args.end(), c.argv.begin(), c.argv.end());
  return args;
}

constexpr std::int64_t t0 = 1'795'982'171'000'000, ms = 1'000;

// Limiters of one permit each (plain_take / plain_give), by name, through the recognizer
// into a timeline.
struct limiters {
  permit_log log;
  lock_timeline timeline{{}, log};
  lock_recognizer r{timeline};
  void take(const std::string& pool, const std::string& id, std::int64_t at, bool got, std::uint64_t conn) {
    timeline_test::feed(r, eval(plain_take, {{pool + ":used", pool + ":by-holder"}, {id, "1", "1"}}),
                        got ? ":1\r\n" : "$-1\r\n", t0 + at, conn);
  }
  void give(const std::string& pool, const std::string& id, std::int64_t at, std::uint64_t conn) {
    timeline_test::feed(r, eval(plain_give, {{pool + ":used", pool + ":by-holder"}, {id}}), ":0\r\n", t0 + at, conn);
  }
  // "event owner [waited ms]" for each event `keep` takes, in order.
  template <class Keep>
  std::vector<std::string> events(Keep keep) const {
    std::vector<std::string> seen;
    for (const auto& e : log.events) {
      if (keep(e)) seen.push_back(e.event + " " + e.owner + (e.wait_us >= 0 ? " waited " + std::to_string(e.wait_us / ms) : ""));
    }
    return seen;
  }
};

}  // namespace

TEST_CASE("counted permits: a waiter drawing a new holder id each try is one wait on its connection",
          "[recognizer][permits]") {
  limiters l;
  l.take("slots", "a-000001", 0, true, 1);
  // Connection 2 tries three times, a new id each time, then takes the permit.
  l.take("slots", "b-000001", 10 * ms, false, 2);
  l.take("slots", "b-000002", 60 * ms, false, 2);
  l.take("slots", "b-000003", 110 * ms, false, 2);
  l.give("slots", "a-000001", 150 * ms, 1);
  l.take("slots", "b-000004", 160 * ms, true, 2);
  l.give("slots", "b-000004", 200 * ms, 2);
  l.timeline.finish(t0 + 1'000 * ms);
  const auto seen = l.events([](const auto& e) {
    return e.event == "acquired" || e.event == "contended" || e.event == "released" || e.event == "gave_up";
  });
  CHECK(seen == std::vector<std::string>{"acquired a-000001", "contended b-000001", "contended b-000002",
                                         "contended b-000003", "released a-000001", "acquired b-000004 waited 150",
                                         "released b-000004"});
}

TEST_CASE("counted permits: a waiter that went on to another limiter and tries this one again begins a new wait",
          "[recognizer][permits]") {
  limiters l;
  l.take("north", "a-000001", 0, true, 1);
  l.take("south", "s-000001", 5 * ms, true, 3);
  // Connection 2 waits on north, gives up silently, waits on south, then on north again.
  l.take("north", "b-000001", 10 * ms, false, 2);
  l.take("north", "b-000002", 60 * ms, false, 2);
  l.take("south", "c-000001", 100 * ms, false, 2);
  l.take("north", "d-000001", 300 * ms, false, 2);
  l.give("north", "a-000001", 350 * ms, 1);
  l.take("north", "d-000002", 360 * ms, true, 2);
  l.timeline.finish(t0 + 1'000 * ms);
  const auto seen = l.events([](const auto& e) { return (e.event == "acquired" && e.wait_us >= 0) || e.event == "gave_up"; });
  CHECK(seen == std::vector<std::string>{"gave_up b-000001 waited 50", "gave_up c-000001 waited 0", "acquired d-000002 waited 60"});
}

namespace {

// A plain count beside a sorted set of its holders' expiries (ARGV: id, lease ms, limit,
// now); the release only moves its holder's expiry to 0, and the next call drops it.
const std::string expiring_take =
    "local gone = redis.call('zrangebyscore', KEYS[2], '-inf', '(' .. ARGV[4])\n"
    "if #gone > 0 then\n"
    "  redis.call('zremrangebyscore', KEYS[2], '-inf', '(' .. ARGV[4])\n"
    "  redis.call('decrby', KEYS[1], #gone)\n"
    "end\n"
    "local used = tonumber(redis.call('get', KEYS[1]) or '0')\n"
    "if used >= tonumber(ARGV[3]) then return 0 end\n"
    "redis.call('incr', KEYS[1])\n"
    "redis.call('zadd', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[1])\n"
    "return 1\n";
const std::string expiring_give = "redis.call('zadd', KEYS[2], 0, ARGV[1])\nreturn 1\n";

class op_log final : public lock_operation_sink {
 public:
  void on_operation(const lock_operation& op) override {
    ops.push_back(std::string(to_string(op.kind)) + " " + std::string(op.lock) + " " + std::string(op.owner) +
                  (op.outcome == op_outcome::ok ? " ok" : " not ok"));
  }
  std::vector<std::string> ops;
};

}  // namespace

TEST_CASE("counted permits: a release that only moves its holder's expiry to the past", "[effect][permits]") {
  const effect_call give{{"jobs:used", "jobs:expiries"}, {"job-77aa01"}};
  const auto r = effect_of(expiring_give, give);
  INFO(r.finding);
  REQUIRE(r.op == script_op::unlock);
  CHECK(r.counted);
  CHECK(r.lock_key == 0);
  CHECK(r.expiry_key == 2);
  CHECK(r.owner_argv == 1);

  const auto a = effect_of(expiring_take, {{"jobs:used", "jobs:expiries"}, {"job-77aa01", "30000", "2", "1795982171000"}});
  INFO(a.finding);
  REQUIRE(a.op == script_op::acquire);
  CHECK(a.lock_key == 1);
  CHECK(a.expiry_key == 2);
  CHECK(a.lease_argv == 2);

  // Through the recognizer: the release names the count its set's acquire named; on a
  // set no acquire scored, it is nothing.
  op_log log;
  lock_recognizer rec{log};
  const std::int64_t at = 1'795'982'171'000'000;
  timeline_test::feed(rec, eval(expiring_take, {{"jobs:used", "jobs:expiries"}, {"job-77aa01", "30000", "2", "1795982171000"}}),
                      ":1\r\n", at, 1);
  timeline_test::feed(rec, eval(expiring_give, {{"jobs:used", "jobs:expiries"}, {"job-77aa01"}}), ":1\r\n", at + 50'000, 1);
  timeline_test::feed(rec, eval(expiring_give, {{"other:used", "other:expiries"}, {"job-77aa02"}}), ":1\r\n", at + 60'000, 2);
  CHECK(log.ops == std::vector<std::string>{"acquire jobs:used job-77aa01 ok", "unlock jobs:used job-77aa01 ok"});
}
