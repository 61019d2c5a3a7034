// Recognition by effect through the whole pipeline: crafted captures (pcap files) of
// lock clients whose scripts lockscope has never seen, each written the way a real
// client writes it, checked for the holds the traffic contains (acquisitions, releases,
// renewals, contended attempts) and for no false `expired`, `expired_while_held` or
// `overlapping_holders`.
#include <chrono>
#include <filesystem>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/lock/scripts.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

constexpr std::int64_t effect_t0 = 1'700'000'000'000'000;
constexpr std::int64_t effect_ms = 1000;

std::vector<std::string> eval_call(std::string_view verb, std::string_view script, std::vector<std::string> keys,
                                   std::vector<std::string> argv) {
  std::vector<std::string> args{std::string(verb), std::string(script), std::to_string(keys.size())};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

std::string effect_capture_path(std::string_view name) {
  return (std::filesystem::temp_directory_path() / ("lockscope_effect_" + std::string(name) + ".pcap")).string();
}

void check_no_false_anomalies(const event_recorder& rec) {
  CHECK(rec.count("expired") == 0);
  CHECK(rec.count("anomaly:expired_while_held") == 0);
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("anomaly:unlock_by_non_owner") == 0);
}

std::string list_of_two(std::int64_t a, std::int64_t b) {
  return "*2\r\n" + resp_int(a) + resp_int(b);
}

}  // namespace

TEST_CASE("effect pipeline: EVAL scripts with locals, three contending clients", "[effect][pipeline]") {
  const std::string acquire =
      "local key = KEYS[1]\nlocal token = ARGV[1]\nlocal ttl = ARGV[2]\n"
      "if redis.call('set', key, token, 'NX', 'PX', ttl) then return 1 end\nreturn 0\n";
  const std::string release =
      "local key = KEYS[1]\nlocal token = ARGV[1]\n"
      "if redis.call('get', key) == token then return redis.call('del', key) end\nreturn 0\n";
  capture_builder b;
  std::vector<int> conns;
  for (int i = 0; i < 3; ++i) conns.push_back(b.connect("10.1.0." + std::to_string(10 + i), 40000, "10.1.0.2", 6379, effect_t0));
  constexpr int rounds = 12;
  std::int64_t t = effect_t0 + 10 * effect_ms;
  for (int r = 0; r < rounds; ++r) {
    const int holder = r % 3;
    const std::string token = "tok-" + std::to_string(holder) + "-" + std::to_string(r);
    b.command(conns[holder], t, eval_call("EVAL", acquire, {"orders:lock"}, {token, "30000"}), resp_int(1));
    for (int other = 0; other < 3; ++other) {
      if (other == holder) continue;
      b.command(conns[other], t + 5 * effect_ms, eval_call("EVAL", acquire, {"orders:lock"}, {"tok-x" + std::to_string(other) + "-" + std::to_string(r), "30000"}),
                resp_int(0));
    }
    b.command(conns[holder], t + 40 * effect_ms, eval_call("EVAL", release, {"orders:lock"}, {token}), resp_int(1));
    t += 100 * effect_ms;
  }
  const std::string path = effect_capture_path("locals");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == rounds);
  CHECK(rec.count("released") == rounds);
  CHECK(rec.count("contended") == 2 * rounds);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a nil-always release and a fresh value on every attempt", "[effect][pipeline]") {
  const std::string release =
      "local k = KEYS[1]\nif redis.call(\"GET\", k) == ARGV[1] then redis.call(\"DEL\", k) end\nreturn nil";
  capture_builder b;
  const int a = b.connect("10.2.0.10", 40000, "10.2.0.2", 6379, effect_t0);
  const int w = b.connect("10.2.0.11", 40000, "10.2.0.2", 6379, effect_t0);
  constexpr int rounds = 10;
  std::int64_t t = effect_t0 + 10 * effect_ms;
  for (int r = 0; r < rounds; ++r) {
    const std::string mine = "a-" + std::to_string(r);
    b.command(a, t, {"SET", "mutex:a", mine, "NX", "PX", "20000"}, std::string(resp_ok));
    // The waiter polls with a new random value each time, and cleans up each failed try.
    for (int k = 0; k < 2; ++k) {
      const std::string attempt = "w-" + std::to_string(r) + "-" + std::to_string(k);
      b.command(w, t + (2 + 5 * k) * effect_ms, {"SET", "mutex:a", attempt, "NX", "PX", "20000"}, std::string(resp_nil));
      b.command(w, t + (3 + 5 * k) * effect_ms, eval_call("EVAL", release, {"mutex:a"}, {attempt}), std::string(resp_nil));
    }
    b.command(a, t + 20 * effect_ms, eval_call("EVAL", release, {"mutex:a"}, {mine}), std::string(resp_nil));
    t += 60 * effect_ms;
  }
  const std::string path = effect_capture_path("nil_always");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == rounds);
  CHECK(rec.count("released") == rounds);
  CHECK(rec.count("unlock_rejected") == 0);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a database-first Redlock by EVALSHA after SCRIPT LOAD", "[effect][pipeline]") {
  const std::string acquire =
      "redis.call('select', ARGV[1])\nreturn redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3])";
  const std::string release =
      "redis.call('select', ARGV[1])\n"
      "if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('del', KEYS[1]) else return 0 end";
  const std::string acquire_sha = lock::sha1_hex(acquire), release_sha = lock::sha1_hex(release);
  capture_builder b;
  const int c = b.connect("10.3.0.10", 40000, "10.3.0.2", 6379, effect_t0);
  const int d = b.connect("10.3.0.11", 40000, "10.3.0.2", 6379, effect_t0);
  b.command(c, effect_t0 + effect_ms, {"SCRIPT", "LOAD", acquire}, "$40\r\n" + acquire_sha + "\r\n");
  b.command(c, effect_t0 + 2 * effect_ms, {"SCRIPT", "LOAD", release}, "$40\r\n" + release_sha + "\r\n");
  constexpr int rounds = 8;
  std::int64_t t = effect_t0 + 10 * effect_ms;
  for (int r = 0; r < rounds; ++r) {
    const std::string v = "c-" + std::to_string(r);
    b.command(c, t, eval_call("EVALSHA", acquire_sha, {"res:1"}, {"0", v, "10000"}), std::string(resp_ok));
    b.command(d, t + effect_ms, eval_call("EVALSHA", acquire_sha, {"res:1"}, {"0", "d-" + std::to_string(r), "10000"}),
              std::string(resp_nil));
    b.command(c, t + 5 * effect_ms, eval_call("EVALSHA", release_sha, {"res:1"}, {"0", v}), resp_int(1));
    t += 50 * effect_ms;
  }
  const std::string path = effect_capture_path("db_first");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == rounds);
  CHECK(rec.count("contended") == rounds);
  CHECK(rec.count("released") == rounds);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: an extend answering {1, ttl} keeps the hold", "[effect][pipeline]") {
  const std::string extend =
      "local key, value = KEYS[1], ARGV[1]\nlocal minTTL, newTTL = tonumber(ARGV[2]), ARGV[3]\n"
      "if redis.call('get', key) ~= value then return {0, redis.call('pttl', key)} end\n"
      "local ttl = redis.call('pttl', key)\n"
      "if ttl < minTTL then redis.call('pexpire', key, newTTL) return {1, tonumber(newTTL)} end\n"
      "return {1, ttl}";
  const std::string release =
      "local key = KEYS[1]\nif redis.call('get', key) == ARGV[1] then redis.call('del', key) return 1 end return 0";
  capture_builder b;
  const int c = b.connect("10.4.0.10", 40000, "10.4.0.2", 6379, effect_t0);
  std::int64_t t = effect_t0 + 10 * effect_ms;
  b.command(c, t, {"SET", "cron:nightly", "v1", "NX", "PX", "3000"}, std::string(resp_ok));
  for (int k = 1; k <= 5; ++k) {
    b.command(c, t + k * 2000 * effect_ms, eval_call("EVAL", extend, {"cron:nightly"}, {"v1", "2000", "3000"}),
              list_of_two(1, 3000));
  }
  b.command(c, t + 11000 * effect_ms, eval_call("EVAL", release, {"cron:nightly"}, {"v1"}), resp_int(1));
  const std::string path = effect_capture_path("list_extend");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == 1);
  CHECK(rec.count("renewed") == 5);
  CHECK(rec.count("renew_failed") == 0);
  CHECK(rec.count("released") == 1);
  CHECK(rec.count("anomaly:idle_with_waiters") == 0);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a reentrant hash lock with its own scripts", "[effect][pipeline]") {
  const std::string acquire =
      "local lock, owner, lease = KEYS[1], ARGV[1], ARGV[2]\n"
      "if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then\n"
      "  redis.call('hincrby', lock, owner, 1)\n  redis.call('pexpire', lock, lease)\n  return nil\nend\n"
      "return redis.call('pttl', lock)";
  const std::string release =
      "local lock, channel, owner = KEYS[1], KEYS[2], ARGV[1]\n"
      "if redis.call('hexists', lock, owner) == 0 then return nil end\n"
      "local left = redis.call('hincrby', lock, owner, -1)\n"
      "if left > 0 then redis.call('pexpire', lock, ARGV[2]) return 0 end\n"
      "redis.call('del', lock)\nredis.call('publish', channel, 'free')\nreturn 1";
  capture_builder b;
  const int c = b.connect("10.5.0.10", 40000, "10.5.0.2", 6379, effect_t0);
  const int d = b.connect("10.5.0.11", 40000, "10.5.0.2", 6379, effect_t0);
  std::int64_t t = effect_t0 + 10 * effect_ms;
  const std::string owner = "node-7:thread-3";
  b.command(c, t, eval_call("EVAL", acquire, {"acct:42"}, {owner, "20000"}), std::string(resp_nil));
  b.command(c, t + 2 * effect_ms, eval_call("EVAL", acquire, {"acct:42"}, {owner, "20000"}), std::string(resp_nil));
  b.command(d, t + 3 * effect_ms, eval_call("EVAL", acquire, {"acct:42"}, {"node-8:thread-1", "20000"}), resp_int(19990));
  b.command(c, t + 5 * effect_ms, eval_call("EVAL", release, {"acct:42", "acct:42:free"}, {owner, "20000"}), resp_int(0));
  b.command(c, t + 6 * effect_ms, eval_call("EVAL", release, {"acct:42", "acct:42:free"}, {owner, "20000"}), resp_int(1));
  b.command(d, t + 7 * effect_ms, eval_call("EVAL", acquire, {"acct:42"}, {"node-8:thread-1", "20000"}), std::string(resp_nil));
  b.command(d, t + 9 * effect_ms, eval_call("EVAL", release, {"acct:42", "acct:42:free"}, {"node-8:thread-1", "20000"}),
            resp_int(1));
  const std::string path = effect_capture_path("hash");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == 2);
  CHECK(rec.count("reentered") == 1);
  CHECK(rec.count("contended") == 1);
  CHECK(rec.count("partially_released") == 1);
  CHECK(rec.count("released") == 2);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a script seen but not understood is still inferred from the traffic", "[effect][pipeline]") {
  // Locals hide it from the shape classifier; PFADD (a HyperLogLog) is outside the
  // shadow, so the probes cannot tell what it does: the call's shape ([value], an
  // integer reply) decides.
  const std::string release =
      "local k, v = KEYS[1], ARGV[1]\n"
      "if redis.call('get', k) == v then redis.call('pfadd', 'audit', v) return redis.call('del', k) end\nreturn 0";
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SET", "res:9", "val-1", "NX", "PX", "10000"}, std::string(resp_ok), effect_t0);
  feed(r, eval_call("EVAL", release, {"res:9"}, {"val-1"}), resp_int(1), effect_t0 + 5 * effect_ms);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[1].kind == locks::lock_op_kind::unlock);
  CHECK(rec.ops[1].outcome == locks::op_outcome::ok);
  CHECK(rec.ops[1].inferred);
  CHECK(rec.ops[1].owner == "val-1");
}

TEST_CASE("effect pipeline: a capture of hostile scripts costs bounded time and hides no lock", "[effect][pipeline]") {
  capture_builder b;
  const int h = b.connect("10.6.0.10", 40000, "10.6.0.2", 6379, effect_t0);
  const int c = b.connect("10.6.0.11", 40000, "10.6.0.2", 6379, effect_t0);
  std::int64_t t = effect_t0 + 10 * effect_ms;
  constexpr int hostile = 200;
  for (int i = 0; i < hostile; ++i) {
    const std::string text = i % 2 == 0 ? "while true do end -- " + std::to_string(i)
                                        : "local s = string.rep('x', 1000000) while true do local t = s .. 'y' end -- " +
                                              std::to_string(i);
    b.command(h, t, eval_call("EVAL", text, {"k" + std::to_string(i)}, {"v", "1000"}), resp_int(0));
    t += effect_ms;
  }
  for (int r = 0; r < 5; ++r) {
    const std::string v = "c-" + std::to_string(r);
    b.command(c, t, {"SET", "safe:lock", v, "NX", "PX", "10000"}, std::string(resp_ok));
    b.command(c, t + 2 * effect_ms,
              eval_call("EVAL", "local k = KEYS[1] if redis.call('get', k) == ARGV[1] then return redis.call('del', k) end return 0",
                        {"safe:lock"}, {v}),
              resp_int(1));
    t += 10 * effect_ms;
  }
  const std::string path = effect_capture_path("hostile");
  b.write(path);
  const auto start = std::chrono::steady_clock::now();
  const event_recorder rec = events_of(path);
  const auto took = std::chrono::steady_clock::now() - start;
  std::filesystem::remove(path);
  CHECK(took < std::chrono::seconds(5));  // 16 scripts run out of budget, then no more are run
  CHECK(rec.count("acquired") == 5);
  CHECK(rec.count("released") == 5);
}

TEST_CASE("effect pipeline: python-redis-lock's scripts as it sends them", "[effect][pipeline]") {
  // Its release answers 0 = released, 1 = not held; its extend [seconds, id] answers 0.
  const std::string unlock =
      "\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n        return 1\n    else\n"
      "        redis.call(\"del\", KEYS[2])\n        redis.call(\"lpush\", KEYS[2], 1)\n"
      "        redis.call(\"del\", KEYS[1])\n        return 0\n    end\n";
  const std::string extend =
      "\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[2] then\n        return 1\n"
      "    elseif redis.call(\"ttl\", KEYS[1]) < 0 then\n        return 2\n    else\n"
      "        redis.call(\"expire\", KEYS[1], ARGV[1])\n        return 0\n    end\n";
  const std::string unlock_sha = lock::sha1_hex(unlock), extend_sha = lock::sha1_hex(extend);
  capture_builder b;
  const int a = b.connect("10.7.0.10", 40000, "10.7.0.2", 6379, effect_t0);
  const int w = b.connect("10.7.0.11", 40000, "10.7.0.2", 6379, effect_t0);
  constexpr int rounds = 6;
  std::int64_t t = effect_t0 + 10 * effect_ms;
  for (int r = 0; r < rounds; ++r) {
    const bool holder_a = r % 2 == 0;
    const int h = holder_a ? a : w, o = holder_a ? w : a;
    const std::string id = "id-" + std::to_string(r) + "-b64";
    b.command(h, t, {"SET", "lock:report", id, "NX", "EX", "2"}, std::string(resp_ok));
    b.command(o, t + 10 * effect_ms, {"SET", "lock:report", "other-" + std::to_string(r), "NX", "EX", "2"}, std::string(resp_nil));
    // Its auto-renewal every 2/3 of the expiry.
    b.command(h, t + 1333 * effect_ms, eval_call("EVAL", extend, {"lock:report"}, {"2", id}), resp_int(0));
    b.command(h, t + 2666 * effect_ms, eval_call("EVALSHA", extend_sha, {"lock:report"}, {"2", id}), resp_int(0));
    // EVALSHA first, EVAL on NOSCRIPT (the first time only), as _eval_script does.
    if (r == 0) {
      b.command(h, t + 3000 * effect_ms, eval_call("EVALSHA", unlock_sha, {"lock:report", "lock-signal:report"}, {id}),
                "-NOSCRIPT No matching script. Please use EVAL.\r\n");
      b.command(h, t + 3001 * effect_ms, eval_call("EVAL", unlock, {"lock:report", "lock-signal:report"}, {id}), resp_int(0));
    } else {
      b.command(h, t + 3000 * effect_ms, eval_call("EVALSHA", unlock_sha, {"lock:report", "lock-signal:report"}, {id}),
                resp_int(0));
    }
    b.command(h, t + 3002 * effect_ms, {"DEL", "lock-signal:report"}, resp_int(1));
    t += 4000 * effect_ms;
  }
  const std::string path = effect_capture_path("python_redis_lock");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == rounds);
  CHECK(rec.count("contended") == rounds);
  CHECK(rec.count("renewed") == 2 * rounds);
  CHECK(rec.count("renew_failed") == 0);
  CHECK(rec.count("released") == rounds);
  CHECK(rec.count("unlock_rejected") == 0);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a refresh that re-creates a lost key renews while its value holds", "[effect][pipeline]") {
  const std::string acquire =
      "local key, id, ttl = KEYS[1], ARGV[1], ARGV[2]\n"
      "if redis.call('set', key, id, 'NX', 'PX', ttl) then return 1 end\nreturn 0";
  const std::string refresh =
      "local key, id, ttl = KEYS[1], ARGV[1], ARGV[2]\nlocal v = redis.call('get', key)\n"
      "if v == id then redis.call('pexpire', key, ttl) return 1\n"
      "elseif v == false then redis.call('set', key, id) redis.call('pexpire', key, ttl) return 1 end\nreturn 0";
  const std::string release =
      "local key, id = KEYS[1], ARGV[1]\nif redis.call('get', key) == id then return redis.call('del', key) end\nreturn 0";
  capture_builder b;
  const int c = b.connect("10.8.0.10", 40000, "10.8.0.2", 6379, effect_t0);
  std::int64_t t = effect_t0 + 10 * effect_ms;
  b.command(c, t, eval_call("EVAL", acquire, {"mutex:job"}, {"id-1", "1000"}), resp_int(1));
  for (int k = 1; k <= 4; ++k) {
    b.command(c, t + k * 800 * effect_ms, eval_call("EVAL", refresh, {"mutex:job"}, {"id-1", "1000"}), resp_int(1));
  }
  b.command(c, t + 3500 * effect_ms, eval_call("EVAL", release, {"mutex:job"}, {"id-1"}), resp_int(1));
  const std::string path = effect_capture_path("refresh_recreates");
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == 1);
  CHECK(rec.count("renewed") == 4);
  CHECK(rec.count("reentered") == 0);
  CHECK(rec.count("released") == 1);
  check_no_false_anomalies(rec);
}

TEST_CASE("effect pipeline: a script that ran to its end and is no lock is not guessed at", "[effect][pipeline]") {
  // [number] and an integer reply is the shape of a release (inference rule 6); the
  // probes ran it whole and saw a counter.
  const std::string counter = "local n = redis.call('incrby', KEYS[1], ARGV[1])\nreturn n";
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, eval_call("EVAL", counter, {"hits:today"}, {"5"}), resp_int(5), effect_t0);
  feed(r, eval_call("EVAL", counter, {"hits:today"}, {"7"}), resp_int(12), effect_t0 + effect_ms);
  CHECK(rec.ops.empty());
}
