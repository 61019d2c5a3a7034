// Scripts loaded inside MULTI/EXEC, and unseen releases that answer nil whatever they
// did (node-mutex 0.2.2's `GET == id then DEL`, sent only by EVALSHA). The truth is the
// sequence each test writes: who held the key, and whether the release deleted it (an
// acquisition by another owner inside the holder's lease is only possible if it did).
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_timeline.hpp"

using namespace lockscope;
using lockscope::timeline_test::event_recorder;
using lockscope::timeline_test::feed;
using lockscope::timeline_test::recorded_event;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;

// node-mutex 0.2.2's two scripts, in its spirit (SETNX then PEXPIRE; GET == id then DEL,
// answering nil either way).
const std::string acquire_text =
    "if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then\n  redis.call('pexpire', KEYS[1], ARGV[2])\n  return 1\n"
    "end\nreturn 0";
const std::string release_text =
    "if redis.call('get', KEYS[1]) == ARGV[1] then\n  redis.call('del', KEYS[1])\nend";

struct seen_op {
  lock_op_kind kind;
  op_outcome outcome;
  bool inferred;
  std::string owner;
  std::int64_t at_us;
};

class op_log final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    ops.push_back({op.kind, op.outcome, op.inferred, std::string(op.owner), op.at_us()});
    if (next != nullptr) next->on_operation(op);
  }
  void on_connection_end(std::uint64_t c, std::int64_t at) override {
    if (next != nullptr) next->on_connection_end(c, at);
  }
  std::vector<seen_op> ops;
  locks::lock_operation_sink* next = nullptr;
};

class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, std::string_view reply, double at_ms, std::uint64_t connection = 1) {
    static const std::string clients[] = {"10.0.0.1:50000", "10.0.0.1:50001", "10.0.0.1:50002", "10.0.0.1:50003"};
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, clients[connection % 4],
         "10.0.0.2:6379");
  }
  locks::lock_recognizer recognizer;
};

std::vector<std::string> evalsha(const std::string& sha, const std::string& key, std::vector<std::string> argv) {
  std::vector<std::string> a{"EVALSHA", sha, "1", key};
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

using lockscope::timeline_test::resp_bulk;

// Unseen SHA1s (another version of each text): the capture joined after the loads.
const std::string acquire_sha = lock::sha1_hex(acquire_text + "\n-- unseen");
const std::string release_sha = lock::sha1_hex(release_text + "\n-- unseen");

std::string id(int n) { return "6e33cc00-ec16-11f1-be8f-" + std::to_string(100000000000 + n); }

}  // namespace

TEST_CASE("nil releases: SCRIPT LOAD inside MULTI/EXEC is learnt by the text's own SHA1", "[recognizer][nil_release]") {
  op_log log;
  wire w(log);
  const std::string a = lock::sha1_hex(acquire_text), r = lock::sha1_hex(release_text);
  w.send({"MULTI"}, "+OK\r\n", 0);
  w.send({"SCRIPT", "LOAD", acquire_text}, "+QUEUED\r\n", 0.1);
  w.send({"SCRIPT", "LOAD", release_text}, "+QUEUED\r\n", 0.2);
  w.send({"EXEC"}, "*2\r\n" + resp_bulk(a) + resp_bulk(r), 0.3);
  w.send(evalsha(a, "mutex:orders", {id(1), "1000"}), ":1\r\n", 10);
  w.send(evalsha(a, "mutex:orders", {id(2), "1000"}), ":0\r\n", 20, 2);
  w.send(evalsha(r, "mutex:orders", {id(1)}), "$-1\r\n", 100);
  w.send(evalsha(a, "mutex:orders", {id(2), "1000"}), ":1\r\n", 150, 2);
  REQUIRE(log.ops.size() == 4);
  for (const seen_op& op : log.ops) CHECK_FALSE(op.inferred);  // read by their texts
  CHECK(log.ops[0].kind == lock_op_kind::acquire);
  CHECK(log.ops[0].outcome == op_outcome::ok);
  CHECK(log.ops[1].outcome == op_outcome::contended);
  CHECK(log.ops[2].kind == lock_op_kind::unlock);
  CHECK(log.ops[2].outcome == op_outcome::ok);  // nil whatever it did: the value held the key
  CHECK(log.ops[3].owner == id(2));
  CHECK(log.ops[3].outcome == op_outcome::ok);
}

TEST_CASE("nil releases: a reply SHA1 that differs from the text's is not the key", "[recognizer][nil_release]") {
  op_log log;
  wire w(log);
  const std::string a = lock::sha1_hex(acquire_text);
  w.send({"SCRIPT", "LOAD", acquire_text}, resp_bulk(std::string(40, 'f')), 0);
  w.send(evalsha(a, "mutex:orders", {id(1), "1000"}), ":1\r\n", 10);
  REQUIRE(log.ops.size() == 1);
  CHECK_FALSE(log.ops[0].inferred);
  CHECK(log.ops[0].kind == lock_op_kind::acquire);
}

TEST_CASE("nil releases: an unseen release answered nil is decided by the next owner's acquisition inside the lease",
          "[recognizer][nil_release]") {
  op_log log;
  event_recorder events;
  locks::lock_timeline timeline({}, events);
  log.next = &timeline;
  wire w(log);
  // Four rounds: the holder releases (nil), the waiter then takes the key well inside
  // the holder's 1 s lease.
  double t = 0;
  for (int i = 0; i < 4; ++i, t += 400) {
    w.send(evalsha(acquire_sha, "mutex:orders", {id(2 * i), "1000"}), ":1\r\n", t, 1);
    w.send(evalsha(acquire_sha, "mutex:orders", {id(2 * i + 1), "1000"}), ":0\r\n", t + 20, 2);
    w.send(evalsha(release_sha, "mutex:orders", {id(2 * i)}), "$-1\r\n", t + 100, 1);
    w.send(evalsha(acquire_sha, "mutex:orders", {id(2 * i + 1), "1000"}), ":1\r\n", t + 150, 2);
    w.send(evalsha(release_sha, "mutex:orders", {id(2 * i + 1)}), "$-1\r\n", t + 250, 2);
  }
  timeline.finish(t0 + 60'000 * ms);
  std::size_t releases = 0;
  for (std::size_t i = 0; i < log.ops.size(); ++i) {
    const seen_op& op = log.ops[i];
    INFO("op " << i << " owner " << op.owner);
    CHECK(op.inferred);
    if (op.kind != lock_op_kind::unlock) continue;
    ++releases;
    CHECK(op.outcome == op_outcome::ok);
    // Dated at the call itself (its reply), not at the call that decided it.
    const int round = static_cast<int>((op.at_us - t0) / (400 * ms));
    const std::int64_t call_ms = round * 400 + (op.owner == id(2 * round) ? 100 : 250);
    CHECK(op.at_us == t0 + call_ms * ms + 100);
  }
  // Each round's first release is decided by the next acquisition; the second by the
  // next round's; from the fourth decision on, the SHA1's nil is a release at once (the
  // last round's second release too, with no later operation to decide it).
  CHECK(releases == 8);
  for (const recorded_event& e : events.events) {
    INFO(e.event << " " << e.owner);
    CHECK(e.event != "unlock_rejected");
    CHECK(e.event != "anomaly:expired_while_held");
    CHECK(e.event != "expired");
  }
  std::size_t released = 0;
  for (const recorded_event& e : events.events) released += e.event == "released" ? 1 : 0;
  CHECK(released == 8);
}

TEST_CASE("nil releases: the key still there after the nil, or the lease run out, makes it a refusal",
          "[recognizer][nil_release]") {
  op_log log;
  wire w(log);
  SECTION("another owner refused after the nil came back") {
    w.send(evalsha(acquire_sha, "mutex:orders", {id(1), "1000"}), ":1\r\n", 0, 1);
    w.send(evalsha(release_sha, "mutex:orders", {id(1)}), "$-1\r\n", 100, 1);
    CHECK(log.ops.size() == 1);  // undecided: nothing yet
    w.send(evalsha(acquire_sha, "mutex:orders", {id(2), "1000"}), ":0\r\n", 150, 2);
    REQUIRE(log.ops.size() == 3);
    CHECK(log.ops[1].kind == lock_op_kind::unlock);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
    CHECK(log.ops[1].at_us == t0 + 100 * ms + 100);
    CHECK(log.ops[2].outcome == op_outcome::contended);
  }
  SECTION("the lease ran out before anyone acquired") {
    w.send(evalsha(acquire_sha, "mutex:orders", {id(1), "1000"}), ":1\r\n", 0, 1);
    w.send(evalsha(release_sha, "mutex:orders", {id(1)}), "$-1\r\n", 100, 1);
    w.send(evalsha(acquire_sha, "mutex:orders", {id(2), "1000"}), ":1\r\n", 1500, 2);
    REQUIRE(log.ops.size() == 3);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
    CHECK(log.ops[2].outcome == op_outcome::ok);
  }
  SECTION("a call after the lease ran out is a refusal at once") {
    w.send(evalsha(acquire_sha, "mutex:orders", {id(1), "1000"}), ":1\r\n", 0, 1);
    w.send(evalsha(release_sha, "mutex:orders", {id(1)}), "$-1\r\n", 1200, 1);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
  }
  SECTION("the holder's connection ends: the refusal it was read as") {
    w.send(evalsha(acquire_sha, "mutex:orders", {id(1), "1000"}), ":1\r\n", 0, 1);
    w.send(evalsha(release_sha, "mutex:orders", {id(1)}), "$-1\r\n", 100, 1);
    w.recognizer.on_connection_end(1, t0 + 200 * ms);
    REQUIRE(log.ops.size() == 2);
    CHECK(log.ops[1].outcome == op_outcome::rejected);
  }
}

TEST_CASE("nil releases: a SHA1 whose nil was once a refusal inside the lease is never a release at once",
          "[recognizer][nil_release]") {
  op_log log;
  wire w(log);
  double t = 0;
  // One refusal (the key still there), then three releases decided by the next owner.
  w.send(evalsha(acquire_sha, "k", {id(100), "1000"}), ":1\r\n", t, 1);
  w.send(evalsha(release_sha, "k", {id(100)}), "$-1\r\n", t + 100, 1);
  w.send(evalsha(acquire_sha, "k", {id(101), "1000"}), ":0\r\n", t + 150, 2);
  w.send({"DEL", "k"}, ":1\r\n", t + 200, 3);
  t = 2000;
  for (int i = 0; i < 4; ++i, t += 400) {
    w.send(evalsha(acquire_sha, "k", {id(i), "1000"}), ":1\r\n", t, 1);
    w.send(evalsha(release_sha, "k", {id(i)}), "$-1\r\n", t + 100, 1);
  }
  // Each release was decided by the next acquisition (none at once): the last one stays
  // undecided.
  std::size_t unlocks = 0;
  for (const seen_op& op : log.ops) unlocks += op.kind == lock_op_kind::unlock ? 1 : 0;
  CHECK(unlocks == 4);  // the refusal and three releases
}
