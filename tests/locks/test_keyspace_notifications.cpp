// Waiters woken by Redis keyspace notifications instead of a channel their lock client
// publishes to: SUBSCRIBE `__keyspace@<db>__:<key>` (the payload the event),
// `__keyevent@<db>__:del` / `:expired` (the payload the key), or a PSUBSCRIBE pattern
// (`pmessage`), in RESP2 arrays and RESP3 pushes. The truth is Redis's documentation of
// the notifications (redis.io /docs/latest/develop/use/keyspace-notifications: which
// channel a DEL or an expiry publishes on, with which payload) and the sequences written
// here; tests/locks/effect_clients/keyspace_worker.py records real ones.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope;
using lockscope::timeline_test::event_recorder;
using lockscope::timeline_test::feed;
using lockscope::timeline_test::make_message;
using lockscope::timeline_test::op_recorder;
using lockscope::timeline_test::recorded_event;
using lockscope::timeline_test::recorded_op;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;

using lockscope::timeline_test::resp_bulk;

// A pub/sub frame: `*` (RESP2) or `>` (RESP3), its kind, then its strings; `count` ends a
// (un)subscribe confirmation.
std::string frame(char type, std::string_view kind, std::vector<std::string> parts, int count = -1) {
  std::string out = type + std::to_string(1 + parts.size() + (count >= 0 ? 1 : 0)) + "\r\n" + resp_bulk(kind);
  for (const auto& p : parts) out += resp_bulk(p);
  if (count >= 0) out += ":" + std::to_string(count) + "\r\n";
  return out;
}

using tee = lockscope::timeline_test::op_tee;

// Process A (10.0.0.1) and B (10.0.0.2): connection 1 A's commands, 2 B's, 3 B's
// subscriber, 4 A's subscriber.
class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, const std::string& reply, double at_ms, std::uint64_t connection,
            bool from_start = true) {
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, client(connection),
         "10.0.0.9:6379", from_start);
  }
  void push(const std::string& bytes, double at_ms, std::uint64_t connection) {
    ingest::message m = make_message(bytes);
    ingest::exchange e;
    e.kind = ingest::exchange_kind::push;
    e.connection = connection;
    e.client_text = client(connection);
    e.server_text = "10.0.0.9:6379";
    e.client = lockscope::test::interned_endpoint(e.client_text);
    e.server = lockscope::test::interned_endpoint(e.server_text);
    e.request_us = t0 + static_cast<std::int64_t>(at_ms * ms);
    e.client_from_start = true;
    e.reply = &m;
    recognizer.on_exchange(e);
  }
  std::string_view client(std::uint64_t connection) {
    texts.push_back(std::string(connection == 1 || connection == 4 ? "10.0.0.1:" : "10.0.0.2:") +
                    std::to_string(40000 + connection));
    return texts.back();
  }
  locks::lock_recognizer recognizer;
  std::deque<std::string> texts;
};

std::vector<recorded_op> of_kind(const op_recorder& r, lock_op_kind kind) {
  std::vector<recorded_op> out;
  for (const recorded_op& op : r.ops) {
    if (op.kind == kind) out.push_back(op);
  }
  return out;
}

const std::string release_script = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

// A holds `lock:a` (db 0); B is refused, and waits for the key's release on its subscriber
// (`subscribe_by`: its SUBSCRIBE command, nothing for a subscription made before the
// capture); A releases it, the server notifies (`notify`), B retries and takes it.
template <class Subscribe, class Notify>
void one_wait(wire& w, Subscribe subscribe_by, Notify notify) {
  w.send({"SET", "lock:a", "va", "NX", "PX", "30000"}, "+OK\r\n", 0, 1);
  w.send({"SET", "lock:a", "vb", "NX", "PX", "30000"}, "$-1\r\n", 10, 2);
  subscribe_by(w, 11);
  w.send({"SET", "lock:a", "vb", "NX", "PX", "30000"}, "$-1\r\n", 12, 2);
  w.send({"EVAL", release_script, "1", "lock:a", "va"}, ":1\r\n", 300, 1);
  notify(w, 300.2);
  w.send({"SET", "lock:a", "vb", "NX", "PX", "30000"}, "+OK\r\n", 301, 2);
}

struct timeline_run {
  tee sink;
  event_recorder events;
  locks::lock_timeline timeline{{}, events};
  timeline_run() { sink.next = &timeline; }
  const recorded_event* first(std::string_view name, std::string_view owner) const {
    for (const recorded_event& e : events.events) {
      if (e.event == name && e.owner == owner && e.lock == "lock:a") return &e;
    }
    return nullptr;
  }
  std::size_t count(std::string_view name) const {
    return static_cast<std::size_t>(std::count_if(events.events.begin(), events.events.end(),
                                                  [&](const recorded_event& e) { return e.event == name; }));
  }
};

}  // namespace

TEST_CASE("keyspace notifications: a key's channel is its lock's subscription, a `del` or `expired` on it the "
          "wake-up, a `set` or `expire` none",
          "[recognizer][keyspace]") {
  for (const char type : {'*', '>'}) {
    CAPTURE(type);
    op_recorder rec;
    wire w(rec);
    const std::string ch = "__keyspace@3__:lock:a";
    w.send({"SELECT", "1"}, "+OK\r\n", 0, 3);  // the subscriber's database is not the key's
    w.send({"SUBSCRIBE", ch}, frame('*', "subscribe", {ch}, 1), 1, 3);
    w.push(frame(type, "message", {ch, "set"}), 2, 3);
    w.push(frame(type, "message", {ch, "expire"}), 2.1, 3);
    w.push(frame(type, "message", {ch, "del"}), 5, 3);
    w.push(frame(type, "message", {ch, "expired"}), 9, 3);
    w.send({"UNSUBSCRIBE", ch}, frame('*', "unsubscribe", {ch}, 0), 10, 3);
    REQUIRE(rec.ops.size() == 4);
    CHECK(rec.ops[0].kind == lock_op_kind::subscribe);
    CHECK(rec.ops[1].kind == lock_op_kind::message);
    CHECK(rec.ops[2].kind == lock_op_kind::message);
    CHECK(rec.ops[3].kind == lock_op_kind::unsubscribe);
    CHECK(rec.ops[3].sub_count == 0);
    for (const recorded_op& op : rec.ops) {
      CHECK(op.lock == "lock:a");
      CHECK(op.db == 3);
      CHECK(op.channel == ch);
    }
  }
}

TEST_CASE("keyspace notifications: an event channel's payload names the key, leaving the channel leaves each key it "
          "delivered, and patterns and duplicate deliveries",
          "[recognizer][keyspace]") {
  op_recorder rec;
  wire w(rec);
  const std::string del = "__keyevent@0__:del", expired = "__keyevent@0__:expired";
  w.send({"SUBSCRIBE", del, expired}, frame('*', "subscribe", {del}, 1), 1, 3);
  w.push(frame('*', "subscribe", {expired}, 2), 1.1, 3);
  CHECK(rec.ops.empty());  // no key named yet
  // Waiters refused on lock:a and lock:b (their keys are read from now on).
  w.send({"SET", "lock:a", "v1", "NX", "PX", "400"}, "$-1\r\n", 2, 1);
  w.send({"SET", "lock:b", "v2", "NX", "PX", "400"}, "$-1\r\n", 3, 1);
  rec.ops.clear();  // from here: the notifications' operations only
  w.push(frame('*', "message", {del, "session:1"}), 4.5, 3);  // a key no lock operation named: not read
  w.push(frame('*', "message", {del, "lock:a"}), 5, 3);
  w.push(frame('>', "message", {expired, "lock:b"}), 6, 3);
  w.push(frame('*', "message", {"__keyevent@0__:set", "lock:a"}), 7, 3);  // a holder taking it
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::message);
  CHECK(rec.ops[0].lock == "lock:a");
  CHECK(rec.ops[0].channel == del);
  CHECK(rec.ops[1].lock == "lock:b");
  CHECK(rec.ops[1].db == 0);
  // Leaving the del channel leaves lock:a; a bare UNSUBSCRIBE then leaves lock:b.
  w.send({"UNSUBSCRIBE", del}, frame('*', "unsubscribe", {del}, 1), 10, 3);
  auto left = of_kind(rec, lock_op_kind::unsubscribe);
  REQUIRE(left.size() == 1);
  CHECK(left[0].lock == "lock:a");
  CHECK(left[0].channel == del);
  w.send({"UNSUBSCRIBE"}, frame('*', "unsubscribe", {expired}, 0), 11, 3);
  left = of_kind(rec, lock_op_kind::unsubscribe);
  REQUIRE(left.size() == 2);
  CHECK(left[1].lock == "lock:b");

  // A pattern over every database and both forms delivers one DEL twice: one wake-up,
  // in the database the channel names; PUNSUBSCRIBE leaves the key.
  op_recorder prec;
  wire p(prec);
  const std::string all = "__key*@*__:*";
  p.send({"PSUBSCRIBE", all}, frame('*', "psubscribe", {all}, 1), 1, 4);
  p.send({"SELECT", "5"}, "+OK\r\n", 2, 1);
  p.send({"SET", "lock:c", "v3", "NX", "PX", "400"}, "$-1\r\n", 3, 1);
  prec.ops.clear();
  p.push(frame('*', "pmessage", {all, "__keyspace@5__:lock:c", "del"}), 5, 4);
  p.push(frame('*', "pmessage", {all, "__keyevent@5__:del", "lock:c"}), 5.0, 4);
  p.push(frame('>', "pmessage", {all, "__keyspace@5__:lock:c", "expired"}), 40, 4);
  REQUIRE(prec.ops.size() == 2);
  CHECK(prec.ops[0].kind == lock_op_kind::message);
  CHECK(prec.ops[0].lock == "lock:c");
  CHECK(prec.ops[0].db == 5);
  CHECK(prec.ops[1].kind == lock_op_kind::message);
  p.send({"PUNSUBSCRIBE", all}, frame('*', "punsubscribe", {all}, 0), 50, 4);
  REQUIRE(prec.ops.size() == 3);
  CHECK(prec.ops[2].kind == lock_op_kind::unsubscribe);
  CHECK(prec.ops[2].lock == "lock:c");
  CHECK(prec.ops[2].db == 5);
}

TEST_CASE("keyspace notifications: the waiter subscribed to its key's channel is woken by the release's `del` "
          "(`notified`), and its wait runs from its first refusal",
          "[recognizer][timeline][keyspace]") {
  const std::string ch = "__keyspace@0__:lock:a";
  timeline_run run;
  wire w(run.sink);
  one_wait(
      w, [&](wire& x, double at) { x.send({"SUBSCRIBE", ch}, frame('*', "subscribe", {ch}, 1), at, 3); },
      [&](wire& x, double at) {
        x.push(frame('*', "message", {ch, "del"}), at, 3);
        x.push(frame('*', "message", {ch, "set"}), at + 0.9, 3);  // B's own SET: no wake-up
      });
  run.timeline.finish(t0 + 400 * ms);
  const recorded_event* told = run.first("notified", "vb");
  REQUIRE(told != nullptr);
  CHECK(told->ts_us == t0 + 300'200);
  CHECK(run.count("notified") == 1);
  const recorded_event* got = run.first("acquired", "vb");
  REQUIRE(got != nullptr);
  CHECK(got->wait_us == 291'100);  // its first refusal's send (10 ms) to its acquiring reply (301.1 ms)
  CHECK(run.first("subscribed", "vb") != nullptr);
}

TEST_CASE("keyspace notifications: joined after the subscription, the event channel's message alone wakes the waiter "
          "of the key it names",
          "[recognizer][timeline][keyspace]") {
  const std::string del = "__keyevent@0__:del";
  timeline_run run;
  wire w(run.sink);
  one_wait(
      w, [](wire&, double) {},  // subscribed once at start-up, before the capture
      [&](wire& x, double at) { x.push(frame('*', "message", {del, "lock:a"}), at, 3); });
  run.timeline.finish(t0 + 400 * ms);
  const recorded_event* told = run.first("notified", "vb");
  REQUIRE(told != nullptr);
  CHECK(told->ts_us == t0 + 300'200);
  CHECK(run.first("acquired", "vb") != nullptr);
}

TEST_CASE("keyspace notifications: a key no lock operation named is no lock, and a key of another database is not "
          "the lock's",
          "[recognizer][timeline][keyspace]") {
  timeline_run run;
  wire w(run.sink);
  // session:9 is deleted, lock:a of db 1 notified: neither is db 0's lock:a.
  one_wait(
      w, [](wire&, double) {},
      [&](wire& x, double at) {
        x.push(frame('*', "message", {"__keyevent@0__:del", "session:9"}), at, 3);
        x.push(frame('*', "message", {"__keyevent@1__:del", "lock:a"}), at + 0.1, 3);
      });
  run.timeline.finish(t0 + 400 * ms);
  CHECK(run.count("notified") == 0);
  for (const recorded_event& e : run.events.events) CHECK(e.lock != "session:9");
  // session:9, named by no lock operation, is not read; db 1's lock:a reaches the timeline,
  // which keeps it off and makes no lock of it (the summary lists every lock it keeps).
  const auto messages = of_kind(run.sink.log, lock_op_kind::message);
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].db == 1);
  std::vector<std::string> names;
  run.timeline.for_each_lock_name([&](std::string_view lock) { names.emplace_back(lock); });
  CHECK(names == std::vector<std::string>{"lock:a"});
  CHECK(run.timeline.lock_count() == 1);
}

TEST_CASE("keyspace notifications: joined mid-stream, a connection whose database was not seen that names a key "
          "notified in one database is in that database",
          "[recognizer][keyspace]") {
  op_recorder rec;
  wire w(rec);
  w.send({"SET", "lock:a", "v1", "NX", "PX", "400"}, "$-1\r\n", 0, 2, false);
  w.push(frame('*', "message", {"__keyevent@2__:del", "lock:a"}), 5, 3);
  w.send({"SET", "lock:a", "v1", "NX", "PX", "400"}, "+OK\r\n", 6, 2, false);
  w.send({"SET", "lock:z", "v9", "NX", "PX", "400"}, "+OK\r\n", 7, 2, false);  // the connection's database now
  // A key notified in two databases tells nothing.
  w.send({"SET", "lock:b", "v2", "NX", "PX", "400"}, "$-1\r\n", 7.5, 6, false);
  w.push(frame('*', "message", {"__keyevent@4__:del", "lock:b"}), 8, 3);
  w.push(frame('*', "message", {"__keyevent@5__:del", "lock:b"}), 9, 3);
  w.send({"SET", "lock:b", "v2", "NX", "PX", "400"}, "+OK\r\n", 10, 5, false);
  REQUIRE(rec.ops.size() == 8);
  CHECK(rec.ops[0].db == -1);
  CHECK(rec.ops[2].lock == "lock:a");
  CHECK(rec.ops[2].db == 2);
  CHECK(rec.ops[3].lock == "lock:z");
  CHECK(rec.ops[3].db == 2);
  CHECK(rec.ops[7].lock == "lock:b");
  CHECK(rec.ops[7].db == -1);
}

TEST_CASE("keyspace notifications: a waiter that let a notification pass without retrying had stopped waiting, "
          "the next one wakes nobody",
          "[recognizer][timeline][keyspace]") {
  const std::string del = "__keyevent@0__:del";
  timeline_run run;
  wire w(run.sink);
  w.send({"SUBSCRIBE", del}, frame('*', "subscribe", {del}, 1), 0, 3);
  w.send({"SET", "lock:a", "va", "NX", "PX", "30000"}, "+OK\r\n", 1, 1);
  w.send({"SET", "lock:a", "vb", "NX", "PX", "30000"}, "$-1\r\n", 10, 2);  // B's one try: it gives up unseen
  w.send({"EVAL", release_script, "1", "lock:a", "va"}, ":1\r\n", 300, 1);
  w.push(frame('*', "message", {del, "lock:a"}), 300.2, 3);  // B may still wait: told
  w.send({"SET", "lock:a", "va2", "NX", "PX", "30000"}, "+OK\r\n", 310, 1);
  w.send({"EVAL", release_script, "1", "lock:a", "va2"}, ":1\r\n", 600, 1);
  w.push(frame('*', "message", {del, "lock:a"}), 600.2, 3);  // B did not retry after the first: not waiting
  run.timeline.finish(t0 + 700 * ms);
  std::vector<std::int64_t> told;
  for (const recorded_event& e : run.events.events) {
    if (e.event == "notified") told.push_back(e.ts_us);
  }
  CHECK(told == std::vector<std::int64_t>{t0 + 300'200});
}

TEST_CASE("keyspace notifications: joined mid-stream, the first notification of a key whose holder and waiter had "
          "their database guessed is that lock's",
          "[recognizer][timeline][keyspace]") {
  timeline_run run;
  wire w(run.sink);
  // Neither command connection seen from its start: their database is guessed (db 0).
  w.send({"SET", "lock:a", "va", "NX", "PX", "30000"}, "+OK\r\n", 0, 1, false);
  w.send({"SET", "lock:a", "vb", "NX", "PX", "30000"}, "$-1\r\n", 10, 2, false);
  w.send({"EVAL", release_script, "1", "lock:a", "va"}, ":1\r\n", 300, 1, false);
  w.push(frame('*', "message", {"__keyevent@2__:del", "lock:a"}), 300.2, 3);
  run.timeline.finish(t0 + 400 * ms);
  const recorded_event* told = run.first("notified", "vb");
  REQUIRE(told != nullptr);
  CHECK(told->ts_us == t0 + 300'200);
  CHECK(run.timeline.lock_count() == 1);
}
