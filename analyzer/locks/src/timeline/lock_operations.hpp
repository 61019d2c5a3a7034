// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The lock operations: acquire (and contended attempts), unlock, renew, plain
// EXPIRE/DEL, forced unlock.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"
#include "timeline/uuid_text.hpp"

namespace lockscope::locks {

inline void lock_timeline::impl::on_acquire(std::uint32_t id, lock_state& l, const lock_operation& op) {
  const std::uint32_t conn = conn_index(op);
  attempt_follows_own_refusal = connections[conn].refused_lock == id && !connections[conn].refusal_cleaned;
  attempt_follows_other_refusal = connections[conn].refused_lock != no_id && connections[conn].refused_lock != id &&
                                  !connections[conn].refusal_cleaned;
  attempt_follows_other_operation = connections[conn].refused_lock != id;
  step_after_refusal(conn, id, op);  // (waiter_moved_on.hpp)
  const std::uint32_t owner = owners.id(op.owner);
  if (op.outcome == op_outcome::ok || op.outcome == op_outcome::contended) note_owner(conn, id, owner);
  // Only locks with waiters or wake-ups need the client (not the uncontended hot path).
  std::uint64_t client = 0;
  if (has_extra(l) || op.outcome == op_outcome::contended) client = client_key(owner, op.connection);
  if (has_extra(l)) attribute_wakes(*xp(l), client, op.request_us);
  if (op.outcome == op_outcome::contended) {
    on_contended(id, l, op, owner, conn, client);
    return;
  }
  if (op.outcome == op_outcome::abandoned) {
    left_queue(id, op, owner);
    return;
  }
  if (op.outcome != op_outcome::ok) return;
  // SET-based and node-redlock locks cannot be re-entered (their acquire fails while
  // the key exists, whoever set it).
  if (holder* h = find_holder(l, owner); h != nullptr && !op.shared && op.family != lock_family::setnx &&
                                         op.family != lock_family::set_based && op.family != lock_family::subscription &&
                                         op.family != lock_family::redlock_multi) {
    on_reentered(id, l, op, *h);
    return;
  }
  if (!op.shared) check_other_holders(id, l, op, owner, conn);
  on_acquired(id, l, op, owner, conn, client);
}

// A failed attempt: a new waiter, or the next attempt of one already waiting.
inline void lock_timeline::impl::on_contended(std::uint32_t id, lock_state& l, const lock_operation& op, std::uint32_t owner,
                                             std::uint32_t conn, std::uint64_t client) {
  const std::int64_t at = op.at_us();
  note_refused_by_own_hold(l, owner, conn);
  waiter* w = continuing_waiter(l, id, owner, op);
  if (w == nullptr) {
    lock_extra& x = ex(l);
    if (!has_holder(l) && x.waiters.empty()) x.free_since_us = -1;  // free since unknown
    if (!has_holder(l)) {
      x.refused_unseen = true;  // held by someone unseen (held_before_capture)
      x.unseen_hold_released = false;
    }
    w = &x.waiters.emplace_back();
    w->seq = x.next_waiter_seq++;
    if (x.waiter_index_valid) x.waiter_index.emplace(owner, w->seq);
    w->owner = owner;
    w->conn = conn;
    w->ip_tag = connections[conn].ip.tag();
    owners.retain(owner);
    retain_connection(conn);
    connections[conn].waits.push_back(id);
    w->connection = op.connection;
    w->client = client;
    w->pubsub = pubsub_family(op.family);
    w->connection_per_attempt = op.family == lock_family::subscription;
    w->first_us = op.request_us;
    if (new_wait_from_us >= 0) {  // began by the attempt before, answered at once by this one
      w->first_us = new_wait_from_us;
      w->attempts = 2;
      w->quick_second = true;
    }
    w->last_attempt_us = at;
    w->mid_stream = op.db < 0;  // its database unseen: no SELECT, no SYN
    w->first_ttl_us = op.ttl_ms >= 0 ? std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000 : -1;
    link_existing_subscription(id, *w);
    // A message its client's subscriber got while this first attempt was in flight tells
    // it, as for any attempt (told_during): Redisson's latch keeps the permit.
    w->notified = told_during(x, *w, op.request_us, at);
    index_keys(x, *w);
  } else {
    move_waiter(*w, id, conn, op.connection);
    retry(l, id, *w, op, at);
  }
  w->last_ttl_us = op.ttl_ms >= 0 ? std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000 : -1;
  set_waiter_deadline(*xp(l), *w, at + expected_wait_us(l, op, at) + options.waiter_margin_us);
  lock_event e = from_op(l, op, lock_event_kind::contended);
  give_owner_hash(e, owner);
  e.ttl_ms = op.ttl_ms;
  // Refused while the same value holds over another connection to this server: the value
  // is shared by several clients (waiter_of_owner); the lock groups must not group by it.
  if (const holder* h = first_holder(l); h != nullptr && h->owner == owner && h->conn != conn &&
                                         connections[h->conn].server == connections[conn].server) {
    e.owner_shared = true;
  }
  emit(l, e);
  // Its clean-up may follow (follow_up_refusal, waiter_moved_on.hpp).
  connections[conn].refused_lock = id;
  connections[conn].refused_sequence = op.connection_sequence;
  connections[conn].refusal_cleaned = false;
  // While the lock is held, only this waiter's deadline changed: no scan of the others.
  if (has_holder(l)) schedule_at(id, l, w->deadline_us);
  else schedule(id, l);
}

inline void lock_timeline::impl::on_reentered(std::uint32_t id, lock_state& l, const lock_operation& op, holder& h) {
  h.reenter();
  if (op.lease_ms >= 0) h.set_lease(op, op.at_us());
  lock_event e = from_op(l, op, lock_event_kind::reentered);
  e.hold_count = h.hold_count() > 0 ? h.hold_count() : -1;
  e.lease_ms = op.lease_ms;
  emit(l, e);
  schedule_at(id, l, h.deadline_us);  // only this holder's deadline changed
}

// An exclusive acquisition while others hold: either their lease has run out (we had
// not seen it yet), or two owners hold at once (an overlap, confirmed or not later). A
// hold known only from its renewals was freed unseen: the key was free to take.
[[gnu::always_inline]] inline void lock_timeline::impl::check_other_holders(std::uint32_t id, lock_state& l, const lock_operation& op,
                                                                            std::uint32_t owner, std::uint32_t conn) {
  const std::int64_t at = op.at_us();
  for (bool again = true; again;) {
    again = false;
    holder* stale = nullptr;
    for_each_holder(l, [&](holder& h) {
      if (stale == nullptr && h.owner != owner && (h.ends_unseen() || (h.floor_us() >= 0 && at >= h.floor_us()))) {
        stale = &h;
      }
    });
    if (stale != nullptr) {
      expire(l, *stale, at);
      again = true;
    }
  }
  std::uint32_t other = no_id;
  bool guessed = op.db < 0;
  for_each_holder(l, [&](holder& h) {
    if (h.owner != owner && other == no_id) {
      other = h.owner;
      guessed = guessed || (h.conn != no_id && connections[h.conn].database_guessed);
    }
  });
  if (other != no_id) {
    owners.retain(owner);
    owners.retain(other);
    retain_connection(conn);
    suspected_overlaps.push_back({id, owner, other, conn, at, op.inferred, guessed});
  }
}

// A new holder: the waiter it was (if any) leaves with its wait measured. It and
// check_other_holders are always inlined into on_acquire, as when they were one function:
// this is the uncontended acquire's path.
[[gnu::always_inline]] inline void lock_timeline::impl::on_acquired(std::uint32_t id, lock_state& l, const lock_operation& op,
                                                                    std::uint32_t owner, std::uint32_t conn, std::uint64_t client) {
  const std::int64_t at = op.at_us();
  std::int64_t wait = -1;
  bool wait_at_least = false;
  // A waiter still subscribed when it acquires leaves the channel next (Redisson, our
  // client); node-redisson left it before retrying: then the next UNSUBSCRIBE is not its.
  bool leaves_next = false;
  if (waiter* w = continuing_waiter(l, id, owner, op)) {
    leaves_next = subscribed(*w, id);
    client = w->client;
    retry(l, id, *w, op, at);
    wait = at - w->first_us;
    // An attempt before the capture cannot be ruled out: its connection was joined
    // mid-stream, its first attempt seen was not answered by an immediate retry (as a
    // first failure is, by Redisson and node-redisson), and it came no later after the
    // capture's first operation than the client may wait between attempts (the TTL
    // it was given, or its longest gap between attempts).
    wait_at_least = w->mid_stream && !w->quick_second &&
                    w->first_us - first_op_us <= std::max(w->longest_gap_us, w->first_ttl_us) + options.wake_window_us;
    drop_waiter(l, id, w);
  } else if (new_wait_from_us >= 0) {
    wait = at - new_wait_from_us;  // a new wait, begun by the attempt before this one
  }
  // Nothing seen of the key before (no row history, no waiter, no holder): a SET NX
  // that may be a marker set once (set_once_keys.hpp) rather than a lock.
  const bool first_of_key = op.family == lock_family::set_based && wait < 0 && l.side == no_id && l.active == no_id &&
                            l.acquisitions == 0 && l.renewals == 0 && l.expiries == 0 && l.last_expired == no_id;
  take_expired(l, owner);
  free_interval_ends(l, at);
  if (has_extra(l)) {
    lock_extra& x = *xp(l);
    x.acquired_us = leaves_next ? at : -1;
    x.acquired_client = client;
    const std::uint32_t kept = leaves_next ? owner : no_id;
    owners.retain(kept);
    owners.release(x.acquired_owner);
    x.acquired_owner = kept;
    // (learn_lone_acquirer; acquirer_leaving_unknown: on a lock with subscriptions begun
    // before the capture, an acquisition right after a message ends a wait begun before it)
    if (wait >= 0 || (x.subscribed_unseen && message_just_before(x, at))) {
      x.waited_acquired_us = at;
      x.waited_acquired_client = client;
      x.waited_acquired_ip_tag = connections[conn].ip.tag();
    }
  }
  connections[conn].last_acquired_us = at;
  connections[conn].last_acquired_owner = owner;
  holder& h = add_holder(l, owner, conn);
  h.set_hold_count(1);
  h.since_us = at;
  h.last_renew_us = at;
  if (op.lease_ms >= 0) h.set_lease(op, at);
  // A holder is present now, so no idleness is timed: its lease and long hold are the
  // only new times (no scan of the other holders and waiters).
  const std::int64_t deadline = h.deadline_us;
  const std::int64_t long_hold = options.long_hold_us > 0 ? at + options.long_hold_us : -1;
  count_acquisition(l);
  if (wait >= 0) {
    ex(l).waits.add(wait);
    if (wait_at_least) xp(l)->waits_at_least = true;
  }
  lock_event e = from_op(l, op, lock_event_kind::acquired);
  give_owner_hash(e, owner);
  e.hold_count = 1;
  e.lease_ms = op.lease_ms;
  e.wait_us = wait;
  e.wait_at_least = wait_at_least;
  e.token = op.token;
  e.first_of_key = first_of_key;
  if (wait >= 0) attribute_to_closed_holder(l, e, at - wait, at);
  emit(l, e);
  release_closed_holder_if_done(l);
  if (op.family == lock_family::setnx) {
    anomaly(l, at, anomaly_kind::non_atomic_acquire, owner, conn,
            {anomaly_finding::setnx_expiry_not_atomic}, op.inferred);
  }
  schedule_at(id, l, deadline);
  schedule_at(id, l, long_hold);
}

// A refusal of `owner`'s unlock or renewal at `at` (the reply), reported at report_at
// when that is later (a refused renewal whose judgement waited: settle_refused_renewal).
inline void lock_timeline::impl::rejected_by_owner(lock_state& l, std::uint32_t owner, std::uint32_t conn, std::int64_t at, bool inferred, bool renew,
                                                   std::int64_t report_at) {
  holder* mine = find_holder(l, owner);
  if (take_expired(l, owner) || mine != nullptr) {
    // The lease's end by our clock (reply + lease) is later than the server's by the
    // reply's latency: refused well before it, the key was not expired but lost.
    const std::int64_t left = mine != nullptr && mine->deadline_us >= 0 ? mine->lease_end_us() - at : -1;
    // Past the floor (request + lease) the key may have expired whatever the reply's
    // latency was: the acquisition's reply may have waited on a busy server.
    const bool lease_over = left <= options.reply_skew_us || (mine != nullptr && at >= mine->floor_us());
    if (mine != nullptr && mine->deadline_us >= 0 && lease_over) {
      // Refused about when the lease ends (Redis's clock counts whole milliseconds, so
      // before our deadline): the lease ran out, and the refusal makes that certain.
      expire(l, *mine, at);
      take_expired(l, owner);  // reported below, once
    } else if (mine != nullptr) {
      remove_holder(l, mine);
      became_free(l, at);
    }
    anomaly_facts found;
    if (!lease_over) {
      found.finding = renew ? anomaly_finding::renewal_refused_key_lost : anomaly_finding::unlock_refused_key_lost;
      found.duration_us = left;
    } else {
      found.finding = renew ? anomaly_finding::renewal_refused_lease_over : anomaly_finding::unlock_refused_lease_over;
    }
    if (report_at > at) {
      anomaly(l, report_at, anomaly_kind::expired_while_held, owner, conn, found, inferred, at, report_at - at);
    } else {
      anomaly(l, at, anomaly_kind::expired_while_held, owner, conn, found, inferred);
    }
    return;
  }
  if (held_before_capture(l, owner, conn)) {
    // Its hold began before the capture and the key is gone: its lease ran out (or the
    // key was lost) unseen. Shown as the expiry it most likely was, at least as long as
    // the capture.
    lock_event e = base(l, at);
    e.event = lock_event_kind::expired;
    e.owner = owners.text(owner);
    name_connection(e, conn);
    e.hold_count = 0;
    held_since_capture(l, e, at);
    count_expiry(l);
    set_last_expired(l, owner);
    emit(l, e);
    anomaly(l, at, anomaly_kind::expired_while_held, owner, conn,
            {renew ? anomaly_finding::renewal_refused_lease_over : anomaly_finding::unlock_refused_lease_over}, inferred);
    return;
  }
  if (!renew && !group_cleanup_unlock(l, owner, conn)) {
    anomaly(l, at, anomaly_kind::unlock_by_non_owner, owner, conn,
            {has_holder(l) ? anomaly_finding::unlock_by_non_holder : anomaly_finding::unlock_of_free_lock},
            inferred);
  }
}

// A refused unlock or renewal by `owner` over `conn` may end a hold the capture did not
// see begin: the connection was joined mid-stream (no SYN), an attempt on the lock was
// refused while no holder was known (someone held it unseen), and the owner was neither
// holder nor waiter nor seen acquiring this lock over it (a client releases or extends
// only what it took). Joined mid-run, node-redisson's and @redis-kit/lock's holds that
// outlived their lease were shown as unlocks by a non-owner, their expiries missed.
//
// Not once a hold the capture saw from its start (first met by its renewal or release)
// was released since that refusal: the lock was that value's from the capture's start
// to its release, and any hold after it is on the wire, so an owner never seen took it
// at no time in the capture (safe-redis-leader joined mid-run: a waiter's give-up
// delete of its own id, answered 0, 46 ms after another id's release, was shown as that
// id's hold expiring). A hold seen begun in the capture leaves the time before it.
inline bool lock_timeline::impl::held_before_capture(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
  if (connections[conn].opened_us >= 0 || !has_extra(l) || !xp(l)->refused_unseen) return false;
  if (xp(l)->unseen_hold_released) return false;
  if (find_waiter(l, owner) != nullptr) return false;
  for (const auto& slot : connections[conn].last_owners) {
    if (slot.owner == owner) return false;
  }
  return true;
}

// An exclusive hold seen from the capture's start released (on_unlock): the unseen holder
// a refusal pointed to is accounted for (held_before_capture).
inline void lock_timeline::impl::unseen_hold_ended(lock_state& l, const lock_operation& op) {
  if (!op.shared && has_extra(l) && xp(l)->refused_unseen) xp(l)->unseen_hold_released = true;
}

// Joined mid-run, a holder that keeps its lock by trying to take it again before each
// renewal (node-resque's scheduler: `SET NX` refused, `GET` its own name, `EXPIRE`) is
// first met refused: a waiter, on a lock with no holder known. A GET over the waiter's own
// connection that then read its value in the key, and the DEL or EXPIRE after it that
// found the key, show it was the holder all along: its refusals were its own tries, no
// wait (the waiter leaves, neither acquiring nor giving up), and the hold began before
// the capture.
inline bool lock_timeline::impl::own_refusals_before(lock_state& l, std::uint32_t lock, std::uint32_t owner,
                                                     std::uint32_t conn) {
  if (connections[conn].opened_us >= 0 || !has_extra(l) || !xp(l)->refused_unseen) return false;
  waiter* w = find_waiter(l, owner);
  if (w == nullptr || w->conn != conn) return false;
  drop_waiter(l, lock, w);
  return true;
}

inline void lock_timeline::impl::on_unlock(std::uint32_t id, lock_state& l, const lock_operation& op) {
  const std::uint32_t conn = conn_index(op);
  step_after_refusal(conn, id, op);  // before withdrew_attempt reads its mark (waiter_moved_on.hpp)
  // (op.owner stays put until the collect after this operation.)
  const std::uint32_t owner = owners.id_of_view(op.owner);
  const std::int64_t at = op.at_us();
  holder* h = find_holder(l, owner);
  if (h != nullptr && op.outcome == op_outcome::ok) holder_acted_elsewhere(l, *h, conn);
  if (h == nullptr) withdrew_attempt(l, id, owner, op);
  auto release_holder = [&] {
    lock_event e = from_op(l, op, lock_event_kind::released);
    if (owner != no_id) give_owner_hash(e, owner);
    e.hold_count = 0;
    if (h != nullptr) {
      if (h->since_us >= 0) {
        e.held_us = at - h->since_us;
        add_hold(l, e.held_us);
      } else {
        held_since_capture(l, e, at);
        unseen_hold_ended(l, op);
      }
      remove_holder(l, h);
    } else if (op.outcome == op_outcome::ok && l.last_expired != owner) {
      held_since_capture(l, e, at);  // its release is the first sign of its hold
      unseen_hold_ended(l, op);
    }
    return e;
  };
  switch (op.outcome) {
    case op_outcome::ok: {
      if (!suspected_overlaps.empty()) released_before(id, owner, op.request_us);
      if (h != nullptr) note_release(id, owner, at);
      if (h != nullptr) connections[conn].last_released_us = at;
      lock_event e = release_holder();
      became_free(l, at);
      if (!has_holder(l)) {
        released_publishing(l, id, at);
        if (has_extra(l)) xp(l)->published_us = op.request_us;
      }
      emit(l, e);
      break;
    }
    case op_outcome::partial: {
      // A read unlock answers 0 while any read hold remains, other readers' included:
      // a reader's last level is its release even though the lock stays held.
      if (op.shared && h != nullptr && h->hold_count() <= 1) {
        note_release(id, owner, at);
        lock_event e = release_holder();
        emit(l, e);
        break;
      }
      lock_event e = from_op(l, op, lock_event_kind::partially_released);
      if (h == nullptr && op.shared) {
        // A reader unseen until its unlock: the 0 says some read hold remains, perhaps not
        // its own (another reader's); it is not made a holder on that guess.
        emit(l, e);
        break;
      }
      if (h == nullptr) {
        e.held_since_capture_start = l.last_expired != owner;
        h = &add_holder(l, owner, conn);
        free_interval_ends(l, at);
      } else if (h->hold_count() > 1) {
        h->set_hold_count(h->hold_count() - 1);
      }
      if (op.lease_ms >= 0) h->set_lease(op, at);
      e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
      emit(l, e);
      break;
    }
    case op_outcome::rejected:
    case op_outcome::expired: {
      // Its holder's release after its lease ran out ends its hold for its connection as
      // a release would (poller_moved_on: a client that waits for one lock at a time is
      // done with this one).
      if (owner != no_id && (h != nullptr || l.last_expired == owner)) connections[conn].last_released_us = at;
      lock_event e = from_op(l, op, lock_event_kind::unlock_rejected);
      if (owner != no_id) give_owner_hash(e, owner);
      emit(l, e);
      rejected_by_owner(l, owner, conn, at, op.inferred, false);
      break;
    }
    default:
      return;
  }
  schedule(id, l);
}

inline void lock_timeline::impl::on_renew(std::uint32_t id, lock_state& l, const lock_operation& op) {
  const std::uint32_t conn = conn_index(op);
  step_after_refusal(conn, id, op);  // (waiter_moved_on.hpp)
  connections[conn].last_renewed_us = op.request_us;
  const std::uint32_t owner = owners.id(op.owner);
  const std::int64_t at = op.at_us();
  lock_event e = from_op(l, op, lock_event_kind::renewed);
  e.lease_ms = op.lease_ms;
  if (op.outcome == op_outcome::ok) {
    holder* h = find_holder(l, owner);
    if (h == nullptr && released_after(id, op.owner, op.request_us)) {
      // Its owner's release, captured first, ran after it: the hold ended there.
      count_renewal(l);
      emit(l, e);
      return;
    }
    if (h == nullptr) {
      e.held_since_capture_start = !take_expired(l, owner);  // else: held again after its lease ran out
      h = &add_holder(l, owner, conn);
      if (op.ends_unseen) h->set_ends_unseen();
      free_interval_ends(l, at);
    } else if (op.family != lock_family::set_based && op.family != lock_family::redlock_multi && op.lease_ms > 0 &&
               h->last_renew_us >= 0) {
      const std::int64_t gap = at - h->last_renew_us;
      const double limit = options.late_renewal_factor * static_cast<double>(op.lease_ms) * 1000.0 / 3.0;
      if (static_cast<double>(gap) > limit) {
        anomaly(l, at, anomaly_kind::late_renewal, owner, conn,
                {anomaly_finding::renewed_late, gap, op.lease_ms / 3},
                op.inferred);
      }
    }
    h->last_renew_us = at;
    holder_acted_elsewhere(l, *h, conn);
    if (op.lease_ms >= 0 && op.lease_added) {
      // redis-py's extend adds to the remaining TTL; unknown when the hold was not seen.
      if (h->deadline_us >= 0) {
        lock_operation added = op;
        added.lease_ms = std::max<std::int64_t>(0, (h->lease_end_us() - at) / 1000) + op.lease_ms;
        h->set_lease(added, at);
        e.lease_ms = added.lease_ms;
      }
    } else if (op.lease_ms >= 0) {
      h->set_lease(op, at);
    }
    e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
    count_renewal(l);
    emit(l, e);
  } else if (op.outcome == op_outcome::rejected) {
    e.event = lock_event_kind::renew_failed;
    emit(l, e);
    if (defer_refused_renewal(id, op, owner, conn)) return;
    rejected_by_owner(l, owner, conn, at, op.inferred, true);
  } else {
    return;
  }
  schedule(id, l);
}

// A renewal refused to a holder well before its lease's end says the key was lost,
// unless its own unlock ran first on the server: a watchdog's renewal and the unlock
// cross on two connections (the unlock's request sent before the refusal was captured,
// its reply captured after). Which ran first shows once that unlock's reply comes, within
// reply_skew_us: until then the holder stays and the judgement waits among the suspected
// overlaps (released_before drops it, report_overlaps settles it). A refusal about when
// the lease ends is judged at once: the lease's end explains it either way.
inline bool lock_timeline::impl::defer_refused_renewal(std::uint32_t id, const lock_operation& op, std::uint32_t owner,
                                                      std::uint32_t conn) {
  lock_state& l = locks[id];
  const holder* mine = find_holder(l, owner);
  const std::int64_t at = op.at_us();
  if (mine == nullptr || l.last_expired == owner || mine->deadline_us < 0) return false;
  if (mine->lease_end_us() - at <= options.reply_skew_us || at >= mine->floor_us()) return false;
  owners.retain(owner);
  retain_connection(conn);
  suspected_overlap p;
  p.lock = id;
  p.owner = owner;
  p.conn = conn;
  p.at = at;
  p.inferred = op.inferred;
  p.refused_renewal = true;
  suspected_overlaps.push_back(p);
  return true;
}

// Redisson's RedLock and MultiLock unlock every server, won or not, and give back a server
// whose wait ended refused: an unlock refused to a Redisson owner whose thread (client IP
// and thread id: one client, one owner id, a server) waits for this lock, or holds or
// waits for the same key on another server, is its group's clean-up, not an unlock by a
// non-owner. Only when the key is known on another server (a plain RLock's unlock after a
// failed tryLock stays an anomaly).
inline bool lock_timeline::impl::group_cleanup_unlock(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
  if (conn == no_id) return false;
  // The key on another server first: on one server (an anomaly storm's refused unlocks,
  // 100,000 a round) there is none, and the owner's text is never parsed.
  const lock_store::identity row = lock_store::identity_of(l);
  const std::uint32_t here = canon(row.scope);
  const auto other_lock = [&](std::uint32_t s) { return canon(s) != s || s == here ? no_id : find_lock(s, row.name); };
  bool on_another_server = false;
  for (std::uint32_t s = 0; s < scopes.size() && !on_another_server; ++s) on_another_server = other_lock(s) != no_id;
  if (!on_another_server) return false;
  const std::string_view text = owners.text(owner);
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !is_uuid_text(text.substr(0, colon))) return false;
  const std::string_view thread = text.substr(colon);  // ":<thread id>"
  const address ip = connections[conn].ip;
  const auto same_thread = [&](std::uint32_t o, std::uint32_t c) {
    const std::string_view t = owners.text(o);
    return c != no_id && t.size() > thread.size() && t.substr(t.size() - thread.size()) == thread && connections[c].ip == ip;
  };
  const auto involves = [&](lock_state& x) {
    bool found = false;
    for_each_holder(x, [&](holder& h) { found = found || same_thread(h.owner, h.conn); });
    if (!found && has_extra(x)) {
      for (const waiter& w : xp(x)->waiters) found = found || same_thread(w.owner, w.conn);
    }
    return found;
  };
  for (std::uint32_t s = 0; s < scopes.size(); ++s) {
    if (const std::uint32_t other = other_lock(s); other != no_id && involves(locks[other])) return true;
  }
  return involves(l);
}

inline void lock_timeline::impl::note_release(std::uint32_t id, std::uint32_t owner, std::int64_t at) {
  recent_releases[next_release] = {id, std::hash<std::string_view>{}(owners.text(owner)), at};
  next_release = (next_release + 1) % recent_releases.size();
}

// Whether `owner` released lock `id` with a reply captured at or after request_us, within
// reply_skew_us of it: an operation sent meanwhile crossed that release.
inline bool lock_timeline::impl::released_after(std::uint32_t id, std::string_view owner, std::int64_t request_us) const {
  const std::uint64_t hash = std::hash<std::string_view>{}(owner);
  for (const recent_release& r : recent_releases) {
    if (r.lock == id && r.owner_hash == hash && r.at >= request_us && r.at - request_us <= options.reply_skew_us) return true;
  }
  return false;
}

// No unlock of its owner came that ran before the refused renewal: the key was lost
// (or the lease ran out meanwhile), judged as at the refusal and reported at `ts`.
inline void lock_timeline::impl::settle_refused_renewal(const suspected_overlap& p, std::int64_t ts) {
  lock_state& l = locks[p.lock];
  if (find_holder(l, p.owner) == nullptr) return;  // it left meanwhile (and that was judged)
  rejected_by_owner(l, p.owner, p.conn, p.at, p.inferred, true, ts);
  schedule(p.lock, l);
}

// Plain EXPIRE/PEXPIRE/DEL on a key that is a held lock (SETNX pattern, old Redisson), or,
// checked by a GET, on one held since before the capture.
inline void lock_timeline::impl::on_plain(std::uint32_t id, lock_state& l, const lock_operation& op) {
  if (op.family == lock_family::set_based && op.kind == lock_op_kind::del) [[unlikely]] {
    // Deleted on the server's check of the key's value (DELEX IFDEQ: by its digest, which
    // names no value): the holder's own release, whoever holds it; no unchecked delete.
    if (holder* h = first_holder(l); h != nullptr && op.outcome == op_outcome::ok) {
      lock_operation acted = op;
      acted.kind = lock_op_kind::unlock;
      acted.owner = owners.text(h->owner);  // (texts stay until the collect after this operation)
      on_unlock(id, l, acted);
      return;
    }
    step_after_refusal(conn_index(op), id, op);  // (waiter_moved_on.hpp)
    return;
  }
  if (!op.owner.empty() && op.outcome == op_outcome::ok && !has_holder(l)) [[unlikely]] {
    // Checked by a GET that read op.owner (the recognizer's checked read), on a lock with
    // no holder known: a hold begun before the capture (held_before_capture: joined
    // mid-stream, refused to others meanwhile) that its owner now ends by a DEL, or
    // extends by an EXPIRE, as a script's `GET == value then DEL` would.
    const std::uint32_t owner = owners.id(op.owner), conn = conn_index(op);
    if (held_before_capture(l, owner, conn) || own_refusals_before(l, id, owner, conn)) {
      lock_operation acted = op;
      acted.family = lock_family::set_based;
      if (op.kind == lock_op_kind::del) {
        acted.kind = lock_op_kind::unlock;
        on_unlock(id, l, acted);
      } else {
        acted.kind = lock_op_kind::renew;
        on_renew(id, l, acted);
      }
      return;
    }
  }
  step_after_refusal(conn_index(op), id, op);  // (waiter_moved_on.hpp)
  holder* h = first_holder(l);
  // partial: a DEL of several keys that removed some of them; a held one is taken as removed.
  const bool acted = op.outcome == op_outcome::ok || (op.outcome == op_outcome::partial && op.kind == lock_op_kind::del);
  if (h == nullptr || !acted) return;
  const std::int64_t at = op.at_us();
  lock_event e = from_op(l, op, lock_event_kind::renewed);
  e.owner = owners.text(h->owner);
  if (op.kind == lock_op_kind::expire) {
    const std::uint32_t sender = conn_index(op);
    if (op.owner.empty() && h->conn != no_id && h->conn != sender && !(connections[h->conn].ip == connections[sender].ip))
        [[unlikely]] {
      // An EXPIRE that checked no value, from a client host other than the holder's: the
      // key's TTL moved, but its holder renewed nothing (RQ: a scheduler whose lock was
      // deleted by another's release re-expires the key the next holder took).
      h->set_lease(op, at);
      schedule(id, l);
      return;
    }
    if (h->deadline_us < 0 && h->since_us >= 0 && h->last_renew_us == h->since_us && h->conn == conn_index(op)) {
      // The acquirer's first EXPIRE after its SETNX: the second half of the acquisition
      // (non_atomic_acquire said so), which gives the hold its lease; not a renewal.
      h->set_lease(op, at);
      schedule(id, l);
      return;
    }
    h->set_lease(op, at);
    h->last_renew_us = at;
    e.lease_ms = op.lease_ms;
    e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
    count_renewal(l);
    emit(l, e);
  } else {
    e.event = lock_event_kind::released;
    e.keys_named = op.keys_named;
    e.hold_count = 0;
    if (h->since_us >= 0) {
      e.held_us = at - h->since_us;
      add_hold(l, e.held_us);
    } else {
      held_since_capture(l, e, at);
    }
    const std::uint32_t conn = conn_index(op);
    connections[conn].last_released_us = at;
    const std::uint32_t deleter = last_owner_on(conn, id);
    const std::uint32_t removed = h->owner;
    owners.retain(removed);  // named by the anomaly below, after the holders are gone
    // Redis writes the replies of one event-loop pass last-served first: a holder that
    // acquired over another connection after this DEL was sent, while an older hold was
    // still live, could only create the key once the DEL had run. It stays; the DEL
    // ended the older hold (and the overlap it seemed to make was the capture's order).
    bool later_kept = false;
    if (h->since_us >= 0 && h->since_us < op.request_us && has_extra(l)) {
      for (const holder& m : xp(l)->more_holders) {
        later_kept = later_kept || (m.since_us >= op.request_us && m.conn != conn);
      }
    }
    if (later_kept) {
      if (!suspected_overlaps.empty()) released_before(id, removed, op.request_us);
      remove_holder(l, h);
    } else {
      clear_holders(l);  // every holder is gone with the key
      became_free(l, at);
    }
    emit(l, e);
    if (deleter != no_id && deleter != removed) {
      anomaly(l, at, anomaly_kind::released_other_owner, deleter, conn,
              {anomaly_finding::del_removed_other_owner, owners.text(removed)},
              op.inferred);
      // A waiter that deletes the hold it was refused by (the Chat SDK's onLockConflict
      // "force") stopped waiting when it sent the DEL: its wait ends there, and its
      // acquisition that follows, whatever value it carries, takes the lock it freed.
      // Unless its own value took another lock over this connection since its latest
      // attempt: it had gone on to that at this attempt (RQ's scheduler leaves a refused
      // queue's lock to its holder, takes the next queue's, and deletes every queue's lock
      // when it stops), and the lock free before this DEL was no missed wake-up.
      if (waiter* w = find_waiter(l, deleter); w != nullptr && w->conn == conn && op.request_us >= w->last_attempt_us) {
        const bool went_on = connections[conn].last_acquired_owner == w->owner &&
                             connections[conn].last_acquired_us > w->last_attempt_us;
        give_up(l, id, w, wait_end::forced, went_on ? w->last_attempt_us : op.request_us, at);
      }
    }
    if (!has_extra(l) || xp(l)->anomalies[static_cast<std::size_t>(anomaly_kind::unchecked_release)] == 0) {
      anomaly(l, at, anomaly_kind::unchecked_release, removed, conn,
              {anomaly_finding::released_by_plain_del}, op.inferred);
    }
    owners.release(removed);
  }
  schedule(id, l);
}

inline void lock_timeline::impl::on_force_unlock(std::uint32_t id, lock_state& l, const lock_operation& op) {
  step_after_refusal(conn_index(op), id, op);  // (waiter_moved_on.hpp)
  if (op.outcome != op_outcome::ok) return;
  const std::int64_t at = op.at_us();
  lock_event e = from_op(l, op, lock_event_kind::force_released);
  e.owner = {};
  e.hold_count = 0;
  if (holder* h = first_holder(l)) {
    e.owner = owners.text(h->owner);
    if (h->since_us >= 0) {
      e.held_us = at - h->since_us;
      add_hold(l, e.held_us);
    } else {
      held_since_capture(l, e, at);
    }
  }
  clear_holders(l);
  became_free(l, at);
  released_publishing(l, id, at);
  if (has_extra(l)) xp(l)->published_us = op.request_us;
  emit(l, e);
  schedule(id, l);
}

}  // namespace lockscope::locks
