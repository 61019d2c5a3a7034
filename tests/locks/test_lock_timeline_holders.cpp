// The per-lock state machine's holders, fed operations directly: acquisitions, reentry,
// releases, leases and renewals, and every anomaly a holder causes; the clock (expiries
// at the deadline with nothing following). Waiters are in test_lock_timeline_waiters.cpp,
// the summary's figures in test_lock_timeline_summary.cpp.
#include <cmath>
#include <deque>
#include <map>
#include <sstream>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "timeline/text_interner.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

TEST_CASE("timeline: acquire, reenter, partial and final release with hold counts", "[timeline]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.acquire("A", 10, 30000);
  f.unlock("A", 20, op_outcome::partial);
  f.unlock("A", 30, op_outcome::ok);
  CHECK(f.events.names() ==
        std::vector<std::string>{"acquired", "reentered", "partially_released", "released"});
  CHECK(f.events.events[0].hold_count == 1);
  CHECK(f.events.events[0].lease_ms == 30000);
  CHECK(f.events.events[1].hold_count == 2);
  CHECK(f.events.events[2].hold_count == 1);
  CHECK(f.events.events[3].hold_count == 0);
  CHECK(f.events.events[3].held_us == 30 * ms);
  bool seen = false;
  f.timeline.for_each_lock([&](std::string_view lock, const locks::lock_stats& s) {
    seen = true;
    CHECK(lock == "L");
    CHECK(s.acquisitions == 1);
    REQUIRE(s.hold_us.size() == 1);
    CHECK(s.hold_us[0] == 30 * ms);
  });
  CHECK(seen);
}

TEST_CASE("timeline: a lease expires at its deadline even when nothing follows", "[timeline]") {
  fixture f;
  f.acquire("A", 0, 100);
  f.timeline.advance_to(t0 + 99 * ms);
  CHECK(f.events.count("expired") == 0);
  f.timeline.advance_to(t0 + 500 * ms);
  REQUIRE(f.events.count("expired") == 1);
  const auto* e = f.events.first("expired");
  // Reply time + lease + 1 ms: Redis's clock counts whole milliseconds, so the key may
  // live that long; the event is placed where the expiry is certain.
  CHECK(e->ts_us == t0 + 100 + 100 * ms + 1 * ms);
  CHECK(e->held_us == 101 * ms);
  CHECK(e->owner == "A");
}

TEST_CASE("timeline: a renewal the server accepts within Redis's millisecond of the lease's end keeps the hold",
          "[timeline]") {
  // A watchdog renewal sent just after reply + lease: Redis had set the expiry from its
  // own clock in whole milliseconds, and still had the key (it answered 1).
  fixture f;
  f.acquire("A", 0, 30);  // request at t0, reply at t0 + 100 µs: lease end t0 + 30.1 ms
  f.renew("A", 30.6, 30);  // answered 1
  f.timeline.advance_to(t0 + 40 * ms);
  CHECK(f.events.count("expired") == 0);
  CHECK(f.events.count("renewed") == 1);
  CHECK(f.events.count("anomaly:expired_while_held") == 0);
  // Past reply + lease + 1 ms the key is surely gone: expired, and a late renewal is refused.
  f.timeline.advance_to(t0 + 100 * ms);
  CHECK(f.events.count("expired") == 1);
  CHECK(f.events.first("expired")->ts_us == t0 + 30'700 + 30 * ms + 1 * ms);
}

TEST_CASE("timeline: a renewal sent before the deadline and answered after it keeps the hold (the server was slow "
          "to reply)",
          "[timeline]") {
  // The server ran the renewal before the deadline (it answered 1: the key was there)
  // and was descheduled before writing its reply, which came 5 ms after the deadline.
  fixture f;
  f.acquire("A", 0, 30);  // deadline: reply (t0 + 100 µs) + 30 ms + 1 ms = t0 + 31.1 ms
  auto renewal = f.op(lock_op_kind::renew, op_outcome::ok, "A", 31.0);
  renewal.lease_ms = 30;
  renewal.reply_us = t0 + 36 * ms;
  f.timeline.on_operation(renewal);
  CHECK(f.events.count("renewed") == 1);
  CHECK(f.events.count("expired") == 0);  // (late_renewal is reported: 36 ms for a 30 ms lease)
  f.timeline.advance_to(t0 + 60 * ms);
  CHECK(f.events.count("expired") == 0);
  // The renewal's lease runs from its reply: it expires then, once.
  f.timeline.advance_to(t0 + 100 * ms);
  REQUIRE(f.events.count("expired") == 1);
  CHECK(f.events.first("expired")->ts_us == t0 + 36 * ms + 31 * ms);

  // An unlock that leaves the hold (reentered) and says no lease: the deadline it left
  // alone still holds, and the lease runs out once the reply is in.
  fixture g;
  g.acquire("A", 0, 30);
  g.acquire("A", 1, 30);  // reentered: deadline t0 + 32.1 ms
  auto partial = g.op(lock_op_kind::unlock, op_outcome::partial, "A", 32.0);
  partial.lease_ms = -1;
  partial.reply_us = t0 + 35 * ms;
  g.timeline.on_operation(partial);
  CHECK(g.events.names() == std::vector<std::string>{"acquired", "reentered", "partially_released"});
  g.timeline.advance_to(t0 + 40 * ms);
  REQUIRE(g.events.count("expired") == 1);
  CHECK(g.events.first("expired")->ts_us == t0 + 35 * ms);

  // Sent after the deadline, an accepted renewal does not undo the expiry before it.
  fixture h;
  h.acquire("A", 0, 30);
  auto late = h.op(lock_op_kind::renew, op_outcome::ok, "A", 31.2);
  late.lease_ms = 30;
  late.reply_us = t0 + 36 * ms;
  h.timeline.on_operation(late);
  REQUIRE(h.events.count("expired") == 1);
  CHECK(h.events.first("expired")->ts_us == t0 + 31'100);
}

TEST_CASE("timeline: a renewal refused past request + lease is an expiry even when the acquisition's reply came late",
          "[timeline]") {
  // The acquisition ran at about its request (t0) and its reply came 12 ms later: by our
  // clock the lease ends at t0 + 42 ms, by the server's at t0 + 30 to 31 ms. A refusal
  // at 31 ms is the lease running out, not a lost key.
  const auto acquire_with_late_reply = [](fixture& x) {
    auto acquisition = x.op(lock_op_kind::acquire, op_outcome::ok, "A", 0);
    acquisition.lease_ms = 30;
    acquisition.reply_us = t0 + 12 * ms;
    x.timeline.on_operation(acquisition);
  };
  fixture f;
  acquire_with_late_reply(f);
  f.renew("A", 31.0, 30, op_outcome::rejected);
  CHECK(f.events.names() ==
        std::vector<std::string>{"acquired", "renew_failed", "expired", "anomaly:expired_while_held"});
  REQUIRE(f.events.first("anomaly:expired_while_held") != nullptr);
  CHECK(f.events.first("anomaly:expired_while_held")->detail.find("already run out") != std::string::npos);

  // Refused before request + lease, the key cannot have expired: it was lost.
  fixture g;
  acquire_with_late_reply(g);
  g.renew("A", 29.0, 30, op_outcome::rejected);
  // Judged once no unlock of A sent before the refusal can still come (reply_skew_us).
  CHECK(g.events.first("anomaly:expired_while_held") == nullptr);
  g.timeline.advance_to(t0 + 29 * ms + locks::timeline_options{}.reply_skew_us + 1 * ms);
  CHECK(g.events.count("expired") == 0);
  REQUIRE(g.events.first("anomaly:expired_while_held") != nullptr);
  CHECK(g.events.first("anomaly:expired_while_held")->detail.find("the key was lost") != std::string::npos);
}

TEST_CASE("timeline: renewals move the deadline", "[timeline]") {
  fixture f;
  f.acquire("A", 0, 300);
  f.renew("A", 100, 300);
  f.renew("A", 200, 300);
  f.timeline.advance_to(t0 + 450 * ms);
  CHECK(f.events.count("renewed") == 2);
  CHECK(f.events.count("expired") == 0);
  f.timeline.advance_to(t0 + 600 * ms);
  CHECK(f.events.count("expired") == 1);
  CHECK(f.events.count("anomaly:late_renewal") == 0);
}

TEST_CASE("timeline: expired_while_held on an unlock or a renewal after the lease ran out", "[timeline][anomaly]") {
  fixture f;
  f.acquire("A", 0, 100);
  f.unlock("A", 300, op_outcome::rejected);
  CHECK(f.events.names() ==
        std::vector<std::string>{"acquired", "expired", "unlock_rejected", "anomaly:expired_while_held"});
  fixture g;
  g.acquire("A", 0, 100);
  g.renew("A", 150, 100, op_outcome::rejected);
  CHECK(g.events.names() == std::vector<std::string>{"acquired", "expired", "renew_failed", "anomaly:expired_while_held"});
}

TEST_CASE("timeline: a refusal long before the lease ends says the key was lost, not expired", "[timeline][anomaly]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.unlock("A", 4000, op_outcome::rejected);  // 26 s of lease left: deleted, evicted, failed over
  REQUIRE(f.events.count("anomaly:expired_while_held") == 1);
  const std::string& why = f.events.first("anomaly:expired_while_held")->detail;
  CHECK(why.find("26000 ms before the lease would run out: the key was lost") != std::string::npos);
  // Within the reply's latency of the deadline it did run out.
  fixture g;
  g.acquire("A", 0, 1000);
  g.renew("A", 999.95, 1000, op_outcome::rejected);
  REQUIRE(g.events.count("anomaly:expired_while_held") == 1);
  CHECK(g.events.first("anomaly:expired_while_held")->detail == "renewal refused: the lease had already run out");
}

TEST_CASE("timeline: an overlap between connections whose database was not seen says they may be two locks",
          "[timeline][anomaly]") {
  // Joined mid-stream: no SELECT seen on either connection, both counted as db 0.
  fixture f;
  auto a = f.op(lock_op_kind::acquire, op_outcome::ok, "A", 0, 1);
  a.lease_ms = 30000;
  a.db = -1;
  f.timeline.on_operation(a);
  auto b = f.op(lock_op_kind::acquire, op_outcome::ok, "B", 1000, 2, "10.0.0.2");
  b.lease_ms = 30000;
  f.timeline.on_operation(b);  // B's database is known: A's is not
  f.timeline.advance_to(t0 + 2'000'000);
  REQUIRE(f.events.count("anomaly:overlapping_holders") == 1);
  CHECK(f.events.first("anomaly:overlapping_holders")->detail.find("if the two use different databases, these are two "
                                                                   "locks") != std::string::npos);
  // Both known: no such hint.
  fixture g;
  g.acquire("A", 0, 30000);
  g.acquire("B", 1000, 30000, op_outcome::ok, 2, "10.0.0.2");
  g.timeline.advance_to(t0 + 2'000'000);
  REQUIRE(g.events.count("anomaly:overlapping_holders") == 1);
  CHECK(g.events.first("anomaly:overlapping_holders")->detail == "acquired while A still held it");
}

TEST_CASE("timeline: overlapping_holders only while the first lease cannot have ended", "[timeline][anomaly]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.acquire("B", 1000, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(f.events.count("anomaly:overlapping_holders") == 0);  // A's unlock may be on its way
  f.timeline.advance_to(t0 + 1'009'000);
  CHECK(f.events.count("anomaly:overlapping_holders") == 0);
  f.timeline.advance_to(t0 + 1'010'100);
  REQUIRE(f.events.count("anomaly:overlapping_holders") == 1);
  const auto& o = *f.events.first("anomaly:overlapping_holders");
  CHECK(o.owner == "B");
  CHECK(o.ts_us == t0 + 1'010'100);  // when it became certain
  CHECK(o.interval_start_us == t0 + 1'000'100);  // B's acquisition
  CHECK(o.interval_us == 10'000);
  // A's unlock, sent before B's acquisition reply but captured just after it: the
  // server ran it first (replies on two connections are written in either order).
  fixture r;
  r.acquire("A", 0, 30000);
  r.acquire("B", 1000, 30000, op_outcome::ok, 2, "10.0.0.2");
  auto u = r.op(lock_op_kind::unlock, op_outcome::ok, "A", 999.99, 1);
  u.reply_us = t0 + 1'000'113;  // 13 µs after B's reply (B's reply: 1000 ms + 100 µs)
  r.timeline.on_operation(u);
  r.timeline.finish(t0 + 5'000'000);
  CHECK(r.events.count("anomaly:overlapping_holders") == 0);
  CHECK(r.events.count("released") == 1);
  // Sent after B's reply: a real overlap, even though it comes within the skew.
  fixture q;
  q.acquire("A", 0, 30000);
  q.acquire("B", 1000, 30000, op_outcome::ok, 2, "10.0.0.2");
  auto late = q.op(lock_op_kind::unlock, op_outcome::ok, "A", 1000.2, 1);
  q.timeline.on_operation(late);
  q.timeline.finish(t0 + 1'003'000);  // the capture ends before the skew passed
  REQUIRE(q.events.count("anomaly:overlapping_holders") == 1);
  CHECK(q.events.first("anomaly:overlapping_holders")->ts_us == t0 + 1'003'000);
  fixture g;
  g.acquire("A", 0, 1000);
  // B's acquire lands after A's request time + lease (but before our reply-based deadline).
  g.acquire("B", 999.95, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(g.events.count("anomaly:overlapping_holders") == 0);
  CHECK(g.events.count("expired") == 1);
}

TEST_CASE("timeline: unlock_by_non_owner", "[timeline][anomaly]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.unlock("B", 10, op_outcome::rejected, 2);
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "unlock_rejected", "anomaly:unlock_by_non_owner"});
  CHECK(f.events.events[2].owner == "B");
}

TEST_CASE("timeline: late_renewal when the gap exceeds 1.5 x lease/3", "[timeline][anomaly]") {
  fixture f;
  f.acquire("A", 0, 3000);
  f.renew("A", 1000, 3000);
  f.renew("A", 2490, 3000);  // 1490 ms: within 1500
  CHECK(f.events.count("anomaly:late_renewal") == 0);
  f.renew("A", 4100, 3000);  // 1610 ms
  CHECK(f.events.count("anomaly:late_renewal") == 1);
}

TEST_CASE("timeline: long_hold is emitted when the threshold passes", "[timeline][anomaly]") {
  locks::timeline_options o;
  o.long_hold_us = 1000 * ms;
  fixture f(o);
  f.acquire("A", 0, 30000);
  f.timeline.advance_to(t0 + 900 * ms);
  CHECK(f.events.count("anomaly:long_hold") == 0);
  f.timeline.advance_to(t0 + 1500 * ms);
  REQUIRE(f.events.count("anomaly:long_hold") == 1);
  CHECK(f.events.first("anomaly:long_hold")->ts_us == t0 + 100 + 1000 * ms);
  f.timeline.advance_to(t0 + 5000 * ms);
  CHECK(f.events.count("anomaly:long_hold") == 1);  // once per hold
}

TEST_CASE("timeline: SETNX is a non_atomic_acquire, EXPIRE sets its lease, DEL releases", "[timeline][anomaly]") {
  fixture f;
  auto setnx = f.op(lock_op_kind::acquire, op_outcome::ok, "1", 0);
  setnx.family = lock_family::setnx;
  f.timeline.on_operation(setnx);
  // The acquirer's first EXPIRE is the acquisition's second half: no renewal (a client's
  // log shows one acquire), but the hold has its lease from then on.
  auto expire = f.op(lock_op_kind::expire, op_outcome::ok, "", 1);
  expire.lease_ms = 15000;
  f.timeline.on_operation(expire);
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "anomaly:non_atomic_acquire"});
  // A later EXPIRE is a renewal.
  auto renew = f.op(lock_op_kind::expire, op_outcome::ok, "", 50);
  renew.lease_ms = 20000;
  f.timeline.on_operation(renew);
  f.timeline.on_operation(f.op(lock_op_kind::del, op_outcome::ok, "", 100));
  CHECK(f.events.names() ==
        std::vector<std::string>{"acquired", "anomaly:non_atomic_acquire", "renewed", "released",
                                 "anomaly:unchecked_release"});
  CHECK(f.events.events[2].lease_ms == 20000);
  CHECK(f.events.events[2].owner == "1");
  // Plain commands on keys that never were locks are ignored.
  f.timeline.on_operation(f.op(lock_op_kind::del, op_outcome::ok, "", 200));
  CHECK(f.events.events.size() == 5);
}

TEST_CASE("timeline: the lease a SETNX acquirer's EXPIRE set runs out", "[timeline][anomaly]") {
  fixture f;
  auto setnx = f.op(lock_op_kind::acquire, op_outcome::ok, "1", 0);
  setnx.family = lock_family::setnx;
  f.timeline.on_operation(setnx);
  auto expire = f.op(lock_op_kind::expire, op_outcome::ok, "", 1);
  expire.lease_ms = 1500;
  f.timeline.on_operation(expire);
  f.timeline.advance_to(t0 + 1400 * ms);
  CHECK(f.events.count("expired") == 0);
  f.timeline.advance_to(t0 + 1600 * ms);
  CHECK(f.events.count("expired") == 1);
  CHECK(f.events.count("renewed") == 0);
}

TEST_CASE("timeline: force unlock releases every holder", "[timeline]") {
  fixture f;
  f.acquire("A", 0, 30000);
  f.timeline.on_operation(f.op(lock_op_kind::force_unlock, op_outcome::ok, "", 10, 2));
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "force_released"});
  CHECK(f.events.events[1].owner == "A");
  f.acquire("B", 20, 30000, op_outcome::ok, 2, "10.0.0.2");
  CHECK(f.events.count("anomaly:overlapping_holders") == 0);
}

TEST_CASE("timeline: read locks are shared", "[timeline]") {
  fixture f;
  auto r1 = f.op(lock_op_kind::acquire, op_outcome::ok, "R1", 0);
  r1.family = lock_family::redisson_read;
  r1.shared = true;
  r1.lease_ms = 30000;
  auto r2 = r1;
  r2.owner = "R2";
  r2.request_us += 10 * ms;
  r2.reply_us += 10 * ms;
  f.timeline.on_operation(r1);
  f.timeline.on_operation(r2);
  CHECK(f.events.names() == std::vector<std::string>{"acquired", "acquired"});
}

TEST_CASE("timeline: random operation sequences keep events in time order and never crash", "[timeline][random]") {
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto next = [&](std::uint64_t n) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed % n;
  };
  const lock_op_kind kinds[] = {lock_op_kind::acquire,     lock_op_kind::unlock,    lock_op_kind::renew,
                                lock_op_kind::force_unlock, lock_op_kind::expire,    lock_op_kind::del,
                                lock_op_kind::subscribe,   lock_op_kind::unsubscribe, lock_op_kind::message};
  const op_outcome outcomes[] = {op_outcome::ok,      op_outcome::contended, op_outcome::partial, op_outcome::rejected,
                                 op_outcome::expired, op_outcome::none,      op_outcome::error,   op_outcome::no_reply};
  const char* owners[] = {"80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:2",
                          "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:1", "token", ""};
  const lock_family families[] = {lock_family::redisson, lock_family::set_based, lock_family::setnx,
                                  lock_family::redisson_read};
  for (int round = 0; round < 20; ++round) {
    fixture f;
    double t = 0;
    for (int i = 0; i < 2000; ++i) {
      t += static_cast<double>(next(400));
      auto o = f.op(kinds[next(9)], outcomes[next(8)], owners[next(5)], t, 1 + next(6),
                    next(2) == 0 ? "10.0.0.1" : "10.0.0.2");
      o.lock = next(3) == 0 ? "L2" : "L";
      o.family = families[next(4)];
      o.shared = o.family == lock_family::redisson_read;
      o.lease_ms = static_cast<std::int64_t>(next(3000)) - 1;
      o.ttl_ms = static_cast<std::int64_t>(next(3000));
      if (next(50) == 0) o.lease_ms = INT64_MAX;
      f.timeline.on_operation(o);
    }
    f.timeline.advance_to(t0 + static_cast<std::int64_t>(t * 1000) + 100'000'000);
    std::int64_t last = 0;
    for (const auto& e : f.events.events) {
      if (e.ts_us < last) FAIL_CHECK("out of order: " << e.event << " at " << e.ts_us - t0 << " after " << last - t0);
      last = e.ts_us;
      if (e.hold_count != -1) CHECK(e.hold_count >= 0);
      if (e.held_us != -1) CHECK(e.held_us >= 0);
      if (e.wait_us != -1) CHECK(e.wait_us >= 0);
    }
    CHECK(f.events.events.size() > 100);
  }
}

// The lock groups key a try's set, and find it again at the owner's release or refused
// unlock, by the owner's text hash: the timeline gives it with those events (its owner
// table's, which is hash_text of the text), so that the groups need not hash the owner
// again. A hash given must be the text's.
TEST_CASE("timeline: tries, releases and refused unlocks carry their owner's text hash", "[timeline]") {
  struct hash_check : locks::lock_event_sink {
    std::map<std::string, int> given;  // event kind → events with the owner's hash
    void on_event(const locks::lock_event& e) override {
      if (e.owner_hashed == nullptr) return;
      REQUIRE(e.owner_hashed == e.owner.data());
      REQUIRE(e.owner_hash == locks::timeline_detail::hash_text(e.owner));
      ++given[std::string(locks::to_string(e.event))];
    }
  } sink;
  fixture f;  // for its operations
  locks::lock_timeline timeline(as_decided(), sink);
  auto unlock = [&](std::string_view owner, double at_ms, op_outcome outcome, std::uint64_t conn) {
    auto o = f.op(lock_op_kind::unlock, outcome, owner, at_ms, conn);
    o.lease_ms = 30000;
    timeline.on_operation(o);
  };
  auto acquire = [&](std::string_view owner, double at_ms, op_outcome outcome, std::uint64_t conn) {
    auto o = f.op(lock_op_kind::acquire, outcome, owner, at_ms, conn);
    o.lease_ms = 30000;
    if (outcome == op_outcome::contended) o.ttl_ms = 29000;
    timeline.on_operation(o);
  };
  acquire("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1", 0, op_outcome::ok, 1);
  acquire("bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1", 1, op_outcome::contended, 2);
  unlock("cccccccc-cccc-4ccc-8ccc-cccccccccccc:7", 2, op_outcome::rejected, 3);
  unlock("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1", 3, op_outcome::ok, 1);
  timeline.finish(at(100'000));
  CHECK(sink.given["acquired"] == 1);
  CHECK(sink.given["contended"] == 1);
  CHECK(sink.given["unlock_rejected"] == 1);
  CHECK(sink.given["released"] == 1);
}
