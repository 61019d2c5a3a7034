// Subscriber links between processes started at the same moment (their connections'
// openings interleaved, so the opening ties nothing): what each process does afterwards is
// the evidence. Reduced from links_redisson_together.pcap (three Redisson JVMs started at
// once, a warm-up lock before the contended one), whose truth is the kernel's table of
// which process owned each port (subscriber_links_oracle.py).
#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;

namespace {

const std::string pa = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1";
const std::string pb = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1";
const std::string pc = "cccccccc-cccc-4ccc-8ccc-cccccccccccc:1";
constexpr std::string_view host = "10.0.0.5";

// Every connection opened within 3 ms of the others': three processes started together.
// Command connections 1 (A), 2 (B), 3 (C); subscribers 11 (A), 12 (B), 13 (C).
std::int64_t opened(std::uint64_t conn) { return at(-1000 + 0.2 * static_cast<double>(conn)); }

void attempt(fixture& f, const std::string& owner, double at_ms, std::uint64_t conn,
             op_outcome outcome = op_outcome::contended) {
  auto o = f.op(lock_op_kind::acquire, outcome, owner, at_ms, conn, host);
  o.lease_ms = 30000;
  if (outcome == op_outcome::contended) o.ttl_ms = 29000;
  o.opened_us = opened(conn);
  f.timeline.on_operation(o);
}

void release(fixture& f, const std::string& owner, double at_ms, std::uint64_t conn) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, owner, at_ms, conn, host);
  o.opened_us = opened(conn);
  f.timeline.on_operation(o);
}

void channel(fixture& f, lock_op_kind kind, double at_ms, std::uint64_t conn) {
  auto o = f.op(kind, op_outcome::ok, "", at_ms, conn, host);
  o.channel = "redisson_lock__channel:{L}";
  o.sub_count = kind == lock_op_kind::unsubscribe ? 0 : 1;
  if (kind == lock_op_kind::message) o.reply_us = o.request_us;
  o.opened_us = opened(conn);
  f.timeline.on_operation(o);
}

const recorded_event* subscribed_on(const fixture& f, std::string_view client, double after_ms) {
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" && e.client == client && e.ts_us >= at(after_ms)) return &e;
  }
  return nullptr;
}

// Each of B and C waits alone once, slowly (a JVM warming up: its SUBSCRIBE 300 ms after
// its refusal, after the lock went free, so no message; its UNSUBSCRIBE 90-150 ms after it
// got the lock: both far outside a reaction's window). Then all three contend: B is refused first, C later, and B's SUBSCRIBE comes
// just after C's refusal, so the latest failure before it is C's.
void together(fixture& f) {
  attempt(f, pa, 0, 1, op_outcome::ok);
  attempt(f, pb, 100, 2);
  release(f, pa, 300, 1);                        // before B's SUBSCRIBE: no message
  channel(f, lock_op_kind::subscribe, 400, 12);  // B alone was refused
  attempt(f, pb, 450, 2, op_outcome::ok);        // its retry once subscribed
  channel(f, lock_op_kind::unsubscribe, 600, 12);
  attempt(f, pc, 650, 3);
  release(f, pb, 700, 2);
  channel(f, lock_op_kind::subscribe, 950, 13);  // C alone was refused
  attempt(f, pc, 1010, 3, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 1100, 13);
  release(f, pc, 1200, 3);
  // The contended phase.
  attempt(f, pa, 2000, 1, op_outcome::ok);
  attempt(f, pb, 2001, 2);
  attempt(f, pc, 2025, 3);
  channel(f, lock_op_kind::subscribe, 2026, 12);  // B's, 1 ms after C's refusal
  channel(f, lock_op_kind::subscribe, 2030, 13);  // C's
  attempt(f, pb, 2031, 2);                        // each retries once subscribed
  attempt(f, pc, 2032, 3);
  release(f, pa, 2100, 1);
  channel(f, lock_op_kind::message, 2100.2, 12);
  channel(f, lock_op_kind::message, 2100.3, 13);
  attempt(f, pb, 2101, 2, op_outcome::ok);
  attempt(f, pc, 2101.5, 3);
}

}  // namespace

TEST_CASE("subscriber evidence: a SUBSCRIBE after the one refusal of its address is that client's, however slow",
          "[timeline][links]") {
  fixture f;
  together(f);
  const recorded_event* b = subscribed_on(f, "10.0.0.5:40012", 2000);
  const recorded_event* c = subscribed_on(f, "10.0.0.5:40013", 2000);
  REQUIRE(b != nullptr);
  REQUIRE(c != nullptr);
  // Without the warm-up's evidence, B's SUBSCRIBE went to C (the latest failure before it).
  CHECK(b->owner == pb);
  CHECK(c->owner == pc);
  // Two agreeing episodes are not proof: neither link is certain, and nothing rests on them.
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" || e.event == "notified" || e.event == "unsubscribed") {
      CHECK(e.confidence != link_confidence::certain);
      if (!e.owner.empty()) {
        const bool on_b = e.client == "10.0.0.5:40012";
        CHECK(e.owner == (on_b ? pb : pc));
      }
    }
  }
  CHECK(f.events.count("anomaly:woken_by_timeout") == 0);
  CHECK(f.events.count("anomaly:subscription_lost") == 0);
}

TEST_CASE("subscriber evidence: two clients refused before a SUBSCRIBE teach nothing", "[timeline][links]") {
  fixture f;
  attempt(f, pa, 0, 1, op_outcome::ok);
  attempt(f, pb, 100, 2);
  attempt(f, pc, 150, 3);
  channel(f, lock_op_kind::subscribe, 400, 12);  // B's or C's: nobody can say
  release(f, pa, 500, 1);
  channel(f, lock_op_kind::message, 500.3, 12);
  attempt(f, pb, 510, 2, op_outcome::ok);
  const recorded_event* s = subscribed_on(f, "10.0.0.5:40012", 0);
  REQUIRE(s != nullptr);
  CHECK(s->confidence == link_confidence::low);
}

TEST_CASE("subscriber evidence: an opening shared with another process ties nothing after that process left",
          "[timeline][links]") {
  // B and A opened together; A's connections closed. The subscriber's opening is no more
  // B's than before: it was seen beside A's.
  fixture f;
  attempt(f, pc, 0, 3, op_outcome::ok);
  attempt(f, pa, 10, 1);
  attempt(f, pb, 20, 2);
  channel(f, lock_op_kind::subscribe, 400, 12);  // two candidates: a guess
  f.timeline.on_connection_end(1, at(450));
  f.timeline.on_connection_end(11, at(450));
  attempt(f, pb, 460, 2);
  channel(f, lock_op_kind::unsubscribe, 470, 12);
  channel(f, lock_op_kind::subscribe, 480, 12);
  for (const auto& e : f.events.events) {
    if (e.event == "subscribed" || e.event == "unsubscribed") CHECK(e.confidence != link_confidence::certain);
  }
}

TEST_CASE("subscriber evidence: an anomaly withheld for want of a certain link is said on the attempt, once a wait",
          "[timeline][links]") {
  // One waiter, its subscriber a guess (`high`: one candidate); the release reaches
  // nobody; the waiter retries when its TTL runs out, then again. A certain link would have
  // raised woken_by_timeout on the first timer retry: that attempt's event says why not.
  auto run = [](fixture& f, bool tied) {
    const std::int64_t cmd_opened = tied ? at(99.8) : -1, sub_opened = tied ? at(100.5) : -1;
    auto attempt_at = [&](double at_ms, op_outcome outcome) {
      auto o = f.op(lock_op_kind::acquire, outcome, pb, at_ms, 4, host);
      o.lease_ms = 30000;
      if (outcome == op_outcome::contended) o.ttl_ms = 29000;
      o.opened_us = cmd_opened;
      f.timeline.on_operation(o);
    };
    auto hold = f.op(lock_op_kind::acquire, op_outcome::ok, pc, 0, 1, host);
    hold.lease_ms = 30000;
    f.timeline.on_operation(hold);
    attempt_at(100, op_outcome::contended);
    auto s = f.op(lock_op_kind::subscribe, op_outcome::ok, "", 100.6, 5, host);
    s.channel = "redisson_lock__channel:{L}";
    s.sub_count = 1;
    s.opened_us = sub_opened;
    f.timeline.on_operation(s);
    attempt_at(101, op_outcome::contended);  // once subscribed
    f.timeline.on_operation(f.op(lock_op_kind::unlock, op_outcome::ok, pc, 500, 1, host));
    auto again = f.op(lock_op_kind::acquire, op_outcome::ok, pa, 600, 2, host);  // another takes it meanwhile
    again.lease_ms = 30000;
    f.timeline.on_operation(again);
    attempt_at(29101, op_outcome::contended);  // its timer: it heard nothing
    attempt_at(58101, op_outcome::contended);  // and again
  };
  fixture guessed;
  run(guessed, false);
  CHECK(guessed.events.count("anomaly:woken_by_timeout") == 0);
  std::vector<locks::anomaly_kind> noted;
  for (const auto& e : guessed.events.events) {
    if (e.event == "contended" && e.owner == pb) noted.push_back(e.link_not_certain);
  }
  REQUIRE(noted.size() == 4);
  CHECK(noted[0] == locks::anomaly_kind::none);
  CHECK(noted[1] == locks::anomaly_kind::none);
  CHECK(noted[2] == locks::anomaly_kind::woken_by_timeout);
  CHECK(noted[3] == locks::anomaly_kind::none);  // once a wait, as the anomaly would be
  fixture tied;
  run(tied, true);
  CHECK(tied.events.count("anomaly:woken_by_timeout") == 1);
  for (const auto& e : tied.events.events) CHECK(e.link_not_certain == locks::anomaly_kind::none);
}

TEST_CASE("subscriber evidence: an UNSUBSCRIBE well after the one acquirer's last wait ended is that client's",
          "[timeline][links]") {
  // B and C both refused before B's SUBSCRIBE on 12: a guess. B gets the lock; 40 ms
  // later (a slow JVM, outside the reaction window) 12 leaves the channel: B's last waiter
  // is done, C still waits. The next SUBSCRIBE on 12, after both were refused again, is B's.
  fixture f;
  attempt(f, pa, 0, 1, op_outcome::ok);
  attempt(f, pb, 100, 2);
  attempt(f, pc, 150, 3);
  channel(f, lock_op_kind::subscribe, 200, 12);  // B's: C's failure was the latest
  release(f, pa, 300, 1);
  attempt(f, pb, 301, 2, op_outcome::ok);
  channel(f, lock_op_kind::unsubscribe, 341, 12);
  release(f, pb, 400, 2);
  attempt(f, pc, 401, 3, op_outcome::ok);
  attempt(f, pb, 500, 2);
  attempt(f, pa, 520, 1);
  channel(f, lock_op_kind::subscribe, 521, 12);  // B's again; A's failure is the latest
  const recorded_event* s = subscribed_on(f, "10.0.0.5:40012", 510);
  REQUIRE(s != nullptr);
  CHECK(s->owner == pb);
  CHECK(s->confidence != link_confidence::certain);
}
