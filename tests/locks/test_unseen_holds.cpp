// Holds the capture never shows taken or freed, known only from their renewals: a job
// queue joined mid-run takes and frees each job's lock inside scripts that build the
// key in Lua (only their SHA1s on the wire, naming no lock key), and renews it with an
// unseen script naming the key, `[token, lease, job id]`, answered 1. The truth is the
// sequence each test writes: which calls renewed which job's lock; nothing says when
// a hold began or ended, so nothing may be said about its end.
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::int64_t ms = 1000;
constexpr std::int64_t t0 = 1'700'000'000'000'000;
const std::string extend(40, 'e');
const std::string token_a = "95dfd6d9-11e5-4430-9f6e-7ea11d4a6340", token_b = "9c2e70e6-e791-4fd3-8d89-43c839cf7296";

// What the timeline is handed: the operation and whether its hold's end is unseen.
struct handed {
  lock_op_kind kind{};
  op_outcome outcome{};
  std::string lock, owner;
  std::int64_t lease_ms = -1, request_us = 0;
  bool inferred = false, ends_unseen = false;
};
class handed_recorder final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    ops.push_back({op.kind, op.outcome, std::string(op.lock), std::string(op.owner), op.lease_ms, op.request_us,
                   op.inferred, op.ends_unseen});
  }
  std::vector<handed> ops;
};
class forward final : public locks::lock_operation_sink {
 public:
  forward(handed_recorder& log, locks::lock_operation_sink& timeline) : log_(log), timeline_(timeline) {}
  void on_operation(const locks::lock_operation& op) override {
    log_.on_operation(op);
    timeline_.on_operation(op);
  }
  void on_connection_end(std::uint64_t c, std::int64_t at) override { timeline_.on_connection_end(c, at); }

 private:
  handed_recorder& log_;
  locks::lock_operation_sink& timeline_;
};


// The worker's renewal of job `job`'s lock, answered `reply`, at `at_ms` over `connection`.
void renew(locks::lock_recognizer& r, const std::string& job, const std::string& token, double at_ms,
           std::string_view reply = ":1\r\n", std::uint64_t connection = 1, const std::string& lease = "1200") {
  feed(r, {"EVALSHA", extend, "2", "q:jobs:" + job + ":lock", "q:jobs:stalled", token, lease, job}, reply,
       t0 + static_cast<std::int64_t>(at_ms * ms), connection, connection == 1 ? "10.0.0.1:50000" : "10.0.0.1:50001");
}


// The recognizer feeding the timeline, what it hands over and the events recorded; to
// begin with, job 21's lock renewed twice by token_a (its script shown renewing).
struct analyzed {
  event_recorder events;
  locks::lock_timeline timeline{{}, events};
  handed_recorder log;
  forward sink{log, timeline};
  locks::lock_recognizer r{sink};
  analyzed() {
    renew(r, "21", token_a, 0);
    renew(r, "21", token_a, 400);
  }
};

}  // namespace

TEST_CASE("unseen holds: an unseen script renewing one key with one value again inside its lease renews holds no call "
          "showed taken",
          "[recognizer][argument_roles][unseen_holds]") {
  handed_recorder log;
  locks::lock_recognizer r(log);
  renew(r, "21", token_a, 0);           // job 21: not shown yet, kept
  renew(r, "7", token_b, 100, ":1\r\n", 2);  // job 7 (an id that could be a database): kept
  CHECK(log.ops.empty());
  renew(r, "21", token_a, 400);         // job 21 again, inside the first call's lease: the script renews
  renew(r, "23", token_a, 500);         // a job first met now: a renewal at once
  renew(r, "7", token_b, 600, ":0\r\n", 2);  // refused (after an unseen release, perhaps): nothing
  struct expected {
    std::string lock, owner;
    std::int64_t at_ms;
  };
  const std::vector<expected> want{{"q:jobs:21:lock", token_a, 0},
                                   {"q:jobs:7:lock", token_b, 100},
                                   {"q:jobs:21:lock", token_a, 400},
                                   {"q:jobs:23:lock", token_a, 500}};
  REQUIRE(log.ops.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(i);
    CHECK(log.ops[i].kind == lock_op_kind::renew);
    CHECK(log.ops[i].outcome == op_outcome::ok);
    CHECK(log.ops[i].lock == want[i].lock);
    CHECK(log.ops[i].owner == want[i].owner);
    CHECK(log.ops[i].lease_ms == 1200);  // not the job id beside it: the key carries that
    CHECK(log.ops[i].request_us == t0 + want[i].at_ms * ms);
    CHECK(log.ops[i].inferred);
    CHECK(log.ops[i].ends_unseen);
  }
}

TEST_CASE("unseen holds: no renewal without the script shown renewing, nor on a key a call the capture read took",
          "[recognizer][argument_roles][unseen_holds]") {
  handed_recorder log;
  locks::lock_recognizer r(log);
  SECTION("each key once: a renewal or not, nothing shows") {
    for (const std::string job : {"21", "22", "23", "24"}) renew(r, job, token_a, 100.0 * std::stoi(job));
    CHECK(log.ops.empty());
  }
  SECTION("again only after the first call's lease ran out") {
    renew(r, "21", token_a, 0);
    renew(r, "21", token_a, 1300);
    CHECK(log.ops.empty());
  }
  SECTION("two lease-sized numbers the key does not carry: which is the lease is not sure") {
    for (const double at : {0.0, 400.0, 800.0}) {
      feed(r, {"EVALSHA", extend, "1", "q:jobs:21:lock", token_a, "1200", "777"}, ":1\r\n",
           t0 + static_cast<std::int64_t>(at * ms));
    }
    CHECK(log.ops.empty());
  }
  SECTION("the key taken by a plain SET the capture showed: that call's rules read it") {
    feed(r, {"SET", "q:jobs:21:lock", token_a, "PX", "1200", "NX"}, "+OK\r\n", t0 - 50 * ms);
    renew(r, "21", token_a, 0);
    renew(r, "21", token_a, 400);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::acquire);
  }
  SECTION("the value taken by an unseen acquire the capture read: that call's rules read it") {
    feed(r, {"EVALSHA", std::string(40, 'a'), "1", "q:jobs:21:lock", token_a, "1200"}, ":1\r\n", t0 - 50 * ms);
    renew(r, "21", token_a, 0);
    renew(r, "21", token_a, 400);
    REQUIRE(log.ops.size() == 1);
    CHECK(log.ops[0].kind == lock_op_kind::acquire);
  }
}

TEST_CASE("unseen holds: a hold known only from its renewals ends unseen: no expiry, no key-lost or closed-holder alarm",
          "[timeline][unseen_holds]") {
  analyzed a;
  auto& [events, timeline, log, sink, r] = a;
  renew(r, "21", token_a, 800);
  renew(r, "22", token_a, 900);
  // The worker's connection closes inside both leases (its process killed, or done).
  timeline.on_connection_end(1, t0 + 1'000 * ms);
  // Job 22's lock renewed by another worker once the first's lease ran out (taken again unseen).
  renew(r, "22", token_b, 2'500, ":1\r\n", 2);
  timeline.finish(t0 + 10'000 * ms);
  REQUIRE(log.ops.size() == 5);
  std::size_t renewed = 0;
  for (const recorded_event& e : events.events) {
    INFO(e.event << " " << e.lock << " " << e.owner);
    if (e.event == "renewed") ++renewed;
    CHECK(e.event == "renewed");  // no expired, expired_while_held, holder_connection_closed, overlap
  }
  CHECK(renewed == 5);
}

TEST_CASE("unseen holds: another owner taking the key inside such a hold's lease shows it freed unseen, no overlap",
          "[timeline][unseen_holds]") {
  analyzed a;
  auto& [events, timeline, log, sink, r] = a;
  // Inside token_a's lease (to 1,600 ms), another process takes the key by a plain SET:
  // the key was free, so token_a's job had freed it unseen.
  feed(r, {"SET", "q:jobs:21:lock", token_b, "PX", "1200", "NX"}, "+OK\r\n", t0 + 700 * ms, 2, "10.0.0.1:50001");
  timeline.finish(t0 + 10'000 * ms);
  REQUIRE(log.ops.size() == 3);
  std::vector<std::string> names;
  for (const recorded_event& e : events.events) names.push_back(e.event + " " + e.owner);
  CHECK(names == std::vector<std::string>{"renewed " + token_a, "renewed " + token_a, "acquired " + token_b,
                                          "expired " + token_b});  // its own lease, never released
}
