// Locks released and renewed by the server's compare-and-delete and compare-and-set
// (Redis 8.4: DELEX, SET IFEQ/IFNE/IFDEQ/IFDNE, DIGEST; Valkey 8.1: SET IFEQ; Valkey 9.0:
// DELIFEQ; Valkey 9.2: DELEX IFEQ/IFNE). No server packaged for Debian has them: the truth
// is the commands' documentation (redis.io/commands/delex and /set, valkey.io/commands/
// delifeq and /delex): DELEX answers 1 when it deleted, 0 when the key was absent or the
// condition false, WRONGTYPE on a non-string; SET answers OK, nil when the condition fails,
// or with GET the old value (nil: no key); IFEQ and IFDEQ never create a key, IFNE and
// IFDNE do. Each sequence below is what such a server answers to two clients.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "effect_calls.hpp"
#include "helpers.hpp"
#include "lockscope/locks/lock_analysis.hpp"
#include "recognize/lua_sandbox.hpp"
#include "scenarios.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t cond_ms = 1000;
constexpr std::int64_t cond_t0 = 1'700'000'000'000'000;

// Each connection from a host of its own (seen from its SYN), answered 100 µs after.
struct cond_wire {
  locks::lock_recognizer recognizer;
  std::map<std::uint64_t, std::uint32_t> sent;
  void send(const std::vector<std::string>& args, std::string_view reply, double at_ms, std::uint64_t connection) {
    const std::string client = "10.0.0." + std::to_string(10 + connection % 4) + ":5000" + std::to_string(connection % 4);
    feed(recognizer, args, reply, cond_t0 + static_cast<std::int64_t>(at_ms * cond_ms), connection, client,
         "10.0.0.2:6379", true, sent[connection]++);
  }
};

struct cond_timeline {
  cond_timeline() { sink.next = &timeline; }
  std::vector<const recorded_event*> all(std::string_view name) const {
    std::vector<const recorded_event*> out;
    for (const recorded_event& e : events.events) {
      if (e.event == name) out.push_back(&e);
    }
    return out;
  }
  std::size_t anomalies() const {
    std::size_t n = 0;
    for (const recorded_event& e : events.events) {
      INFO(e.event << " " << e.lock << " " << e.owner);
      n += e.event.rfind("anomaly:", 0) == 0 ? 1 : 0;
    }
    return n;
  }
  void finish(double at_ms) { timeline.finish(cond_t0 + static_cast<std::int64_t>(at_ms * cond_ms)); }
  op_tee sink;
  event_recorder events;
  locks::lock_timeline timeline{{}, events};
  cond_wire w{locks::lock_recognizer(sink), {}};
};

void take(cond_wire& w, std::string_view value, double at_ms, std::uint64_t connection) {
  w.send({"SET", "lock:orders", std::string(value), "NX", "PX", "10000"}, "+OK\r\n", at_ms, connection);
}

}  // namespace

TEST_CASE_METHOD(cond_timeline, "conditional commands: DELEX IFEQ and DELIFEQ are their holder's releases, 0 a refusal",
                 "[recognizer][timeline][conditional]") {
  const bool delifeq = GENERATE(false, true);
  auto release = [&](std::string_view value, std::string_view reply, double at, std::uint64_t conn) {
    if (delifeq) w.send({"DELIFEQ", "lock:orders", std::string(value)}, reply, at, conn);
    else w.send({"DELEX", "lock:orders", "IFEQ", std::string(value)}, reply, at, conn);
  };
  take(w, "tok-a", 0, 1);
  w.send({"SET", "lock:orders", "tok-b", "NX", "PX", "10000"}, "$-1\r\n", 10, 2);  // refused
  release("tok-b", ":0\r\n", 20, 2);  // not the holder: refused, the hold stays
  release("tok-a", ":1\r\n", 100, 1);
  take(w, "tok-b", 110, 2);
  release("tok-b", ":1\r\n", 200, 2);
  finish(60'000);
  const auto released = all("released");
  REQUIRE(released.size() == 2);
  CHECK(released[0]->owner == "tok-a");
  CHECK(released[0]->ts_us == cond_t0 + 100 * cond_ms + 100);
  CHECK(released[1]->owner == "tok-b");
  CHECK(all("acquired").size() == 2);
  CHECK(all("expired").empty());
  CHECK(all("anomaly:overlapping_holders").empty());
  CHECK(all("anomaly:expired_while_held").empty());
}

TEST_CASE("conditional commands: the operations each reply makes", "[recognizer][conditional]") {
  op_recorder log;
  cond_wire w{locks::lock_recognizer(log), {}};
  SECTION("DELEX IFEQ: 1 released, 0 refused; the value is the owner") {
    w.send({"DELEX", "lock:a", "IFEQ", "tok"}, ":1\r\n", 0, 1);
    w.send({"DELEX", "lock:a", "ifeq", "tok"}, ":0\r\n", 1, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].kind == lock_op_kind::unlock);
    CHECK(log.ops[0].family == locks::lock_family::set_based);
    CHECK(log.ops[0].owner == "tok");
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
  }
  SECTION("DELEX without a condition is a DEL") {
    w.send({"DELEX", "lock:a"}, ":1\r\n", 0, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::del);
    CHECK(log.ops[0].outcome == op_outcome::ok);
  }
  SECTION("an error reply (WRONGTYPE, syntax) changed nothing: no operation") {
    w.send({"DELEX", "lock:a", "IFEQ", "tok"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", 0, 1);
    w.send({"DELIFEQ", "lock:a", "tok"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", 1, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "PX", "100"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", 2, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "GET", "PX", "100"}, "-ERR syntax error\r\n", 3, 1);
    w.send({"SET", "lock:a", "tok", "NX", "IFEQ", "tok", "PX", "100"}, "-ERR syntax error\r\n", 4, 1);
    CHECK(log.ops.empty());
  }
  SECTION("SET IFEQ with its own value and an expiry: a renewal; nil refused; KEEPTTL none") {
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "PX", "30000"}, "+OK\r\n", 0, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "EX", "30"}, "$-1\r\n", 1, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "KEEPTTL"}, "+OK\r\n", 2, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].kind == lock_op_kind::renew);
    CHECK(log.ops[0].owner == "tok");
    CHECK(log.ops[0].lease_ms == 30'000);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].kind == lock_op_kind::renew);
    CHECK(log.ops[1].lease_ms == 30'000);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
  }
  SECTION("SET IFEQ with another value: a hand-over; nil: the matched value held nothing") {
    w.send({"SET", "lock:a", "new", "IFEQ", "old", "PX", "5000"}, "+OK\r\n", 0, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].kind == lock_op_kind::unlock);
    CHECK(log.ops[0].owner == "old");
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].kind == lock_op_kind::acquire);
    CHECK(log.ops[1].owner == "new");
    CHECK(log.ops[1].lease_ms == 5000);
    CHECK(log.ops[1].outcome == op_outcome::ok);
    w.send({"SET", "lock:a", "new", "IFEQ", "old", "PX", "5000"}, "$-1\r\n", 1, 1);
    REQUIRE(log.ops.size() == 3);
    CHECK(log.ops[2].kind == lock_op_kind::unlock);
    CHECK(log.ops[2].outcome == op_outcome::rejected);
  }
  SECTION("SET IFEQ KEEPTTL with another value: the new holder keeps what was left of the old one's lease") {
    w.send({"SET", "lock:a", "old", "NX", "PX", "5000"}, "+OK\r\n", 0, 1);
    w.send({"SET", "lock:a", "new", "IFEQ", "old", "KEEPTTL"}, "+OK\r\n", 2000, 2);
    REQUIRE(log.ops.size() == 3);
    CHECK(log.ops[2].kind == lock_op_kind::acquire);
    CHECK(log.ops[2].owner == "new");
    CHECK(std::abs(log.ops[2].lease_ms - 3000) <= 1);
    w.send({"SET", "lock:b", "new", "IFEQ", "unseen", "KEEPTTL"}, "+OK\r\n", 2001, 2);  // the old lease never seen
    REQUIRE(log.ops.size() == 5);
    CHECK(log.ops[4].lease_ms == -1);
  }
  SECTION("with GET the old value tells whether it wrote") {
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "GET", "PX", "100"}, "$3\r\ntok\r\n", 0, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "GET", "PX", "100"}, "$5\r\nother\r\n", 1, 1);
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "GET", "PX", "100"}, "$-1\r\n", 2, 1);
    w.send({"SET", "lock:a", "tok", "IFNE", "x", "GET", "PX", "100"}, "$-1\r\n", 3, 1);  // no key: created
    REQUIRE(log.ops.size() == 4);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
    CHECK(log.ops[2].outcome == op_outcome::rejected);
    CHECK(log.ops[3].kind == lock_op_kind::acquire);  // no force: nothing was there
    CHECK(log.ops[3].outcome == op_outcome::ok);
  }
  SECTION("SET NX GET: nil took the key, the old value was a refusal; SET XX GET the other way round") {
    w.send({"SET", "lock:a", "tok", "NX", "GET", "PX", "100"}, "$-1\r\n", 0, 1);
    w.send({"SET", "lock:a", "tok2", "NX", "GET", "PX", "100"}, "$3\r\ntok\r\n", 1, 2);
    w.send({"SET", "lock:a", "tok", "XX", "GET", "PX", "100"}, "$3\r\ntok\r\n", 2, 1);  // renewed
    w.send({"SET", "lock:a", "tok", "XX", "GET", "PX", "100"}, "$-1\r\n", 3, 1);  // the key had gone
    REQUIRE(log.ops.size() == 4);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].outcome == op_outcome::contended);
    CHECK(log.ops[2].kind == lock_op_kind::renew);
    CHECK(log.ops[2].outcome == op_outcome::ok);
    CHECK(log.ops[3].outcome == op_outcome::rejected);
  }
  SECTION("DELEX IFNE: a forced release; SET IFNE over an old value: forced, then taken") {
    w.send({"DELEX", "lock:a", "IFNE", "mine"}, ":1\r\n", 0, 1);
    w.send({"DELEX", "lock:a", "IFNE", "mine"}, ":0\r\n", 1, 1);
    w.send({"SET", "lock:a", "mine", "IFNE", "x", "GET", "PX", "100"}, "$5\r\ntheir\r\n", 2, 1);
    w.send({"SET", "lock:a", "other", "IFNE", "mine", "PX", "100"}, "$-1\r\n", 3, 2);  // holds "mine": refused
    REQUIRE(log.ops.size() == 5);
    CHECK(log.ops[0].kind == lock_op_kind::force_unlock);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].kind == lock_op_kind::force_unlock);
    CHECK(log.ops[1].outcome == op_outcome::none);
    CHECK(log.ops[2].kind == lock_op_kind::force_unlock);
    CHECK(log.ops[3].kind == lock_op_kind::acquire);
    CHECK(log.ops[3].owner == "mine");
    CHECK(log.ops[4].kind == lock_op_kind::acquire);
    CHECK(log.ops[4].outcome == op_outcome::contended);
    // Without GET an absent key is not told: a plain DEL's reading (ends a hold known).
    w.send({"SET", "lock:a", "mine", "IFNE", "x", "PX", "100"}, "+OK\r\n", 4, 1);
    REQUIRE(log.ops.size() == 7);
    CHECK(log.ops[5].kind == lock_op_kind::del);
    CHECK(log.ops[5].family != locks::lock_family::set_based);
    CHECK(log.ops[6].kind == lock_op_kind::acquire);
    CHECK(log.ops[6].outcome == op_outcome::ok);
  }
  SECTION("PXAT: the lease is what is left of the deadline when sent") {
    const std::int64_t deadline_ms = cond_t0 / 1000 + 7000;
    w.send({"SET", "lock:a", "tok", "IFEQ", "tok", "PXAT", std::to_string(deadline_ms)}, "+OK\r\n", 0, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].lease_ms == 7000);
  }
  SECTION("inside MULTI/EXEC: read from EXEC's array") {
    w.send({"MULTI"}, "+OK\r\n", 0, 1);
    w.send({"DELEX", "lock:a", "IFEQ", "tok"}, "+QUEUED\r\n", 1, 1);
    w.send({"SET", "lock:b", "tok", "IFEQ", "tok", "PX", "900"}, "+QUEUED\r\n", 2, 1);
    w.send({"DELIFEQ", "lock:c", "tok"}, "+QUEUED\r\n", 3, 1);
    CHECK(log.ops.empty());
    w.send({"EXEC"}, "*3\r\n:1\r\n+OK\r\n:0\r\n", 4, 1);
    REQUIRE(log.ops.size() == 3);
    CHECK(log.ops[0].kind == lock_op_kind::unlock);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].kind == lock_op_kind::renew);
    CHECK(log.ops[1].lease_ms == 900);
    CHECK(log.ops[2].lock == "lock:c");
    CHECK(log.ops[2].outcome == op_outcome::rejected);
  }
}

TEST_CASE_METHOD(cond_timeline, "conditional commands: a steal by DELEX IFNE ends the holder's hold by force",
                 "[recognizer][timeline][conditional]") {
  take(w, "tok-a", 0, 1);
  w.send({"DELEX", "lock:orders", "IFNE", "tok-b"}, ":1\r\n", 50, 2);
  take(w, "tok-b", 60, 2);
  finish(60'000);
  const auto forced = all("force_released");
  REQUIRE(forced.size() == 1);
  CHECK(forced[0]->owner == "tok-a");
  CHECK(all("acquired").size() == 2);
  CHECK(all("anomaly:overlapping_holders").empty());
}

TEST_CASE_METHOD(cond_timeline, "conditional commands: SET IFEQ PX renews its holder, and hands over to another value",
                 "[recognizer][timeline][conditional]") {
  take(w, "tok-a", 0, 1);
  w.send({"SET", "lock:orders", "tok-a", "IFEQ", "tok-a", "PX", "10000"}, "+OK\r\n", 8000, 1);
  w.send({"SET", "lock:orders", "tok-a", "IFEQ", "tok-a", "PX", "10000"}, "+OK\r\n", 16000, 1);
  w.send({"SET", "lock:orders", "tok-c", "IFEQ", "tok-a", "PX", "10000"}, "+OK\r\n", 20000, 1);
  w.send({"DELEX", "lock:orders", "IFEQ", "tok-c"}, ":1\r\n", 21000, 1);
  finish(60'000);
  const auto renewed = all("renewed");
  REQUIRE(renewed.size() == 2);
  CHECK(renewed[0]->owner == "tok-a");
  CHECK(renewed[0]->lease_ms == 10'000);
  CHECK(all("expired").empty());  // without the renewals tok-a's lease ran out at 10 s
  const auto released = all("released");
  REQUIRE(released.size() == 2);
  CHECK(released[0]->owner == "tok-a");
  CHECK(released[1]->owner == "tok-c");
  const auto acquired = all("acquired");
  REQUIRE(acquired.size() == 2);
  CHECK(acquired[1]->owner == "tok-c");
  CHECK(anomalies() == 0);
}

TEST_CASE_METHOD(cond_timeline, "conditional commands: DELEX IFDEQ releases the key's holder, with or without a DIGEST read",
                 "[recognizer][timeline][conditional]") {
  const bool digest_read = GENERATE(false, true);
  take(w, "tok-a", 0, 1);
  if (digest_read) w.send({"DIGEST", "lock:orders"}, "$16\r\n2c1f3a9d8e7b6f50\r\n", 90, 1);
  w.send({"DELEX", "lock:orders", "IFDEQ", "2c1f3a9d8e7b6f50"}, ":1\r\n", 100, 1);
  take(w, "tok-b", 150, 2);
  w.send({"DELEX", "lock:orders", "IFDEQ", "2c1f3a9d8e7b6f50"}, ":0\r\n", 160, 1);  // refused: tok-b stays
  w.send({"DELEX", "lock:orders", "IFDNE", "2c1f3a9d8e7b6f50"}, ":1\r\n", 200, 2);
  finish(60'000);
  const auto released = all("released");
  REQUIRE(released.size() == 2);
  CHECK(released[0]->owner == "tok-a");
  CHECK(released[0]->ts_us == cond_t0 + 100 * cond_ms + 100);
  CHECK(released[1]->owner == "tok-b");
  CHECK(released[1]->ts_us == cond_t0 + 200 * cond_ms + 100);
  CHECK(all("expired").empty());
  CHECK(anomalies() == 0);  // a checked delete: neither unchecked nor another's
}

namespace {

// A release and an extend written with the conditional commands, as a client that still
// sends a script (to run on older servers' replicas, or to return its own codes) does.
constexpr std::string_view delex_release =
    "local released = redis.call('DELEX', KEYS[1], 'IFEQ', ARGV[1])\n"
    "if released == 1 then return 1 end\nreturn 0";
constexpr std::string_view delifeq_release = "return redis.call('DELIFEQ', KEYS[1], ARGV[1])";
constexpr std::string_view ifeq_extend =
    "local ok = redis.call('SET', KEYS[1], ARGV[1], 'IFEQ', ARGV[1], 'PX', ARGV[2])\n"
    "if ok then return 1 end\nreturn 0";
constexpr std::string_view digest_release =
    "local d = redis.call('DIGEST', KEYS[1])\n"
    "if not d then return 0 end\n"
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "return redis.call('DELEX', KEYS[1], 'IFDEQ', d)";

}  // namespace

TEST_CASE("conditional commands: the sandbox's shadow answers them, and scripts using them are read by effect",
          "[effect][conditional]") {
  const locks::effect_call call{{"lock:orders"}, {"tok-91f2"}};
  const locks::effect_call extend_call{{"lock:orders"}, {"tok-91f2", "30000"}};
  for (const std::string_view release : {delex_release, delifeq_release, digest_release}) {
    const locks::effect::script_effect e = locks::effect_of(release, call);
    INFO(release << "\n" << e.finding);
    CHECK(e.op == locks::script_op::unlock);
    CHECK(e.lock_key == 1);
    CHECK(e.owner_argv == 1);
  }
  const locks::effect::script_effect e = locks::effect_of(ifeq_extend, extend_call);
  INFO(e.finding);
  CHECK(e.op == locks::script_op::extend);
  CHECK(e.owner_argv == 1);
  CHECK(e.lease_argv == 2);
}

TEST_CASE_METHOD(cond_timeline, "conditional commands: a script using DELEX run by the sandbox releases its holder",
                 "[recognizer][timeline][effect][conditional]") {
  take(w, "tok-a", 0, 1);
  w.send({"EVAL", std::string(ifeq_extend), "1", "lock:orders", "tok-a", "10000"}, ":1\r\n", 8000, 1);
  w.send({"EVAL", std::string(delex_release), "1", "lock:orders", "tok-b"}, ":0\r\n", 9000, 2);
  w.send({"EVAL", std::string(delex_release), "1", "lock:orders", "tok-a"}, ":1\r\n", 12000, 1);
  finish(60'000);
  const auto renewed = all("renewed");
  REQUIRE(renewed.size() == 1);
  CHECK(renewed[0]->owner == "tok-a");
  const auto released = all("released");
  REQUIRE(released.size() == 1);
  CHECK(released[0]->owner == "tok-a");
  CHECK(released[0]->ts_us == cond_t0 + 12000 * cond_ms + 100);
  CHECK(all("expired").empty());
}

TEST_CASE("conditional commands: the crafted capture's timeline is the one written by hand from its scenario",
          "[captures][conditional]") {
  const std::string base = std::string(LOCKSCOPE_CAPTURES_DIR) + "/crafted/conditional_commands";
  struct expected_event {
    double at_ms = 0;
    std::string owner, event;
  };
  std::vector<expected_event> expected;
  std::ifstream in(base + ".expected.txt");
  REQUIRE(in);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    expected_event e;
    fields >> e.at_ms >> e.owner >> e.event;
    expected.push_back(e);
  }
  REQUIRE(expected.size() == 14);

  locks::analysis_options o;
  o.report.format = locks::report_format::jsonl;
  std::string jsonl;
  locks::analyze_files({base + ".pcap"}, o, [&](std::string_view s) { jsonl += s; });
  std::vector<expected_event> found;
  std::vector<std::string> anomalies;
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    const boost::json::object ev = boost::json::parse(line).as_object();
    if (!ev.contains("event") || !ev.contains("ts")) continue;
    const std::string event(ev.at("event").as_string());
    if (event == "anomaly") {
      anomalies.emplace_back(ev.at("kind").as_string());
      continue;
    }
    const double at_ms = (ev.at("ts").to_number<double>() * 1e6 - static_cast<double>(capture_epoch_us)) / 1000;
    found.push_back({at_ms, std::string(ev.at("owner").as_string()), event});
  }
  REQUIRE(found.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(i << ": expected " << expected[i].at_ms << " " << expected[i].owner << " " << expected[i].event << ", found "
           << found[i].at_ms << " " << found[i].owner << " " << found[i].event);
    CHECK(found[i].event == expected[i].event);
    CHECK(found[i].owner == expected[i].owner);
    // An expiry is reported once the lease is past, with the clock's tolerance.
    CHECK(std::fabs(found[i].at_ms - expected[i].at_ms) <= (expected[i].event == "expired" ? 2.0 : 0.01));
  }
  for (const std::string& kind : anomalies) {
    INFO(kind);
    CHECK(kind != "overlapping_holders");
    CHECK(kind != "expired_while_held");
  }
  // A's stale release at 3000 ms named an owner that did not hold the lock.
  CHECK(std::count(anomalies.begin(), anomalies.end(), "unlock_by_non_owner") == 1);
}
