// Subscriber links from the life a subscriber connection shares with its process's command
// connection (its name, its opening beside it), and the anomalies that rest on a link
// (subscription_lost, woken_by_timeout) raised only when that link is certain. The
// real-process oracles are tests/locks/subscriber_links_oracle.py (ctest
// locks.subscriber_links.*).
#include <algorithm>

#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;

namespace {

const std::string pa = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1";
const std::string pb = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1";
const std::string pc = "cccccccc-cccc-4ccc-8ccc-cccccccccccc:1";
constexpr std::string_view host = "10.0.0.5";  // every process on one host

constexpr double mid_stream = -1e9;

struct life {
  double opened_ms = mid_stream;  // when its SYN was captured
  std::string_view name;
};

void attempt(fixture& f, const std::string& owner, double at_ms, std::uint64_t conn, life l,
             op_outcome outcome = op_outcome::contended) {
  auto o = f.op(lock_op_kind::acquire, outcome, owner, at_ms, conn, host);
  o.lease_ms = 30000;
  if (outcome == op_outcome::contended) o.ttl_ms = 29000;
  o.opened_us = l.opened_ms == mid_stream ? -1 : at(l.opened_ms);
  o.client_name = l.name;
  f.timeline.on_operation(o);
}

void channel(fixture& f, lock_op_kind kind, double at_ms, std::uint64_t conn, life l, std::int64_t count = 1) {
  auto o = f.op(kind, op_outcome::ok, "", at_ms, conn, host);
  o.channel = "redisson_lock__channel:{L}";
  o.sub_count = count;
  if (kind == lock_op_kind::message) o.reply_us = o.request_us;
  o.opened_us = l.opened_ms == mid_stream ? -1 : at(l.opened_ms);
  o.client_name = l.name;
  f.timeline.on_operation(o);
}

// The false alarm of issue 42, reduced: a holder and two waiters of different processes on
// one host. B fails first and subscribes; A fails between B's failure and B's SUBSCRIBE, so
// the latest failure before the SUBSCRIBE is A's. On the release, B's subscriber gets the
// message and B retries at once; A, told nothing, retries by its timer (a real case of a
// waiter nobody told, had the link been A's).
void contention(fixture& f, life hold, life a_cmd, life a_sub, life b_cmd, life b_sub) {
  attempt(f, pc, 0, 1, hold, op_outcome::ok);
  attempt(f, pb, 100, 4, b_cmd);
  attempt(f, pa, 100.4, 2, a_cmd);
  channel(f, lock_op_kind::subscribe, 100.6, 5, b_sub);  // B's subscriber
  channel(f, lock_op_kind::subscribe, 101.5, 3, a_sub);  // A's subscriber
  attempt(f, pb, 102, 4, b_cmd);                         // Redisson retries once subscribed
  attempt(f, pa, 102.2, 2, a_cmd);
  auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 500, 1, host);
  f.timeline.on_operation(u);
  channel(f, lock_op_kind::message, 500.3, 5, b_sub);
  attempt(f, pb, 500.5, 4, b_cmd, op_outcome::ok);  // woken
  attempt(f, pa, 29200, 2, a_cmd);                  // A's TTL ran out: its timer
}

const recorded_event* subscribed_on(const fixture& f, std::string_view client) {
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" && e.client == client) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("subscriber life: names tie each subscriber to its process, certain", "[timeline][links]") {
  fixture f;
  contention(f, {mid_stream, "lockscope-lock:1"}, {mid_stream, "lockscope-lock:2"}, {mid_stream, "lockscope-lock:2:sub"},
             {mid_stream, "lockscope-lock:3"}, {mid_stream, "lockscope-lock:3:sub"});
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40005");
  const recorded_event* a = subscribed_on(f, "10.0.0.5:40003");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(b->owner == pb);
  CHECK(b->confidence == link_confidence::certain);
  CHECK(a->owner == pa);
  CHECK(a->confidence == link_confidence::certain);
  // A's subscriber heard nothing: A was subscribed (certainly) and retried by its timer.
  CHECK(f.events.count("anomaly:woken_by_timeout") == 1);
  CHECK(f.events.first("anomaly:woken_by_timeout")->owner == pa);
}

TEST_CASE("subscriber life: a name shared by every process ties nothing", "[timeline][links]") {
  fixture f;
  const life cmd{mid_stream, "lockscope-lock"}, sub{mid_stream, "lockscope-lock:sub"};
  contention(f, cmd, cmd, sub, cmd, sub);
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40005");
  REQUIRE(b != nullptr);
  CHECK(b->confidence != link_confidence::certain);
  // No link is certain: no anomaly blames pub/sub.
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber life: a subscriber opened beside one process's command connection is that process's",
          "[timeline][links]") {
  fixture f;
  // Each process opens its two connections together, the processes seconds apart.
  contention(f, {-5000, {}}, {-3000, {}}, {-2990, {}}, {-1000, {}}, {-995, {}});
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40005");
  const recorded_event* a = subscribed_on(f, "10.0.0.5:40003");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(b->owner == pb);
  CHECK(b->confidence == link_confidence::certain);
  CHECK(a->owner == pa);
  CHECK(a->confidence == link_confidence::certain);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 1);
}

TEST_CASE("subscriber life: processes that opened together are not told apart by it", "[timeline][links]") {
  fixture f;
  contention(f, {-5000, {}}, {-1000, {}}, {-999, {}}, {-1000.5, {}}, {-998, {}});
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" || e.event == "notified" || e.event == "unsubscribed") {
      CHECK(e.confidence != link_confidence::certain);
    }
  }
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber life: nothing known of the connections' lives: the guess is not certain and raises nothing",
          "[timeline][links]") {
  // Before: B's SUBSCRIBE went to A (the latest failure before it), A's to nobody or B,
  // and A's woken B was read as B's timer: a woken_by_timeout for the wrong process.
  fixture f;
  contention(f, {}, {}, {}, {}, {});
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" || e.event == "notified" || e.event == "unsubscribed") {
      CHECK(e.confidence != link_confidence::certain);
    }
  }
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber life: a name that contradicts the latest failure wins over it", "[timeline][links]") {
  fixture f;
  // Only the subscribers are named (the command connections' names unseen): B's SUBSCRIBE
  // still cannot go to A, whose command connection is named apart.
  contention(f, {mid_stream, "x"}, {mid_stream, "proc-a"}, {mid_stream, "proc-b:sub"}, {mid_stream, "proc-b"}, {mid_stream, "proc-a:sub"});
  // (Here the subscribers' names are swapped on purpose: conn 5 is named as A's.)
  const recorded_event* five = subscribed_on(f, "10.0.0.5:40005");
  REQUIRE(five != nullptr);
  CHECK(five->owner == pa);
  CHECK(five->confidence == link_confidence::certain);
}

TEST_CASE("subscriber life: a timer retry on a guessed link raises nothing, on a certain one it does",
          "[timeline][links]") {
  // One waiter and its subscriber; the release reaches nobody; the waiter retries when its
  // TTL runs out. A guess (`high`: one candidate) raises nothing, a tie does.
  auto run = [](life cmd, life sub) {
    fixture f;
    attempt(f, pc, 0, 1, {}, op_outcome::ok);
    attempt(f, pb, 100, 4, cmd);
    channel(f, lock_op_kind::subscribe, 100.6, 5, sub);
    attempt(f, pb, 101, 4, cmd);  // once subscribed
    auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 500, 1, host);
    f.timeline.on_operation(u);
    attempt(f, pb, 29101, 4, cmd, op_outcome::ok);  // its TTL ran out: its timer
    const recorded_event* s = subscribed_on(f, "10.0.0.5:40005");
    REQUIRE(s != nullptr);
    return std::pair{s->confidence, f.events.count("anomaly:woken_by_timeout") + f.events.count("anomaly:subscription_lost")};
  };
  const auto guessed = run({}, {});
  CHECK(guessed.first == link_confidence::high);
  CHECK(guessed.second == 0);
  const auto tied = run({99.8, {}}, {100.5, {}});
  CHECK(tied.first == link_confidence::certain);
  CHECK(tied.second == 1);  // woken_by_timeout (it was subscribed at the release)
}

TEST_CASE("subscriber life: a name two processes used stays untied after one of them leaves", "[timeline][links]") {
  fixture f;
  attempt(f, pc, 0, 1, {}, op_outcome::ok);
  attempt(f, pa, 10, 2, {mid_stream, "svc"});
  attempt(f, pb, 20, 4, {mid_stream, "svc"});
  f.timeline.on_connection_end(2, at(30));  // A's process left
  attempt(f, pb, 100, 4, {mid_stream, "svc"});
  channel(f, lock_op_kind::subscribe, 100.5, 5, {mid_stream, "svc:sub"});
  const recorded_event* s = subscribed_on(f, "10.0.0.5:40005");
  REQUIRE(s != nullptr);
  CHECK(s->owner == pb);
  CHECK(s->confidence != link_confidence::certain);
}

// Processes started together (issue 42's links_redisson_together2, reduced): A's subscriber
// is tied to A for certain; B's subscriber opened 5 ms after one of A's command connections
// and 20 ms before B's own, C's first 274 ms after. A failed last before B's SUBSCRIBE.
namespace {

const std::string pa2 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:2";
const std::string pd = "dddddddd-dddd-4ddd-8ddd-dddddddddddd:1";

void started_together(fixture& f, life a_sub, life b_sub, bool with_c) {
  attempt(f, pd, 0, 1, {}, op_outcome::ok);  // the holder
  attempt(f, pa, 100, 2, {-3000, {}});
  channel(f, lock_op_kind::subscribe, 100.6, 3, a_sub);  // A's own subscriber
  attempt(f, pa, 101, 2, {-3000, {}});
  attempt(f, pa2, 110, 6, {-2005, {}});  // A's other connection, opened beside B's subscriber
  attempt(f, pb, 120, 8, {-1980, {}});
  if (with_c) attempt(f, pc, 125, 9, {-1726, {}});
  attempt(f, pa2, 190, 6, {-2005, {}});  // the latest failure before B's SUBSCRIBE: A's
  channel(f, lock_op_kind::subscribe, 200, 7, b_sub);  // B's subscriber (JVM slow to subscribe)
}

}  // namespace

TEST_CASE("subscriber links: a client listening for certain on its own subscriber is no episode's client",
          "[timeline][links]") {
  // B's subscriber joined mid-stream (nothing known of its life): A's failure just before
  // the SUBSCRIBE taught A, whose waiters all share A's own subscription; the subscription
  // went to A. Excluded, the one client left is B.
  fixture f;
  started_together(f, {-2999.2, {}}, {}, false);
  const recorded_event* a = subscribed_on(f, "10.0.0.5:40003");
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40007");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->confidence == link_confidence::certain);
  CHECK(b->owner == pb);
  CHECK(b->confidence != link_confidence::certain);  // A also waits from its address
}

TEST_CASE("subscriber links: an opening beside an excluded client's ties the subscriber to the one left, for good",
          "[timeline][links]") {
  // B's subscriber opened between A's connection (5 ms) and B's (20 ms): shared, unless A,
  // listening on its own subscriber for certain, is excluded; C's opening is 274 ms away.
  fixture f;
  started_together(f, {-2999.2, {}}, {-2000, {}}, true);
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40007");
  REQUIRE(b != nullptr);
  CHECK(b->owner == pb);
  CHECK(b->confidence == link_confidence::certain);
  // The tie stays once A's subscription ends: B's next SUBSCRIBE is still B's for certain.
  channel(f, lock_op_kind::unsubscribe, 300, 3, {-2999.2, {}}, 0);
  channel(f, lock_op_kind::unsubscribe, 301, 7, {-2000, {}}, 0);
  attempt(f, pb, 400, 8, {-1980, {}});
  channel(f, lock_op_kind::subscribe, 401, 7, {-2000, {}});
  int subscribed = 0;
  for (const auto& e : f.events.events) {
    if (e.event != "subscribed" || e.client != "10.0.0.5:40007") continue;
    ++subscribed;
    CHECK(e.owner == pb);
    CHECK(e.confidence == link_confidence::certain);
  }
  CHECK(subscribed == 2);
}

TEST_CASE("subscriber links: no exclusion by a subscription that is only a guess", "[timeline][links]") {
  // A's own subscriber joined mid-stream (a guess): A is not excluded, B's opening stays
  // shared with A's, and nothing is certain.
  fixture f;
  started_together(f, {}, {-2000, {}}, true);
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40007");
  REQUIRE(b != nullptr);
  CHECK(b->confidence != link_confidence::certain);
}

namespace {

// Two processes refused together, their subscribers (opened together, named alike)
// SUBSCRIBE together: each subscription can only be guessed. A acquires first and its
// subscriber leaves, `leave_ms` after A's acquisition.
void leave_after_acquisition(fixture& f, double leave_ms) {
  const life cmd{-1000, "svc"}, sub{-900, "svc"};
  attempt(f, pc, 0, 1, {-2000, "svc"}, op_outcome::ok);
  attempt(f, pa, 100, 2, cmd);
  attempt(f, pb, 100.2, 4, {-999.9, "svc"});
  channel(f, lock_op_kind::subscribe, 150, 3, sub);  // A's subscriber: guessed B's (latest failure)
  channel(f, lock_op_kind::subscribe, 150.1, 5, {-899.9, "svc"});
  auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 300, 1, host);
  f.timeline.on_operation(u);
  channel(f, lock_op_kind::message, 300.2, 3, sub);
  channel(f, lock_op_kind::message, 300.2, 5, {-899.9, "svc"});
  attempt(f, pa, 300.5, 2, cmd, op_outcome::ok);
  attempt(f, pb, 300.6, 4, {-999.9, "svc"});
  channel(f, lock_op_kind::unsubscribe, 300.5 + leave_ms, 3, sub, 0);
}

}  // namespace

TEST_CASE("subscriber links: the UNSUBSCRIBE after one client's acquisition is that client's, over a guess",
          "[timeline][links]") {
  for (const double leave_ms : {0.3, 40.0}) {  // at once (Redisson, our client) or a slow JVM's
    CAPTURE(leave_ms);
    fixture f;
    leave_after_acquisition(f, leave_ms);
    const recorded_event* guess = subscribed_on(f, "10.0.0.5:40003");
    REQUIRE(guess != nullptr);
    REQUIRE(guess->owner == pb);  // the guess this test is about
    const recorded_event* left = f.events.first("unsubscribed");
    REQUIRE(left != nullptr);
    CHECK(left->client == "10.0.0.5:40003");
    CHECK(left->owner == pa);
    CHECK(left->confidence != link_confidence::certain);
  }
}

TEST_CASE("subscriber links: a subscription given to one client frees the other clients' waiters guessed on it",
          "[timeline][links]") {
  // A's subscriber was guessed B's; A acquired and left, then A's next thread subscribed
  // on it again. B's waiter, still linked to that connection by the old guess, looked
  // subscribed there, so B's own SUBSCRIBE found no candidate (links_redisson_together3).
  // The two processes opened their connections together. With 40 more waiters from another
  // host, those linked to the connection are found by key instead of by a walk.
  for (const int others : {0, 40}) {
    CAPTURE(others);
    fixture f;
    const life a_cmd{-1000, {}}, b_cmd{-999.5, {}}, a_sub{-999.8, {}}, b_sub{-999.3, {}};
    attempt(f, pc, 0, 1, {}, op_outcome::ok);
    for (int i = 0; i < others; ++i) {
      const std::string owner = "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee:" + std::to_string(i + 1);  // outlives the op's view
      auto o = f.op(lock_op_kind::acquire, op_outcome::contended, owner, 1 + i * 0.1, 100 + static_cast<std::uint64_t>(i),
                    "10.0.0.7");
      o.lease_ms = 30000;
      o.ttl_ms = 29000;
      f.timeline.on_operation(o);
    }
    attempt(f, pa, 100, 2, a_cmd);
    attempt(f, pb, 140, 4, b_cmd);
    channel(f, lock_op_kind::subscribe, 150, 3, a_sub);  // A's subscriber, guessed B's
    auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 300, 1, host);
    f.timeline.on_operation(u);
    channel(f, lock_op_kind::message, 300.2, 3, a_sub);
    attempt(f, pa, 300.5, 2, a_cmd, op_outcome::ok);
    channel(f, lock_op_kind::unsubscribe, 330, 3, a_sub, 0);
    attempt(f, pa2, 340, 2, a_cmd);
    channel(f, lock_op_kind::subscribe, 342, 3, a_sub);  // A's next thread
    channel(f, lock_op_kind::subscribe, 360, 5, b_sub);  // B's own subscriber
    REQUIRE(subscribed_on(f, "10.0.0.5:40003") != nullptr);
    REQUIRE(subscribed_on(f, "10.0.0.5:40003")->owner == pb);  // the first guess
    const recorded_event* b = subscribed_on(f, "10.0.0.5:40005");
    REQUIRE(b != nullptr);
    CHECK(b->owner == pb);
  }
}

TEST_CASE("subscriber links: a message between an attempt's request and its reply still tells the waiter",
          "[timeline][links]") {
  // B's link is certain (names). The release's message reaches B's subscriber while B's
  // attempt is in flight, the server having run that attempt before the release (its
  // refusal is captured 30 us after the message). D takes the lock; B, told, retries
  // 50 ms later (Redisson's TTL is 30 s): no timer, no woken_by_timeout
  // (links_redisson_together5: 3 such once their links were certain).
  fixture f;
  const life b_cmd{mid_stream, "proc-b"}, b_sub{mid_stream, "proc-b:sub"};
  attempt(f, pc, 0, 1, {}, op_outcome::ok);
  attempt(f, pb, 100, 4, b_cmd);
  channel(f, lock_op_kind::subscribe, 100.6, 5, b_sub);
  attempt(f, pb, 101, 4, b_cmd);
  auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 500, 1, host);
  f.timeline.on_operation(u);                           // replied at 500.1
  channel(f, lock_op_kind::message, 500.12, 5, b_sub);
  attempt(f, pb, 500.05, 4, b_cmd);                     // replied at 500.15
  attempt(f, pd, 500.5, 6, {}, op_outcome::ok);
  attempt(f, pb, 550, 4, b_cmd);
  REQUIRE(subscribed_on(f, "10.0.0.5:40005") != nullptr);
  REQUIRE(subscribed_on(f, "10.0.0.5:40005")->confidence == link_confidence::certain);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber links: a message on a subscriber whose guessed client left names the one client left",
          "[timeline][links]") {
  // A's and B's subscribers were guessed the wrong way round; A acquired and its own
  // subscriber left. B's subscriber, guessed A's, then hears A's release: A waits no more,
  // B is the one client of the address not listening elsewhere.
  fixture f;
  leave_after_acquisition(f, 0.3);
  REQUIRE(subscribed_on(f, "10.0.0.5:40005") != nullptr);
  REQUIRE(subscribed_on(f, "10.0.0.5:40005")->owner == pa);  // the guess this test is about
  auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pa, 400, 2, host);
  f.timeline.on_operation(u);
  channel(f, lock_op_kind::message, 400.2, 5, {-899.9, "svc"});
  const recorded_event* told = nullptr;
  for (const auto& e : f.events.events) {
    if (e.event == "notified" && e.client == "10.0.0.5:40005") told = &e;
  }
  REQUIRE(told != nullptr);
  CHECK(told->owner == pb);
  CHECK(told->confidence == link_confidence::low);
}

// Redisson's wake-ups on a loaded host (links_redisson_together5.pcap): one permit per
// unlock message for the threads of the JVM whose subscriber got it, each thread that
// retries after a wait answering one. A (threads pa2, pa) shares one subscriber; B waits
// on its own. pa2 waits first; pa's wait begins just before the release, its second
// attempt (Redisson's, once subscribed: no wait) comes after A's message, and its third,
// the one the message woke, 42 ms after it.
namespace {

// pa2's timer retry (its TTL after its last attempt) comes in time order with pa's third.
void slow_wake(fixture& f, bool a_told, double pa_third_ms, bool pa2_retries = false) {
  const life hold{mid_stream, "lockscope-lock:1"}, a_cmd{mid_stream, "lockscope-lock:2"},
      a_sub{mid_stream, "lockscope-lock:2:sub"}, b_cmd{mid_stream, "lockscope-lock:3"},
      b_sub{mid_stream, "lockscope-lock:3:sub"};
  attempt(f, pc, 0, 1, hold, op_outcome::ok);
  attempt(f, pb, 100, 4, b_cmd);
  channel(f, lock_op_kind::subscribe, 100.6, 5, b_sub);
  attempt(f, pb, 101, 4, b_cmd);
  attempt(f, pa2, 200, 2, a_cmd);
  channel(f, lock_op_kind::subscribe, 200.6, 3, a_sub);
  attempt(f, pa2, 201, 2, a_cmd);
  attempt(f, pa, 499, 2, a_cmd);  // pa's wait begins
  auto u = f.op(lock_op_kind::unlock, op_outcome::ok, pc, 500, 1, host);
  f.timeline.on_operation(u);
  if (a_told) channel(f, lock_op_kind::message, 500.3, 3, a_sub);
  channel(f, lock_op_kind::message, 500.35, 5, b_sub);
  attempt(f, pb, 500.5, 4, b_cmd, op_outcome::ok);  // B's thread answers B's message
  attempt(f, pa, 504, 2, a_cmd);                    // pa's retry once subscribed
  constexpr double pa2_timer_ms = 201 + 29000;
  if (pa2_retries && pa2_timer_ms < pa_third_ms) attempt(f, pa2, pa2_timer_ms, 2, a_cmd);
  attempt(f, pa, pa_third_ms, 2, a_cmd);
  if (pa2_retries && pa2_timer_ms >= pa_third_ms) attempt(f, pa2, pa2_timer_ms, 2, a_cmd);
}

std::vector<std::string> timed_out(const fixture& f) {
  std::vector<std::string> owners;
  for (const auto& e : f.events.events) {
    if (e.event == "anomaly:woken_by_timeout") owners.push_back(e.owner);
  }
  return owners;
}

}  // namespace

TEST_CASE("subscriber life: a slow retry after its client's message answers it, not a timer", "[timeline][links]") {
  fixture f;
  slow_wake(f, true, 546);  // 45.7 ms after the message, past the wake window, its TTL 29 s
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber life: a retry at its TTL with no message is still woken_by_timeout", "[timeline][links]") {
  fixture f;
  slow_wake(f, false, 504 + 29000, true);  // A's subscriber heard nothing: both threads wait out their TTL
  const auto owners = timed_out(f);
  CHECK(std::count(owners.begin(), owners.end(), pa) == 1);
  CHECK(std::count(owners.begin(), owners.end(), pa2) == 1);
}

TEST_CASE("subscriber life: one message on a shared subscriber wakes one thread, and the other thread's TTL retry is the timer's",
          "[timeline][links]") {
  fixture f;
  slow_wake(f, true, 546, true);  // pa answers A's one message; pa2 was told, but the permit was taken
  const auto owners = timed_out(f);
  REQUIRE(owners.size() == 1);
  CHECK(owners[0] == pa2);
}
