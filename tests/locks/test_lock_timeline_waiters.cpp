// The waiter model: a wait runs from the first failed attempt until the owner acquires
// or gives up, whatever happens to its subscription; the anomalies a lost subscription
// leads to (idle_with_waiters after the fact, subscription_lost, woken_by_timeout); and
// subscriber connections linked to their clients by what the traffic shows.
#include <random>
#include <set>

#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;

namespace {

// Redisson-style owners: the UUID names the client (process).
const std::string p1 = "11111111-1111-4111-8111-111111111111:1";
const std::string p2 = "22222222-2222-4222-8222-222222222222:1";
const std::string p3 = "33333333-3333-4333-8333-333333333333:1";
constexpr std::string_view host = "10.0.0.5";  // three processes, one host

}  // namespace

TEST_CASE("waiters: node-redisson's lost subscription: idle_with_waiters after the fact, subscription_lost, "
          "woken_by_timeout, and the wait",
          "[timeline][waiter][anomaly]") {
  fixture f;
  // The waiter's command and subscriber connections opened together: the subscriber is
  // its process's for certain, which these anomalies rest on (test_subscriber_life.cpp).
  f.opened[2] = t0 + 99'000;
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 30000);
  f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2", 29900);
  f.acquire(p2, 100.5, 30000, op_outcome::contended, 2, "10.0.0.2", 29899);  // node retries at once: no timer
  f.pubsub(lock_op_kind::subscribe, 101, 3, "10.0.0.2", 1);
  f.pubsub(lock_op_kind::unsubscribe, 300, 3, "10.0.0.2", 0);  // a stale timer's UNSUBSCRIBE: p2 still waits
  f.unlock("A", 1000, op_outcome::ok);                          // published; nobody hears it
  f.timeline.advance_to(at(1900));
  // Live, an unsubscribed waiter's idleness is not certain before it shows up again.
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  CHECK(f.events.count("unsubscribed") == 1);
  f.acquire(p2, 2000, 30000, op_outcome::ok, 2, "10.0.0.2");  // its timer fires after the TTL it waited
  CHECK(f.events.names() ==
        std::vector<std::string>{"acquired", "contended", "contended", "subscribed", "unsubscribed", "released",
                                 "anomaly:idle_with_waiters", "anomaly:subscription_lost",
                                 "anomaly:woken_by_timeout", "acquired"});
  const std::int64_t release = at(1000) + 100, retry = at(2000) + 100;
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  CHECK(idle->ts_us == retry);  // emitted when certain, in time order
  CHECK(idle->owner == p2);
  CHECK(idle->interval_start_us == release);
  CHECK(idle->interval_us == retry - release);
  const recorded_event* lost = f.events.first("anomaly:subscription_lost");
  CHECK(lost->ts_us == retry);
  CHECK(lost->owner == p2);
  CHECK(lost->interval_start_us == release);
  CHECK(lost->client == "10.0.0.2:40002");  // the waiter's command connection
  CHECK(f.events.first("anomaly:woken_by_timeout")->owner == p2);
  CHECK(f.events.events.back().wait_us == retry - at(100));
  std::int64_t last = 0;
  for (const auto& e : f.events.events) {
    CHECK(e.ts_us >= last);
    last = e.ts_us;
  }
}

TEST_CASE("waiters: a Redisson tryLock that timed out and left the channel, then a new tryLock by the same thread, "
          "is two waits",
          "[timeline][waiter][anomaly]") {
  // Redisson's tryLock(1 s): attempt, SUBSCRIBE, attempt, then at its wait time the
  // UNSUBSCRIBE and no more attempts. The same thread's next tryLock, seconds later, is
  // a new wait: before, the old one ran on into it (a 4.5 s wait) with a missed wake-up,
  // a lost subscription and a timer retry that never were.
  fixture f;
  f.acquire("H", 0, 30000, op_outcome::ok, 9, "10.0.0.9");
  f.acquire(p2, 196.9, 30000, op_outcome::contended, 2, "10.0.0.2", 29804);
  f.pubsub(lock_op_kind::subscribe, 197.3, 3, "10.0.0.2", 1);
  f.acquire(p2, 197.4, 30000, op_outcome::contended, 2, "10.0.0.2", 29804);
  f.pubsub(lock_op_kind::unsubscribe, 1198, 3, "10.0.0.2", 0);  // tryLock's wait ran out
  f.unlock("H", 2500, op_outcome::ok, 9);
  f.acquire(p2, 4698.8, 30000, op_outcome::ok, 2, "10.0.0.2");  // the next tryLock: free, taken at once
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.names().back() == "acquired");
  CHECK(f.events.events.back().wait_us < 0);  // no wait: taken at its first attempt
}

TEST_CASE("waiters: a subscription seen from a poller's address is not the poller's", "[timeline][waiter][link]") {
  // Joined mid-stream: a pub/sub waiter W subscribed before the capture (its attempts
  // unseen), and a poller P on the same host tries every 100 ms with Redisson's script.
  // The message W's subscriber gets, and its UNSUBSCRIBE, were named as P's "(high)",
  // and P's next poll then had a lost subscription and a timer retry (an audit's
  // recording, 4 runs of 4).
  fixture f;
  f.acquire("H", 0, 30000, op_outcome::ok, 9, "10.0.0.9");
  for (int i = 0; i < 5; ++i) f.acquire(p2, 100 + 100 * i, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);
  f.unlock("H", 560, op_outcome::ok, 9);
  f.pubsub(lock_op_kind::message, 560.2, 5, "10.0.0.2");  // W's subscriber, from P's host
  f.acquire("W", 560.5, 30000, op_outcome::ok, 6, "10.0.0.2");
  f.pubsub(lock_op_kind::unsubscribe, 561, 5, "10.0.0.2", 0);
  f.unlock("W", 580, op_outcome::ok, 6);
  f.acquire(p2, 600, 30000, op_outcome::ok, 2, "10.0.0.2");  // its next poll takes it
  const recorded_event* notified = f.events.first("notified");
  REQUIRE(notified != nullptr);
  CHECK(notified->owner != p2);
  CHECK(f.events.first("unsubscribed")->owner != p2);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  for (const auto& e : f.events.events) {
    if (e.event == "anomaly") CHECK(e.detail.find("missed wake-up") == std::string::npos);
  }
}

TEST_CASE("waiters: a subscription guessed to be a poller's is the waiter's that retries right after its confirmation",
          "[timeline][waiter][link]") {
  // Churn on one host (an audit's recordings, checked against the clients' logs): a
  // poller P's attempt came between a Redisson-style waiter B's failure and B's
  // SUBSCRIBE, so the subscription went to P, the latest failure before it. B's retry
  // right after the confirmation is Redisson's order and names B; before, P was charged
  // with the subscription's loss and a timer wake-up when it next polled.
  const auto run = [](fixture& f, double b_retry_ms) {
    f.acquire("H", 0, 30000, op_outcome::ok, 9, "10.0.0.9");
    f.acquire(p1, 100.0, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);  // P polls
    f.acquire(p2, 100.2, 30000, op_outcome::contended, 4, "10.0.0.2", 29000);  // B fails
    f.acquire(p1, 100.5, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);  // P again
    f.pubsub(lock_op_kind::subscribe, 100.7, 5, "10.0.0.2", 1);                 // B's SUBSCRIBE
    f.acquire(p2, b_retry_ms, 30000, op_outcome::contended, 4, "10.0.0.2", 29000);
    f.unlock("H", 150, op_outcome::ok, 9);
    f.pubsub(lock_op_kind::message, 150.2, 5, "10.0.0.2");
    f.acquire(p2, 150.5, 30000, op_outcome::ok, 4, "10.0.0.2");
    f.pubsub(lock_op_kind::unsubscribe, 151, 5, "10.0.0.2", 0);
    f.acquire(p1, 160, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);  // P polls while B holds
    f.unlock(p2, 170, op_outcome::ok, 4);
    f.acquire(p1, 190, 30000, op_outcome::ok, 2, "10.0.0.2");  // P's next poll takes it
  };
  SECTION("B retries 0.2 ms after the confirmation: the subscription is B's") {
    fixture f;
    run(f, 100.9);
    CHECK(f.events.first("subscribed")->owner == p1);  // the guess, as it was made (low)
    CHECK(f.events.first("subscribed")->confidence == link_confidence::low);
    REQUIRE(f.events.first("notified") != nullptr);
    CHECK(f.events.first("notified")->owner == p2);
    CHECK(f.events.first("unsubscribed")->owner == p2);
    CHECK(f.events.count("anomaly:subscription_lost") == 0);
    CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  }
  SECTION("B retries 5 ms after it: its first retry since its refusal names the one SUBSCRIBE between; B's leave names B") {
    fixture f;
    run(f, 105.8);
    REQUIRE(f.events.first("notified") != nullptr);
    // B's first retry, the SUBSCRIBE the only one sent since B's refusal and confirmed
    // before it, however late (subscriber_links.hpp, take_subscription_by_retry; before,
    // past the 2 ms of take_guessed_subscription, the guess P stood).
    CHECK(f.events.first("notified")->owner == p2);
    // The subscriber (joined mid-stream: no opening seen) leaves 0.5 ms after B took the
    // lock, B having no waiter left: B's leave (subscriber_links.hpp, acquirer_leaving_unknown).
    CHECK(f.events.first("unsubscribed")->owner == p2);
    CHECK(f.events.first("unsubscribed")->confidence == link_confidence::low);
  }
}

TEST_CASE("waiters: a waiter already subscribed on its own connection is not taken for the next SUBSCRIBE's",
          "[timeline][waiter][link]") {
  // Churn on one host (an audit's recording): W failed, SUBSCRIBEd on its connection
  // and retried; another client's SUBSCRIBE came just after W's retry, which taught
  // that connection it was W's and moved W's link there. When that client acquired and
  // left the channel, W's own wake-up on its real subscription went unheard: a false
  // subscription_lost and woken_by_timeout.
  fixture f;
  f.acquire("H", 0, 30000, op_outcome::ok, 9, "10.0.0.9");
  f.acquire(p3, 99.0, 30000, op_outcome::contended, 6, "10.0.0.2", 29000);  // X fails
  f.acquire(p1, 100.0, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);  // W fails
  f.pubsub(lock_op_kind::subscribe, 100.3, 3, "10.0.0.2", 1);                 // W's SUBSCRIBE
  f.acquire(p1, 100.4, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);  // W's retry
  f.pubsub(lock_op_kind::subscribe, 100.6, 5, "10.0.0.2", 1);                 // X's SUBSCRIBE
  f.unlock("H", 120, op_outcome::ok, 9);
  f.pubsub(lock_op_kind::message, 120.2, 3, "10.0.0.2");
  f.pubsub(lock_op_kind::message, 120.2, 5, "10.0.0.2");
  f.acquire(p3, 120.5, 30000, op_outcome::ok, 6, "10.0.0.2");
  f.acquire(p1, 120.6, 30000, op_outcome::contended, 2, "10.0.0.2", 29000);
  f.pubsub(lock_op_kind::unsubscribe, 121, 5, "10.0.0.2", 0);
  f.unlock(p3, 140, op_outcome::ok, 6);
  f.pubsub(lock_op_kind::message, 140.2, 3, "10.0.0.2");
  f.acquire(p1, 140.5, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  std::vector<std::string> subscribed_owners;
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed") subscribed_owners.push_back(e.owner);
  }
  REQUIRE(subscribed_owners.size() == 2);
  CHECK(subscribed_owners[0] == p1);
  CHECK(subscribed_owners[1] != p1);
}

TEST_CASE("waiters: a Redisson waiter whose command connection is killed goes on waiting on its subscription",
          "[timeline][waiter][link]") {
  // CLIENT KILL of a waiter's command connection: Redisson reconnects and its thread
  // goes on waiting, under the same owner, while its subscriber stays subscribed. The
  // wait ran from the new connection's first attempt (724 ms for the 1,327 ms its
  // client logged, in an audit's recording).
  const auto start = [](fixture& f) {
    f.acquire("H", 0, 30000, op_outcome::ok, 9, "10.0.0.9");
    f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2", 29900);
    f.pubsub(lock_op_kind::subscribe, 100.3, 3, "10.0.0.2", 1);
    f.acquire(p2, 100.4, 30000, op_outcome::contended, 2, "10.0.0.2", 29899);
  };
  SECTION("its subscriber still subscribed: the wait goes on") {
    fixture f;
    start(f);
    f.timeline.on_connection_end(2, at(500));
    f.acquire(p2, 700, 30000, op_outcome::contended, 4, "10.0.0.2", 29300);  // the new connection
    f.unlock("H", 1400, op_outcome::ok, 9);
    f.pubsub(lock_op_kind::message, 1400.2, 3, "10.0.0.2");
    f.acquire(p2, 1400.5, 30000, op_outcome::ok, 4, "10.0.0.2");
    REQUIRE(f.events.names().back() == "acquired");
    CHECK(f.events.events.back().wait_us == at(1400.5) + 100 - at(100));
    CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  }
  SECTION("its subscriber gone first: the waiter left with its connection") {
    fixture f;
    start(f);
    f.timeline.on_connection_end(3, at(400));
    f.timeline.on_connection_end(2, at(500));
    f.acquire(p2, 700, 30000, op_outcome::contended, 4, "10.0.0.2", 29300);
    f.unlock("H", 1400, op_outcome::ok, 9);
    f.acquire(p2, 1400.5, 30000, op_outcome::ok, 4, "10.0.0.2");
    REQUIRE(f.events.names().back() == "acquired");
    CHECK(f.events.events.back().wait_us == at(1400.5) + 100 - at(700));
  }
  SECTION("its subscriber gone after: it leaves then, and no idleness is charged to it") {
    fixture f;
    start(f);
    f.timeline.on_connection_end(2, at(500));
    f.timeline.on_connection_end(3, at(600));
    // Nothing names the two connections any more: only the holder's is left.
    CHECK(f.timeline.memory().connections == 1);
    f.unlock("H", 1000, op_outcome::ok, 9);
    f.timeline.advance_to(at(5000));
    CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  }
}

TEST_CASE("waiters: a poller's idleness is its sleep between attempts, not a missed wake-up", "[timeline][waiter][anomaly]") {
  // A SET NX PX client (no pub/sub) fails, sleeps 200 ms, and finds the lock free since 50.
  fixture f;
  auto attempt = [&](std::string_view owner, double at_ms, op_outcome outcome, std::uint64_t connection) {
    auto o = f.op(lock_op_kind::acquire, outcome, owner, at_ms, connection);
    o.family = lock_family::set_based;
    o.lease_ms = 30000;
    f.timeline.on_operation(o);
  };
  attempt("A", 0, op_outcome::ok, 1);
  attempt("B", 10, op_outcome::contended, 2);
  auto release = f.op(lock_op_kind::del, op_outcome::ok, "A", 50, 1);
  release.family = lock_family::set_based;
  f.timeline.on_operation(release);
  attempt("B", 210, op_outcome::ok, 2);
  REQUIRE(f.events.count("anomaly:idle_with_waiters") == 1);
  CHECK(f.events.first("anomaly:idle_with_waiters")->detail == "free while a polling waiter slept between its attempts");
}

TEST_CASE("waiters: a subscribed waiter's idleness is certain at the threshold, with its interval",
          "[timeline][waiter][anomaly]") {
  fixture f;
  f.opened[2] = t0 + 99'000;  // its connections opened together: the link is certain
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 30000);
  f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2");
  f.pubsub(lock_op_kind::subscribe, 101, 3);
  f.unlock("A", 1000, op_outcome::ok);
  f.timeline.advance_to(at(1200));
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->ts_us == at(1050) + 100);
  CHECK(idle->interval_start_us == at(1000) + 100);
  CHECK(idle->interval_us == 50 * ms);
  // Subscribed at the release: the message was lost, not the subscription.
  f.acquire(p2, 6000, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(f.events.count("anomaly:idle_with_waiters") == 1);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 1);
}

TEST_CASE("waiters: a free interval that ended before the waiter's retry is reported by that retry",
          "[timeline][waiter][anomaly]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2", 29900);
  f.unlock("A", 1000, op_outcome::ok);
  f.acquire("C", 1400, 30000, op_outcome::ok, 4, "10.0.0.4");  // C takes it after 400 ms
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  f.acquire(p2, 3000, 30000, op_outcome::contended, 2, "10.0.0.2", 28400);  // p2 still waits
  const recorded_event* idle = f.events.first("anomaly:idle_with_waiters");
  REQUIRE(idle != nullptr);
  CHECK(idle->ts_us == at(3000) + 100);
  CHECK(idle->interval_start_us == at(1000) + 100);
  CHECK(idle->interval_us == 400 * ms);
  // Never subscribed: no pub/sub wait, so no subscription_lost and no woken_by_timeout.
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
}

TEST_CASE("waiters: woken_by_timeout for an unsubscribed waiter after an expiry (no release: no subscription_lost)",
          "[timeline][waiter][anomaly]") {
  fixture f;
  f.opened[2] = t0 + 99'000;  // its connections opened together: the link is certain
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 500);
  f.acquire(p2, 100, 500, op_outcome::contended, 2, "10.0.0.2", 400);
  f.pubsub(lock_op_kind::subscribe, 101, 3, "10.0.0.2", 1);
  f.pubsub(lock_op_kind::unsubscribe, 200, 3, "10.0.0.2", 0);
  f.acquire(p2, 510, 500, op_outcome::ok, 2, "10.0.0.2");  // 10 ms after the expiry: not idle
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "contended", "subscribed", "unsubscribed", "expired",
                                                     "anomaly:woken_by_timeout", "acquired"});
}

TEST_CASE("waiters: a waiter that does not retry within its TTL plus the margin gave up", "[timeline][waiter]") {
  locks::timeline_options o;
  o.waiter_margin_us = 1000 * ms;
  fixture f(o);
  f.acquire("A", 0, 30000);
  f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2", 500);
  f.acquire(p2, 1500, 30000, op_outcome::contended, 2, "10.0.0.2", 500);  // within 500 + 1000 ms: still waiting
  f.timeline.advance_to(at(3100));  // 1500 + 500 + 1000 passed with no attempt
  f.unlock("A", 4000, op_outcome::ok);
  f.timeline.advance_to(at(8000));
  // A released and the waiter gone: only each connection's last owner (what a plain DEL
  // on it would be attributed to) is still held, until the connection ends.
  CHECK(f.timeline.memory().owners == 2);
  f.acquire(p2, 9000, 30000, op_outcome::ok, 2, "10.0.0.2");  // a new start
  CHECK(f.events.events.back().event == "acquired");
  CHECK(f.events.events.back().wait_us == -1);
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
}

TEST_CASE("waiters: acquisitions after inferred failed attempts carry wait_ms", "[timeline][waiter]") {
  fixture f;
  f.acquire("A", 0, 30000);
  auto failed = f.op(lock_op_kind::acquire, op_outcome::contended, p2, 100, 2, "10.0.0.2");
  failed.inferred = true;
  failed.ttl_ms = 900;
  f.timeline.on_operation(failed);
  f.unlock("A", 1000, op_outcome::ok);
  auto won = f.op(lock_op_kind::acquire, op_outcome::ok, p2, 1001, 2, "10.0.0.2");
  won.inferred = true;
  won.lease_ms = 30000;
  f.timeline.on_operation(won);
  const recorded_event& e = f.events.events.back();
  CHECK(e.event == "acquired");
  CHECK(e.inferred);
  CHECK(e.wait_us == at(1001) + 100 - at(100));
}

TEST_CASE("waiters: UNSUBSCRIBE of a channel the connection is not subscribed to is no event", "[timeline][waiter]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.acquire(p2, 100, 30000, op_outcome::contended, 2, "10.0.0.2");
  f.pubsub(lock_op_kind::unsubscribe, 101, 3, "10.0.0.2", 0);  // never subscribed, answered 0: nothing
  CHECK(f.events.count("unsubscribed") == 0);
  f.pubsub(lock_op_kind::subscribe, 102, 3, "10.0.0.2", 1);
  f.pubsub(lock_op_kind::unsubscribe, 103, 3, "10.0.0.2", 0);  // the real one
  f.pubsub(lock_op_kind::unsubscribe, 104, 3, "10.0.0.2", 0);  // again: nothing
  f.pubsub(lock_op_kind::unsubscribe, 105, 3, "10.0.0.2", 2);  // seen leaving: nothing, whatever the count
  REQUIRE(f.events.count("unsubscribed") == 1);
  CHECK(f.events.first("unsubscribed")->owner == p2);
  // Joined mid-run: a connection never seen before, still subscribed to others.
  f.pubsub(lock_op_kind::unsubscribe, 106, 5, "10.0.0.2", 1);
  CHECK(f.events.count("unsubscribed") == 2);
  CHECK(f.events.events.back().owner.empty());
}

namespace {

// Three processes on one host, each with a command connection (1, 2, 3) and a
// subscriber connection (11, 12, 13). Attempts at t0 + at_ms.
struct three_processes : fixture {
  void fail(const std::string& owner, std::uint64_t c, double at_ms) {
    acquire(owner, at_ms, 30000, op_outcome::contended, c, host, 29000);
  }
  void wake(std::uint64_t sub, const std::string& owner, std::uint64_t c, double at_ms) {
    pubsub(lock_op_kind::message, at_ms, sub, host);
    fail(owner, c, at_ms + 0.2);  // reacts at once; nobody else attempts
  }
  std::vector<std::string> clients = {p1, p2, p3};
};

}  // namespace

TEST_CASE("waiters: subscriber links learned from episodes where the IP/time guess is wrong", "[timeline][waiter][link]") {
  three_processes f;
  f.acquire("H", 0, 60000, op_outcome::ok, 9, "10.0.0.9");
  // p1 fails, then p2 fails; then p1's SUBSCRIBE arrives on 11: the latest failure is
  // p2's, and the IP is everyone's. The guess names p2, but only as low.
  f.fail(p1, 1, 100);
  f.fail(p2, 2, 100.3);
  f.pubsub(lock_op_kind::subscribe, 100.6, 11, host, 1);
  CHECK(f.events.events.back().owner == p2);
  CHECK(f.events.events.back().confidence == link_confidence::low);
  f.pubsub(lock_op_kind::subscribe, 100.7, 12, host, 1);
  f.fail(p3, 3, 105);
  f.pubsub(lock_op_kind::subscribe, 105.3, 13, host, 1);  // p3 alone failed just before: an episode
  // Wake-ups each followed by one client alone: the pairing of every subscriber.
  for (int round = 0; round < 3; ++round) {
    const double t = 200 + 100 * round;
    f.wake(11, p1, 1, t);
    f.wake(12, p2, 2, t + 30);
    f.wake(13, p3, 3, t + 60);
  }
  f.timeline.advance_to(at(600));
  // Now the same confusing order names the right client, with certainty.
  f.fail(p1, 1, 700);
  f.fail(p2, 2, 700.3);
  f.pubsub(lock_op_kind::subscribe, 700.6, 11, host, 1);
  CHECK(f.events.events.back().event == "subscribed");
  CHECK(f.events.events.back().owner == p1);
  CHECK(f.events.events.back().confidence == link_confidence::certain);
  f.pubsub(lock_op_kind::message, 800, 12, host);
  CHECK(f.events.events.back().event == "notified");
  CHECK(f.events.events.back().owner == p2);
  CHECK(f.events.events.back().confidence == link_confidence::certain);
  // No subscriber event names a client other than its subscriber's with high or certain.
  for (const auto& e : f.events.events) {
    if (e.event != "subscribed" && e.event != "notified" && e.event != "unsubscribed") continue;
    if (e.confidence != link_confidence::high && e.confidence != link_confidence::certain) continue;
    const std::size_t index = e.client == "10.0.0.5:40011" ? 0 : e.client == "10.0.0.5:40012" ? 1 : 2;
    CHECK(e.owner == f.clients[index]);
  }
}

TEST_CASE("waiters: a guess the traffic contradicts is low, and the link follows the evidence", "[timeline][waiter][link]") {
  three_processes f;
  f.acquire("H", 0, 60000, op_outcome::ok, 9, "10.0.0.9");
  f.fail(p1, 1, 100);
  f.fail(p2, 2, 110);
  f.pubsub(lock_op_kind::subscribe, 100.2, 11, host, 1);
  f.pubsub(lock_op_kind::subscribe, 110.2, 12, host, 1);
  for (int round = 0; round < 3; ++round) f.wake(12, p2, 2, 200 + 100 * round);  // 12 is p2's
  f.timeline.advance_to(at(600));
  // Only p2 waits from this host, unsubscribed, when a new subscriber (14) subscribes:
  // the IP/time guess has one candidate, which would be "high"; but p2's subscriber is 12.
  f.timeline.on_connection_end(1, at(650));  // p1 gave up
  f.pubsub(lock_op_kind::unsubscribe, 660, 12, host, 0);
  f.fail(p2, 2, 700);
  f.pubsub(lock_op_kind::subscribe, 700.5, 14, host, 1);
  CHECK(f.events.events.back().owner == p2);
  CHECK(f.events.events.back().confidence == link_confidence::low);
  // 14 turns out to be p3's: its wake-ups are followed by p3 alone. Re-linked once
  // the evidence outweighs the early episode that pointed to p2.
  f.fail(p3, 3, 750);
  for (int round = 0; round < 8; ++round) f.wake(14, p3, 3, 800 + 100 * round);
  f.timeline.advance_to(at(1700));
  f.pubsub(lock_op_kind::message, 1800, 14, host);
  CHECK(f.events.events.back().event == "notified");
  CHECK(f.events.events.back().owner == p3);
  CHECK(f.events.events.back().confidence == link_confidence::certain);
  f.pubsub(lock_op_kind::unsubscribe, 1801, 14, host, 0);
  CHECK(f.events.events.back().event == "unsubscribed");
  CHECK(f.events.events.back().owner == p3);
  CHECK(f.events.events.back().confidence == link_confidence::certain);
}

TEST_CASE("waiters: learned links are freed with their connections", "[timeline][waiter][link][memory]") {
  three_processes f;
  f.acquire("H", 0, 60000, op_outcome::ok, 9, "10.0.0.9");
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t c = 100 + static_cast<std::uint64_t>(i) * 2;
    const std::string owner = "44444444-4444-4444-8444-" + std::string(12 - std::to_string(i).size(), '0') +
                              std::to_string(i) + ":1";
    const double t = 100 + i * 10;
    f.acquire(owner, t, 30000, op_outcome::contended, c, host, 29000);
    f.pubsub(lock_op_kind::subscribe, t + 0.3, c + 1, host, 1);
    f.wake(c + 1, owner, c, t + 1);
    f.timeline.on_connection_end(c, at(t + 5));
    f.timeline.on_connection_end(c + 1, at(t + 5));
  }
  const locks::timeline_memory m = f.timeline.memory();
  CHECK(m.connections == 1);  // the holder's
  CHECK(m.owners == 1);
  CHECK(m.subscriber_clients == 0);
}

TEST_CASE("waiters: a new waiter shares its client's subscription, the first in table order, and loses it with "
          "that connection",
          "[timeline][waiter][link]") {
  fixture f;
  const std::string a1 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1";
  const std::string a2 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:2";
  const std::string a3 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:3";
  f.opened[1] = t0 + 99'000;  // a1's connections opened together: 11 is client A's for certain
  f.opened[11] = t0 + 100'200;
  f.acquire("H", 0, 60000, op_outcome::ok, 9, "10.0.0.9");
  // Client A has two subscriptions to the lock's channel: a1's on 11, and a2's on 12, the
  // connection a2 attempts on (RESP3).
  f.acquire(a1, 100, 30000, op_outcome::contended, 1, "10.0.0.1", 29900);
  f.pubsub(lock_op_kind::subscribe, 100.3, 11, "10.0.0.1", 1);
  CHECK(f.events.events.back().owner == a1);
  f.acquire(a2, 200, 30000, op_outcome::contended, 12, "10.0.0.2", 29800);
  f.pubsub(lock_op_kind::subscribe, 200.3, 12, "10.0.0.2", 1);
  CHECK(f.events.events.back().owner == a2);
  CHECK(f.timeline.memory().subscriber_clients == 1);
  // a3 shares one of them without a SUBSCRIBE of its own: 11's, seen first. That
  // connection ends, so a3 hears nothing of the release and retries late.
  f.acquire(a3, 300, 30000, op_outcome::contended, 3, "10.0.0.3", 29700);
  f.timeline.on_connection_end(11, at(400));
  f.unlock("H", 500, op_outcome::ok, 9);
  f.acquire(a3, 2000, 30000, op_outcome::ok, 3, "10.0.0.3");
  const recorded_event* lost = f.events.first("anomaly:subscription_lost");
  REQUIRE(lost != nullptr);
  CHECK(lost->owner == a3);
  CHECK(lost->detail.find("its subscriber unsubscribed 100") != std::string::npos);
  CHECK(f.timeline.memory().subscriber_clients == 1);  // 12's
  // With 12 gone too, client A shares nothing.
  f.pubsub(lock_op_kind::unsubscribe, 2100, 12, "10.0.0.2", 0);
  CHECK(f.timeline.memory().subscriber_clients == 0);
}

TEST_CASE("waiters: a sure client with two waiters in one pipeline names either only as low", "[timeline][waiter][link]") {
  three_processes f;
  f.acquire("H", 0, 60000, op_outcome::ok, 9, "10.0.0.9");
  f.fail(p1, 1, 100);
  f.pubsub(lock_op_kind::subscribe, 100.3, 11, host, 1);
  for (int round = 0; round < 3; ++round) f.wake(11, p1, 1, 200 + 100 * round);
  f.timeline.advance_to(at(600));
  // A second owner of p1's client, attempting in the same pipeline as the first.
  const std::string sibling = "11111111-1111-4111-8111-111111111111:2";
  f.fail(p1, 1, 700);
  f.acquire(sibling, 700, 30000, op_outcome::contended, 1, host, 29000);
  f.pubsub(lock_op_kind::subscribe, 700.4, 11, host, 1);
  const recorded_event& e = f.events.events.back();
  CHECK(e.event == "subscribed");
  CHECK((e.owner == p1 || e.owner == sibling));
  CHECK(e.confidence == link_confidence::low);
  // Alone again: certain.
  f.timeline.on_connection_end(1, at(800));
  f.acquire(sibling, 900, 30000, op_outcome::contended, 4, host, 29000);
  f.pubsub(lock_op_kind::subscribe, 900.3, 11, host, 1);
  CHECK(f.events.events.back().owner == sibling);
  CHECK(f.events.events.back().confidence == link_confidence::certain);
}

TEST_CASE("timeline: a waiter fails, subscribes, is notified and acquires with wait_ms", "[timeline]") {
  fixture f;
  f.acquire("A", 0, 30000, op_outcome::ok, 1, "10.0.0.1");
  f.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2", 29900);
  f.pubsub(lock_op_kind::subscribe, 101, 3);
  f.acquire("B", 102, 30000, op_outcome::contended, 2, "10.0.0.2", 29898);  // the retry after SUBSCRIBE
  f.unlock("A", 1000, op_outcome::ok);
  f.pubsub(lock_op_kind::message, 1000.2, 3);
  f.acquire("B", 1001, 30000, op_outcome::ok, 2, "10.0.0.2");
  f.pubsub(lock_op_kind::unsubscribe, 1002, 3);
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "contended", "subscribed", "contended", "released",
                                                     "notified", "acquired", "unsubscribed"});
  const auto& sub = f.events.events[2];
  CHECK(sub.owner == "B");
  CHECK(sub.confidence == link_confidence::high);
  CHECK(f.events.events[1].ttl_ms == 29900);
  CHECK(f.events.events[5].owner == "B");
  const auto& acquired = f.events.events[6];
  CHECK(acquired.wait_us == 1001 * ms + 100 - 100 * ms);  // reply of the acquire - first failed request
  CHECK(f.events.events[7].owner == "B");
}

TEST_CASE("timeline: subscriber linking confidence", "[timeline]") {
  SECTION("same connection (RESP3): certain") {
    fixture f;
    f.acquire("A", 0, 30000);
    f.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
    f.pubsub(lock_op_kind::subscribe, 101, 2);
    CHECK(f.events.first("subscribed")->confidence == link_confidence::certain);
  }
  SECTION("two waiters on the same IP: low, the most recent") {
    fixture f;
    f.acquire("A", 0, 30000);
    f.acquire("B1", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
    f.acquire("B2", 101, 30000, op_outcome::contended, 4, "10.0.0.2");
    f.pubsub(lock_op_kind::subscribe, 102, 3);
    CHECK(f.events.first("subscribed")->confidence == link_confidence::low);
    CHECK(f.events.first("subscribed")->owner == "B2");
  }
  SECTION("another IP or outside the window: not linked") {
    fixture f;
    f.acquire("A", 0, 30000);
    f.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
    f.pubsub(lock_op_kind::subscribe, 101, 3, "10.0.0.3");
    f.pubsub(lock_op_kind::subscribe, 5000, 5, "10.0.0.2");
    CHECK(f.events.count("subscribed") == 2);
    for (const auto& e : f.events.events) {
      if (e.event == "subscribed") CHECK(e.owner.empty());
    }
  }
}

TEST_CASE("timeline: idle_with_waiters fires at free + threshold with nothing following", "[timeline][anomaly]") {
  fixture f;
  f.opened[2] = t0 + 99'000;  // B's connections opened together: its link is certain
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 30000);
  f.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
  f.pubsub(lock_op_kind::subscribe, 101, 3);
  f.unlock("A", 1000, op_outcome::ok);
  f.timeline.advance_to(t0 + 1040 * ms);
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
  f.timeline.advance_to(t0 + 2000 * ms);
  REQUIRE(f.events.count("anomaly:idle_with_waiters") == 1);
  CHECK(f.events.first("anomaly:idle_with_waiters")->ts_us == t0 + 1000 * ms + 100 + 50 * ms);
  CHECK(f.events.first("anomaly:idle_with_waiters")->owner == "B");

  fixture quick;  // the waiter takes it within the threshold: no anomaly
  quick.acquire("A", 0, 30000);
  quick.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
  quick.pubsub(lock_op_kind::subscribe, 101, 3);
  quick.unlock("A", 1000, op_outcome::ok);
  quick.acquire("B", 1030, 30000, op_outcome::ok, 2, "10.0.0.2");
  quick.timeline.advance_to(t0 + 5000 * ms);
  CHECK(quick.events.count("anomaly:idle_with_waiters") == 0);
}

TEST_CASE("timeline: woken_by_timeout, but not for the retry right after SUBSCRIBE or after a message",
          "[timeline][anomaly]") {
  fixture f;
  f.opened[2] = t0 + 99'000;  // B's connections opened together: its link is certain
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 500);
  f.acquire("B", 100, 500, op_outcome::contended, 2, "10.0.0.2", 400);
  f.pubsub(lock_op_kind::subscribe, 101, 3);
  f.acquire("B", 102, 500, op_outcome::contended, 2, "10.0.0.2", 398);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  f.acquire("B", 520, 500, op_outcome::ok, 2, "10.0.0.2");
  CHECK(f.events.count("anomaly:woken_by_timeout") == 1);
  CHECK(f.events.first("anomaly:woken_by_timeout")->owner == "B");

  fixture g;
  g.acquire("A", 0, 30000);
  g.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
  g.pubsub(lock_op_kind::subscribe, 101, 3);
  g.acquire("B", 102, 30000, op_outcome::contended, 2, "10.0.0.2");
  g.unlock("A", 200, op_outcome::ok);
  g.pubsub(lock_op_kind::message, 200.2, 3);
  g.acquire("B", 201, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(g.events.count("anomaly:woken_by_timeout") == 0);
}

namespace {

// A holds (a 300 ms lease); B fails, subscribes, and fails again (Redisson's order).
void subscribed_waiter_b(fixture& f) {
  f.opened[2] = t0 + 99'000;  // B's connections opened together: its link is certain
  f.opened[3] = t0 + 100'800;
  f.acquire("A", 0, 300);
  f.acquire("B", 100, 300, op_outcome::contended, 2, "10.0.0.2", 200);
  f.pubsub(lock_op_kind::subscribe, 101, 3);
  f.acquire("B", 102, 300, op_outcome::contended, 2, "10.0.0.2", 198);
}

}  // namespace

TEST_CASE("timeline: woken_by_timeout is reported once per wait", "[timeline][anomaly]") {
  // A releases at 150 and C takes the lock at once; no message reaches B, whose timer
  // wakes it at 299.5, and it retries in a tight loop.
  fixture f;
  subscribed_waiter_b(f);
  f.unlock("A", 150, op_outcome::ok);
  f.acquire("C", 150.5, 30000, op_outcome::ok, 4, "10.0.0.4");
  for (int i = 0; i < 5; ++i) f.acquire("B", 299.5 + 0.1 * i, 300, op_outcome::contended, 2, "10.0.0.2", 29000);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 1);
}

TEST_CASE("timeline: a timer retry while the lock was held all along is no woken_by_timeout", "[timeline][anomaly]") {
  // A's watchdog keeps the lock; B retries when the TTL it was given runs out (Redisson
  // does, and so does tryLock when its wait time ends): nothing went free, nothing to hear.
  fixture f;
  subscribed_waiter_b(f);
  f.renew("A", 200, 300);
  f.acquire("B", 300.5, 300, op_outcome::contended, 2, "10.0.0.2", 199);
  f.renew("A", 400, 300);
  f.acquire("B", 500, 300, op_outcome::contended, 2, "10.0.0.2", 200);
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
}

TEST_CASE("timeline: a waiter gives up when its connection ends, subscriptions end with their connection",
          "[timeline][memory][waiter]") {
  fixture f;
  f.acquire("a:1", 0, 30'000, op_outcome::ok, 1);
  f.acquire("b:1", 1, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  f.pubsub(lock_op_kind::subscribe, 2, 3);  // b's subscriber connection, linked to its wait
  CHECK(f.timeline.memory().connections == 3);
  f.timeline.on_connection_end(2, t0 + 3 * ms);  // b's command connection: b gave up
  f.timeline.on_connection_end(3, t0 + 3 * ms);
  CHECK(f.timeline.memory().connections == 1);  // only 1, open and holding
  CHECK(f.timeline.memory().owners == 1);
  f.unlock("a:1", 5, op_outcome::ok, 1);
  f.timeline.advance_to(t0 + 1000 * ms);
  CHECK(f.events.count("anomaly:idle_with_waiters") == 0);  // nobody waits any more
  f.acquire("b:1", 1006, 30'000, op_outcome::ok, 4, "10.0.0.2");  // a new start on a new connection
  const recorded_event* acquired = f.events.events.back().event == "acquired" ? &f.events.events.back() : nullptr;
  REQUIRE(acquired != nullptr);
  CHECK(acquired->wait_us == -1);
  f.timeline.on_connection_end(1, t0 + 1007 * ms);
  const locks::timeline_memory m = f.timeline.memory();
  CHECK(m.connections == 1);  // 4, open and holding
  CHECK(m.owners == 1);       // b:1
  CHECK(m.endpoint_texts == 2);
}

TEST_CASE("timeline: a thundering herd of waiters, a connection of half of them ending, the others found again",
          "[timeline][waiters]") {
  // More waiters than a scan is used for: they are found by an index, which must follow
  // the ones that leave (a connection's end takes 50 of them at once).
  fixture f;
  f.acquire("holder:1", 0, 30000);
  constexpr int waiters = 100;
  for (int i = 0; i < waiters; ++i) {
    const std::uint64_t connection = i < waiters / 2 ? 10 : 11;
    f.acquire("w" + std::to_string(i) + ":1", 1 + i * 0.01, 30000, op_outcome::contended, connection, "10.0.0.1", 29000);
  }
  f.timeline.on_connection_end(10, t0 + 5 * ms);  // w0..w49 gave up
  f.acquire("w10:1", 6, 30000, op_outcome::contended, 12, "10.0.0.1", 29000);  // a new wait, from 6 ms
  f.acquire("w60:1", 6.5, 30000, op_outcome::contended, 11, "10.0.0.1", 29000);  // still waiting since 1.6 ms
  f.unlock("holder:1", 7, op_outcome::ok);
  f.acquire("w60:1", 7.1, 30000, op_outcome::ok, 11);
  f.unlock("w60:1", 7.2, op_outcome::ok, 11);
  f.acquire("w10:1", 7.3, 30000, op_outcome::ok, 12);
  f.unlock("w10:1", 7.4, op_outcome::ok, 12);
  f.acquire("w99:1", 7.5, 30000, op_outcome::ok, 11);
  std::map<std::string, std::int64_t> waited;
  for (const auto& e : f.events.events) {
    if (e.event == "acquired") waited[e.owner] = e.wait_us;
  }
  // From the first failed attempt's request to the acquisition's reply (100 µs later).
  CHECK(waited.at("w60:1") == 7200 - 1600);
  CHECK(waited.at("w10:1") == 7400 - 6000);
  CHECK(waited.at("w99:1") == 7600 - 1990);
  CHECK(f.events.count("contended") == waiters + 2);
}

TEST_CASE("timeline: connections that end after the capture's end close nothing: no gave_up, no closed holder",
          "[timeline][waiter][give-up]") {
  // The ingest closes the flows still open when the capture ends like the others;
  // lock_pipeline says first that the capture ends (capture_ends_connection).
  fixture f;
  f.acquire("a:1", 0, 30'000, op_outcome::ok, 1);
  f.acquire("b:1", 1, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  f.timeline.on_connection_end(locks::capture_ends_connection, 0);
  f.timeline.on_connection_end(1, t0 + 3 * ms);
  f.timeline.on_connection_end(2, t0 + 3 * ms);
  f.timeline.finish(t0 + 3 * ms);
  CHECK(f.events.count("gave_up") == 0);
  CHECK(f.events.count("anomaly:holder_connection_closed") == 0);
  // Seen closing instead: both are said.
  fixture g;
  g.acquire("a:1", 0, 30'000, op_outcome::ok, 1);
  g.acquire("b:1", 1, 30'000, op_outcome::contended, 2, "10.0.0.2", 29'000);
  g.timeline.on_connection_end(2, t0 + 3 * ms);
  g.timeline.on_connection_end(1, t0 + 4 * ms);
  REQUIRE(g.events.count("gave_up") == 1);
  const recorded_event* gave_up = g.events.first("gave_up");
  CHECK(gave_up->owner == "b:1");
  CHECK(gave_up->ts_us == t0 + 3 * ms);
  CHECK(gave_up->interval_start_us == t0 + 1 * ms);  // its first attempt's request
  REQUIRE(g.events.count("anomaly:holder_connection_closed") == 1);
  CHECK(g.events.first("anomaly:holder_connection_closed")->owner == "a:1");
  CHECK(g.events.first("anomaly:holder_connection_closed")->ts_us == t0 + 4 * ms);
}

namespace {
// Keeps what the closed-holder fields of each event said (lock_event's views are valid
// during the call only).
struct closed_holder_sink : locks::lock_event_sink {
  struct seen {
    std::string event, owner, closed_holder;
    std::int64_t ts = 0, closed_us = -1, expired_us = -1;
  };
  std::vector<seen> all;
  void on_event(const locks::lock_event& e) override {
    std::string name(to_string(e.event));
    if (e.event == locks::lock_event_kind::anomaly) name += ":" + std::string(to_string(e.kind));
    all.push_back({name, std::string(e.owner), std::string(e.closed_holder), e.ts_us, e.closed_holder_us,
                   e.closed_holder_expired_us});
  }
  const seen* first(std::string_view event) const {
    for (const auto& s : all) {
      if (s.event == event) return &s;
    }
    return nullptr;
  }
};
}  // namespace

TEST_CASE("timeline: a holder whose connection closed is named by its expiry and by its waiter, unless it acts from another connection",
          "[timeline][waiter][give-up]") {
  fixture ops;  // builds the operations
  for (const bool lives_on : {false, true}) {
    INFO(lives_on);
    closed_holder_sink sink;
    locks::lock_timeline timeline({}, sink);
    auto a = ops.op(lock_op_kind::acquire, op_outcome::ok, "a:1", 0, 1);
    a.lease_ms = 1000;
    timeline.on_operation(a);
    auto b = ops.op(lock_op_kind::acquire, op_outcome::contended, "b:1", 1, 2, "10.0.0.2");
    b.ttl_ms = 999;
    timeline.on_operation(b);
    timeline.on_connection_end(1, t0 + 10 * ms);  // a's connection, while a holds
    REQUIRE(sink.first("anomaly:holder_connection_closed") != nullptr);
    CHECK(sink.first("anomaly:holder_connection_closed")->owner == "a:1");
    if (lives_on) {  // a pool's other connection renews, then releases
      auto r = ops.op(lock_op_kind::renew, op_outcome::ok, "a:1", 300, 5);
      r.lease_ms = 1000;
      timeline.on_operation(r);
      auto u = ops.op(lock_op_kind::unlock, op_outcome::ok, "a:1", 600, 5);
      timeline.on_operation(u);
      auto won = ops.op(lock_op_kind::acquire, op_outcome::ok, "b:1", 601, 2, "10.0.0.2");
      won.lease_ms = 1000;
      timeline.on_operation(won);
      REQUIRE(sink.first("acquired") != nullptr);
      const auto* acquired = &sink.all.back();
      CHECK(acquired->event == "acquired");
      CHECK(acquired->closed_holder.empty());  // it waited for a holder that lived on
      CHECK(sink.first("released")->owner == "a:1");
      continue;
    }
    auto won = ops.op(lock_op_kind::acquire, op_outcome::ok, "b:1", 1002, 2, "10.0.0.2");  // its TTL ran out
    won.lease_ms = 1000;
    timeline.on_operation(won);
    const auto* expired = sink.first("expired");
    REQUIRE(expired != nullptr);
    CHECK(expired->closed_holder == "a:1");
    CHECK(expired->closed_us == t0 + 10 * ms);
    const auto* acquired = &sink.all.back();
    REQUIRE(acquired->event == "acquired");
    CHECK(acquired->owner == "b:1");
    CHECK(acquired->closed_holder == "a:1");
    CHECK(acquired->closed_us == t0 + 10 * ms);
    CHECK(acquired->expired_us == expired->ts);
  }
}

TEST_CASE("waiters: a connection's end gives up its waiters lock by lock, in the order it first waited on each",
          "[timeline][waiter]") {
  // The connection's list of locks names a lock once per waiter; its end visits each lock
  // once (its first listing) and gives up that lock's waiters of the connection in their
  // arrival order. A long list (more than 16) and a short one take different paths.
  const int attempts = GENERATE(10, 40, 200);
  const int lock_count = attempts / 3 + 2;
  fixture f;
  std::mt19937 random(static_cast<unsigned>(attempts));
  std::vector<std::pair<std::string, std::string>> tries;  // (lock, owner), in order
  for (int k = 0; k < lock_count; ++k) {
    auto o = f.op(lock_op_kind::acquire, op_outcome::ok, "H", 0, 9, "10.0.0.9");
    o.lock = f.texts.emplace_back("L" + std::to_string(k));
    o.lease_ms = 60000;
    f.timeline.on_operation(o);
  }
  for (int i = 0; i < attempts; ++i) {
    const std::string lock = "L" + std::to_string(random() % static_cast<unsigned>(lock_count));
    const std::string owner = "44444444-4444-4444-8444-444444444444:" + std::to_string(i + 1);  // a thread each
    tries.emplace_back(lock, owner);
    auto o = f.op(lock_op_kind::acquire, op_outcome::contended, f.texts.emplace_back(owner), 10 + i, 2, "10.0.0.2");
    o.lock = f.texts.emplace_back(lock);
    o.lease_ms = 30000;
    o.ttl_ms = 50000;
    f.timeline.on_operation(o);
  }
  // The expected order, from the tries alone: locks by first try, owners by try.
  std::vector<std::string> lock_order;
  std::set<std::string> seen;
  for (const auto& [lock, owner] : tries) {
    if (seen.insert(lock).second) lock_order.push_back(lock);
  }
  std::vector<std::pair<std::string, std::string>> expected;
  for (const std::string& lock : lock_order) {
    for (const auto& t : tries) {
      if (t.first == lock) expected.push_back(t);
    }
  }
  const std::size_t before = f.events.events.size();
  f.timeline.on_connection_end(2, at(5000));
  std::vector<std::pair<std::string, std::string>> gave_up;
  for (std::size_t i = before; i < f.events.events.size(); ++i) {
    const recorded_event& e = f.events.events[i];
    if (e.event == "gave_up") gave_up.emplace_back(e.lock, e.owner);
  }
  const auto text = [](const std::vector<std::pair<std::string, std::string>>& v) {
    std::string out;
    for (const auto& [lock, owner] : v) out += lock + "/" + owner + " ";
    return out;
  };
  CHECK(text(gave_up) == text(expected));
}

// A lock with many waiters (a herd's) asks whether one of them is subscribed by their
// subscriber connections (its waiters' keys), not waiter by waiter: the idle check
// still counts the one subscribed waiter among 40 that never subscribed, and refused
// attempts while the lock stands free neither report it twice nor scan for it again.
TEST_CASE("timeline: idle_with_waiters on a lock with many waiters, one of them subscribed", "[timeline][anomaly]") {
  for (const bool subscribes : {true, false}) {
    INFO("B subscribes " << subscribes);
    fixture f;
    f.opened[2] = t0 + 99'000;  // B's connections opened together: its link is certain
    f.opened[3] = t0 + 100'800;
    f.acquire("A", 0, 30000);
    for (int i = 0; i < 40; ++i) {
      f.acquire("W" + std::to_string(i), 10 + i, 30000, op_outcome::contended, 10 + static_cast<std::uint64_t>(i), "10.0.1.1");
    }
    f.acquire("B", 100, 30000, op_outcome::contended, 2, "10.0.0.2");
    if (subscribes) f.pubsub(lock_op_kind::subscribe, 101, 3);
    f.unlock("A", 1000, op_outcome::ok);
    for (int i = 0; i < 10; ++i) {  // refused while free (their holder unseen): the check asked again
      f.acquire("W" + std::to_string(i), 1005 + i, 30000, op_outcome::contended, 10 + static_cast<std::uint64_t>(i), "10.0.1.1");
    }
    f.timeline.advance_to(t0 + 2000 * ms);
    if (subscribes) {
      REQUIRE(f.events.count("anomaly:idle_with_waiters") == 1);
      CHECK(f.events.first("anomaly:idle_with_waiters")->ts_us == t0 + 1000 * ms + 100 + 50 * ms);
    } else {
      CHECK(f.events.count("anomaly:idle_with_waiters") == 0);
    }
  }
}
