// Locks held by a pub/sub subscription, not a key (portalocker's RedisLock): a client asks
// PUBSUB NUMSUB of the lock's channel, subscribes when it answers 0 and checks the count
// is 1; others' NUMSUB answered 1 are refusals; the holder's UNSUBSCRIBE, or its
// connection's end, frees it. Each check goes over a connection of its own. The truth is
// the sequence each test writes: which connection subscribed, what the server answered.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope;
using lockscope::timeline_test::event_recorder;
using lockscope::timeline_test::feed;
using lockscope::timeline_test::op_recorder;
using lockscope::timeline_test::recorded_event;
using lockscope::timeline_test::recorded_op;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;

std::string numsub_reply(std::string_view channel, int count) {
  return "*2\r\n$" + std::to_string(channel.size()) + "\r\n" + std::string(channel) + "\r\n:" + std::to_string(count) +
         "\r\n";
}
std::string subscribe_reply(std::string_view word, std::string_view channel, int count) {
  return "*3\r\n$" + std::to_string(word.size()) + "\r\n" + std::string(word) + "\r\n$" + std::to_string(channel.size()) +
         "\r\n" + std::string(channel) + "\r\n:" + std::to_string(count) + "\r\n";
}

using tee = lockscope::timeline_test::op_tee;

// Hosts A (10.0.0.1) and B (10.0.0.2); each connection's client port is 40000 + its id.
class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, const std::string& reply, double at_ms, std::uint64_t connection,
            char host) {
    const std::string client = std::string(host == 'A' ? "10.0.0.1:" : "10.0.0.2:") + std::to_string(40000 + connection);
    texts.push_back(client);
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, texts.back(), "10.0.0.9:6379");
  }
  void numsub(const std::string& channel, int count, double at_ms, std::uint64_t connection, char host) {
    send({"PUBSUB", "NUMSUB", channel}, numsub_reply(channel, count), at_ms, connection, host);
  }
  void subscribe(const std::string& channel, double at_ms, std::uint64_t connection, char host) {
    send({"SUBSCRIBE", channel}, subscribe_reply("subscribe", channel, 1), at_ms, connection, host);
  }
  void unsubscribe(const std::string& channel, double at_ms, std::uint64_t connection, char host) {
    send({"UNSUBSCRIBE", channel}, subscribe_reply("unsubscribe", channel, 0), at_ms, connection, host);
  }
  void end(std::uint64_t connection, double at_ms) {
    recognizer.on_connection_end(connection, t0 + static_cast<std::int64_t>(at_ms * ms));
  }
  locks::lock_recognizer recognizer;
  std::deque<std::string> texts;
};

// A takes `orders` (its check on connection 1, its subscription on 2, its own count
// check on 3); B asks twice while A holds (connections 10, 11), A lets go, B takes it.
void contention(wire& w, bool release_by_close) {
  w.numsub("orders", 0, 0, 1, 'A');
  w.send({"CLIENT", "SETNAME", "orders-lock"}, "+OK\r\n", 0.2, 1, 'A');
  w.subscribe("orders", 0.5, 2, 'A');
  w.numsub("orders", 1, 0.8, 3, 'A');
  w.numsub("orders", 1, 100, 10, 'B');
  w.end(10, 101);  // each check over a connection of its own
  w.numsub("orders", 1, 350, 11, 'B');
  w.end(11, 351);
  if (release_by_close) w.end(2, 400);
  else w.unsubscribe("orders", 400, 2, 'A');
  w.numsub("orders", 0, 600, 12, 'B');
  w.subscribe("orders", 601, 13, 'B');
  w.numsub("orders", 1, 602, 12, 'B');
}

std::vector<recorded_op> of_lock(const op_recorder& r, std::string_view lock) {
  std::vector<recorded_op> out;
  for (const recorded_op& op : r.ops) {
    if (op.lock == lock) out.push_back(op);
  }
  return out;
}

}  // namespace

TEST_CASE("subscription locks: NUMSUB, SUBSCRIBE and the subscriber's leave are the lock's acquisitions, refusals and releases",
          "[recognizer][subscription_lock]") {
  for (const bool by_close : {false, true}) {
    CAPTURE(by_close);
    tee sink;
    wire w(sink);
    contention(w, by_close);
    const auto ops = of_lock(sink.log, "orders");
    REQUIRE(ops.size() == 5);
    CHECK(ops[0].kind == lock_op_kind::acquire);
    CHECK(ops[0].outcome == op_outcome::ok);
    CHECK(ops[0].family == lock_family::subscription);
    CHECK(ops[0].owner == "10.0.0.1");
    // A's own check right after it subscribed is no refusal; B's two checks are.
    CHECK(ops[1].outcome == op_outcome::contended);
    CHECK(ops[1].owner == "10.0.0.2");
    CHECK(ops[2].outcome == op_outcome::contended);
    CHECK(ops[3].kind == lock_op_kind::unlock);
    CHECK(ops[3].outcome == op_outcome::ok);
    CHECK(ops[3].owner == "10.0.0.1");
    CHECK(ops[4].kind == lock_op_kind::acquire);
    CHECK(ops[4].outcome == op_outcome::ok);
    CHECK(ops[4].owner == "10.0.0.2");
  }
}

TEST_CASE("subscription locks: the timeline shows B's wait from its first refusal, though each check closed its connection",
          "[recognizer][timeline][subscription_lock]") {
  tee sink;
  event_recorder events;
  locks::lock_timeline timeline({}, events);
  sink.next = &timeline;
  wire w(sink);
  contention(w, true);
  timeline.finish(t0 + 700 * ms);
  std::vector<std::string> seen;
  const recorded_event* b_acquired = nullptr;
  for (const recorded_event& e : events.events) {
    if (e.lock != "orders") continue;
    seen.push_back(e.event + " " + e.owner);
    if (e.event == "acquired" && e.owner == "10.0.0.2") b_acquired = &e;
  }
  CHECK(std::find(seen.begin(), seen.end(), "gave_up 10.0.0.2") == seen.end());
  REQUIRE(b_acquired != nullptr);
  // From its first check (sent at 100 ms) to its SUBSCRIBE's reply (601.1 ms).
  CHECK(b_acquired->wait_us == 501 * ms + 100);
  CHECK(std::count(seen.begin(), seen.end(), "released 10.0.0.1") == 1);
}

TEST_CASE("subscription locks: two hosts that both found it free: the first SUBSCRIBE takes it, the other's check is its refusal",
          "[recognizer][subscription_lock]") {
  tee sink;
  wire w(sink);
  w.numsub("stock", 0, 0, 1, 'A');
  w.numsub("stock", 0, 0.3, 5, 'B');
  w.subscribe("stock", 0.5, 2, 'A');
  w.numsub("stock", 1, 0.55, 3, 'A');
  w.subscribe("stock", 0.6, 6, 'B');
  w.numsub("stock", 2, 0.9, 7, 'B');
  w.unsubscribe("stock", 20, 6, 'B');  // B lets go: it held nothing
  w.unsubscribe("stock", 300, 2, 'A');
  const auto ops = of_lock(sink.log, "stock");
  REQUIRE(ops.size() == 3);
  CHECK((ops[0].kind == lock_op_kind::acquire && ops[0].outcome == op_outcome::ok && ops[0].owner == "10.0.0.1"));
  CHECK((ops[1].kind == lock_op_kind::acquire && ops[1].outcome == op_outcome::contended && ops[1].owner == "10.0.0.2"));
  CHECK((ops[2].kind == lock_op_kind::unlock && ops[2].owner == "10.0.0.1"));
}

TEST_CASE("subscription locks: a SUBSCRIBE nobody checked first, or long after, takes nothing, nor does a NUMSUB alone",
          "[recognizer][subscription_lock]") {
  tee sink;
  wire w(sink);
  // A channel subscribed with no count asked first (a plain pub/sub listener).
  w.subscribe("news", 0, 1, 'A');
  w.numsub("news", 1, 10, 2, 'B');  // a monitor asking how many listen
  // Asked, found free, but subscribed 5 s later: not the lock taken.
  w.numsub("jobs", 0, 20, 3, 'A');
  w.subscribe("jobs", 5020, 4, 'A');
  w.numsub("jobs", 1, 5030, 5, 'B');
  CHECK(sink.log.ops.empty());
}
