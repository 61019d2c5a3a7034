// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The clock: each lock's next timed event in the timer queue (lease expiry, long hold,
// a waiter's deadline, idleness), firing what fell due, and the overlaps held back for
// reply_skew_us before they are reported.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// Queues the lock's next timed event unless an earlier entry is already queued (a
// later deadline is found when that entry fires: renewals push nothing).
inline void lock_timeline::impl::schedule(std::uint32_t id) { schedule(id, locks[id]); }

// schedule(id) with the lock's row, `l`, at hand (a handler's, found once per operation).
inline void lock_timeline::impl::schedule(std::uint32_t id, lock_state& l) {
  std::int64_t next = -1;
  auto consider = [&](std::int64_t t) {
    if (t < 0) return;
    t = std::max(t, now);  // already due (e.g. a waiter subscribed to a long-free lock): fire now
    if (next < 0 || t < next) next = t;
  };
  for_each_holder(l, [&](holder& h) {
    consider(h.deadline_us);
    if (!h.long_hold_reported() && h.since_us >= 0 && options.long_hold_us > 0) consider(h.since_us + options.long_hold_us);
  });
  if (has_extra(l)) {
    consider(earliest_waiter_deadline(*xp(l)));  // kept: a herd's 4,000 waiters were scanned each time
    if (!has_holder(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported) {
      // The idle check's time counts only when it would queue a timer the others do not:
      // before them, and before the one queued (else the scan for a subscribed waiter is
      // skipped: a herd's refused retries while the lock stood free each scanned its
      // thousands of waiters for the same answer).
      const std::int64_t idle_at = std::max(xp(l)->free_since_us + options.idle_threshold_us, now);
      const bool could_count = (next < 0 || idle_at < next) && !(l.queued_us >= 0 && l.queued_us <= idle_at);
      if (could_count && has_subscribed_waiter(l, id)) consider(idle_at);
    }
  }
  if (next < 0 || (l.queued_us >= 0 && l.queued_us <= next)) return;
  l.queued_us = next;
  timers.push(timer{next, id});
}

// schedule(id) when only one deadline, `t`, changed: the entry queued is no later than
// every other deadline (schedule() keeps it so, and fire() calls it), so it is enough
// to queue `t` when it comes first.
inline void lock_timeline::impl::schedule_at(std::uint32_t id, std::int64_t t) {
  if (t >= 0) schedule_at(id, locks[id], t);
}

inline void lock_timeline::impl::schedule_at(std::uint32_t id, lock_state& l, std::int64_t t) {
  if (t < 0) return;
  t = std::max(t, now);
  if (l.queued_us >= 0 && l.queued_us <= t) return;
  l.queued_us = t;
  timers.push(timer{t, id});
}

inline void lock_timeline::impl::fire(std::uint32_t id, lock_state& l, std::int64_t at) {
  l.queued_us = -1;
  // Expiries first (in deadline order), then long holds, then idleness.
  for (bool again = true; again;) {
    again = false;
    holder* due = nullptr;
    for_each_holder(l, [&](holder& h) {
      if (h.deadline_us >= 0 && h.deadline_us <= at && (due == nullptr || h.deadline_us < due->deadline_us)) due = &h;
    });
    if (due != nullptr) {
      expire(l, *due, std::max(due->deadline_us.get(), now));  // a deadline set in the past fires now
      again = true;
    }
  }
  for_each_holder(l, [&](holder& h) {
    if (!h.long_hold_reported() && h.since_us >= 0 && options.long_hold_us > 0 && h.since_us + options.long_hold_us <= at) {
      h.set_long_hold_reported();
      anomaly(l, h.since_us + options.long_hold_us, anomaly_kind::long_hold, h.owner, h.conn,
              {anomaly_finding::held_too_long, options.long_hold_us});
    }
  });
  // Waiters that made no attempt within their last TTL plus the margin gave up.
  if (has_extra(l) && earliest_waiter_deadline(*xp(l)) >= 0 && earliest_waiter_deadline(*xp(l)) <= at) {
    give_up_due_waiters(l, id, at);
  }
  // A subscribed waiter still waits (clients unsubscribe when they give up): the
  // idleness is certain at the threshold, live or not.
  if (!has_holder(l) && has_extra(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported &&
      has_subscribed_waiter(l, id) && xp(l)->free_since_us + options.idle_threshold_us <= at) {
    lock_extra& x = *xp(l);
    // A missed wake-up rests on the link: a waiter certainly subscribed when the lock went
    // free and not told since (one that was told and is slow to retry, or that subscribed
    // after, and retries once subscribed, missed nothing).
    const waiter* longest = nullptr;
    for (const waiter& w : x.waiters) {
      if (subscribed(w, id) && link_certain(w) && !w.notified && subscribed_by(w, id, x.free_since_us) &&
          (longest == nullptr || w.first_us < longest->first_us)) {
        longest = &w;
      }
    }
    // Considered once either way (else this deadline, past, would be queued again).
    x.idle_reported = true;
    // At the threshold, or now when the waiter only appeared after it had passed.
    const std::int64_t ts = std::max(x.free_since_us + options.idle_threshold_us, at);
    if (longest != nullptr) anomaly(l, ts, anomaly_kind::idle_with_waiters, longest->owner, longest->conn,
            {anomaly_finding::idle_while_subscribed_waiter_waits}, false, x.free_since_us,
            ts - x.free_since_us);
  }
  schedule(id, l);
}

[[gnu::always_inline]] inline void lock_timeline::impl::advance(std::int64_t to) {
  for (timer t; timers.pop_due(to, t);) {
    lock_state& l = locks[t.lock];
    if (l.queued_us != t.at_us) continue;  // superseded by an earlier entry
    report_overlaps(t.at_us);
    if (t.at_us > now) now = t.at_us;
    fire(t.lock, l, t.at_us);
  }
  if (!suspected_overlaps.empty()) report_overlaps(to);
  if (to > now) now = to;
}

// Reports the suspected overlaps certain by `until` (reply_skew_us after their
// acquisition; `all`: the rest too, now: the capture ended), at that moment: events
// stay in time order.
inline void lock_timeline::impl::report_overlaps(std::int64_t until, bool all) {
  if (suspected_overlaps.empty()) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < suspected_overlaps.size(); ++i) {
    const suspected_overlap p = suspected_overlaps[i];
    const std::int64_t certain = p.at + options.reply_skew_us;
    if (certain > until && !all) {
      suspected_overlaps[kept++] = p;
      continue;
    }
    // The interval: from the acquisition to when it became certain (or the end).
    const std::int64_t ts = certain <= until ? std::max(now, certain) : now;
    if (p.refused_renewal) {
      settle_refused_renewal(p, ts);
      forget_overlap(p);
      continue;
    }
    // Mid-stream, a connection's SELECT may be before the capture: the same key in two
    // databases would read as one lock held twice.
    const anomaly_finding finding = p.database_guessed ? anomaly_finding::acquired_while_held_db_guessed
                                                       : anomaly_finding::acquired_while_held;
    anomaly(locks[p.lock], ts, anomaly_kind::overlapping_holders, p.owner, p.conn,
            {finding, owners.text(p.other)}, p.inferred, p.at,
            ts - p.at);
    forget_overlap(p);
  }
  suspected_overlaps.resize(kept);
}

inline void lock_timeline::impl::forget_overlap(const suspected_overlap& p) {
  owners.release(p.owner);
  owners.release(p.other);
  release_connection(p.conn);
}

// `owner` released lock `id` with an unlock sent at request_us: an overlap suspected
// with an acquisition whose reply came after that was the capture's order, not the
// server's.
inline void lock_timeline::impl::released_before(std::uint32_t id, std::uint32_t owner, std::int64_t request_us) {
  std::erase_if(suspected_overlaps, [&](const suspected_overlap& p) {
    // A refused renewal of this owner: its unlock ran first, and the refusal was its effect.
    if (p.lock != id || (p.refused_renewal ? p.owner : p.other) != owner || request_us > p.at) return false;
    forget_overlap(p);
    return true;
  });
}

}  // namespace lockscope::locks
