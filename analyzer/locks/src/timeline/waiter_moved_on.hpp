// The "moved on" rule of waiter matching (continuing_waiter, waiters.hpp): a polling
// waiter whose connection took another lock since its latest attempt, and whose owner
// then attempts again off its cadence or after that other hold ended, had given up.
#pragma once

#include <algorithm>
#include <cstdint>

#include "timeline/timeline_state.hpp"
#include "timeline/timeline_types.hpp"

namespace lockscope::locks::timeline_detail {

// A poller that backs off (@medusajs/locking-redis: a pause of 20 ms doubling up to 1 s,
// each drawn at 50-100% of it) spaces its attempts further apart each time: seen by
// spacing alone its next attempt looks far off its cadence (gaps 21, 25, 83, 87, then
// 299 ms; 12, 22, 49, 103, 175, then 611 ms), and the rules that read a same-owner
// attempt long after its spacing as a new wait split one wait into a give-up and a new
// wait. What tells a backoff is the trend, not one step (jitter makes a single step
// anything from flat to x4): its spacings never shrank (each at least 3/4 of the one
// before; a fixed-cadence poller's jitter goes both ways) and the latest is at least
// three times its first not at once (a first failure's immediate retry, within half the
// wake window, is no spacing). Recorded per retry, in ms (two 16-bit fields: the waiter stays 144 bytes).
inline void note_gap(waiter& w, std::int64_t gap_us, std::int64_t wake_window_us) {
  const auto gap_ms = static_cast<std::uint16_t>(std::clamp<std::int64_t>(gap_us / 1000, 1, 0xffff));
  w.last_gap_cut_short = !w.gaps_shrank && w.last_gap_ms != 0 && gap_ms * 2 < w.last_gap_ms;
  if (w.last_gap_ms != 0 && gap_ms * 4 < w.last_gap_ms * 3) w.gaps_shrank = true;
  if (w.first_gap_ms == 0 && gap_us > wake_window_us / 2) w.first_gap_ms = gap_ms;
  w.last_gap_ms = gap_ms;
}

// The longest spacing a backing-off poller's next attempt may take and still be the same
// wait: four times its latest (a doubling pause drawn at 50-100% of itself grows by up to
// x4 from one attempt to the next) plus the wake window; 0 when `w` is not backing off.
inline std::int64_t backoff_reach_us(const waiter& w, std::int64_t wake_window_us) {
  if (w.gaps_shrank || w.first_gap_ms == 0 || w.last_gap_ms < 3 * w.first_gap_ms) return 0;
  return 4 * std::int64_t{w.last_gap_ms} * 1000 + wake_window_us;
}

// A backing-off poller whose next attempt comes back at its first steps (under a third of
// its latest spacing and within twice its first) began its backoff again: a new wait. A
// step's jitter never shrinks a backoff so far (each at least 3/4 of the one before,
// note_gap), and a loop that gives up at its deadline and takes the lock again at once
// starts from its first pause (malkusch/lock: spacings grown to 180-220 ms, then 21 and
// 17 ms; joined, its give-up was missed and the next wait shown 1.2-1.4 s long).
inline bool backoff_restarted(const waiter& w, std::int64_t attempt_us, std::int64_t wake_window_us) {
  if (backoff_reach_us(w, wake_window_us) == 0) return false;
  const std::int64_t gap = attempt_us - w.last_attempt_us;
  return gap * 3 < std::int64_t{w.last_gap_ms} * 1000 && gap <= 2 * std::int64_t{w.first_gap_ms} * 1000;
}

// How long after its latest attempt a waiter seen polling may still be waiting for its
// next one: the cadence poller_moved_on holds it to (its longest spacing plus half of it,
// at least the wake window), or a backoff's next step; none when no spacing was learnt.
// Its connection's close within that reach comes while it could still be waiting (the
// close dates its give-up); a close later comes after it stopped: somewhere from its
// latest refusal to when its next attempt was due (a process exiting after a give-up
// takes 75-115 ms, murlock and redis-mutex seen), and most pollers log the give-up at
// once after the refusal (redis-mutex, the node-redlock family, redis-py without a
// timeout left), so the refusal dates it, as a lower bound. A single refused attempt
// shows no waiting at all: it is what a single try looks like (Laravel's `get()`,
// verrou's `acquireImmediately()`, redis-py's `blocking=False`), and a process that ends
// after one closes its connection within milliseconds (predis 13.7 ms, ioredis's QUIT
// 40 ms seen), as soon as a waiter killed in its first sleep would; so its close, however
// soon, only bounds the give-up, dated at the refusal (a pub/sub waiter still subscribed
// is kept to the close before this is asked).
inline std::int64_t next_attempt_reach_us(const waiter& w, std::int64_t wake_window_us) {
  if (w.longest_gap_us <= 0) return 0;
  return std::max(w.longest_gap_us + std::max(wake_window_us, w.longest_gap_us / 2), backoff_reach_us(w, wake_window_us));
}

// Whether `w`'s connection renewed a lock between w's first attempt and its latest (the
// latest renewal over it, refused or not: connection_info::last_renewed_us): it kept a
// hold, in its client's view, while this waiter polled, so a whole hold of another lock
// in the waiter's next spacing may be that other task's too, and a waiter back at its
// cadence after it polls on (poller_moved_on's whole-hold clause does not end it).
// safe-redis-leader runs each lock's candidate over one connection: the `orders`
// candidate's stray renewal between two `stock` polls, then its retake and step-down
// within the next spacing, split a 601 ms wait in two, the delete that ended it
// (released_at_cadence) left to a second part with no cadence. Only the latest renewal
// is kept: one within the whole hold itself (a client that gave up, took, renewed and
// released another lock) is after the latest attempt and says nothing.
inline bool renewed_while_polling(const waiter& w, const connection_info& c) {
  return c.last_renewed_us > w.first_us && c.last_renewed_us < w.last_attempt_us;
}

// A client that keeps one value for every wait of a process (ioredis-lock's Lock) shows a
// give-up only by what its connection does next: it goes on to its next task, takes
// another lock, and later tries this one again with the same value. Joined, the two
// waits read as one, seconds long, with the free time between as a missed wake-up.
// Nothing stops a connection that takes another lock from still waiting for this one,
// though: Node clients run several tasks over one connection, one holding B while
// another polls A. What tells them apart is whether the waiter kept polling:
// - off its cadence: its owner's attempt comes later than its longest spacing plus half
//   of it (at least the wake window) since its latest, after its connection acquired a
//   lock meanwhile: its polling had stopped (a poller's timer keeps its spacing
//   whatever else the connection carries);
// - after a whole hold: the connection acquired and then released a lock since the
//   waiter's latest attempt. A client that waits for one lock at a time comes back to
//   this one only once it is done with the other, and may then come within the spacing;
//   a client seen attempting this lock while its connection held a lock it took since
//   the attempt before (so it runs tasks side by side: `multiplexes`) is not judged by
//   this clause, only by its cadence.
// A polling waiter seen retrying after its connection took another lock before any
// spacing was learnt marks the connection too (below), or, when that was a whole hold,
// is judged at its next attempt, once that gives it a spacing.
// `poller`: the waiter polls (no pub/sub, a spacing learnt; continuing_waiter says);
// `attempt_us`: the new attempt's request time. Marks the connection `multiplexes` when
// this attempt shows it. Returns whether the waiter had given up, and when.
enum class moved_on : std::uint8_t {
  no,
  at_latest,  // at its latest attempt: this one begins a new wait
  at_first,   // at its first: its latest attempt (its second) began the wait this one continues
};

inline moved_on poller_moved_on(waiter& w, bool poller, connection_info& c, std::int64_t attempt_us,
                                std::int64_t wake_window_us) {
  if (w.hold_in_first_gap) [[unlikely]] {
    // Its first retry came after a whole hold of another lock on its connection, with no
    // spacing to judge it by. This attempt gives it one: a first gap far off that cadence
    // (longer than the spacing plus half of it, at least the wake window) was no spacing
    // but a give-up, the client's next task, and a new wait, begun by that retry: a capture
    // joined mid-run saw a give-up by its last attempt only (redislock, whose Lock keeps
    // one value for every wait). A first gap on the cadence was the connection carrying
    // another task beside the wait (sesame_redlock_mux_short), as marked before.
    w.hold_in_first_gap = false;
    const std::int64_t gap = attempt_us - w.last_attempt_us;
    if (w.attempts == 2 && gap > wake_window_us && w.longest_gap_us > gap + std::max(wake_window_us, gap / 2)) {
      return moved_on::at_first;
    }
    c.multiplexes = true;
  }
  if (c.last_acquired_us <= w.last_attempt_us) return moved_on::no;
  if (!poller) {
    // No spacing learnt yet (its first retry): nothing to judge it by, so it waits on --
    // and a polling waiter's connection that took another lock meanwhile runs tasks side
    // by side (a client waiting for one lock at a time takes another only once this wait
    // is over, and a client that keeps its value polls it more than once). Without this,
    // a whole hold of the other lock in each of its first two spacings split the wait
    // (sesame_redlock_mux_short: its other task holds stock 10-40 ms). A whole hold in
    // its first gap after one attempt is judged at the next attempt instead (above): that
    // attempt may be the last seen of a give-up (joined mid-run), and a connection marked
    // for it judged every later wait of its client by cadence alone.
    if (!w.pubsub && w.sub_connection == 0 && w.subscribed_us < 0 && !w.fresh_values) {
      if (w.attempts == 1 && c.last_released_us > c.last_acquired_us && !c.multiplexes) {
        w.hold_in_first_gap = true;
      } else {
        c.multiplexes = true;
      }
    }
    return moved_on::no;
  }
  const std::int64_t gap = attempt_us - w.last_attempt_us;
  if (gap > std::max(w.longest_gap_us + std::max(wake_window_us, w.longest_gap_us / 2), backoff_reach_us(w, wake_window_us)))
    return moved_on::at_latest;
  const bool whole_hold_since = c.last_released_us > c.last_acquired_us;
  if (whole_hold_since && !c.multiplexes && !renewed_while_polling(w, c)) return moved_on::at_latest;
  if (!whole_hold_since) c.multiplexes = true;  // polling on while its connection holds another lock
  return moved_on::no;
}

// A waiter whose own value, over its own connection, took another lock and let it go
// again (a whole hold) since its latest attempt: the task that value names went on to
// other work and came back to this lock only after it, so it had given up at that
// attempt. Beaker's creation lock sends one value per thread for every lock and round:
// a single try on `orders`, refused, is followed by rounds on `stock` before the thread's
// next round on `orders`; read as one wait, the time `orders` stood free between showed
// as a missed wake-up (the first gap's whole hold is otherwise judged only at the attempt
// after, poller_moved_on, when the stretch was already said). What a whole hold by any
// value on the connection cannot tell, the value does: a connection that carries tasks
// side by side (sesame_redlock_mux_short) holds the other lock within a waiter's spacing
// under the other task's value, and a group that takes its keys in turn under one value
// (RQ's scheduler) still holds the other key when it tries this one again. Not a value
// seen shared by several clients (owner_shared), which names no task.
inline bool own_value_went_on(const waiter& w, const connection_info& c) {
  return !w.pubsub && w.sub_connection == 0 && c.last_acquired_owner == w.owner &&
         c.last_acquired_us > w.last_attempt_us && c.last_released_us > c.last_acquired_us;
}

// Likewise a waiter whose own value, over its own connection, began a wait on another
// lock since its latest attempt here and has given that wait up since (withdrew, went on,
// its connection deleted the hold): a value that names one task waits for one lock at a
// time, and the task tried this lock, went on to wait for the other, gave that up, and
// only then came back here. @huangang/nestjs-simple-redis-lock sends one value per process
// for every lock: a single try on `orders`, refused, then four refusals on `stock` ended
// by its unlock in a `finally`, then the next round on `orders`; read as one wait, the
// 290-480 ms `orders` stood free between showed as a missed wake-up. A wait on the other
// lock that ended by its acquisition is own_value_went_on's once released, and kept whole
// while held (a group taking its keys in turn); one that began before this waiter's latest
// attempt ran beside it (a connection carrying tasks side by side, `multiplexes`, is not
// judged by this). Not a pub/sub waiter's: it waits for a message, not in turn.
inline bool own_value_gave_up_elsewhere(const waiter& w, const connection_info& c, std::uint32_t lock) {
  return !w.pubsub && w.sub_connection == 0 && !c.multiplexes && c.gave_up_owner == w.owner && c.gave_up_lock != lock &&
         c.gave_up_wait_began_us > w.last_attempt_us;
}

// The same "whole hold" clause, asked when the waiter's connection closes before its
// next attempt: a polling waiter `w` (a spacing learnt) on connection `c`, which has
// since its latest attempt acquired and then released a lock and does not run tasks side
// by side (`multiplexes`), had given up at that attempt, as poller_moved_on would judge
// it at its next one: a client that waits for one lock at a time goes on to another only
// once done with this one. Its wait is then bounded by its latest attempt and the close,
// however soon after its cadence the close came (verrou's process giving up on stock
// after 5 refusals, taking and releasing orders, then quitting 260 ms after that refusal,
// within the 300 ms reach of its next attempt: read as waiting to the close, 1,069 ms for
// the 810 ms it logged).
inline bool moved_on_before_close(const waiter& w, const connection_info& c) {
  return w.longest_gap_us > 0 && !c.multiplexes && c.last_acquired_us > w.last_attempt_us &&
         c.last_released_us > c.last_acquired_us;
}

// A waiter whose value repeated (a client keeping one value, so far) and whose connection
// now attempts the lock with another value: the same wait with a value drawn anew, when
// that attempt is the connection's next lock operation after the waiter's refusal
// (lock_timeline::impl::attempt_follows_own_refusal: a client that gave up goes on to
// another lock first, or comes back later) and comes at the waiter's own cadence, at
// least 3/4 of its latest spacing after its latest attempt was answered and within the
// reach of its next one. A client
// drawing its value from a coarse clock (redlock-js, whole seconds) repeats it for up to
// a second of attempts, then changes it mid-wait: cut there, the wait was shown from the
// new value's first attempt and the old value's waiter gave up falsely when the
// connection closed. A second task waiting on the same connection (another value sent
// between two of this waiter's attempts, off its cadence) stays another wait; so does
// one before any spacing was learnt (the waiter's second attempt decides), and one whose
// client released its refused value first (@sesamecare-oss/redlock releases the value it
// gave up, then its next acquire draws another: a give-up and a new wait).
inline bool comes_at_cadence(const waiter& w, std::int64_t request_us, std::int64_t wake_window_us) {
  if (w.last_gap_ms == 0 || w.attempts < 2) return false;
  const std::int64_t gap = request_us - w.last_attempt_us;
  return gap * 4 >= std::int64_t{w.last_gap_ms} * 1000 * 3 && gap <= next_attempt_reach_us(w, wake_window_us);
}

inline bool value_redrawn_at_cadence(const waiter& w, std::int64_t attempt_us, std::int64_t wake_window_us) {
  return !w.withdrawn && comes_at_cadence(w, attempt_us, wake_window_us);
}

// A poller's release of the value it was refused, sent over its connection as the next
// step after its last refusal and where its next attempt was due (comes_at_cadence), is
// the client stopping: its retry loop found its time out after one more sleep and gave
// the value back instead of trying again (@huangang/nestjs-simple-redis-lock's decorator
// unlocks in a `finally` after its lock() gave up, one retry interval after the last
// refusal). The wait ended at that release, not at the last refusal. A release sent at
// once after a refusal is that attempt's clean-up (below); one off the cadence says
// nothing of when the wait ended (a Redlock quorum holder releasing, at its hold's end,
// the server that refused it); a waiter seen by one attempt has no cadence.
inline bool released_at_cadence(const waiter& w, const connection_info& c, std::uint32_t lock, std::uint32_t conn,
                                std::int64_t request_us, std::int64_t wake_window_us) {
  return w.conn == conn && c.refused_lock == lock && !c.refusal_cleaned && !c.multiplexes &&
         request_us - w.last_attempt_us > wake_window_us && comes_at_cadence(w, request_us, wake_window_us);
}

// The same question for a waiter whose next attempt may carry a new value
// (waiter_of_fresh_value): whether the waiter `w` on connection `c` had stopped by
// `attempt_us`, a new value's attempt over its connection, because the connection took
// another lock since w's latest attempt. A waiter whose values change (warlock,
// redis-lock), or seen by one attempt only (a give-up seen by its last attempt, joined
// mid-run), had: a client that waits for one lock at a time takes another only once it
// gave this one up. On a connection that multiplexes, only a waiter that left its
// cadence had.
inline bool fresh_waiter_moved_on(const waiter& w, const connection_info& c, std::int64_t attempt_us,
                                  std::int64_t wake_window_us) {
  if (c.last_acquired_us <= w.last_attempt_us) return false;
  if (!c.multiplexes) return w.fresh_values || w.attempts == 1;
  return w.attempts >= 2 && w.longest_gap_us > wake_window_us &&
         attempt_us - w.last_attempt_us > w.longest_gap_us + std::max(wake_window_us, w.longest_gap_us / 2);
}

// A clean-up release: a client that draws a new value for every attempt (@redis-kit/lock,
// node-redlock's acquire) may release that attempt's value at once after the refusal, a
// release that finds nothing. Right after the refused attempt (sent within the wake
// window of its reply: the client sends it on the refusal), with nothing else on its
// connection in between, that release is part of the attempt (withdrew_attempt marks the
// waiter `cleaned_up` and moves its latest attempt to the clean-up); it is no give-up by
// itself. Whether the wait goes on shows at the connection's next step:
// - another attempt on the same lock with a new value within the retry window (below):
//   a retry, the same waiter (waiter_of_fresh_value);
// - that attempt later, or any other lock operation over the connection first: the
//   client gave up, at the clean-up (follow_up_refusal; on a connection seen carrying
//   tasks side by side, `multiplexes`, another task's operation says nothing of this
//   wait, and only the window judges);
// - nothing: the waiter's deadline, dated at its last attempt (the clean-up).
// The retry window, from the clean-up to the next attempt's request:
// - once the waiter retried (a cadence learnt): its longest spacing plus half of it (at
//   least the wake window), as poller_moved_on judges a poller that left its cadence;
// - before that: a quarter of the lease its attempts set, at most 400 ms, at least the
//   wake window. A retry loop pauses briefly and retries several times within one lease
//   (node-redlock's default pause is 200 ms + up to 200 ms of jitter, @redis-kit/lock's
//   200 +- 100 ms; their leases, seconds), while an application that runs an attempt
//   with no retries on a timer repeats it on its own period, which comes back late
//   against the lease it sets: node-redlock with retryCount 0 on 500 ms ticks and a
//   1 s lease (captures/thirdparty/redlock.pcap) gave up each time.
inline constexpr std::int64_t first_retry_cap_us = 400'000;

inline std::int64_t cleanup_retry_window_us(const waiter& w, std::int64_t lease_ms, std::int64_t wake_window_us) {
  std::int64_t window = first_retry_cap_us;
  if (lease_ms > 0) window = std::min(window, lease_ms * 250);  // a quarter of it, in us
  window = std::max(window, wake_window_us);
  if (w.attempts >= 2) window = std::max(window, w.longest_gap_us + std::max(wake_window_us, w.longest_gap_us / 2));
  return window;
}

// Whether `w`, withdrawn, had stopped by an attempt with a new value over its connection
// at `attempt_us` asking for `lease_ms`: a release of its value that was no clean-up
// (not right after its refusal) ended it; a clean-up ended it unless this retry came
// within the window.
inline bool withdrawn_stopped(const waiter& w, std::int64_t attempt_us, std::int64_t lease_ms,
                              std::int64_t wake_window_us) {
  if (!w.withdrawn) return false;
  if (!w.cleaned_up) return true;
  return attempt_us - w.last_attempt_us > cleanup_retry_window_us(w, lease_ms, wake_window_us);
}

// The free interval kept for a waiter's next attempt to confirm (lock_extra::idle_start_us,
// the longest so far) is only any current waiter's to confirm when that waiter was
// already waiting as it began. Kept while waiters whose waits ended unseen (a give-up
// found only at its deadline) stayed listed, an old long interval that none of the
// waiters now present waited through hid a newer, shorter one that one of them did (a
// 113 ms stretch went unreported behind a 900 ms one from 8 s before). Called before a
// new interval is weighed against the kept one. The later one kept beside it
// (lock_extra::later_idle_start_us) is judged alike, and takes the kept one's place
// when that one goes.
inline void forget_idle_no_waiter_saw(lock_extra& x) {
  const auto anyone_waiting_at = [&](std::int64_t start) {
    for (const waiter& w : x.waiters) {
      if (w.first_us <= start) return true;  // the earliest waiters come first: usually at once
    }
    return false;
  };
  if (x.later_idle_start_us >= 0 && !anyone_waiting_at(x.later_idle_start_us)) {
    x.later_idle_start_us = x.later_idle_end_us = -1;
  }
  if (x.idle_start_us >= 0 && !anyone_waiting_at(x.idle_start_us)) {
    x.idle_start_us = x.later_idle_start_us;
    x.idle_end_us = x.later_idle_end_us;
    x.later_idle_start_us = x.later_idle_end_us = -1;
  }
}

// A pub/sub waiter whose own subscription ended by its client's UNSUBSCRIBE after its
// latest attempt (Redisson's and node-redisson's tryLock when its wait time runs out):
// it is listed until its owner attempts again or its deadline passes, and then ends as
// of that UNSUBSCRIBE, but it shares no subscription with its client's other waiters.
// Counted as their sibling, it made the next waiter's own UNSUBSCRIBE look shared, so
// that give-up too was found only at its deadline, with its wait as a lower bound
// (node-redisson, a new lock object and owner per tryLock: 27 of 31 give-ups).
inline bool left_waiter(const waiter& w) { return w.left_channel && w.unsubscribed_us >= w.last_attempt_us; }

}  // namespace lockscope::locks::timeline_detail

namespace lockscope::locks {

// A client that subscribes once per wait and UNSUBSCRIBEs when each wait ends, by message
// or by its timer, sends one UNSUBSCRIBE per wait, whether or not it is still subscribed:
// node-redisson's timers are never cleared, so a wait woken early still UNSUBSCRIBEs when
// its timer fires, later, in the middle of the same client's next wait on the lock. That
// stale UNSUBSCRIBE ends the subscription (the waiter then hears no release), but not the
// wait: the waiter's own timer UNSUBSCRIBEs again when it gives up, a no-op on the wire
// (0 subscriptions left). Read as the end, the first made a 900 ms give-up a 63 ms one and
// hid the 456 ms the lock then stood free while it waited.
// So a waiter that left its channel by an UNSUBSCRIBE nothing explained (no message just
// before it, not when its TTL's timer was due: waiter::left_unexplained, a low link), and
// whose subscriber connection unsubscribes the channel again with no SUBSCRIBE between
// (the record of that leave still the connection's latest), waited on at least until that
// repeat, when the repeat comes no later than its own timer could fire (its latest
// attempt plus the TTL it was given, with explained_unsubscribe's slack: a pub/sub
// waiter's timer never runs longer). Its give-up is dated at the latest such repeat
// (left_until). Not a leave a message or its timer explained (that was its own: later
// repeats are other waits' stale timers), nor a leave that was a sure link's.
inline void lock_timeline::impl::left_again(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t at) {
  if (!has_extra(l)) return;
  const connection_info::subscription* r = record_of(s, lock);
  if (r == nullptr || r->active || r->since_us < 0) return;
  lock_extra& x = *xp(l);
  const std::int64_t left_us = r->since_us;
  auto consider = [&](const waiter& w) {
    if (w.sub_connection != s.id || !left_waiter(w) || !w.left_unexplained || w.unsubscribed_us != left_us ||
        w.last_ttl_us < 0 || at <= w.unsubscribed_us) {
      return;
    }
    const std::int64_t slack = std::max(options.wake_window_us, w.last_ttl_us / 20);
    if (at > w.last_attempt_us + w.last_ttl_us + slack) return;  // past its own timer: another wait's
    for (lock_extra::later_leave& e : x.later_leaves) {
      if (e.seq == w.seq) {
        e.at_us = at;
        return;
      }
    }
    x.later_leaves.push_back({w.seq, at});
  };
  if (x.waiters.size() <= scanned_waiters) {
    for (const waiter& w : x.waiters) consider(w);
  } else if (const auto* v = waiter_keys::of(keys_of(x).by_sub, s.id)) {
    woken_seqs.assign(v->begin(), v->end());
    for (const std::uint64_t seq : woken_seqs) {
      if (const waiter* w = waiter_at(x, seq)) consider(*w);
    }
  }
}

// When a waiter that left its channel (left_waiter) stopped waiting: at its leave, or at
// the latest repeat of it that left_again kept.
inline std::int64_t lock_timeline::impl::left_until(const lock_extra& x, const waiter& w) {
  std::int64_t until = w.unsubscribed_us;
  for (const lock_extra::later_leave& e : x.later_leaves) {
    if (e.seq == w.seq && e.at_us > until) until = e.at_us;
  }
  return until;
}

// Before `w` (waiting for `lock`) retries: another waiter on its connection, for another
// lock, that was already waiting at w's latest attempt and has attempted since, waits
// side by side with it: the connection carries concurrent tasks (`multiplexes`). A client
// that waits for one lock at a time shows no such pair: its next wait begins only after
// the one before ended (given up or acquired).
inline void lock_timeline::impl::note_side_by_side_waits(const waiter& w, std::uint32_t lock) {
  // A pub/sub waiter is woken, not polling on a cadence: what the flag decides
  // (poller_moved_on, fresh_waiter_moved_on) is about pollers and changing values, and
  // the scan visits every waiter of every other lock the connection waits on (a herd's
  // connection carries thousands: it was a third of the herd's instructions).
  if (w.pubsub) return;
  connection_info& c = connections[w.conn];
  if (c.multiplexes || c.waits.size() < 2) return;
  for (const std::uint32_t other : c.waits) {
    if (other == lock || !has_extra(locks[other])) continue;
    for (const waiter& v : xp(locks[other])->waiters) {
      if (v.conn == w.conn && v.first_us < w.last_attempt_us && v.last_attempt_us > w.last_attempt_us) {
        c.multiplexes = true;
        return;
      }
    }
  }
}

// A lock operation over connection `conn` (on lock `id`): the next step after a refused
// attempt there (connection_info::refused_lock) when one is marked. A clean-up of that
// attempt keeps the mark for withdrew_attempt; after a clean-up, anything but another
// attempt on the same lock ends that wait, at the clean-up (the rule above). Called by
// the acquire, unlock, renew, forced-unlock and plain DEL/EXPIRE paths (a channel's
// operations are not the connection's next step), with the connection they look up.
[[gnu::always_inline]] inline void lock_timeline::impl::step_after_refusal(std::uint32_t conn, std::uint32_t id,
                                                                          const lock_operation& op) {
  connection_info& c = connections[conn];
  if (c.refused_lock == no_id) return;  // (the common case: one load)
  if (c.refusal_cleaned) [[unlikely]] {
    follow_up_refusal(conn, id, op);
  } else if (op.kind != lock_op_kind::unlock || id != c.refused_lock) {
    c.refused_lock = no_id;
  }
}

inline void lock_timeline::impl::follow_up_refusal(std::uint32_t conn, std::uint32_t id, const lock_operation& op) {
  connection_info& c = connections[conn];
  const std::uint32_t lock = c.refused_lock;
  if (id == lock && op.kind == lock_op_kind::unlock && cleaned_up_again(conn, op)) return;
  c.refused_lock = no_id;
  c.refusal_cleaned = false;
  if ((id == lock && op.kind == lock_op_kind::acquire) || c.multiplexes) return;  // waiter_of_fresh_value judges
  gave_up_at_cleanup(conn, lock, wait_end::new_wait, op.at_us());
}

// The clean-up's value released again over the same connection, nothing between: the same
// clean-up sent once more, no next step. A client that calls its scripts by SHA1 sends a
// script's text after the server answers NOSCRIPT (node-redlock's first release on a server
// it had not used it on), and may re-send a release whose reply it did not get.
inline bool lock_timeline::impl::cleaned_up_again(std::uint32_t conn, const lock_operation& op) {
  lock_state& l = locks[connections[conn].refused_lock];
  if (!has_extra(l)) return false;
  const waiter* w = find_waiter(*xp(l), owners.id(op.owner));
  return w != nullptr && w->conn == conn && w->cleaned_up;
}

// The connection closes as the next step after a clean-up: that waiter gave up at it.
// (Not the capture's end closing every flow: that says nothing of the waiter, which stays
// "still waiting", as connection_ended leaves it.)
inline void lock_timeline::impl::closed_after_cleanup(std::uint32_t conn, std::int64_t at) {
  connection_info& c = connections[conn];
  if (c.refused_lock == no_id || !c.refusal_cleaned || capture_ending) return;
  const std::uint32_t lock = c.refused_lock;
  c.refused_lock = no_id;
  c.refusal_cleaned = false;
  gave_up_at_cleanup(conn, lock, wait_end::connection_closed, at);
}

// The waiter of `lock` on `conn` whose latest attempt was cleaned up gave up at that
// clean-up (its latest attempt's time); known at `at`. A poller (a spacing learnt) may
// have slept on after it before finding its time out (malkusch/lock gives up at its
// deadline, up to a backoff step after its last clean-up), so its give-up is bounded
// there, as a stopped poller's is: from the clean-up to the earliest of `at` and when its
// next attempt was due. A single try gave up at its clean-up.
inline void lock_timeline::impl::gave_up_at_cleanup(std::uint32_t conn, std::uint32_t lock, wait_end how, std::int64_t at) {
  lock_state& l = locks[lock];
  if (!has_extra(l)) return;
  for (waiter& w : xp(l)->waiters) {
    if (w.conn == conn && w.cleaned_up) {
      give_up(l, lock, &w, how, w.last_attempt_us, at, w.attempts >= 2 && w.longest_gap_us > 0);
      schedule(lock);
      return;
    }
  }
}

}  // namespace lockscope::locks
