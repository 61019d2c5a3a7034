// A waiter whose channel another wait's stale timer left (left_again, waiter_moved_on.hpp):
// node-redisson never clears a wait's timer, so a wait woken early still UNSUBSCRIBEs when
// its timer fires, in the middle of the same client's next wait. That UNSUBSCRIBE ends the
// subscription, not the wait: the waiter's own timer UNSUBSCRIBEs again when it gives up
// (0 subscriptions left), and its give-up is dated there. As recorded
// (tests/locks/effect_clients/node_redisson.pcap, p1 on locks:orders at +1.62 s: refused
// twice with a TTL of 964 ms, SUBSCRIBE, stale UNSUBSCRIBEs at +62 and +280 ms, its own at
// +900 ms; the client logged a 900.7 ms tryLock that returned false).
#include "timeline_fixture.hpp"

namespace lockscope::stale_unsubscribes_test {

using namespace lockscope::timeline_test;

namespace {

// One client (its UUID), a new lock object, so a new owner, for each tryLock.
const std::string waiter_a = "7b46369f-770d-4733-b128-0077fc3047cf:d21d6e6e-77b5-479f-8514-504d6d0736b5";
const std::string waiter_b = "7b46369f-770d-4733-b128-0077fc3047cf:6d0cec4a-f7cc-42bf-8165-fb215a800f2d";
const std::string holder = "14658350-f7d2-4169-801c-4fc417ee1d14:11e57352-10ee-42fc-a286-4ec35963ba4c";
constexpr std::uint64_t command = 2, subscriber = 3;

// The holder takes L for 30 s; `owner` is refused twice at `from` (a retry at once, as
// node-redisson does) with `ttl_ms`, then its client SUBSCRIBEs.
void refused_then_subscribed(fixture& f, const std::string& owner, double from, std::int64_t ttl_ms) {
  f.acquire(owner, from, 30'000, op_outcome::contended, command, "10.0.0.2", ttl_ms);
  f.acquire(owner, from + 0.5, 30'000, op_outcome::contended, command, "10.0.0.2", ttl_ms - 1);
  f.pubsub(lock_op_kind::subscribe, from + 0.8, subscriber, "10.0.0.2", 1);
}

void unsubscribe(fixture& f, double at_ms) { f.pubsub(lock_op_kind::unsubscribe, at_ms, subscriber, "10.0.0.2", 0); }

const recorded_event& only_give_up(fixture& f, const std::string& owner) {
  f.timeline.advance_to(at(60'000));
  REQUIRE(f.events.count("gave_up") >= 1);
  const recorded_event* e = first_of(f.events, "gave_up", owner);
  REQUIRE(e != nullptr);
  return *e;
}

}  // namespace

TEST_CASE("stale unsubscribes: the waiter's give-up is its own UNSUBSCRIBE, not another wait's stale one before",
          "[timeline][waiter][give-up][pubsub][stale]") {
  fixture f;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 964);
  unsubscribe(f, 72);   // an earlier wait's timer: the subscription ends here...
  unsubscribe(f, 290);  // ...another's, a no-op (0 left)
  unsubscribe(f, 910);  // the waiter's own timer: tryLock returns false
  const recorded_event& e = only_give_up(f, waiter_a);
  CHECK(e.ended == locks::wait_end::unsubscribed);
  CHECK(e.wait_us == at(910) + 100 - at(10));  // was 62 ms: dated at the first, stale one
  CHECK(e.wait_at_most_us == -1);  // exact, not a bound
}

TEST_CASE("stale unsubscribes: a repeat after the waiter's own timer was due is another wait's",
          "[timeline][waiter][give-up][pubsub][stale]") {
  fixture f;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 300);  // its timer fires by 310 (+ slack)
  unsubscribe(f, 72);
  unsubscribe(f, 1'000);  // long after: not its own
  const recorded_event& e = only_give_up(f, waiter_a);
  CHECK(e.ended == locks::wait_end::unsubscribed);
  CHECK(e.wait_us == at(72) + 100 - at(10));
}

TEST_CASE("stale unsubscribes: a leave its timer explains is its own, later repeats are not",
          "[timeline][waiter][give-up][pubsub][stale]") {
  fixture f;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 300);
  unsubscribe(f, 309);  // at its TTL: its own timer
  unsubscribe(f, 330);  // within the slack, but the leave was explained
  const recorded_event& e = only_give_up(f, waiter_a);
  CHECK(e.wait_us == at(309) + 100 - at(10));
}

TEST_CASE("stale unsubscribes: a leave a message explains is its own, later repeats are not",
          "[timeline][waiter][give-up][pubsub][stale]") {
  fixture f;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 964);
  f.pubsub(lock_op_kind::message, 100, subscriber, "10.0.0.2");
  unsubscribe(f, 100.3);  // its handler: woken (and, its time over, it tries no more)
  unsubscribe(f, 500);
  const recorded_event& e = only_give_up(f, waiter_a);
  CHECK(e.wait_us == at(100.3) + 100 - at(10));
}

TEST_CASE("stale unsubscribes: after the client subscribed again, repeats are its newer wait's",
          "[timeline][waiter][give-up][pubsub][stale]") {
  fixture f;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 964);
  unsubscribe(f, 72);  // a's subscription ends (a stale timer or its own: unexplained)
  refused_then_subscribed(f, waiter_b, 400, 564);
  unsubscribe(f, 500);  // b leaves (unexplained too)
  unsubscribe(f, 900);  // a repeat of b's leave, within a's TTL: b's, not a's
  f.timeline.advance_to(at(60'000));
  const recorded_event* a = first_of(f.events, "gave_up", waiter_a);
  const recorded_event* b = first_of(f.events, "gave_up", waiter_b);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->wait_us == at(72) + 100 - at(10));
  CHECK(b->wait_us == at(900) + 100 - at(400));
}

// The stretch the deaf waiter then waited through (stretch_waited_through_before_give_up,
// waiters.hpp): a free stretch is kept for a waiter's next attempt to confirm, and a
// waiter that gives up makes none. Its give-up's exact end after the stretch shows it
// waited through it: the idle_with_waiters goes out with the gave_up, when the waiter's
// link to its subscriber is certain (the recording's 456 ms: the release at +1.75 s
// published to nobody, another process took the lock at +2.20 s, the waiter gave up at
// +2.52 s); otherwise the gave_up names what was not raised.
namespace {

const std::string other = "33333333-3333-4333-8333-333333333333:1";

void deaf_waiter_then_free_stretch(fixture& f) {
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 964);
  unsubscribe(f, 72);                                               // a stale timer: deaf from here
  f.unlock(holder, 140, op_outcome::ok, 1);                         // published to nobody
  f.acquire(other, 595, 30'000, op_outcome::ok, 4, "10.0.0.4");     // free 455 ms
  unsubscribe(f, 910);                                              // its own timer: it gives up
  f.timeline.advance_to(at(60'000));
}

}  // namespace

TEST_CASE("stale unsubscribes: a free stretch the deaf waiter waited through is said with its give-up",
          "[timeline][waiter][give-up][pubsub][stale][anomaly]") {
  fixture f;
  // Its command and subscriber connections opened together: the link is certain
  // (test_subscriber_life.cpp).
  f.opened[command] = t0 + 9'000;
  f.opened[subscriber] = t0 + 9'500;
  deaf_waiter_then_free_stretch(f);
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->owner == waiter_a);
  CHECK(idle->interval_start_us == at(140) + 100);
  CHECK(idle->interval_us == at(595) - at(140));
  const recorded_event* gone = first_of(f.events, "gave_up", waiter_a);
  REQUIRE(gone != nullptr);
  CHECK(idle->ts_us == gone->ts_us);  // known with the give-up, said just before it
  CHECK(gone->wait_us == at(910) + 100 - at(10));
  CHECK(gone->link_not_certain == locks::anomaly_kind::none);
  CHECK(f.events.count("anomaly:idle_with_waiters") == 1);
}

TEST_CASE("stale unsubscribes: without a certain link the stretch is only named on the give-up",
          "[timeline][waiter][give-up][pubsub][stale][anomaly]") {
  fixture f;
  deaf_waiter_then_free_stretch(f);  // linked by the episode alone (the recording's `high`)
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  const recorded_event* gone = first_of(f.events, "gave_up", waiter_a);
  REQUIRE(gone != nullptr);
  CHECK(gone->link_not_certain == locks::anomaly_kind::idle_with_waiters);
}

TEST_CASE("stale unsubscribes: a stretch after the waiter's give-up is not its",
          "[timeline][waiter][give-up][pubsub][stale][anomaly]") {
  fixture f;
  f.opened[command] = t0 + 9'000;
  f.opened[subscriber] = t0 + 9'500;
  f.acquire(holder, 0, 30'000, op_outcome::ok, 1, "10.0.0.1");
  refused_then_subscribed(f, waiter_a, 10, 964);
  unsubscribe(f, 72);
  f.unlock(holder, 140, op_outcome::ok, 1);
  unsubscribe(f, 400);                                            // it gives up while the lock is free
  f.acquire(other, 595, 30'000, op_outcome::ok, 4, "10.0.0.4");
  f.timeline.advance_to(at(60'000));
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  const recorded_event* gone = first_of(f.events, "gave_up", waiter_a);
  REQUIRE(gone != nullptr);
  CHECK(gone->wait_us == at(400) + 100 - at(10));
  CHECK(gone->link_not_certain == locks::anomaly_kind::none);
}

}  // namespace lockscope::stale_unsubscribes_test
