// Lock identity (server, database, key): the recognizer's SELECT tracking, the timeline
// keyed by identity (and merge_servers), and the report's titles of a name on several
// servers. The RedLock recording against its driver's own log is in test_captures.cpp.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <deque>
#include <set>

#include <boost/json.hpp>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_event_kind;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

// Exchanges on one connection whose start was (or was not) captured.
struct connection_feeder {
  locks::lock_recognizer& r;
  std::uint64_t connection;
  bool from_start;
  std::int64_t at_us = t0;
  void operator()(const std::vector<std::string>& args, std::string_view reply) {
    feed(r, args, reply, at_us += 1000, connection, "10.0.0.1:50000", "10.0.0.2:6379", from_start);
  }
  void acquire() { (*this)({"SET", "k", "v", "NX", "PX", "1000"}, "+OK\r\n"); }
};

}  // namespace

TEST_CASE("recognizer: each connection's database follows SELECT and RESET: HELLO keeps it", "[identity][recognizer]") {
  op_recorder ops;
  locks::lock_recognizer r(ops);
  connection_feeder c{r, 1, true};
  c.acquire();
  c({"SELECT", "1"}, "+OK\r\n");
  c.acquire();
  c({"SELECT", "99"}, "-ERR DB index is out of range\r\n");  // refused: still db 1
  c.acquire();
  // redis-server 7.0.15: after SELECT 1, HELLO 2 and GET see db 1's key; after RESET, db 0's.
  c({"HELLO", "2"}, "*2\r\n$6\r\nserver\r\n$5\r\nredis\r\n");
  c.acquire();
  c({"RESET"}, "+RESET\r\n");
  c.acquire();
  c({"select", "2"}, "+OK\r\n");
  c.acquire();
  REQUIRE(ops.ops.size() == 6);
  CHECK(ops.ops[0].db == 0);
  CHECK(ops.ops[1].db == 1);
  CHECK(ops.ops[2].db == 1);
  CHECK(ops.ops[3].db == 1);
  CHECK(ops.ops[4].db == 0);
  CHECK(ops.ops[5].db == 2);

  // Joined mid-stream: unknown until it SELECTs.
  connection_feeder mid{r, 2, false};
  mid.acquire();
  mid({"SELECT", "3"}, "+OK\r\n");
  mid.acquire();
  REQUIRE(ops.ops.size() == 8);
  CHECK(ops.ops[6].db == -1);
  CHECK(ops.ops[7].db == 3);
  // A connection seen from its start, then with a gap before any SELECT: unknown.
  connection_feeder gap{r, 3, true};
  gap.acquire();
  gap.from_start = false;
  gap.acquire();
  CHECK(ops.ops[8].db == 0);
  CHECK(ops.ops[9].db == -1);
  // The state goes with the connection: a new connection with the same id starts over.
  r.on_connection_end(1, t0);
  c.acquire();
  CHECK(ops.ops.back().db == 0);
}

TEST_CASE("recognizer: the database it follows is the one redis-server uses, across HELLO and RESET",
          "[identity][recognizer][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  op_recorder ops;
  locks::lock_recognizer r(ops);
  connection_feeder feed{r, 1, true};
  // Each command goes to redis-server, and with redis-server's own reply to the recognizer.
  auto both = [&](const std::vector<std::string>& args) {
    c.command_argv(args);
    feed(args, c.last_value_bytes());
    return std::string(c.last_value_bytes());
  };
  both({"SET", "k", "db0", "NX", "PX", "60000"});
  both({"SELECT", "1"});
  both({"SET", "k", "db1", "NX", "PX", "60000"});
  both({"HELLO", "2"});
  CHECK(both({"GET", "k"}) == "$3\r\ndb1\r\n");  // still db 1 after HELLO
  both({"SET", "k", "x", "NX", "PX", "60000"});     // refused: db 1's k is held
  CHECK(both({"RESET"}) == "+RESET\r\n");
  CHECK(both({"GET", "k"}) == "$3\r\ndb0\r\n");  // db 0 after RESET
  both({"SET", "k", "y", "NX", "PX", "60000"});
  REQUIRE(ops.ops.size() == 4);
  CHECK(ops.ops[0].db == 0);
  CHECK(ops.ops[1].db == 1);
  CHECK(ops.ops[2].db == 1);
  CHECK(ops.ops[2].outcome == op_outcome::contended);
  CHECK(ops.ops[3].db == 0);
  CHECK(ops.ops[3].outcome == op_outcome::contended);
}

namespace {

class identity_fixture {
 public:
  explicit identity_fixture(locks::timeline_options o = {}) : timeline(o, events) {}

  void op(lock_op_kind kind, op_outcome outcome, std::string_view owner, double at_ms, std::string_view server,
          std::int32_t db = 0, std::uint64_t connection = 0) {
    locks::lock_operation o;
    o.kind = kind;
    o.family = lock_family::set_based;
    o.outcome = outcome;
    o.lock = "rl:payment";
    o.owner = owner;
    o.db = db;
    o.lease_ms = 1000;
    texts.emplace_back(server);
    o.server_text = texts.back();
    o.client_text = "10.0.0.1:50000";
    o.connection = connection != 0 ? connection : std::hash<std::string_view>{}(server) % 1000 + 1;
    o.request_us = t0 + static_cast<std::int64_t>(at_ms * 1000);
    o.reply_us = o.request_us + 100;
    timeline.on_operation(with_addresses(o));
  }

  event_recorder events;
  locks::lock_timeline timeline;
  std::deque<std::string> texts;
};

}  // namespace

TEST_CASE("timeline: the same key on three servers is three locks", "[identity][timeline]") {
  identity_fixture f;
  for (const char* s : {s1, s2, s3}) f.op(lock_op_kind::acquire, op_outcome::ok, "R1", 1, s);
  CHECK(f.timeline.lock_count() == 3);
  CHECK(f.timeline.scope_count() == 3);
  CHECK(f.events.count("acquired") == 3);
  CHECK(f.events.count("reentered") == 0);
  CHECK(f.events.count("anomaly:overlapping_holders") == 0);
  std::set<std::string> lock_servers;
  for (const auto& e : f.events.events) lock_servers.insert(e.lock_server);
  CHECK(lock_servers == std::set<std::string>{s1, s2, s3});
  // Another owner on one of them is contended there only.
  f.op(lock_op_kind::acquire, op_outcome::ok, "R2", 2, s2);
  f.timeline.advance_to(f.events.events.back().ts_us + 10'000);  // no unlock of R1's was in flight
  CHECK(f.events.count("anomaly:overlapping_holders") == 1);
  CHECK(f.events.events.back().lock_server == s2);
  for (const char* s : {s1, s2, s3}) f.op(lock_op_kind::unlock, op_outcome::ok, "R1", 3, s);
  CHECK(f.events.count("released") == 3);
}

TEST_CASE("timeline: SELECT 1 and SELECT 0 are different locks: an unknown database is db 0", "[identity][timeline]") {
  identity_fixture f;
  f.op(lock_op_kind::acquire, op_outcome::ok, "A", 1, s1, 0);
  f.op(lock_op_kind::acquire, op_outcome::ok, "B", 2, s1, 1);
  CHECK(f.timeline.lock_count() == 2);
  CHECK(f.events.count("anomaly:overlapping_holders") == 0);
  CHECK(f.events.events[1].db == 1);
  // A connection joined mid-stream (db unknown) releasing A's hold: db 0's lock.
  f.op(lock_op_kind::unlock, op_outcome::ok, "A", 3, s1, -1, 77);
  CHECK(f.timeline.lock_count() == 2);
  REQUIRE(f.events.first("released") != nullptr);
  CHECK(f.events.first("released")->owner == "A");
  CHECK(f.events.first("released")->db == 0);
  CHECK(f.events.first("released")->held_us == 2000);
}

TEST_CASE("timeline: an unknown database is the one other database that has the key", "[identity][timeline]") {
  identity_fixture f;
  f.op(lock_op_kind::acquire, op_outcome::ok, "A", 1, s1, 3);
  f.op(lock_op_kind::unlock, op_outcome::ok, "A", 2, s1, -1, 77);  // joined mid-stream
  CHECK(f.timeline.lock_count() == 1);
  REQUIRE(f.events.first("released") != nullptr);
  CHECK(f.events.first("released")->db == 3);
  CHECK(f.events.count("anomaly:unlock_by_non_owner") == 0);
  // In two other databases: no telling, db 0.
  f.op(lock_op_kind::acquire, op_outcome::ok, "B", 3, s1, 4);
  f.op(lock_op_kind::acquire, op_outcome::ok, "C", 4, s1, -1, 78);
  CHECK(f.timeline.lock_count() == 3);
  CHECK(f.events.events.back().db == 0);
  // Known in db 0 too: db 0.
  f.op(lock_op_kind::unlock, op_outcome::ok, "C", 5, s1, -1, 78);
  CHECK(f.events.events.back().event == "released");
  CHECK(f.events.events.back().db == 0);
}

TEST_CASE("timeline: merge_servers makes the key on any server one lock, databases still apart", "[identity][timeline]") {
  locks::timeline_options o;
  o.merge_servers = true;
  identity_fixture f(o);
  f.op(lock_op_kind::acquire, op_outcome::ok, "A", 1, s1);
  f.op(lock_op_kind::acquire, op_outcome::ok, "B", 2, s2);
  f.timeline.advance_to(f.events.events.back().ts_us + 10'000);  // no unlock of A's was in flight
  CHECK(f.timeline.lock_count() == 1);
  CHECK(f.events.count("anomaly:overlapping_holders") == 1);
  CHECK(f.events.events.back().lock_server.empty());
  CHECK(f.events.events.back().server == s2);  // the connection's server is still told
  f.op(lock_op_kind::acquire, op_outcome::ok, "C", 3, s3, 1);
  CHECK(f.timeline.lock_count() == 2);
}

TEST_CASE("report: a name on several servers is titled with its server: one server keeps the bare name",
          "[identity][report]") {
  auto render = [](locks::report_format format, const std::vector<const char*>& servers) {
    std::string out;
    locks::report_options ro;
    ro.format = format;
    locks::lock_report report(ro, [&](std::string_view s) { out += s; });
    locks::lock_timeline timeline({}, report);
    std::deque<std::string> texts;
    double at = 1;
    for (const char* s : servers) {
      locks::lock_operation o;
      o.kind = lock_op_kind::acquire;
      o.family = lock_family::set_based;
      o.outcome = op_outcome::ok;
      o.lock = "rl:payment";
      o.owner = "R1";
      o.server_text = s;
      o.client_text = "10.0.0.1:50000";
      o.connection = static_cast<std::uint64_t>(at);
      o.request_us = t0 + static_cast<std::int64_t>(at++ * 1000);
      o.reply_us = o.request_us + 100;
      timeline.on_operation(with_addresses(o));
    }
    timeline.finish(t0 + 10'000);
    report.finish(timeline);
    return out;
  };
  const std::string one = render(locks::report_format::text, {s1});
  CHECK(one.find("== rl:payment\n") != std::string::npos);
  CHECK(one.find("@") == std::string::npos);
  const std::string three = render(locks::report_format::text, {s1, s2, s3});
  for (const char* s : {s1, s2, s3}) {
    CHECK(three.find("== rl:payment @" + std::string(s) + "\n") != std::string::npos);
    CHECK(three.find("\nrl:payment @" + std::string(s) + "  ") != std::string::npos);  // its summary row
  }
  const std::string jsonl = render(locks::report_format::jsonl, {s1, s2});
  CHECK(jsonl.find(R"("server":"10.0.0.9:6379","db":0,)") != std::string::npos);
  CHECK(jsonl.find(R"("server":"10.0.0.9:6380","db":0,)") != std::string::npos);
  CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::event_line_errors) == "");
}
