// A plain DEL or EXPIRE that its client checked with a GET just before (`GET key`, compared
// with its own value, then `DEL key` or `EXPIRE key s`: redlock-node's unlock and extend,
// a script's `GET == value then DEL` done by the client). The GET names the value the
// command acts for; joined mid-run, on a lock held since before the capture (refused to
// others while no holder was known), that is the release, or the renewal, of that value's
// hold. The truth is the sequence each test writes: which value the key held, and what
// the server answered.
#include <string>
#include <tuple>
#include <vector>

#include "helpers.hpp"

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

using lockscope::timeline_test::resp_bulk;

using tee = lockscope::timeline_test::op_tee;

// Exchanges joined mid-stream (no SYN seen), each answered 100 µs after it was sent.
class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, std::string_view reply, double at_ms, std::uint64_t connection) {
    static const std::string clients[] = {"10.0.0.1:50000", "10.0.0.1:50001", "10.0.0.1:50002", "10.0.0.1:50003"};
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, clients[connection % 4],
         "10.0.0.2:6379");
  }
  locks::lock_recognizer recognizer;
};

// The recognizer feeding the timeline, its events recorded.
struct analyzed {
  tee sink;
  event_recorder events;
  locks::lock_timeline timeline{{}, events};
  wire w{sink};
  analyzed() { sink.next = &timeline; }
  auto parts() { return std::tie(w, events, timeline); }
};

const std::string held = "1795977975001jelbkekigdaki";  // the holder's value, taken before the capture

// The other processes poll `SET lock:stock value EX 1 NX`, refused while the key is held.
void refused(wire& w, double at_ms, std::uint64_t connection, int n) {
  w.send({"SET", "lock:stock", "1795977976" + std::to_string(100 + n) + "bbdejcekdddbh", "EX", "1", "NX"}, "$-1\r\n",
         at_ms, connection);
}

const recorded_event* only(const event_recorder& events, std::string_view name) {
  const recorded_event* found = nullptr;
  std::size_t n = 0;
  for (const recorded_event& e : events.events) {
    if (e.event == name) {
      found = &e;
      ++n;
    }
  }
  return n == 1 ? found : nullptr;
}

}  // namespace

TEST_CASE("checked plain commands: joined mid-run, a GET-checked EXPIRE and DEL renew and release the unseen hold",
          "[recognizer][timeline][checked_read]") {
  analyzed a;
  auto [w, events, timeline] = a.parts();
  refused(w, 0, 2, 1);
  refused(w, 9, 3, 2);
  w.send({"GET", "lock:stock"}, resp_bulk(held), 63, 1);
  w.send({"expire", "lock:stock", "1"}, ":1\r\n", 64, 1);  // the client's extend: EXPIRE in seconds
  refused(w, 160, 2, 3);
  refused(w, 170, 3, 4);
  w.send({"GET", "lock:stock"}, resp_bulk(held), 340, 1);
  w.send({"DEL", "lock:stock"}, ":1\r\n", 341, 1);  // its unlock
  w.send({"SET", "lock:stock", "1795977976621iehaklafgfgcc", "EX", "1", "NX"}, "+OK\r\n", 472, 2);
  timeline.finish(t0 + 5'000 * ms);

  const recorded_event* renewed = only(events, "renewed");
  REQUIRE(renewed != nullptr);
  CHECK(renewed->owner == held);
  CHECK(renewed->lease_ms == 1000);
  const recorded_event* released = only(events, "released");
  REQUIRE(released != nullptr);
  CHECK(released->owner == held);
  CHECK(released->ts_us == t0 + 341 * ms + 100);
  // Free from the DEL to the next acquisition (131 ms) while two processes polled.
  const recorded_event* idle = nullptr;
  for (const recorded_event& e : events.events) {
    if (e.event == "anomaly:idle_with_waiters" && idle == nullptr) idle = &e;
  }
  REQUIRE(idle != nullptr);
  CHECK(idle->interval_start_us == t0 + 341 * ms + 100);
  for (const recorded_event& e : events.events) {
    INFO(e.event << " " << e.owner);
    if (e.owner == held) CHECK(e.event != "expired");  // renewed at 64 ms, released at 341: never ran out
    CHECK(e.event != "anomaly:overlapping_holders");
  }
}

TEST_CASE("checked plain commands: only the GET just before, of that key, answered before the command was sent",
          "[recognizer][checked_read]") {
  op_recorder log;
  wire w(log);
  SECTION("the connection's next command: the DEL carries the value read") {
    w.send({"GET", "lock:a"}, resp_bulk(held), 0, 1);
    w.send({"DEL", "lock:a"}, ":1\r\n", 1, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::del);
    CHECK(log.ops[0].owner == held);
  }
  SECTION("another command between: no value") {
    w.send({"GET", "lock:a"}, resp_bulk(held), 0, 1);
    w.send({"PING"}, "+PONG\r\n", 1, 1);
    w.send({"DEL", "lock:a"}, ":1\r\n", 2, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].owner.empty());
  }
  SECTION("another connection's commands between do not matter") {
    w.send({"GET", "lock:a"}, resp_bulk(held), 0, 1);
    w.send({"PING"}, "+PONG\r\n", 0.5, 2);
    w.send({"PEXPIRE", "lock:a", "1000"}, ":1\r\n", 1, 1);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::expire);
    CHECK(log.ops[0].owner == held);
  }
  SECTION("another key, a nil answer, or a DEL sent before the GET's answer came: no value") {
    w.send({"GET", "lock:b"}, resp_bulk(held), 0, 1);
    w.send({"DEL", "lock:a"}, ":1\r\n", 1, 1);
    w.send({"GET", "lock:a"}, "$-1\r\n", 2, 1);
    w.send({"DEL", "lock:a"}, ":0\r\n", 3, 1);
    w.send({"GET", "lock:a"}, resp_bulk(held), 4, 1);
    w.send({"DEL", "lock:a"}, ":1\r\n", 4.05, 1);  // pipelined: the answer (at +100 µs) came after
    REQUIRE(log.ops.size() == 3);
    for (const auto& op : log.ops) CHECK(op.owner.empty());
  }
  SECTION("used once") {
    w.send({"GET", "lock:a"}, resp_bulk(held), 0, 1);
    w.send({"EXPIRE", "lock:a", "1"}, ":1\r\n", 1, 1);
    w.send({"DEL", "lock:a"}, ":1\r\n", 2, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[0].owner == held);
    CHECK(log.ops[1].owner.empty());
  }
}

TEST_CASE("checked plain commands: without a refusal showing an unseen holder, a checked DEL makes no release",
          "[recognizer][timeline][checked_read]") {
  analyzed a;
  auto [w, events, timeline] = a.parts();
  // The key is known as a lock (an acquisition seen, then its lease ran out), but nothing
  // showed anyone holding it since: a cache-like GET and DEL are not a hold's end.
  w.send({"SET", "lock:stock", "1795977976621iehaklafgfgcc", "PX", "100", "NX"}, "+OK\r\n", 0, 2);
  w.send({"GET", "lock:stock"}, resp_bulk(held), 500, 1);
  w.send({"DEL", "lock:stock"}, ":1\r\n", 501, 1);
  timeline.finish(t0 + 5'000 * ms);
  std::size_t released = 0;
  for (const recorded_event& e : events.events) released += e.event == "released" ? 1 : 0;
  CHECK(released == 0);
}

namespace {

// A leader election whose leader keeps its lock by trying to take it again each poll:
// `SET leader name EX 1 NX` (refused: it holds it), `GET leader` (its own name), `EXPIRE
// leader 1` (node-resque's scheduler). The follower polls the same SET every 150 ms.
const std::string leader_name = "host-a:4021", follower_name = "host-b:4388";

void keep(wire& w, double at_ms) {
  w.send({"SET", "leader", leader_name, "EX", "1", "NX"}, "$-1\r\n", at_ms, 1);
  w.send({"GET", "leader"}, resp_bulk(leader_name), at_ms + 0.5, 1);
  w.send({"EXPIRE", "leader", "1"}, ":1\r\n", at_ms + 1, 1);
}

std::size_t count(const event_recorder& events, std::string_view name, std::string_view owner) {
  std::size_t n = 0;
  for (const recorded_event& e : events.events) n += e.event == name && e.owner == owner ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("checked plain commands: a holder's own refused SET NX before each GET-checked EXPIRE is no contention",
          "[recognizer][timeline][checked_read]") {
  analyzed a;
  auto [w, events, timeline] = a.parts();
  const bool mid_run = GENERATE(false, true);
  INFO((mid_run ? "joined mid-run" : "whole"));
  if (!mid_run) w.send({"SET", "leader", leader_name, "EX", "1", "NX"}, "+OK\r\n", 0, 1);
  // Three seconds of polls, past the first lease (1 s) thrice.
  int follower_tries = 0;
  for (double at = 150; at < 3000; at += 150) {
    keep(w, at);
    w.send({"SET", "leader", follower_name, "EX", "1", "NX"}, "$-1\r\n", at + 40, 2);
    ++follower_tries;
  }
  keep(w, 3000);  // its end(): the same, then DEL
  w.send({"DEL", "leader"}, ":1\r\n", 3002, 1);
  w.send({"SET", "leader", follower_name, "EX", "1", "NX"}, "+OK\r\n", 3040, 2);
  timeline.finish(t0 + 3'500 * ms);

  // Joined mid-run, its first try is read before any GET showed it holding: refused.
  CHECK(count(events, "contended", leader_name) == (mid_run ? 1u : 0u));
  CHECK(count(events, "gave_up", leader_name) == 0);
  CHECK(count(events, "expired", leader_name) == 0);
  CHECK(count(events, "renewed", leader_name) == 20);
  CHECK(count(events, "contended", follower_name) == static_cast<std::size_t>(follower_tries));
  CHECK(count(events, "acquired", follower_name) == 1);
  for (const recorded_event& e : events.events) CHECK(e.event != "anomaly:overlapping_holders");
}

namespace {

// A process that sends one value for all its attempts (an owner id per process) and
// releases by an optimistic transaction: `WATCH`, `GET` (its own value), `DEL`, then an
// empty `MULTI`/`EXEC` that the DEL aborts, run again (`WATCH`, `GET` nil, `MULTI`, `EXEC`).
const std::string process_a = "686c82-5124-140080881672896", process_b = "686c82-5143-140378694685376";

void release_watched(wire& w, std::string_view value, double at_ms, std::uint64_t connection) {
  w.send({"WATCH", "beaker_lock:orders"}, "+OK\r\n", at_ms, connection);
  w.send({"GET", "beaker_lock:orders"}, resp_bulk(value), at_ms + 0.2, connection);
  w.send({"DEL", "beaker_lock:orders"}, ":1\r\n", at_ms + 0.4, connection);
  w.send({"MULTI"}, "+OK\r\n", at_ms + 0.6, connection);
  w.send({"EXEC"}, "*-1\r\n", at_ms + 0.7, connection);
  w.send({"WATCH", "beaker_lock:orders"}, "+OK\r\n", at_ms + 0.9, connection);
  w.send({"GET", "beaker_lock:orders"}, "$-1\r\n", at_ms + 1.0, connection);
  w.send({"MULTI"}, "+OK\r\n", at_ms + 1.1, connection);
  w.send({"EXEC"}, "*0\r\n", at_ms + 1.2, connection);
}

void try_set(wire& w, std::string_view value, bool taken, double at_ms, std::uint64_t connection) {
  w.send({"SET", "beaker_lock:orders", std::string(value), "EX", "1", "NX"}, taken ? "+OK\r\n" : "$-1\r\n", at_ms,
         connection);
}

}  // namespace

TEST_CASE("checked plain commands: a GET-checked DEL ends its value's hold, so the value's next tries are refusals",
          "[recognizer][timeline][checked_read]") {
  analyzed a;
  auto [w, events, timeline] = a.parts();
  try_set(w, process_a, true, 0, 1);
  release_watched(w, process_a, 90, 1);
  try_set(w, process_b, true, 110, 2);
  // Within the lease (1 s) of its own first hold, process A polls every 200 ms.
  try_set(w, process_a, false, 160, 1);
  try_set(w, process_a, false, 360, 1);
  try_set(w, process_a, false, 560, 1);
  release_watched(w, process_b, 600, 2);
  try_set(w, process_a, true, 760, 1);
  release_watched(w, process_a, 900, 1);
  timeline.finish(t0 + 3'000 * ms);

  CHECK(count(events, "acquired", process_a) == 2);
  CHECK(count(events, "released", process_a) == 2);
  CHECK(count(events, "contended", process_a) == 3);
  const recorded_event* waited = nullptr;
  for (const recorded_event& e : events.events) {
    if (e.event == "acquired" && e.owner == process_a && e.wait_us >= 0) waited = &e;
  }
  REQUIRE(waited != nullptr);
  CHECK(waited->ts_us == t0 + 760 * ms + 100);
  CHECK(waited->wait_us == 600 * ms + 100);  // from its first refused try (sent at 160 ms) to the answer at 760.1
  // Free from B's DEL (600.4 ms) until A's try at 760 ms, while A waited.
  std::size_t idle = 0;
  for (const recorded_event& e : events.events) idle += e.event == "anomaly:idle_with_waiters" ? 1 : 0;
  CHECK(idle == 1);
  for (const recorded_event& e : events.events) {
    INFO(e.event << " " << e.owner);
    CHECK(e.event != "anomaly:overlapping_holders");
    CHECK(e.event != "expired");
  }
}
