// Plain lock commands in a transaction and a DEL of several keys: RQ's scheduler (1.13)
// takes a lock per queue with `SET key pid NX EX 61`, renews them together in a
// MULTI/EXEC pipeline (`EXPIRE k1 61`, `EXPIRE k2 61`: each answered +QUEUED, what each
// did in EXEC's array) and releases them with one `DEL k1 k2` (answering how many
// existed). The truth is the sequence each test writes: which keys were held, by which
// value, and what the server answered (a redis-server answers MULTI/EXEC and DEL so).
#include <map>
#include <string>
#include <vector>

#include "timeline/clock_values.hpp"
#include "helpers.hpp"
#include "tooz_scripts.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_groups.hpp"

using namespace lockscope;
using lockscope::timeline_test::event_recorder;
using lockscope::timeline_test::feed;
using lockscope::timeline_test::op_recorder;
using lockscope::timeline_test::recorded_event;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;

using tee = lockscope::timeline_test::op_tee;

// Each connection from a host of its own (as separate processes), answered 100 µs after.
class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, std::string_view reply, double at_ms, std::uint64_t connection) {
    static const std::string clients[] = {"10.0.0.10:50000", "10.0.0.11:50001", "10.0.0.12:50002", "10.0.0.13:50003"};
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, clients[connection % 4],
         "10.0.0.2:6379", false, sent[connection]++);
  }
  locks::lock_recognizer recognizer;
  std::map<std::uint64_t, std::uint32_t> sent;  // exchanges so far per connection (exchange::connection_sequence)
};

std::vector<const recorded_event*> all(const event_recorder& events, std::string_view name) {
  std::vector<const recorded_event*> out;
  for (const recorded_event& e : events.events) {
    if (e.event == name) out.push_back(&e);
  }
  return out;
}

// A poller's wait, one from its first refusal to the second acquisition (the first: the holder's).
void check_one_wait(const event_recorder& events, std::int64_t at_least_us) {
  CHECK(all(events, "gave_up").empty());
  const auto acquired = all(events, "acquired");
  REQUIRE(acquired.size() == 2);
  CHECK(acquired[1]->wait_us >= at_least_us);
}

void take_both(wire& w, double at_ms, std::uint64_t connection, std::string_view pid) {
  w.send({"SET", "rq:scheduler-lock:orders", std::string(pid), "NX", "EX", "61"}, "+OK\r\n", at_ms, connection);
  w.send({"SET", "rq:scheduler-lock:stock", std::string(pid), "NX", "EX", "61"}, "+OK\r\n", at_ms + 0.5, connection);
}

// The heartbeat: MULTI, an EXPIRE per held queue with other work queued between, EXEC.
void heartbeat(wire& w, double at_ms, std::uint64_t connection, std::string_view exec_reply) {
  w.send({"MULTI"}, "+OK\r\n", at_ms, connection);
  w.send({"EXPIRE", "rq:scheduler-lock:orders", "61"}, "+QUEUED\r\n", at_ms + 0.1, connection);
  w.send({"HSET", "rq:worker:1", "last_heartbeat", "now"}, "+QUEUED\r\n", at_ms + 0.2, connection);
  w.send({"EXPIRE", "rq:scheduler-lock:stock", "61"}, "+QUEUED\r\n", at_ms + 0.3, connection);
  w.send({"EXEC"}, exec_reply, at_ms + 1, connection);
}

// The recognizer's operations to a timeline (and recorded on the way), sent as `w`.
struct to_timeline {
  to_timeline() { sink.next = &timeline; }
  tee sink;
  event_recorder events;
  locks::lock_timeline timeline{{}, events};
  wire w{sink};
};

// ... and on through the lock groups.
struct to_groups {
  to_groups() { sink.next = &timeline; }
  void finish(double at_ms) {
    timeline.finish(t0 + static_cast<std::int64_t>(at_ms * ms));
    groups.finish(t0 + static_cast<std::int64_t>(at_ms * ms));
  }
  tee sink;
  event_recorder events;
  locks::lock_groups groups{{}, events};
  locks::lock_timeline timeline{{}, groups};
  wire w{sink};
};

}  // namespace

TEST_CASE_METHOD(to_timeline, "transactions: EXPIREs queued in MULTI renew at EXEC with their own element, and one DEL of two keys releases both",
          "[recognizer][timeline][transactions]") {
  take_both(w, 0, 1, "4101");
  w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "$-1\r\n", 30, 2);  // another scheduler: refused
  heartbeat(w, 400, 1, "*3\r\n:1\r\n:1\r\n:1\r\n");
  heartbeat(w, 800, 1, "*3\r\n:1\r\n:1\r\n:1\r\n");
  w.send({"DEL", "rq:scheduler-lock:orders", "rq:scheduler-lock:stock"}, ":2\r\n", 1000, 1);  // release_locks()
  w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "+OK\r\n", 1200, 2);
  timeline.finish(t0 + 5'000 * ms);

  const auto renewed = all(events, "renewed");
  REQUIRE(renewed.size() == 4);  // two heartbeats, two locks each
  for (const recorded_event* e : renewed) {
    CHECK(e->owner == "4101");
    CHECK(e->lease_ms == 61'000);
  }
  // Run when EXEC was: its reply's time.
  CHECK(renewed[0]->ts_us == t0 + 401 * ms + 100);
  const auto released = all(events, "released");
  REQUIRE(released.size() == 2);
  for (const recorded_event* e : released) {
    CHECK(e->owner == "4101");
    CHECK(e->ts_us == t0 + 1000 * ms + 100);
  }
  CHECK(all(events, "acquired").size() == 3);
  for (const recorded_event& e : events.events) {
    INFO(e.event << " " << e.lock << " " << e.owner);
    CHECK(e.event != "anomaly:overlapping_holders");  // the DEL freed orders before 4202 took it
  }
}

TEST_CASE("transactions: only what EXEC ran, at its place", "[recognizer][transactions]") {
  op_recorder log;
  wire w(log);
  SECTION("EXEC's array: each queued lock command with its element (0: the key had gone)") {
    heartbeat(w, 0, 1, "*3\r\n:0\r\n:1\r\n:1\r\n");
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].kind == lock_op_kind::expire);
    CHECK(log.ops[0].lock == "rq:scheduler-lock:orders");
    CHECK(log.ops[0].outcome == op_outcome::none);
    CHECK(log.ops[1].lock == "rq:scheduler-lock:stock");
    CHECK(log.ops[1].outcome == op_outcome::ok);
    CHECK(log.ops[1].lease_ms == 61'000);
  }
  SECTION("EXEC answered nil (a WATCHed key changed): nothing ran") {
    heartbeat(w, 0, 1, "*-1\r\n");
    CHECK(log.ops.empty());
  }
  SECTION("DISCARD: nothing ran; the connection's next commands are read at their replies") {
    w.send({"MULTI"}, "+OK\r\n", 0, 1);
    w.send({"SET", "lock:a", "v1", "NX", "PX", "1000"}, "+QUEUED\r\n", 1, 1);
    w.send({"DISCARD"}, "+OK\r\n", 2, 1);
    CHECK(log.ops.empty());
    w.send({"SET", "lock:a", "v1", "NX", "PX", "1000"}, "+OK\r\n", 3, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::acquire);
    CHECK(log.ops[0].outcome == op_outcome::ok);
  }
  SECTION("a SET NX queued: acquired or refused by its element") {
    w.send({"MULTI"}, "+OK\r\n", 0, 1);
    w.send({"SET", "lock:a", "v1", "NX", "PX", "1000"}, "+QUEUED\r\n", 1, 1);
    w.send({"SET", "lock:b", "v1", "NX", "PX", "1000"}, "+QUEUED\r\n", 2, 1);
    w.send({"EXEC"}, "*2\r\n+OK\r\n$-1\r\n", 3, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].outcome == op_outcome::ok);
    CHECK(log.ops[1].outcome == op_outcome::contended);
  }
  SECTION("another connection's commands between are not the transaction's") {
    w.send({"MULTI"}, "+OK\r\n", 0, 1);
    w.send({"EXPIRE", "lock:a", "5"}, "+QUEUED\r\n", 1, 1);
    w.send({"EXPIRE", "lock:b", "5"}, ":1\r\n", 2, 2);
    REQUIRE(log.ops.size() == 1);  // read at once: connection 2 is in no transaction
    CHECK(log.ops[0].lock == "lock:b");
    w.send({"EXEC"}, "*1\r\n:1\r\n", 3, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[1].lock == "lock:a");
    CHECK(log.ops[1].outcome == op_outcome::ok);
  }
  SECTION("joined inside a transaction (its MULTI not captured): read at QUEUED as before") {
    w.send({"EXPIRE", "lock:a", "5"}, "+QUEUED\r\n", 1, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].outcome == op_outcome::no_reply);
    w.send({"EXEC"}, "*1\r\n:1\r\n", 3, 1);
    CHECK(log.ops.size() == 1);
  }
}

TEST_CASE("multi-key DEL: each key an operation, its outcome from the count", "[recognizer][multi_del]") {
  op_recorder log;
  wire w(log);
  SECTION("all existed") {
    w.send({"DEL", "lock:a", "lock:b"}, ":2\r\n", 0, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].lock == "lock:a");
    CHECK(log.ops[1].lock == "lock:b");
    for (const auto& op : log.ops) {
      CHECK(op.kind == lock_op_kind::del);
      CHECK(op.outcome == op_outcome::ok);
      CHECK(op.owner.empty());
    }
  }
  SECTION("none existed") {
    w.send({"UNLINK", "lock:a", "lock:b", "lock:c"}, ":0\r\n", 0, 1);
    REQUIRE(log.ops.size() == 3);
    for (const auto& op : log.ops) CHECK(op.outcome == op_outcome::none);
  }
  SECTION("some existed: which is left to the timeline") {
    w.send({"DEL", "lock:a", "lock:b"}, ":1\r\n", 0, 1);
    REQUIRE(log.ops.size() == 2);
    for (const auto& op : log.ops) CHECK(op.outcome == op_outcome::partial);
  }
}

TEST_CASE_METHOD(to_timeline, "multi-key DEL: a count below the keys named ends the hold known on a named key",
          "[recognizer][timeline][multi_del]") {
  // One scheduler holds stock only (orders was refused); its release names both.
  w.send({"SET", "rq:scheduler-lock:orders", "4101", "NX", "EX", "61"}, "$-1\r\n", 0, 1);
  w.send({"SET", "rq:scheduler-lock:stock", "4101", "NX", "EX", "61"}, "+OK\r\n", 1, 1);
  w.send({"DEL", "rq:scheduler-lock:orders", "rq:scheduler-lock:stock"}, ":1\r\n", 500, 1);
  w.send({"SET", "rq:scheduler-lock:stock", "4202", "NX", "EX", "61"}, "+OK\r\n", 700, 2);
  timeline.finish(t0 + 5'000 * ms);
  const auto released = all(events, "released");
  REQUIRE(released.size() == 1);
  CHECK(released[0]->lock == "rq:scheduler-lock:stock");
  CHECK(released[0]->owner == "4101");
  for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:overlapping_holders");
}

TEST_CASE_METHOD(to_timeline, "single tries: an owner back over another connection, the first still open, after a spinner's pause had given up",
          "[timeline][single_try]") {
  // Connections 2 and 6 are one process's two schedulers (one host), each trying once.
  w.send({"SET", "rq:scheduler-lock:orders", "4101", "NX", "EX", "61"}, "+OK\r\n", 0, 1);
  w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "$-1\r\n", 10, 2);
  SECTION("RQ's rounds: each try given up at its refusal; the lock free with no one waiting") {
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "$-1\r\n", 400, 6);
    w.send({"DEL", "rq:scheduler-lock:orders"}, ":1\r\n", 600, 1);
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "+OK\r\n", 900, 10);
    timeline.finish(t0 + 5'000 * ms);
    const auto gave_up = all(events, "gave_up");
    REQUIRE(gave_up.size() == 2);
    for (const recorded_event* e : gave_up) {
      CHECK(e->owner == "4202");
      CHECK(e->wait_us <= 1 * ms);  // dated at its one refusal
    }
    const auto acquired = all(events, "acquired");
    REQUIRE(acquired.size() == 2);
    CHECK(acquired[1]->wait_us <= 0);  // its first attempt of a new round
    for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:idle_with_waiters");
  }
  SECTION("a poller over the same connection waits on") {
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "$-1\r\n", 400, 2);
    w.send({"DEL", "rq:scheduler-lock:orders"}, ":1\r\n", 600, 1);
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "+OK\r\n", 790, 2);
    timeline.finish(t0 + 5'000 * ms);
    check_one_wait(events, 779 * ms);
  }
  SECTION("a pooled client's next poll over another connection within a spinner's pause waits on") {
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "$-1\r\n", 110, 6);
    w.send({"DEL", "rq:scheduler-lock:orders"}, ":1\r\n", 150, 1);
    w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "+OK\r\n", 210, 2);
    timeline.finish(t0 + 5'000 * ms);
    CHECK(all(events, "gave_up").empty());
  }
}

// RQ's worker (one queue): one `SET NX` of its cleaning lock each time it starts, then its
// round's work over the same connection (a job, the registries, its death: 19-229
// commands in the recording), then the next worker's try.
void worker_round(wire& w, double at_ms, std::uint64_t connection, int other_commands) {
  w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "$-1\r\n", at_ms, connection);
  for (int i = 0; i < other_commands; ++i) {
    w.send({"HSET", "rq:worker:1", "last_heartbeat", "now"}, ":0\r\n", at_ms + 1 + 0.1 * i, connection);
  }
}

TEST_CASE_METHOD(to_timeline, "single tries: a connection that did its client's other work before trying again had given up",
                 "[timeline][single_try]") {
  w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "+OK\r\n", 0, 1);
  SECTION("a worker's round (RQ: 19 commands or more) or a job put back (node-resque: 8) between two tries") {
    const int between = GENERATE(19, 60, 8);
    INFO(between << " commands between two tries");
    for (const double at_ms : {100.0, 500.0, 900.0, 1300.0}) worker_round(w, at_ms, 2, between);
    timeline.finish(t0 + 5'000 * ms);
    const auto gave_up = all(events, "gave_up");
    REQUIRE(gave_up.size() >= 3);
    for (const recorded_event* e : gave_up) {
      INFO(e->ts_us - t0);
      CHECK(e->wait_us <= 1 * ms);  // dated at its one refusal, not joined with the next round's
    }
    for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:idle_with_waiters");
  }
  SECTION("a poller whose pooled connection carries another thread's few commands waits on") {
    worker_round(w, 100, 2, 6);  // a heartbeat's (the recordings' pollers: up to 6)
    worker_round(w, 500, 2, 6);
    worker_round(w, 900, 2, 6);
    w.send({"DEL", "rq:clean_registries:orders"}, ":1\r\n", 1000, 1);
    w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "+OK\r\n", 1300, 2);
    timeline.finish(t0 + 5'000 * ms);
    check_one_wait(events, 1190 * ms);
  }
}

TEST_CASE_METHOD(to_timeline, "unchecked EXPIRE: from another client host it renews nothing of the holder's", "[timeline][plain_expire]") {
  w.send({"SET", "rq:scheduler-lock:orders", "4101", "NX", "EX", "61"}, "+OK\r\n", 0, 1);
  // A scheduler on another host whose own lock another's DEL removed re-expires the key.
  w.send({"EXPIRE", "rq:scheduler-lock:orders", "61"}, ":1\r\n", 300, 2);
  w.send({"EXPIRE", "rq:scheduler-lock:orders", "61"}, ":1\r\n", 400, 1);  // the holder's own heartbeat
  timeline.finish(t0 + 5'000 * ms);
  const auto renewed = all(events, "renewed");
  REQUIRE(renewed.size() == 1);
  CHECK(renewed[0]->ts_us == t0 + 400 * ms + 100);
  CHECK(renewed[0]->owner == "4101");
}

namespace {

using lockscope::test_texts::tooz_create_group;
using lockscope::test_texts::tooz_delete_group;

std::string bulk_reply(std::string_view s) { return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n"; }

}  // namespace

TEST_CASE("set scripts: a script on a hash and a set, its text seen, runs in the shadow to its end and is no lock",
          "[recognizer][effect][sets]") {
  op_recorder log;
  wire w(log);
  for (const std::string* text : {&tooz_create_group, &tooz_delete_group}) {
    const std::string sha = lock::sha1_hex(*text);
    // redis-py's Script: EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA again; then the other processes'.
    w.send({"EVALSHA", sha, "2", "_tooz_group:workers", "_tooz_groups", "workers"},
           "-NOSCRIPT No matching script. Please use EVAL.\r\n", 0, 1);
    w.send({"SCRIPT", "LOAD", *text}, bulk_reply(sha), 1, 1);
    w.send({"EVALSHA", sha, "2", "_tooz_group:workers", "_tooz_groups", "workers"}, ":1\r\n", 2, 1);
    w.send({"EVALSHA", sha, "2", "_tooz_group:workers", "_tooz_groups", "workers"}, text == &tooz_create_group ? ":0\r\n" : ":-1\r\n",
           3, 2);
  }
  for (const auto& op : log.ops) {
    INFO(static_cast<int>(op.kind) << " " << op.lock << " " << op.owner);
    CHECK(op.outcome == op_outcome::error);  // only the NOSCRIPT replies, which did nothing
  }
}

// A value every process sends (RQ's cleaning lock: `SET rq:clean_registries:<queue> 1 NX
// EX 899`, taken by the first worker and tried once by every worker after, the holder's
// own included): no owner's identity. The truth is the sequence written: which
// connection (host) holds, and that each later try is one `SET NX`, refused, never retried.
namespace {

void try_queues(wire& w, double at_ms, std::uint64_t connection, std::string_view reply = "$-1\r\n") {
  w.send({"SET", "clean:orders", "1", "NX", "EX", "899"}, reply, at_ms, connection);
  w.send({"SET", "clean:stock", "1", "NX", "EX", "899"}, reply, at_ms + 0.2, connection);
}

}  // namespace

TEST_CASE("shared values: once another connection sent the holder's value, the holder's own refused try is a refusal",
          "[recognizer][shared_value]") {
  op_recorder log;
  wire w(log);
  try_queues(w, 0, 1, "+OK\r\n");  // host .11 takes both
  // Host .12 tries orders only: the value is seen shared there, not yet on stock.
  w.send({"SET", "clean:orders", "1", "NX", "EX", "899"}, "$-1\r\n", 100, 2);
  try_queues(w, 400, 1);  // the holder's next worker tries both over its own connection
  REQUIRE(log.ops.size() == 5);
  CHECK(log.ops[2].outcome == op_outcome::contended);
  for (std::size_t i : {3, 4}) {
    INFO(log.ops[i].lock);
    // Not the holder's retry of an acquire it has (node-redlock on a server it holds):
    // its value is shared, on stock too (shared on one of the server's keys).
    CHECK(log.ops[i].outcome == op_outcome::contended);
  }
}

TEST_CASE("shared values: a holder retrying its own value, never sent over another connection, changes nothing",
          "[recognizer][shared_value]") {
  op_recorder log;
  wire w(log);
  w.send({"SET", "lock:a", "v-4101", "NX", "PX", "5000"}, "+OK\r\n", 0, 1);
  w.send({"SET", "lock:a", "v-4101", "NX", "PX", "5000"}, "$-1\r\n", 200, 1);
  REQUIRE(log.ops.size() == 2);
  CHECK(log.ops[1].outcome == op_outcome::none);
}

TEST_CASE_METHOD(to_timeline, "shared values: a single try whose connection was then refused another lock had given up at its refusal",
          "[timeline][shared_value]") {
  try_queues(w, 0, 1, "+OK\r\n");
  // Host .12's worker starts three times, each trying both queues once.
  try_queues(w, 100, 2);
  try_queues(w, 500, 2);
  try_queues(w, 900, 2);
  timeline.finish(t0 + 5'000 * ms);
  std::size_t dated = 0;
  for (const recorded_event* e : all(events, "gave_up")) {
    INFO(e->lock << " " << e->ts_us - t0);
    CHECK(e->wait_us <= 1 * ms);  // each dated at its one refusal, not joined with the next round's
    ++dated;
  }
  CHECK(dated >= 4);  // the first two rounds, both queues
  for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:idle_with_waiters");
}

TEST_CASE("clock values: seconds, milliseconds and microseconds near the time sent, a deadline included", "[clock_value]") {
  const std::int64_t now_us = 1'796'021'532'556'186;
  CHECK(locks::is_clock_reading("1796021539", now_us));           // node-resque: now + 5 s
  CHECK(locks::is_clock_reading("1796021532556", now_us));        // Date.now()
  CHECK(locks::is_clock_reading("1796025132557", now_us));        // Date.now() + an hour
  CHECK(locks::is_clock_reading("1796021532556186", now_us));     // microseconds
  CHECK_FALSE(locks::is_clock_reading("1796321532", now_us));     // 3.5 days ahead
  CHECK_FALSE(locks::is_clock_reading("1", now_us));
  CHECK_FALSE(locks::is_clock_reading("1796021539.5", now_us));
  CHECK_FALSE(locks::is_clock_reading("4202", now_us));
  CHECK_FALSE(locks::is_clock_reading("17960215391796021539", now_us));  // too long for a clock
  CHECK_FALSE(locks::is_clock_reading("", now_us));
}

// Redis's own SETNX pattern, and clients that took it up (node-resque's JobLock): the value
// is `<unix time + timeout>`, the same for every process trying within that second. Three
// connections from one host (1, 5 and 9: separate processes on it).
TEST_CASE_METHOD(to_timeline, "clock values: a value that reads as the time sent is no client's: each connection's tries are its own",
                 "[timeline][shared_value][clock_value]") {
  // The holder took it a second before, with another value: none is refused while it holds.
  const auto tries = [&](const std::string& held, const std::string& value) {
    w.send({"SET", "job:alpha", held, "NX", "EX", "5"}, "+OK\r\n", 0, 1);
    w.send({"SET", "job:alpha", value, "NX", "EX", "5"}, "$-1\r\n", 10, 5);  // a single try, given up
    w.send({"SET", "job:gamma", value, "NX", "EX", "5"}, "+OK\r\n", 12, 5);  // its next job
    w.send({"SET", "job:alpha", value, "NX", "EX", "5"}, "$-1\r\n", 20, 9);
    w.send({"DEL", "job:gamma"}, ":1\r\n", 100, 5);
    w.send({"SET", "job:alpha", value, "NX", "EX", "5"}, "$-1\r\n", 110, 5);  // another job's single try
    w.send({"DEL", "job:alpha"}, ":1\r\n", 200, 1);
    w.send({"SET", "job:alpha", value, "NX", "EX", "5"}, "+OK\r\n", 300, 9);
    timeline.finish(t0 + 60'000 * ms);
  };
  SECTION("a timestamp in seconds") {
    tries(std::to_string(t0 / 1'000'000 + 4), std::to_string(t0 / 1'000'000 + 5));
    const auto acquired = all(events, "acquired");
    REQUIRE(acquired.size() == 3);
    CHECK(acquired[2]->client == "10.0.0.11:50001");
    CHECK(acquired[2]->wait_us >= 279 * ms);  // connection 9's own wait, from its try at 20 ms
    CHECK(acquired[2]->wait_us < 281 * ms);
    const recorded_event* first = nullptr;
    for (const recorded_event* e : all(events, "gave_up")) {
      if (first == nullptr || e->ts_us < first->ts_us) first = e;
    }
    REQUIRE(first != nullptr);
    CHECK(first->wait_us <= 1 * ms);  // connection 5's first try, dated at its refusal
  }
  SECTION("not a clock: one client's value, retried over its pool, is one wait") {
    tries("worker-1", "worker-7");
    const auto acquired = all(events, "acquired");
    REQUIRE(acquired.size() == 3);
    CHECK(acquired[2]->wait_us >= 289 * ms);  // from the first try at 10 ms
  }
}

TEST_CASE_METHOD(to_timeline, "clock values: a single try, a job put back, then the next second's value: a give-up, no free stretch",
                 "[timeline][single_try][clock_value]") {
  const std::int64_t s = t0 / 1'000'000;
  w.send({"SET", "job:alpha", std::to_string(s + 4), "NX", "EX", "5"}, "+OK\r\n", 0, 1);
  w.send({"SET", "job:alpha", std::to_string(s + 5), "NX", "EX", "5"}, "$-1\r\n", 10, 2);
  for (int i = 0; i < 8; ++i) w.send({"RPUSH", "resque:delayed", "job"}, ":1\r\n", 11 + 0.1 * i, 2);  // put back
  w.send({"DEL", "job:alpha"}, ":1\r\n", 200, 1);
  // A second later another job of the resource, with that second's value, while it is held again.
  w.send({"SET", "job:alpha", std::to_string(s + 6), "NX", "EX", "5"}, "+OK\r\n", 900, 1);
  w.send({"SET", "job:alpha", std::to_string(s + 6), "NX", "EX", "5"}, "$-1\r\n", 1010, 2);
  timeline.finish(t0 + 60'000 * ms);
  const auto gave_up = all(events, "gave_up");
  REQUIRE(!gave_up.empty());
  CHECK(gave_up[0]->wait_us <= 1 * ms);  // the first try, dated at its refusal
  for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:idle_with_waiters");  // nobody waited while it was free
}

TEST_CASE_METHOD(to_timeline, "shared values: the holder's own tries of a lock it holds, under a value seen shared, are single tries",
                 "[timeline][shared_value]") {
  // RQ's worker (a second recording, not used for the rules before): the connection that
  // holds one queue's cleaning lock tries both queues' each time it starts, value `1`,
  // shared (seen on the other queue's lock); its own tries were one wait of 9 s.
  w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "+OK\r\n", 0, 2);
  w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "$-1\r\n", 5, 1);  // shared from here
  w.send({"SET", "rq:clean_registries:stock", "1", "NX", "EX", "899"}, "+OK\r\n", 6, 1);
  for (const double at_ms : {100.0, 500.0, 900.0}) {
    w.send({"SET", "rq:clean_registries:orders", "1", "NX", "EX", "899"}, "$-1\r\n", at_ms, 1);
    w.send({"SET", "rq:clean_registries:stock", "1", "NX", "EX", "899"}, "$-1\r\n", at_ms + 0.1, 1);
    for (int i = 0; i < 3; ++i) w.send({"HSET", "rq:worker:3", "state", "idle"}, ":0\r\n", at_ms + 1 + 0.1 * i, 1);
  }
  timeline.finish(t0 + 5'000 * ms);
  std::size_t on_stock = 0;
  for (const recorded_event* e : all(events, "gave_up")) {
    if (e->lock != "rq:clean_registries:stock") continue;
    INFO(e->ts_us - t0);
    CHECK(e->wait_us <= 1 * ms);  // each dated at its one refusal
    ++on_stock;
  }
  CHECK(on_stock >= 2);
}

TEST_CASE_METHOD(to_timeline, "shared values: a poller over its own connection under a shared value waits on",
          "[timeline][shared_value]") {
  w.send({"SET", "lock:a", "mutex", "NX", "PX", "5000"}, "+OK\r\n", 0, 1);
  w.send({"SET", "lock:a", "mutex", "NX", "PX", "5000"}, "$-1\r\n", 100, 2);
  w.send({"SET", "lock:a", "mutex", "NX", "PX", "5000"}, "$-1\r\n", 400, 2);
  w.send({"SET", "lock:a", "mutex", "NX", "PX", "5000"}, "$-1\r\n", 700, 2);
  w.send({"DEL", "lock:a"}, ":1\r\n", 800, 1);
  w.send({"SET", "lock:a", "mutex", "NX", "PX", "5000"}, "+OK\r\n", 1000, 2);
  timeline.finish(t0 + 5'000 * ms);
  check_one_wait(events, 900 * ms);
}

TEST_CASE_METHOD(to_timeline, "shared values: joined after the holder took it, tries from two hosts are two waits",
          "[timeline][shared_value]") {
  // No holder seen: only the hosts tell the value is no one client's.
  w.send({"SET", "lock:a", "1", "NX", "EX", "899"}, "$-1\r\n", 0, 1);  // host .11
  SECTION("another host's acquisition waited from its own first try") {
    w.send({"SET", "lock:a", "1", "NX", "EX", "899"}, "$-1\r\n", 50, 2);  // host .12
    w.send({"SET", "lock:a", "1", "NX", "EX", "899"}, "+OK\r\n", 600, 2);
    timeline.finish(t0 + 5'000 * ms);
    const auto acquired = all(events, "acquired");
    REQUIRE(acquired.size() == 1);
    // Its own wait, from its try at 50 ms: not host .11's, begun at 0, nor one ended there.
    CHECK(acquired[0]->wait_us >= 540 * ms);
    CHECK(acquired[0]->wait_us < 560 * ms);
    for (const recorded_event* e : all(events, "gave_up")) CHECK(e->client != "10.0.0.12:50002");
  }
  SECTION("a pooled client's retry over another connection of its own host is the same wait") {
    w.send({"SET", "lock:a", "1", "NX", "EX", "899"}, "$-1\r\n", 100, 5);  // host .11 again
    w.send({"SET", "lock:a", "1", "NX", "EX", "899"}, "+OK\r\n", 200, 1);
    timeline.finish(t0 + 5'000 * ms);
    const auto acquired = all(events, "acquired");
    REQUIRE(acquired.size() == 1);
    CHECK(acquired[0]->wait_us >= 200 * ms);
  }
}

TEST_CASE_METHOD(to_groups, "multi-key DEL: a DEL of more keys than a refused set took is no MultiLock giving back",
                 "[groups][multi_del]") {
  // Host .10's scheduler holds stock; host .11's takes orders, is refused stock.
  w.send({"SET", "rq:scheduler-lock:stock", "4101", "NX", "EX", "61"}, "+OK\r\n", 0, 1);
  w.send({"SET", "rq:scheduler-lock:orders", "4202", "NX", "EX", "61"}, "+OK\r\n", 100, 2);
  w.send({"SET", "rq:scheduler-lock:stock", "4202", "NX", "EX", "61"}, "$-1\r\n", 100.3, 2);
  SECTION("RQ's release of every queue's lock, held or not: no group") {
    w.send({"DEL", "rq:scheduler-lock:orders", "rq:scheduler-lock:stock"}, ":2\r\n", 102, 2);
    finish(5'000);
    CHECK(all(events, "multilock").empty());
  }
  SECTION("joined after the other took stock (its hold unseen): no group either") {
    w.send({"DEL", "rq:scheduler-lock:orders", "rq:scheduler-lock:stock"}, ":1\r\n", 102, 2);
    finish(5'000);
    CHECK(all(events, "multilock").empty());
  }
  SECTION("a give-back of what it took, by a plain DEL, is a MultiLock that failed and gave back") {
    w.send({"DEL", "rq:scheduler-lock:orders"}, ":1\r\n", 102, 2);
    finish(5'000);
    const auto found = all(events, "multilock");
    REQUIRE(found.size() == 1);
    CHECK_FALSE(found[0]->succeeded);
    CHECK(found[0]->released);
  }
}
