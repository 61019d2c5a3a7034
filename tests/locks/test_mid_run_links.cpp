// Subscriber links on a capture joined mid-run: the subscribers were connected and
// subscribed before the capture began, so no SYN and no SUBSCRIBE tie them to anyone;
// each is first seen at its first `message`. Reduced from links_redisson_together3.pcap
// cut 2 s in (subscriber_links_oracle.py --cut-seconds 2), whose truth is the kernel's
// table of which process owned each port: Redisson keeps one subscriber connection per
// client and leaves the channel when its last waiter got the lock, so the leave right
// after a client's acquisition tells whose the subscriber was, and its events so far
// wait for it (held_events.hpp).
#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;

namespace {

const std::string& holder = link_holder;
const std::string& pa = link_pa;
const std::string& pb = link_pb;
constexpr std::string_view host = "10.0.0.5";

// Command connections 1 (A), 2 (B), 4 (the holder); subscribers 11 (A's), 12 (B's). No
// opening seen (fixture::opened stays empty): joined mid-stream.

void attempt(fixture& f, const std::string& owner, double at_ms, std::uint64_t conn,
             op_outcome outcome = op_outcome::contended) {
  f.redisson_attempt(owner, at_ms, conn, host, outcome);
}
void release(fixture& f, const std::string& owner, double at_ms, std::uint64_t conn) { f.redisson_release(owner, at_ms, conn, host); }
void channel(fixture& f, lock_op_kind kind, double at_ms, std::uint64_t conn) { f.redisson_channel(kind, at_ms, conn, host); }

bool subscriber_event(const recorded_event& e) {
  return e.event == "subscribed" || e.event == "notified" || e.event == "unsubscribed";
}

// Checks that every subscriber event (on `client`, if given) names `owner`; returns how many.
int subscriber_events_naming(const fixture& f, const std::string& owner, std::string_view client = {}) {
  int n = 0;
  for (const auto& e : f.events.events) {
    if (!subscriber_event(e) || (!client.empty() && e.client != client)) continue;
    INFO(e.event << " at " << (e.ts_us - t0) << " us on " << e.client << ": " << e.owner);
    CHECK(e.owner == owner);
    ++n;
  }
  return n;
}

// The process whose subscriber the event is on.
const std::string& truth_of(const recorded_event& e) { return e.client == "10.0.0.5:40011" ? pa : pb; }

// The holder releases; both subscribers get the message (one publish); A's waiter takes
// the lock, B's is refused again. A's subscriber leaves `a_leaves_after_ms` after A's
// acquisition (its last waiter got the lock). Then A releases, B's subscriber gets the
// message, B acquires and its subscriber leaves 4 ms later.
void joined_mid_run(fixture& f, double a_leaves_after_ms) {
  attempt(f, holder, 0, 4, op_outcome::ok);
  attempt(f, pa, 10, 1);
  attempt(f, pb, 12, 2);
  release(f, holder, 100, 4);
  channel(f, lock_op_kind::message, 100.05, 11);
  channel(f, lock_op_kind::message, 100.06, 12);
  attempt(f, pa, 103, 1, op_outcome::ok);
  attempt(f, pb, 104, 2);
  channel(f, lock_op_kind::unsubscribe, 103.1 + a_leaves_after_ms, 11);
  release(f, pa, 250, 1);
  channel(f, lock_op_kind::message, 250.05, 12);
  attempt(f, pb, 253, 2, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 257, 12);
  release(f, pb, 300, 2);
}

}  // namespace

TEST_CASE("mid-run links: a subscriber first seen at its message is named once its leave follows its client's acquisition",
          "[timeline][links][held][mid_run]") {
  fixture f(holding());
  joined_mid_run(f, 5);
  f.timeline.finish(at(5000));
  int subscriber_events = 0;
  for (const auto& e : f.events.events) {
    if (!subscriber_event(e)) continue;
    ++subscriber_events;
    INFO(e.event << " at " << (e.ts_us - t0) << " us on " << e.client);
    CHECK(e.owner == truth_of(e));
    CHECK(e.confidence == link_confidence::low);  // a leave beside an acquisition: a guess, said so
  }
  CHECK(subscriber_events == 5);  // 3 notified, 2 unsubscribed
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("mid-run links: a loaded JVM's leave 21-60 ms after its acquisition names it too",
          "[timeline][links][held][mid_run]") {
  // links_redisson_together.pcap cut 7 s in: a JVM's subscriber, begun before the capture,
  // left 21.1 ms after its last waiter's acquisition; its 34 events went out unlinked.
  for (const double after_ms : {21.1, 45.0}) {
    INFO("leaves " << after_ms << " ms after");
    fixture f(holding());
    joined_mid_run(f, after_ms);
    f.timeline.finish(at(5000));
    const recorded_event* first = f.events.first("notified");
    REQUIRE(first != nullptr);
    CHECK(first->client == "10.0.0.5:40011");
    CHECK(first->owner == pa);
    CHECK(first->confidence == link_confidence::low);
  }
}

TEST_CASE("mid-run links: a waiter whose whole wait came before the capture is named by its leave after the message",
          "[timeline][links][held][mid_run]") {
  // links_lockscope.pcap cut 5 s in: the capture's first packets are a publish to a
  // subscriber begun before it, the acquisition of a waiter never seen refused (its
  // attempts all came before), and that subscriber's leave: 2 events went out unlinked.
  fixture f(holding());
  attempt(f, holder, 0, 4, op_outcome::ok);
  release(f, holder, 100, 4);
  channel(f, lock_op_kind::message, 100.05, 11);
  attempt(f, pa, 101, 1, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 106, 11);
  release(f, pa, 250, 1);
  f.timeline.finish(at(5000));
  const recorded_event* notified = f.events.first("notified");
  REQUIRE(notified != nullptr);
  CHECK(notified->owner == pa);
  CHECK(notified->confidence == link_confidence::low);
  const recorded_event* left = f.events.first("unsubscribed");
  REQUIRE(left != nullptr);
  CHECK(left->owner == pa);
}

TEST_CASE("mid-run links: a leave long after the acquisition names nobody, and no event names the wrong process",
          "[timeline][links][held][mid_run]") {
  fixture f(holding());
  joined_mid_run(f, 61);  // past unknown_leave_us: not tied to A's acquisition
  f.timeline.finish(at(5000));
  for (const auto& e : f.events.events) {
    if (!subscriber_event(e)) continue;
    INFO(e.event << " at " << (e.ts_us - t0) << " us on " << e.client);
    CHECK((e.owner.empty() || e.owner == truth_of(e)));
  }
  const recorded_event* first = f.events.first("notified");
  REQUIRE(first != nullptr);
  CHECK(first->client == "10.0.0.5:40011");
  CHECK(first->owner.empty());
}

TEST_CASE("mid-run links: past the hold's bound, an event still undecided goes out unlinked, in its place",
          "[timeline][links][held][mid_run]") {
  fixture f(holding(2'000));  // 2 ms: A's leave comes 5 ms after its acquisition
  joined_mid_run(f, 5);
  f.timeline.finish(at(5000));
  const recorded_event* first = f.events.first("notified");
  REQUIRE(first != nullptr);
  CHECK(first->owner.empty());
  // The same events in the order they go out without holding: none lost, none moved.
  fixture now_only;
  joined_mid_run(now_only, 5);
  now_only.timeline.finish(at(5000));
  REQUIRE(f.events.events.size() == now_only.events.events.size());
  for (std::size_t i = 0; i < f.events.events.size(); ++i) {
    CHECK(f.events.events[i].event == now_only.events.events[i].event);
    CHECK(f.events.events[i].ts_us == now_only.events.events[i].ts_us);
  }
  for (const auto& e : f.events.events) {
    if (subscriber_event(e)) CHECK((e.owner.empty() || e.owner == truth_of(e)));
  }
}

TEST_CASE("mid-run links: a client's certain SUBSCRIBE takes back its guess on another subscriber",
          "[timeline][links][held][mid_run]") {
  // Reduced from links_redisson_staggered.pcap cut 2 s in: A's subscriber (joined
  // mid-stream) SUBSCRIBEs just after B's refusal, so the guess is B; 17 ms later B's own
  // subscriber, opened beside B's command connection, SUBSCRIBEs: certain. A client keeps
  // one subscription a channel, so the first is not B's (84 events named B before).
  for (const std::int64_t hold : {std::int64_t{0}, std::int64_t{2'000'000}}) {
    INFO("hold " << hold << " us");
    fixture f(holding(hold));
    f.opened[2] = at(-500);
    f.opened[12] = at(-499.5);
    attempt(f, holder, 0, 4, op_outcome::ok);
    attempt(f, pa, 10, 1);
    attempt(f, pb, 12, 2);
    channel(f, lock_op_kind::subscribe, 13, 11);  // A's subscriber; the latest refusal is B's
    channel(f, lock_op_kind::subscribe, 30, 12);  // B's own, tied by its opening
    attempt(f, pa, 40, 1);
    attempt(f, pb, 41, 2);
    release(f, holder, 100, 4);
    channel(f, lock_op_kind::message, 100.05, 11);
    channel(f, lock_op_kind::message, 100.06, 12);
    attempt(f, pa, 103, 1, op_outcome::ok);
    f.timeline.finish(at(5000));
    for (const auto& e : f.events.events) {
      if (!subscriber_event(e)) continue;
      INFO(e.event << " at " << (e.ts_us - t0) << " us on " << e.client << ": " << e.owner);
      // (Nothing held, the SUBSCRIBE's event went out with the guess made at the moment.)
      if (e.client == "10.0.0.5:40011" && !(hold == 0 && e.event == "subscribed")) CHECK(e.owner != pb);
      if (e.client == "10.0.0.5:40012") CHECK(e.owner == pb);
    }
    const recorded_event* first = f.events.first("notified");
    REQUIRE(first != nullptr);
    CHECK(first->client == "10.0.0.5:40011");
    CHECK(first->owner == pa);  // the one client of its address left (by elimination, low)
    // Its held guess taken back, and A's retry once it was confirmed names A (the one
    // SUBSCRIBE since A's refusal that is not B's).
    if (hold > 0) CHECK(f.events.first("subscribed")->owner == pa);
  }
}

namespace {

// Redisson on a loaded host, joined mid-run: each process's SUBSCRIBE comes long after its
// refusal (seen: 30-330 ms), after another process's refusal, so the latest failure
// before it names the wrong process; the waiter that retries once it is confirmed (26-70
// ms later) is its own. Reduced from links_redisson_together5.pcap cut 2 s in (25 events
// named the wrong JVM, low, before this rule).
void loaded_host_subscribes(fixture& f) {
  attempt(f, holder, 0, 4, op_outcome::ok);
  attempt(f, pa, 10, 1);
  attempt(f, pb, 30, 2);
  channel(f, lock_op_kind::subscribe, 200, 11);  // A's, 190 ms after its refusal; B's refusal is the latest
  attempt(f, pa, 260, 1);                        // A retries once it is subscribed
  channel(f, lock_op_kind::subscribe, 350, 12);  // B's
  attempt(f, pb, 400, 2);
  release(f, holder, 500, 4);
  channel(f, lock_op_kind::message, 500.05, 11);
  channel(f, lock_op_kind::message, 500.06, 12);
  attempt(f, pa, 540, 1, op_outcome::ok);
  attempt(f, pb, 545, 2);
  channel(f, lock_op_kind::unsubscribe, 650, 11);  // a slow leave: it names nobody by itself
  release(f, pa, 700, 1);
  channel(f, lock_op_kind::message, 700.05, 12);
  attempt(f, pb, 740, 2, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 850, 12);
  release(f, pb, 900, 2);
}

}  // namespace

TEST_CASE("mid-run links: the waiter that retries once a SUBSCRIBE is confirmed names it, however late both came",
          "[timeline][links][held][mid_run][retry]") {
  for (const std::int64_t hold : {std::int64_t{0}, std::int64_t{2'000'000}}) {
    INFO("hold " << hold << " us");
    fixture f(holding(hold));
    loaded_host_subscribes(f);
    f.timeline.finish(at(5000));
    int subscriber_events = 0;
    for (const auto& e : f.events.events) {
      if (!subscriber_event(e)) continue;
      ++subscriber_events;
      INFO(e.event << " at " << (e.ts_us - t0) << " us on " << e.client << ": " << e.owner);
      // (Nothing held, A's SUBSCRIBE went out with the guess made at the moment: B.)
      if (hold == 0 && e.event == "subscribed" && e.client == "10.0.0.5:40011") continue;
      CHECK(e.owner == truth_of(e));
      CHECK(e.confidence == link_confidence::low);  // timing, not the subscriber's life: a guess, said so
    }
    CHECK(subscriber_events == 7);  // 2 subscribed, 3 notified, 2 unsubscribed
    CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
    CHECK(f.events.count("anomaly:subscription_lost") == 0);
  }
}

TEST_CASE("mid-run links: a retry that may answer a message is not taken for a SUBSCRIBE's",
          "[timeline][links][held][mid_run][retry]") {
  // A's subscriber subscribed before the capture (first seen at its message); B's
  // SUBSCRIBE comes late, between A's refusal and A's retry, which answers the message
  // (the holder took the lock back meanwhile, so A is refused again). Nothing held: each
  // event names what was known at its moment (held, B's leave would name B at the end).
  fixture f;
  attempt(f, holder, 0, 4, op_outcome::ok);
  attempt(f, pa, 10, 1);
  attempt(f, pb, 30, 2);
  release(f, holder, 100, 4);
  channel(f, lock_op_kind::message, 100.05, 11);
  attempt(f, holder, 100.1, 4, op_outcome::ok);
  channel(f, lock_op_kind::subscribe, 110, 12);  // B's, 80 ms after its refusal
  attempt(f, pa, 140, 1);                         // A, woken by its message
  attempt(f, pb, 150, 2);                         // B's retry once subscribed
  release(f, holder, 300, 4);
  channel(f, lock_op_kind::message, 300.05, 11);
  channel(f, lock_op_kind::message, 300.06, 12);
  attempt(f, pa, 303, 1, op_outcome::ok);
  attempt(f, pb, 304, 2);
  channel(f, lock_op_kind::unsubscribe, 305, 11);
  release(f, pa, 400, 1);
  channel(f, lock_op_kind::message, 400.05, 12);
  attempt(f, pb, 403, 2, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 407, 12);
  f.timeline.finish(at(5000));
  CHECK(subscriber_events_naming(f, pb, "10.0.0.5:40012") == 4);  // subscribed, 2 notified, unsubscribed
}

namespace {

// A SUBSCRIBE 7 ms into a capture on a subscriber opened before it, the only waiter seen
// so far being A's (refused 5 ms before). `busy`: A's refusal came while no holder was known
// (the lock was held from before the capture); else the holder's acquisition was seen.
// Reduced from links_redisson_together5.pcap cut 5 s in and links_redisson_together.pcap
// cut 7 s in, where the subscriber was another JVM's (its waiter refused before the
// capture) and was named at `high`: 2 and 31 events on the wrong process.
const recorded_event* subscribed_early(fixture& f, bool busy, double subscribe_ms) {
  if (!busy) attempt(f, holder, 0, 4, op_outcome::ok);
  attempt(f, pa, subscribe_ms - 5, 1);
  channel(f, lock_op_kind::subscribe, subscribe_ms, 12);
  attempt(f, pa, subscribe_ms + 40, 1);
  f.timeline.finish(at(subscribe_ms + 5000));
  return f.events.first("subscribed");
}

locks::timeline_options from_capture_start() {
  locks::timeline_options o = holding(0);
  o.capture_start_us = at(0);
  return o;
}

}  // namespace

TEST_CASE("mid-run links: on a lock busy before the capture, a lone candidate in its first link window is a guess",
          "[timeline][links][mid_run]") {
  {
    fixture f(from_capture_start());
    const recorded_event* sub = subscribed_early(f, true, 7);
    REQUIRE(sub != nullptr);
    CHECK(sub->owner == pa);
    CHECK(sub->confidence == link_confidence::low);
  }
  // What the rule leaves: the holder seen taking the lock (nothing hidden before), a
  // SUBSCRIBE past the first second, a timeline fed without a capture's start.
  {
    fixture f(from_capture_start());
    const recorded_event* sub = subscribed_early(f, false, 7);
    REQUIRE(sub != nullptr);
    CHECK(sub->confidence == link_confidence::high);
  }
  {
    fixture f(from_capture_start());
    const recorded_event* sub = subscribed_early(f, true, 1'505);  // still the only waiter seen
    REQUIRE(sub != nullptr);
    CHECK(sub->confidence == link_confidence::high);
  }
  {
    fixture f(holding(0));
    const recorded_event* sub = subscribed_early(f, true, 7);
    REQUIRE(sub != nullptr);
    CHECK(sub->confidence == link_confidence::high);
  }
}

TEST_CASE("mid-run links: a leave no acquisition explains leaves its guesses waiting for the connection's next sure link",
          "[timeline][links][held][mid_run]") {
  // captures/thirdparty/redisson.pcap cut 3 and 4 s in: in the capture's first second a
  // JVM's subscriber (opened before it) SUBSCRIBEs just after another JVM's refusal, and
  // leaves again before its own retry (no acquisition to name it). Its guesses went out
  // as they stood at that leave: naming the other JVM (7 and 14 events, low) or, here,
  // nobody. Its next subscription's leave, after its own acquisition, names it.
  locks::timeline_options o = holding(2'000'000);
  o.capture_start_us = at(0);
  fixture f(o);
  attempt(f, pb, 5, 2);  // the lock busy before the capture: no holder seen taking it
  channel(f, lock_op_kind::subscribe, 8, 11);  // A's; B's refusal is the only one seen
  channel(f, lock_op_kind::unsubscribe, 60, 11);
  attempt(f, pa, 150, 1);
  channel(f, lock_op_kind::subscribe, 152, 11);
  release(f, holder, 200, 4);
  channel(f, lock_op_kind::message, 200.05, 11);
  attempt(f, pa, 200.5, 1, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 201, 11);
  release(f, pa, 300, 1);
  f.timeline.finish(at(5000));
  CHECK(subscriber_events_naming(f, pa) == 5);  // 2 subscribed, 1 notified, 2 unsubscribed
  const recorded_event* first = f.events.first("subscribed");
  REQUIRE(first != nullptr);
  CHECK(first->confidence == link_confidence::low);  // the process is shown; its waiter then was a guess
}

TEST_CASE("mid-run links: a subscription first seen at its message that leaves before its retry is named by its next leave",
          "[timeline][links][held][mid_run]") {
  // captures/thirdparty/redisson.pcap cut 4 s in: the capture begins with a release and
  // its message to three subscribers begun before it, which leave 5 ms later, before
  // their JVMs retry; their 3 leaves went out naming nobody.
  fixture f(holding(2'000'000));
  release(f, holder, 100, 4);
  channel(f, lock_op_kind::message, 100.05, 11);
  channel(f, lock_op_kind::unsubscribe, 105, 11);
  attempt(f, pa, 110, 1, op_outcome::ok);
  release(f, pa, 200, 1);
  attempt(f, holder, 250, 4, op_outcome::ok);
  attempt(f, pa, 300, 1);
  channel(f, lock_op_kind::subscribe, 302, 11);
  release(f, holder, 400, 4);
  channel(f, lock_op_kind::message, 400.05, 11);
  attempt(f, pa, 400.5, 1, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 401, 11);
  f.timeline.finish(at(5000));
  CHECK(subscriber_events_naming(f, pa) == 5);  // 2 notified, 2 unsubscribed, 1 subscribed
}
