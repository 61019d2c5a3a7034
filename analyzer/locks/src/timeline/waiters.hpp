// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Waiters: an owner waiting for a lock, from its first failed attempt until it
// acquires or gives up; its retries, and what they prove about the time the lock
// stood free (idle_with_waiters, subscription_lost, woken_by_timeout).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/clock_values.hpp"
#include "timeline/timeline_state.hpp"
#include "timeline/waiter_moved_on.hpp"
#include "timeline/uuid_text.hpp"

namespace lockscope::locks {

inline void lock_timeline::impl::dormant_fields::complete(waiter& w) const {
  const connection_info& c = connections[w.conn];
  w.connection = c.id;
  w.ip_tag = c.ip.tag();
}

inline waiter* lock_timeline::impl::find_waiter(lock_state& l, std::uint32_t owner) {
  return has_extra(l) ? find_waiter(*xp(l), owner) : nullptr;
}

inline waiter* lock_timeline::impl::find_waiter(lock_extra& x, std::uint32_t owner) {
  if (x.waiters.size() <= scanned_waiters) {
    for (waiter& w : x.waiters.records_with_holes()) {  // (a storm's many locks: no skip of holes for each)
      if (w.owner == owner && !timeline_detail::is_hole(w)) return &w;
    }
    return nullptr;
  }
  if (!x.waiter_index_valid) {
    x.waiter_index.clear();
    for (const waiter& w : x.waiters) x.waiter_index.emplace(w.owner, w.seq);
    x.waiter_index_valid = true;
  }
  const auto it = x.waiter_index.find(owner);
  if (it == x.waiter_index.end()) return nullptr;
  return x.waiters.find_seq(it->second.before(x.next_waiter_seq));
}

// `w` leaves its lock's waiters: out of the index, and what it retained released (the
// caller removes it from the vector).
inline void lock_timeline::impl::forget_waiter(lock_extra& x, const waiter& w) {
  if (x.waiter_index_valid) {
    const auto it = x.waiter_index.find(w.owner);
    if (it != x.waiter_index.end() && it->second == w.seq) x.waiter_index.erase(it);
  }
  unindex_keys(x, w);
  if (!x.later_leaves.empty()) [[unlikely]] {
    std::erase_if(x.later_leaves, [&](const lock_extra::later_leave& r) { return r.seq == w.seq; });
  }
  if (w.cut_pending) [[unlikely]] --connections[w.conn].pending_cuts;
  owners.release(w.owner);
  release_connection(w.conn);
}

// The waiters `leaves` picks leave, in one pass that keeps the others' order (it may
// update those it keeps). Dormant waiters are read in place (waiter_vector.hpp): the
// capture's end, visiting every lock, made none full again. `concerns` (a dormant
// record): false when leaves() would neither pick nor change that waiter.
template <class Leaves, class Concerns>
inline void lock_timeline::impl::remove_waiters(lock_extra& x, Leaves&& leaves, Concerns&& concerns) {
  const std::size_t before = x.waiters.size();
  x.waiters.remove_if(leaves, [&](const waiter& w) { forget_waiter(x, w); }, concerns);
  after_removals(x, before);
}

// remove_waiters(x, <w's key in `by`> == key && leaves(w)), for a lock whose keys are
// kept and whose waiters are all full: only the key's waiters are asked (a herd's
// connection ending visited every waiter of each lock it waited on or listened to).
template <class Leaves>
inline void lock_timeline::impl::remove_waiters_keyed(lock_extra& x, waiter_keys::map waiter_keys::*by, std::uint64_t key, Leaves&& leaves) {
  const std::size_t before = x.waiters.size();
  waiter_keys::sorted(keys_of(x).*by, key, keyed_seqs);
  x.waiters.remove_among(keyed_seqs, leaves, [&](const waiter& w) { forget_waiter(x, w); });
  after_removals(x, before);
}

inline void lock_timeline::impl::after_removals(lock_extra& x, std::size_t before) {
  if (x.waiters.size() == before) return;
  if (x.waiters.empty()) {
    x.idle_start_us = x.idle_end_us = x.later_idle_start_us = x.later_idle_end_us = -1;
    no_waiters_left(x);
  }
}

// The waiter leaves (acquired or gave up).
inline void lock_timeline::impl::drop_waiter(lock_state& l, std::uint32_t lock, waiter* w) {
  auto& ws = xp(l)->waiters;
  const waiter gone = *w;
  ws.erase(w);
  unlist_wait(gone.conn, lock);
  forget_waiter(*xp(l), gone);
  if (ws.empty()) {
    xp(l)->idle_start_us = xp(l)->idle_end_us = xp(l)->later_idle_start_us = xp(l)->later_idle_end_us = -1;
    no_waiters_left(*xp(l));
  }
}

inline void lock_timeline::impl::unlist_wait(std::uint32_t conn, std::uint32_t lock) {
  auto& waits = connections[conn].waits;
  const auto it = std::find(waits.begin(), waits.end(), lock);
  if (it != waits.end()) {
    *it = waits.back();
    waits.pop_back();
  }
}

// The waiter's latest attempt came over `conn` (clients with connection pools retry
// over any of them): the connection whose end means it gave up.
inline void lock_timeline::impl::move_waiter(waiter& w, std::uint32_t lock, std::uint32_t conn, std::uint64_t connection) {
  if (w.conn == conn) return;
  unlist_wait(w.conn, lock);
  retain_connection(conn);
  release_connection(w.conn);
  set_waiter_conn(*xp(locks[lock]), w, conn, connections[conn].ip.tag());
  w.connection = connection;
  connections[conn].waits.push_back(lock);
}

inline void lock_timeline::impl::became_free(lock_state& l, std::int64_t at) {
  if (!has_holder(l) && has_extra(l)) {
    lock_extra& x = *xp(l);
    x.free_since_us = at;
    x.last_freed_us = at;
    x.idle_reported = false;
    if (x.acquired_owner != no_id && at - x.acquired_us > options.wake_window_us) {
      owners.release(x.acquired_owner);  // its UNSUBSCRIBE would have come by now
      x.acquired_owner = no_id;
      x.acquired_us = -1;
    }
  }
}

// The lock is taken again at `at`: a free interval >= the threshold that no waiter has
// shown it waited through yet is kept (the longest) for the next attempt to confirm.
// A shorter one that ends while a longer one is kept is kept beside it (the longest of
// those): only a waiter already waiting when the kept one began can confirm that one,
// and such a waiter may have given up unseen (found only at its deadline, seconds on),
// while the waiters that came since wait through the shorter one (medusa_lock: a 1.1 s
// stretch that no listed waiter was still polling for hid a 144 ms one two live pollers
// waited through). retry() reports, for a waiter, the kept one if it was waiting when
// that began, else the later one; an attempt that finds the lock free again reports each
// kept one its waiter waited through, then the current one.
inline void lock_timeline::impl::free_interval_ends(lock_state& l, std::int64_t at) {
  if (!has_extra(l)) return;
  lock_extra& x = *xp(l);
  if (x.free_since_us >= 0 && at - x.free_since_us >= options.idle_threshold_us) forget_idle_no_waiter_saw(x);
  if (x.free_since_us >= 0 && !x.idle_reported && !x.waiters.empty() &&
      at - x.free_since_us >= options.idle_threshold_us) {
    if (x.idle_start_us < 0 || at - x.free_since_us > x.idle_end_us - x.idle_start_us) {
      x.idle_start_us = x.free_since_us;
      x.idle_end_us = at;
      x.later_idle_start_us = x.later_idle_end_us = -1;  // it lies before the new one: no waiter chooses it over that
    } else if (x.later_idle_start_us < 0 || at - x.free_since_us > x.later_idle_end_us - x.later_idle_start_us) {
      x.later_idle_start_us = x.free_since_us;
      x.later_idle_end_us = at;
    }
  }
  x.free_since_us = -1;
}

// A release that publishes (an unlock, a forced unlock): a waiter of a pub/sub lock
// that is not subscribed now will not hear it.
inline void lock_timeline::impl::released_publishing(lock_state& l, std::uint32_t lock, std::int64_t at) {
  if (!has_extra(l)) return;
  for (waiter& w : xp(l)->waiters.records_with_holes()) {
    if (w.pubsub && w.lost_release_us < 0 && !subscribed(w, lock)) w.lost_release_us = at;
  }
}

// The client a waiter belongs to: a Redisson-style owner's UUID (its threads share
// one subscriber connection, whatever command connection they use), else its command
// connection.
inline std::uint64_t lock_timeline::impl::client_key(std::uint32_t owner, std::uint64_t connection) {
  const std::size_t part = owner == no_id ? 0 : client_part_size(owner);
  return client_key_of(part == 0 ? std::string_view() : owners.text(owner).substr(0, part), connection);
}

// client_key of an owner whose client part is `uuid` (empty: none).
inline std::uint64_t lock_timeline::impl::client_key_of(std::string_view uuid, std::uint64_t connection) noexcept {
  if (uuid.empty()) return (connection & ~(std::uint64_t{3} << 62)) | (std::uint64_t{1} << 62);  // never 0
  return uuid_client_key(uuid);
}

// The length of client_part of an interned owner, learnt once and kept with it (the
// interner's note: the length + 1). A refused attempt asks it two or three times.
inline std::size_t lock_timeline::impl::client_part_size(std::uint32_t owner) {
  std::uint32_t note = owners.note(owner);
  if (note == 0) {
    note = static_cast<std::uint32_t>(client_part_length(owners.text(owner))) + 1;
    owners.set_note(owner, note);
  }
  return note - 1;
}

// The length of an owner's client part: `<uuid>:<thread>` → the UUID's; 0 for others.
// (A UUID holds no colon: the owner's first colon is the one after it.)
inline std::size_t lock_timeline::impl::client_part_length(std::string_view owner) noexcept {
  constexpr std::size_t uuid_size = 36;
  return owner.size() > uuid_size && owner[uuid_size] == ':' && is_uuid_text(owner.substr(0, uuid_size)) ? uuid_size : 0;
}

// The client part of a Redisson owner id (`<uuid>:<thread>` → uuid): the owners of
// one client share its subscriber connection. Empty for other owners.
inline std::string_view lock_timeline::impl::client_part(std::string_view owner) const {
  client_part_answer& last = client_part_last;
  if (owner.size() == last.size && ingest::same_bytes(owner, std::string_view(last.owner.data(), last.size))) {
    return last.part == 0 ? std::string_view() : owner.substr(0, last.part);
  }
  const std::size_t part = client_part_length(owner);
  if (owner.size() <= last.owner.size()) {
    std::memcpy(last.owner.data(), owner.data(), owner.size());
    last.size = owner.size();
    last.part = part;
  }
  return part == 0 ? std::string_view() : owner.substr(0, part);
}

// An attempt by a waiter that already failed before: a retry. It shows the waiter
// waited all along, which confirms what happened meanwhile.
inline void lock_timeline::impl::retry(lock_state& l, std::uint32_t lock, waiter& w, const lock_operation& op, std::int64_t at) {
  lock_extra& x = ex(l);
  const std::int64_t t = op.request_us;
  if (x.guessed.sub != 0) take_guessed_subscription(l, lock, w, t);
  if (x.recent_subscribes[0].sub != 0 && w.attempts == 1) take_subscription_by_retry(l, lock, w, t);
  if (!w.notified) w.notified = woken_by_message(x, w, t);
  w.longest_gap_us = std::max(w.longest_gap_us, t - w.last_attempt_us);
  note_gap(w, t - w.last_attempt_us, options.wake_window_us);
  if (attempt_follows_own_refusal && w.conn == conn_index(op)) {
    w.busy_between_retries = std::max(w.busy_between_retries, exchanges_since_refusal(op));
  }
  // A first failure's retry comes at once and unprompted; a retry a message woke
  // may come as soon, mid-wait, when releases follow each other.
  if (++w.attempts == 2) w.quick_second = t - w.last_attempt_us <= options.wake_window_us && !w.notified;
  // Redisson's LockPubSub gives one permit per unlock message to the latch its JVM's
  // threads wait on (tryAcquire for the TTL they were refused with): one message wakes
  // one thread, and a thread that finds a permit left retries at once, however slow the
  // host is to run it (seen: 32-46 ms after the message on a loaded host, the TTL 30 s).
  // So each retry after a wait (the third attempt on: the second follows the SUBSCRIBE
  // with no wait) answers one message its client's subscriber received, and one that
  // finds a message unanswered, before half its TTL, was woken by it. Bound: half the
  // TTL, where its timer may be near; a retry at its TTL is the timer's. A tryLock(wait)
  // may time out sooner, but not while a permit waits (tryAcquire takes it at once), so
  // a retry that finds one is the message's either way. Once every message was answered
  // (by its client's other threads), a Redisson-style waiter told by them was not woken,
  // unless a message came within the wake window (a read unlock wakes every thread).
  if (w.attempts >= 3 && w.sub_connection != 0) {
    connection_info* s = open_connection(w.sub_connection);
    connection_info::subscription* sub = s != nullptr ? subscription_of(*s, lock) : nullptr;
    // (A message after this retry was sent is left for the next: see told_during.)
    const std::uint32_t unanswered = sub == nullptr ? 0 : sub->unanswered - (sub->unanswered > 0 && sub->message_us >= t ? 1u : 0u);
    if (unanswered > 0 && w.last_ttl_us > 0 && t - w.last_attempt_us < w.last_ttl_us / 2) {
      --sub->unanswered;
      w.notified = true;
    } else if (sub != nullptr && sub->unanswered == 0 && !sub->wakes_all && w.notified && (w.client >> 63) != 0 &&
               sub->owner != no_id && sub->client == w.client) {
      w.notified = woken_by_message(x, w, t);
    }
  }
  // Redisson retries once its SUBSCRIBE is confirmed; node-redisson retries at once
  // after its first failure: neither waited for anything. A wait shorter than the
  // TTL it was given (or than the wake window) was not a timer either.
  const bool after_subscribe = w.subscribed_us >= w.last_attempt_us && t - w.subscribed_us <= options.wake_window_us;
  const std::int64_t quick = w.last_ttl_us >= 0 ? std::clamp<std::int64_t>(w.last_ttl_us * 9 / 10, 2'000, options.wake_window_us)
                                               : options.wake_window_us;
  // Only a waiter that subscribes at all waits for a message (RedLock and spin-lock
  // clients poll by design).
  bool by_timer = w.pubsub && w.sub_connection != 0 && !w.notified && !after_subscribe &&
                  t - w.last_attempt_us >= quick;
  // Redisson's threads share their client's subscription and each retries once it is
  // confirmed, on a loaded JVM tens of ms later (seen: 56-260 ms after the SUBSCRIBE, the
  // TTL 30 s): a retry long before its TTL ran out, after its client subscribed since its
  // last attempt, is that retry, not a timer's.
  if (by_timer && w.last_ttl_us > 0 && t - w.last_attempt_us < w.last_ttl_us / 2) {
    if (connection_info* s = open_connection(w.sub_connection)) {
      const connection_info::subscription* sub = subscription_of(*s, lock);
      if (sub != nullptr && sub->since_us >= w.last_attempt_us && sub->since_us <= t) by_timer = false;
    }
  }
  // The lock was free >= threshold while it waited: this attempt proves it waited.
  // For a pub/sub waiter, a missed wake-up rests on its link (certain), and one that was
  // told (a message since its last attempt) and was slow to retry missed nothing.
  // (A waiter linked to no subscriber is said to be unsubscribed; one that subscribed
  // only after the lock went free and retried once subscribed, Redisson's start, missed
  // nothing.)
  connection_info* sub_conn = w.sub_connection != 0 ? open_connection(w.sub_connection) : nullptr;
  const connection_info::subscription* sub = sub_conn != nullptr ? subscription_of(*sub_conn, lock) : nullptr;
  // Whether a missed wake-up rests, for the lock free since `from`.
  auto idle_rests = [&](std::int64_t from) {
    const bool subscribed_after = sub != nullptr && from >= 0 && sub->since_us > from;
    return !w.pubsub || polls(w) || (!w.notified && (w.sub_connection == 0 || (link_certain(w) && !subscribed_after)));
  };
  // What a certain link would have raised (said on this attempt's event instead).
  auto idle_withheld = [&](std::int64_t from) {
    return w.pubsub && !polls(w) && !w.notified && w.sub_connection != 0 && !link_certain(w) &&
           !(sub != nullptr && from >= 0 && sub->since_us > from);
  };
  // A past free stretch (start..end) this waiter waited through: said once, then forgotten.
  auto report_stretch_waited_through = [&](auto& start_us, auto& end_us) {
    const anomaly_finding finding = w.pubsub && !polls(w) ? anomaly_finding::idle_while_this_waiter_waited
                                                          : anomaly_finding::idle_while_this_poller_slept;
    anomaly(l, at, anomaly_kind::idle_with_waiters, w.owner, w.conn, {finding}, op.inferred, start_us,
            end_us - start_us);
    start_us = end_us = -1;
  };
  if (!has_holder(l) && x.free_since_us >= 0 && !x.idle_reported && x.free_since_us >= w.first_us &&
      at - x.free_since_us >= options.idle_threshold_us && idle_withheld(x.free_since_us)) {
    withhold(w, anomaly_kind::idle_with_waiters);
  }
  if (!has_holder(l) && x.free_since_us >= 0 && !x.idle_reported && x.free_since_us >= w.first_us &&
      at - x.free_since_us >= options.idle_threshold_us && idle_rests(x.free_since_us)) {
    // A stretch kept since this waiter began (ended by another client's acquisition while
    // it slept between attempts) was waited through as well: said before the current one,
    // or its only chance, this attempt, is gone (distributed-lock: a 101 ms stretch its
    // releaser's next hold ended, hidden by the 120 ms one the waiter's own attempt ended).
    if (x.idle_start_us >= 0 && x.idle_start_us >= w.first_us && idle_rests(x.idle_start_us)) {
      report_stretch_waited_through(x.idle_start_us, x.idle_end_us);
    }
    if (x.later_idle_start_us >= 0 && x.later_idle_start_us >= w.first_us && idle_rests(x.later_idle_start_us)) {
      report_stretch_waited_through(x.later_idle_start_us, x.later_idle_end_us);
    }
    x.idle_reported = true;
    // A poller (no pub/sub: redis-py, RedLock, spin locks) misses nothing: it slept
    // longer than the lock stayed free.
    const anomaly_finding finding = !w.pubsub || polls(w) ? anomaly_finding::idle_while_poller_slept
                                    : subscribed(w, lock) ? anomaly_finding::idle_while_subscribed_waiter_waited
                                                          : anomaly_finding::idle_while_unsubscribed_waiter_waited;
    anomaly(l, at, anomaly_kind::idle_with_waiters, w.owner, w.conn, {finding}, op.inferred, x.free_since_us,
            at - x.free_since_us);
  } else if (x.idle_start_us >= 0 && x.idle_start_us >= w.first_us && idle_rests(x.idle_start_us)) {
    report_stretch_waited_through(x.idle_start_us, x.idle_end_us);
  } else if (x.later_idle_start_us >= 0 && x.later_idle_start_us >= w.first_us && idle_rests(x.later_idle_start_us)) {
    report_stretch_waited_through(x.later_idle_start_us, x.later_idle_end_us);
  }
  if (by_timer && w.lost_release_us >= 0 && !w.lost_reported && !link_certain(w) && w.sub_connection != 0) {
    withhold(w, anomaly_kind::subscription_lost);
    w.lost_reported = true;  // judged once per wait, as when raised
  }
  if (by_timer && w.lost_release_us >= 0 && !w.lost_reported && link_certain(w)) {
    w.lost_reported = true;  // once per wait
    anomaly_facts found{anomaly_finding::not_subscribed_at_release};
    if (w.unsubscribed_us >= 0 && w.unsubscribed_us <= w.lost_release_us) {
      found = {anomaly_finding::unsubscribed_before_release, w.lost_release_us - w.unsubscribed_us};
    }
    anomaly(l, at, anomaly_kind::subscription_lost, w.owner, w.conn, found, op.inferred, w.lost_release_us,
            at - w.lost_release_us);
  }
  // Held all along since its previous attempt (a watchdog renewing), there was nothing
  // to be told: a retry when its TTL, or tryLock's wait time, runs out is the client's
  // design, not a missed wake-up.
  // A lease that ran out after its holder's connection closed published nothing: the
  // timer was the only way to learn of it (the closed holder is named instead).
  const bool closed_holder_expired = x.closed_expired_us >= 0 && x.closed_expired_us == x.last_freed_us;
  if (by_timer && !w.timeout_reported && x.last_freed_us >= w.last_attempt_us - options.reply_skew_us &&
      !closed_holder_expired && !link_certain(w)) {
    withhold(w, anomaly_kind::woken_by_timeout);
    w.timeout_reported = true;  // judged once per wait, as when raised
  }
  if (by_timer && !w.timeout_reported && x.last_freed_us >= w.last_attempt_us - options.reply_skew_us &&
      !closed_holder_expired && link_certain(w)) {
    w.timeout_reported = true;  // once per wait: a client may then retry in a tight loop
    anomaly(l, at, anomaly_kind::woken_by_timeout, w.owner, w.conn,
            {anomaly_finding::retried_without_notification}, op.inferred);
  }
  w.notified = w.notified && told_during(x, w, t, at);  // (subscriber_links.hpp)
  w.lost_release_us = -1;
  w.last_attempt_us = at;
  note_attempt(x, w);
}

// A single try whose connection did its client's other work before this attempt (RQ's
// worker: one `SET NX` of its cleaning lock each time it starts, then a job's or an idle
// round's 19-229 commands on the same connection; node-resque's job lock, a refused job
// put back in 8): a poller sleeps between its attempts, and over a pool shared with other
// threads its connection carries their few commands meanwhile (seen: up to 6, a
// heartbeat's, Redisson's watchdog); this one had given up at its refusal. The attempt,
// with no other lock operation between, begins a new wait, with the same value or a new
// one (a timestamp's next second).
inline bool lock_timeline::impl::busy_since_single_try(const waiter& w, const lock_operation& op) {
  return w.attempts == 1 && attempt_follows_own_refusal && w.conn == conn_index(op) && !w.pubsub && !w.fresh_values &&
         w.sub_connection == 0 && !connections[w.conn].multiplexes &&
         op.connection_sequence - connections[w.conn].refused_sequence > busy_between_tries;
}

// A value whose wait over this connection was taken to have ended at another value's
// attempt on the same lock (a single try, then a new wait) and which is refused there
// again within a spinner's pause of its latest attempt had not stopped: the connection
// carries several waits of that lock side by side (@meta-1/nest-common's WithLock, three
// calls at once over a Nest service's one client, each polling with its own uuid), and is
// marked `multiplexes`, so no rule takes one value's attempt as another's next step. A
// client drawing a new value per attempt never sends a value again.
inline void lock_timeline::impl::note_value_back_beside_another(std::uint32_t lock, std::uint32_t owner,
                                                                const lock_operation& op) {
  connection_info& c = connections[conn_index(op)];
  if (c.multiplexes) return;
  constexpr std::int64_t spinner_pause_us = 250'000;  // continuing_waiter's
  for (const connection_info::cut_wait& cut : c.cut_waits) {
    if (cut.lock != lock || cut.owner_size != op.owner.size()) continue;
    if (cut.owner_hash == owners.hash(owner) && op.request_us - cut.last_attempt_us <= spinner_pause_us) [[unlikely]] {
      c.multiplexes = true;
      return;
    }
  }
}

// An attempt refused while the lock is held over the same connection under another
// value: a client running one task at a time does not wait for a lock it holds itself,
// so the connection carries tasks side by side (@meta-1/nest-common's WithLock: one
// call holds `orders` while another, over the same client, polls it), and is marked
// before any of its waits is read as a single try given up at another value's attempt
// (waiter_of_fresh_value), which could not be withdrawn once said. Not `multiplexes`: a
// single try it cleaned up still ends at the connection's next step (follow_up_refusal;
// the 3-server shape's RedLock client tries a lock it holds and never retries).
inline void lock_timeline::impl::note_refused_by_own_hold(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
  connection_info& c = connections[conn];
  if (c.tried_what_it_holds) return;
  if (const holder* h = first_holder(l); h != nullptr && h->conn == conn && h->owner != owner) [[unlikely]] {
    c.tried_what_it_holds = true;
  }
}

// The waiter `owner`'s attempt continues, if any; nullptr when the owner has no
// waiter, or its wait ended before this attempt (reported as gave_up here; when the
// new wait began before this attempt, new_wait_from_us says when).
//
// The waiter whose attempt `op` (by `owner`) is, by its value. A value is an identity
// unless the traffic shows otherwise:
// - a waiter whose value changes with every attempt stays on its connection: its value
//   sent over another is another client's that happened to draw the same (two
//   processes' millisecond timestamps);
// - a value refused over one connection while it holds the lock over another is shared
//   by several clients (ioredis-mutex: every process sends `SET key mutex NX`): no
//   client is refused the lock it holds itself unless its lock cannot be re-entered,
//   and then over the connection it holds it by as often as any other. From then on the
//   lock's waiters are its value's over each connection: keyed by value alone, the
//   refusals of three processes were one waiter moving between them, its wait shown on
//   whichever acquired first and a give-up where another took it over. (A client that
//   retries over any connection of a pool, Redisson's, never shows the mark: it
//   re-enters what it holds. Nor does a Redlock's value, held on one server and refused
//   on another, when --merge-servers makes them one lock: the two connections must go
//   to the same server.)
inline waiter* lock_timeline::impl::waiter_of_owner(lock_state& l, std::uint32_t owner, const lock_operation& op) {
  if (op.outcome == op_outcome::contended) [[unlikely]] {
    if (holder* h = first_holder(l); h != nullptr && h->owner == owner) {
      // (Over the holder's own connection too: the recognizer passes a held value's own
      // refused try on only once the value was seen shared; else it is the holder's retry.)
      const std::uint32_t conn = conn_index(op);
      if (connections[h->conn].server == connections[conn].server) ex(l).owner_shared = true;
    }
    // A value that reads as the time it was sent names a moment: every process trying
    // within that second sends it.
    if (!ex(l).owner_shared && is_clock_reading(op.owner, op.request_us)) ex(l).owner_shared = true;
  }
  waiter* w = find_waiter(l, owner);
  if (w == nullptr || w->connection == op.connection) return w;
  if (w->fresh_values) return nullptr;
  // Refused over a connection from another client host while its waiter there still
  // waits: the value is no one client's either (a capture joined after the holder took
  // it shows no holder to compare with). A pooled client retries over its own host's
  // connections.
  if (!xp(l)->owner_shared && !(connections[w->conn].ip == connections[conn_index(op)].ip)) [[unlikely]] {
    xp(l)->owner_shared = true;
  }
  if (!xp(l)->owner_shared) return w;
  for (waiter& v : xp(l)->waiters) {
    if (v.owner == owner && v.connection == op.connection) return &v;
  }
  return nullptr;
}

// A pub/sub waiter whose own subscription (its SUBSCRIBE's, shared with no other
// waiter of its client) left the lock's channel by an UNSUBSCRIBE after its latest
// attempt, and whose owner attempts again neither at once (node-redisson leaves, then
// retries) nor when its TTL runs out (a waiter that lost its subscription retries
// then), gave up when it left (Redisson's tryLock at its wait time): this attempt
// begins a new wait. Carried on, the old wait ran into the new one, and a thread's
// next tryLock seconds later showed the whole span as its wait, with a missed
// wake-up, a lost subscription and a timer retry.
//
// Without an UNSUBSCRIBE (Redisson keeps the channel while another thread of its
// client listens) a tryLock that runs out leaves nothing on the wire. A pub/sub waiter
// attempts again when told (after a release), when the TTL it was given runs out, or
// at once after its first failure or SUBSCRIBE: an attempt none of these explains,
// while the lock stayed held, is marked; when the next attempt follows it at once (a
// new tryLock's first failure and its retry), the marked one began a new wait, and the
// old one had ended by then (and by its latest attempt + its TTL). Our own client's
// last attempt at its --wait deadline is marked too, and then it leaves: no new wait.
inline waiter* lock_timeline::impl::continuing_waiter(lock_state& l, std::uint32_t lock, std::uint32_t owner, const lock_operation& op) {
  new_wait_from_us = -1;
  // An attempt whose owner is not known (a script that draws the owner only when it
  // acquires: ioredfour) is its connection's waiter's, as a fresh value's is.
  waiter* w = op.owner.empty() ? nullptr : waiter_of_owner(l, owner, op);
  if (w != nullptr) {
    if (w->cut_pending) [[unlikely]] cut_was_still_waiting(*w, op);
    w->owner_repeated = true;
    connections[w->conn].keeps_values = true;
    w->withdrawn = false;
    w->cleaned_up = false;
  } else {
    // (The common case, a lock without waiters, decided here: no call.)
    if (!has_extra(l)) return nullptr;
    note_value_back_beside_another(lock, owner, op);
    w = waiter_of_fresh_value(l, lock, owner, op);
    if (w == nullptr) return nullptr;
  }
  const std::int64_t t = op.request_us;
  // A single try: one attempt, and its owner comes back over another connection while
  // the first is still open, later than a spinner's pause (RQ's scheduler: one `SET NX`
  // per queue, a refused queue left to its holder, its next round a scheduler with a
  // connection of its own). A poller polls over the connection it waits on, or, from a
  // pool shared with other threads (tooz's heart), over another within its short spacing;
  // this one had given up at its refusal. (A client that opens a connection per attempt
  // closes the one before, or is marked connection_per_attempt.)
  constexpr std::int64_t spinner_pause_us = 250'000;  // poller_stop_floor_us below
  if (w->attempts == 1 && op.connection != w->connection && !w->pubsub && !w->connection_per_attempt &&
      w->sub_connection == 0 && w->subscribed_us < 0 && t - w->last_attempt_us > spinner_pause_us) [[unlikely]] {
    if (connections[w->conn].id == w->connection) {
      give_up(l, lock, w, wait_end::new_wait, w->last_attempt_us, op.at_us());
      return nullptr;
    }
  }
  // A single try under a value every process sends (owner_shared: one refused while it
  // held over another connection, or a clock reading), whose connection then went on to
  // another lock (refused, took or released it), went on to its next task: its owner's
  // next attempt here is a new try, as waiter_of_fresh_value judges a changing value's
  // (RQ's cleaning locks, value `1`, one `SET NX` per queue each time a worker starts;
  // node-resque's job lock, a refused job put back and the next one taken). A shared
  // value tells no waiter's identity, so its connection's order is all there is to go by.
  // So did one whose connection did its client's other work before this attempt.
  const bool moved_on_under_shared_value = w->attempts == 1 && attempt_follows_other_operation && xp(l)->owner_shared &&
                                           w->conn == conn_index(op) && !w->pubsub && !connections[w->conn].multiplexes;
  const bool own_value_elsewhere =
      w->conn == conn_index(op) && !xp(l)->owner_shared &&
      (own_value_went_on(*w, connections[w->conn]) || own_value_gave_up_elsewhere(*w, connections[w->conn], lock));
  if (moved_on_under_shared_value || busy_since_single_try(*w, op) || own_value_elsewhere) [[unlikely]] {
    give_up(l, lock, w, wait_end::new_wait, w->last_attempt_us, op.at_us());
    return nullptr;
  }
  // A poller (no pub/sub, no subscription linked to it, not told a TTL longer than
  // this) sleeps its own spacing between attempts: one whose owner attempts again after
  // far more than three of its spacings (and a floor: a fast spinner's pause is no
  // give-up; a spacing learnt from a retry that was not at once: a Redlock's attempts on
  // its servers, merged, come together) had stopped, a give-up that left nothing on the wire, as
  // waiter_of_fresh_value's rule for a changing value. Clients that keep one value for
  // every attempt of every wait (ioredis-lock's Lock) showed its attempts joined with the
  // same process's next wait on the lock, seconds later, with a false free stretch.
  constexpr std::int64_t poller_stop_floor_us = 250'000;
  const bool poller = !w->pubsub && w->sub_connection == 0 && w->subscribed_us < 0 && !w->notified &&
                      !w->fresh_values && w->longest_gap_us > options.wake_window_us;
  if (poller && t - w->last_attempt_us > std::max({3 * w->longest_gap_us + options.wake_window_us, w->last_ttl_us,
                                                   poller_stop_floor_us, backoff_reach_us(*w, options.wake_window_us)})) {
    give_up(l, lock, w, wait_end::new_wait, w->last_attempt_us, op.at_us(), true);  // somewhere before its next attempt was due
    return nullptr;
  }
  // Its connection took another lock meanwhile and it did not keep polling (waiter_moved_on.hpp).
  note_side_by_side_waits(*w, lock);
  switch (poller_moved_on(*w, poller, connections[w->conn], t, options.wake_window_us)) {
    case moved_on::no:
      break;
    case moved_on::at_latest:
      give_up(l, lock, w, wait_end::new_wait, w->last_attempt_us, op.at_us());
      return nullptr;
    case moved_on::at_first: {
      // Its one attempt before (its second) began the wait this attempt continues.
      const std::int64_t second = w->last_attempt_us;
      give_up(l, lock, w, wait_end::new_wait, w->first_us, op.at_us());
      new_wait_from_us = second;
      return nullptr;
    }
  }
  if (w->unexplained_us >= 0) {
    const std::int64_t began = w->unexplained_us, ended = w->unexplained_end_us;
    w->unexplained_us = w->unexplained_end_us = -1;
    if (t - w->last_attempt_us <= options.wake_window_us) {
      give_up(l, lock, w, wait_end::new_wait, ended, op.at_us());
      new_wait_from_us = began;
      return nullptr;
    }
  }
  // Redisson's order: its first attempt, SUBSCRIBE, the retry after it, and nothing
  // more (a tryLock that heard no release). A waiter with more attempts may be a poller
  // that a subscriber was linked to by mistake, whose next poll is no new wait; one
  // that subscribed after its retry is node-redisson's, whose stale timer sends an
  // UNSUBSCRIBE while it still waits.
  const bool left = w->pubsub && w->left_channel && w->attempts <= 2 && w->subscribed_us <= w->last_attempt_us &&
                    w->unsubscribed_us >= w->last_attempt_us && w->last_ttl_us >= 0;
  const std::int64_t left_us = left ? left_until(*xp(l), *w) : -1;
  if (left && t - left_us > options.wake_window_us) {
    const std::int64_t slack = std::max(options.wake_window_us, w->last_ttl_us / 20);
    if (t < w->last_attempt_us + w->last_ttl_us - slack) {  // not its timer
      give_up(l, lock, w, wait_end::unsubscribed, left_us, op.at_us());
      return nullptr;
    }
  }
  // Only locks whose channel hears of nothing but the lock going free: fair locks wake
  // their waiters on per-thread channels and tell each its own TTL, and a read lock's
  // reader leaving publishes while other readers still hold it.
  const bool publishes_when_free = op.family == lock_family::redisson || op.family == lock_family::redisson_fenced;
  if (!left && w->pubsub && publishes_when_free && w->last_ttl_us > 0 && has_holder(l) &&
      (w->sub_connection != 0 || w->subscribed_us >= 0)) {
    const lock_extra& x = *xp(l);
    const std::int64_t slack = std::max(options.wake_window_us, w->last_ttl_us / 20);
    const bool at_once = t - w->last_attempt_us <= options.wake_window_us ||
                         (w->subscribed_us >= w->last_attempt_us && t - w->subscribed_us <= options.wake_window_us);
    const bool freed = x.last_freed_us >= w->last_attempt_us - options.reply_skew_us;
    const bool timer = t >= w->last_attempt_us + w->last_ttl_us - slack;
    if (!at_once && !freed && !timer) {
      w->unexplained_us = t;
      w->unexplained_end_us = std::min(t, w->last_attempt_us + w->last_ttl_us);
    }
  }
  if (connections[w->conn].pending_cuts != 0) [[unlikely]] w = end_pending_cuts(l, lock, *w, op);
  return w;
}

// A single try read as given up at another value's attempt, its end said only once its
// connection shows which it was (cut_pending).
inline void lock_timeline::impl::hold_as_cut(waiter& w) {
  w.cut_pending = true;
  ++connections[w.conn].pending_cuts;
}

// A held cut's end at `at` (the connection's close, the waiter's deadline, the capture's
// end): it had stopped, at its refusal.
inline void lock_timeline::impl::say_held_cut(lock_state& l, const waiter& w, std::int64_t at) {
  report_give_up(l, w, wait_end::new_wait, w.last_attempt_us, at, false);
}

// A single try read as given up at another value's attempt (cut_pending), whose value is
// tried again over its connection before any wait begun after it there tried again: it
// was still waiting, and the connection carries waits side by side (as
// note_value_back_beside_another finds once a cut was said).
inline void lock_timeline::impl::cut_was_still_waiting(waiter& w, const lock_operation& op) {
  w.cut_pending = false;
  connection_info& c = connections[w.conn];
  --c.pending_cuts;
  if (w.conn == conn_index(op)) c.multiplexes = true;
}

// `w`'s retry over its connection, where single tries are listed as given up unsaid
// (cut_pending): a wait that began after such a try (a later seq) tried again before it,
// so that try's value had stopped, at its refusal (the give-up said now). Returns `w`
// again (the removals move the records).
inline waiter* lock_timeline::impl::end_pending_cuts(lock_state& l, std::uint32_t lock, waiter& w, const lock_operation& op) {
  const std::uint64_t seq = w.seq;
  const std::uint32_t conn = w.conn;
  for (bool again = true; again;) {
    again = false;
    for (waiter& v : xp(l)->waiters) {
      if (v.cut_pending && v.conn == conn && v.seq < seq) {
        give_up(l, lock, &v, wait_end::new_wait, v.last_attempt_us, op.at_us());
        again = true;
        break;
      }
    }
  }
  return xp(l)->waiters.find_seq(seq);
}

// Whether the single try `w` (on `lock`) came at once after a single try on another lock
// over its connection that is held as cut (cut_pending): one burst of several calls' first
// tries. Scans only when the connection holds any (rare).
inline bool lock_timeline::impl::tried_beside_held_cut(std::uint32_t lock, const waiter& w, std::int64_t at_once_us) {
  const connection_info& c = connections[w.conn];
  if (c.pending_cuts == 0) return false;
  for (const std::uint32_t other : c.waits) {
    if (other == lock || !has_extra(locks[other])) continue;
    for (const waiter& v : xp(locks[other])->waiters) {
      if (v.cut_pending && v.conn == w.conn && w.first_us >= v.last_attempt_us && w.first_us - v.last_attempt_us <= at_once_us) {
        return true;
      }
    }
  }
  return false;
}

// A client that sends a new random value on every attempt (simple-redis-mutex, a
// SET NX poller whose value is a timestamp, warlock's optimistic lock) shows a new owner
// each time: its attempts are still one wait. So does one that draws its value at each
// attempt from a coarse clock (redlock-js: `new Date().toString()`, whole seconds): its
// value repeats for a while, then changes in the middle of the wait, at its cadence
// (value_redrawn_at_cadence). An attempt whose owner no waiter has is
// the next attempt of the one waiter of this lock on the same connection whose owner
// never came back (a stable owner's retry proves its client keeps one), when no other
// waiter of the lock shares that connection (then whose it is is not known) and it
// comes after its latest attempt was answered and within its spacing (a poll interval,
// or a message's wake-up sooner).
// A Redisson-style owner (`<uuid>:<thread>`) is its thread's, never a fresh value.
// A success on that connection ends the wait (it acquired); a new value on another
// connection is another client's.
inline waiter* lock_timeline::impl::waiter_of_fresh_value(lock_state& l, std::uint32_t lock, std::uint32_t owner,
                                                          const lock_operation& op) {
  if (!has_extra(l) || client_part_size(owner) != 0) return nullptr;
  // Most new owners come over a connection with no waiter on this lock (a herd's each
  // on its own): no scan of the lock's waiters then.
  const auto& waits = connections[conn_index(op)].waits;
  if (std::find(waits.begin(), waits.end(), lock) == waits.end()) return nullptr;
  // A retry is sent once the attempt before it was answered: an attempt sent earlier
  // is another waiter's sharing the connection (a client multiplexing its waits). Past
  // three of its spacings plus the wake window, a waiter whose value kept changing had
  // stopped (a give-up that left nothing on the wire): its connection's new value
  // begins a new wait, and that one ended at its last attempt.
  // So had one whose connection acquired another lock since its latest attempt and now
  // tries this one again (a client that gave up and went on to its next task).
  // A waiter told how long the lock stays held (a TTL in the refusal) may sleep that long;
  // one woken by a message may sleep until its timer: its success on this connection,
  // while it is still listed (its deadline not passed), ends its wait whatever the gap.
  // A single try whose connection was then refused another lock, nothing between, went
  // on to its client's next task (symfony/lock: `acquire(false)` once on orders, then on
  // stock, then orders again with the next Lock's token), when the connection's client is
  // seen keeping its value across a wait's retries (then a new value is a new wait, not
  // a fresh value's retry) and carries no tasks side by side. (A fresh-value poller on a
  // connection whose other task waits for another lock keeps its wait.)
  const bool after_other_refusal = attempt_follows_other_refusal && connections[conn_index(op)].keeps_values;
  // So did a single try whose connection did its client's other work and then tried this
  // lock again with a new value (dogpile.cache over redis-py's Lock: a stale value's
  // `acquire(blocking=False)` refused, the value served, the next round's GET, DEL and
  // GET, then a blocking acquire() with its own token, 150 ms later): a client seen keeping
  // its value across a wait's retries draws a new one only for a new call. (A value
  // redrawn at the waiter's cadence comes with nothing between: value_redrawn_at_cadence.)
  const bool new_call_after_other_work =
      attempt_follows_own_refusal && connections[conn_index(op)].keeps_values &&
      op.connection_sequence - connections[conn_index(op)].refused_sequence > 1;
  // (As a poller's stop: a pause shorter than a spinner's is no give-up, however quick the
  // retries before it: a spinner's tries at once, then its next 90 ms on.)
  constexpr std::int64_t fresh_stop_floor_us = 250'000;
  const bool acquires = op.outcome == op_outcome::ok;
  // A new value within 2 ms of a single refused try's reply over its connection: no
  // poller sleeps so little between two tries of one wait, so the try before was all of
  // its wait (a non-blocking try given up at its refusal) and this begins another (kombu:
  // its own `acquire(blocking=False)` refused, the worker's retrying loop's first try
  // 0.3-0.7 ms later, then one every 80-120 ms; joined, the single try's give-up was
  // missed and the loop's wait shown from it). A connection whose wait begun so tries at
  // once again is a spinner's, drawing a value per try: never split so again.
  constexpr std::int64_t at_once_us = 2'000;
  connection_info& own = connections[conn_index(op)];
  const auto tried_again_at_once = [&](const waiter& w) {
    return w.attempts == 1 && !w.fresh_values && !w.pubsub && w.sub_connection == 0 && w.subscribed_us < 0 &&
           op.request_us - w.last_attempt_us <= at_once_us;
  };
  if (own.split_at_once) [[unlikely]] {
    for (const waiter& w : xp(l)->waiters) {
      if (w.connection == op.connection && tried_again_at_once(w)) own.spins = true;
    }
    own.split_at_once = false;
  }
  const auto stopped = [&](const waiter& w) {
    return withdrawn_stopped(w, op.request_us, op.lease_ms, options.wake_window_us) ||
           (w.fresh_values && backoff_restarted(w, op.request_us, options.wake_window_us)) ||
           fresh_waiter_moved_on(w, connections[w.conn], op.request_us, options.wake_window_us) ||
           ((after_other_refusal || new_call_after_other_work) && w.attempts == 1 && !w.fresh_values &&
            !connections[w.conn].carries_tasks_side_by_side()) ||
           (tried_again_at_once(w) && !own.spins) || busy_since_single_try(w, op) ||
           (!acquires && w.attempts >= 2 &&
            op.request_us - w.last_attempt_us >
                std::max({3 * w.longest_gap_us + options.wake_window_us, w.last_ttl_us + options.wake_window_us,
                          fresh_stop_floor_us}));
  };
  // A client that draws a new value for each round of attempts (dlock: a new ioredis-lock
  // Lock per push, its retries sharing its value) waits between rounds with nothing on
  // the wire, for a publication that the lock went free or for its own timer (twice the
  // lease). A stable value's round being over, the connection's next attempt with a new
  // value is its next round when it comes long after the round's cadence would have
  // brought its next attempt (twice it), at once after the lock went free (woken), or as
  // the connection's next lock operation after that refusal, nothing between, three such
  // cadences later (its timer); the connection having taken no lock meanwhile: the gap
  // between rounds is no give-up.
  // A new value sooner is another wait: a poller that gave up and began again (redis-py's
  // next acquire, 4 ms after its last refusal; two tasks of one client take turns so), or
  // another task's. (So a round begun the moment the last one ended, woken in the middle
  // of its retries, reads as a give-up and a new wait.)
  const lock_extra& lx = *xp(l);
  const auto next_round = [&](const waiter& w) {
    const std::int64_t t = op.request_us;
    if (t < w.last_attempt_us || connections[w.conn].last_acquired_us > w.last_attempt_us) return false;
    const std::int64_t cadence = next_attempt_reach_us(w, options.wake_window_us);
    // Within twice its cadence: a poller that gave up (it sleeps its spacing, then finds
    // its time out) and began again at once (redis-py's next acquire).
    if (w.longest_gap_us <= 0 || t - w.last_attempt_us <= 2 * cadence) return false;
    const bool woken = lx.last_freed_us >= w.last_attempt_us - options.reply_skew_us &&
                       t - lx.last_freed_us <= options.wake_window_us;
    const bool timer = attempt_follows_own_refusal && t - w.last_attempt_us > 3 * cadence;
    return woken || timer;
  };
  bool any_stopped = false;
  waiter* found = nullptr;
  for (waiter& w : xp(l)->waiters) {
    if (w.connection != op.connection || w.cut_pending) continue;
    // A stable owner's wait shares the connection with this new value's, unless the new
    // value comes at the waiter's own cadence with nothing else between on the connection
    // (value_redrawn_at_cadence), or is its next round (next_round, above).
    // A new value after more went over the connection than between the waiter's own
    // retries (a read of who holds the lock, before a new wait) is no redraw mid-wait: the
    // client began again (a poller whose patience ran out, then its next task's wait).
    const bool redrawn = w.owner_repeated && attempt_follows_own_refusal &&
                         exchanges_since_refusal(op) <= w.busy_between_retries &&
                         value_redrawn_at_cadence(w, op.request_us, options.wake_window_us);
    const bool round = w.owner_repeated && !redrawn && next_round(w);
    if (w.owner_repeated && !redrawn && !round) return nullptr;
    if (!round && stopped(w)) {
      any_stopped = any_stopped || w.fresh_values || w.withdrawn || w.attempts == 1;
      continue;
    }
    // A connection carrying tasks side by side (`multiplexes`: a Nest service's requests
    // over one client, each call with a value of its own) shows one task's new value while
    // another's single try still stands: a value tried once, never changed yet, is no
    // fresh-value poller's, and the new one begins a wait of its own.
    if (w.attempts == 1 && !w.fresh_values && own.carries_tasks_side_by_side()) continue;
    if (found != nullptr || op.request_us < w.last_attempt_us) return nullptr;
    // Nor one sent at once after a single try on another lock there that is held as cut
    // (cut_pending: it may still wait beside the value that came at once after it): several
    // calls' first tries in one burst, tasks side by side as likely as one task's tries on
    // several locks (@meta-1/nest-common: a new child's connection tries stock, orders and
    // stock again, three calls queued while it connected, then the next call's uuid on
    // orders). This try is held the same way, and the new value begins a wait of its own;
    // the connection shows which it was (that wait's retry first: given up at its try; its
    // value back: one wait, side by side).
    if (w.single_try_of_kept_value() && tried_beside_held_cut(lock, w, at_once_us)) {
      hold_as_cut(w);
      continue;
    }
    found = &w;
  }
  if (any_stopped) {
    const std::uint64_t keep = found != nullptr ? found->seq : ~std::uint64_t{0};
    for (bool again = true; again;) {
      again = false;
      for (waiter& w : xp(l)->waiters) {
        if (w.connection == op.connection && (w.fresh_values || w.withdrawn || w.attempts == 1) && w.seq != keep &&
            !w.cut_pending && stopped(w)) {
          // A poller's cadence bounds when it stopped; a single try stopped at its refusal.
          if (tried_again_at_once(w) && !own.spins) own.split_at_once = true;
          const auto value_size = static_cast<std::uint32_t>(owners.text(w.owner).size());
          own.cut_waits[own.next_cut_wait++ % own.cut_waits.size()] = {lock, value_size, owners.hash(w.owner), w.last_attempt_us};
          // A single try of a value kept over its attempts may be one of several waits the
          // connection carries side by side, each polling in turn: said only once the
          // connection shows which (its value back: still waiting; a later wait's retry
          // there first, its close, its deadline or the capture's end: it had stopped).
          if (w.single_try_of_kept_value()) {
            hold_as_cut(w);
            continue;
          }
          give_up(l, lock, &w, wait_end::new_wait, w.last_attempt_us, op.at_us(), w.attempts >= 2 && w.longest_gap_us > 0);
          again = true;
          break;
        }
      }
    }
    found = nullptr;
    for (waiter& w : xp(l)->waiters) {
      if (w.seq == keep) found = &w;
    }
  }
  if (found == nullptr || client_part_size(found->owner) != 0) return nullptr;
  lock_extra& x = *xp(l);
  if (x.waiter_index_valid) {
    const auto it = x.waiter_index.find(found->owner);
    if (it != x.waiter_index.end() && it->second == found->seq) x.waiter_index.erase(it);
    x.waiter_index.insert_or_assign(owner, found->seq);
  }
  owners.retain(owner);
  owners.release(found->owner);
  found->owner = owner;
  found->fresh_values = true;
  found->withdrawn = found->cleaned_up = false;  // a clean-up's retry: the same wait (waiter_moved_on.hpp)
  return found;
}

// A release of a waiter's refused value (node-redlock releases everywhere after a
// failed quorum): its client gave that attempt up. A client keeping one value retries
// with it (the same wait); one drawing a new value per attempt began another wait with
// its next one (waiter_of_fresh_value).
//
// A Redisson thread (`<uuid>:<thread>`) runs one call at a time: its unlock of a lock it
// waits for says its tryLock there is over. Its MultiLock or RedLock went on without
// this server (its wait here ran out, then it won or lost elsewhere) and now unlocks
// every server, this one included (RedissonRedLock, RedissonMultiLock.unlock): the wait
// ended by then for a reason that is not pub/sub, so it is ended now (group_decided)
// rather than joined with the thread's next attempt here, whose retry would read the
// lock's free time meanwhile as a missed wake-up.
inline void lock_timeline::impl::withdrew_attempt(lock_state& l, std::uint32_t lock, std::uint32_t owner,
                                                  const lock_operation& op) {
  if (!has_extra(l)) return;
  lock_extra& x = *xp(l);
  waiter* w = find_waiter(x, owner);
  if (w == nullptr) return;
  if (client_part(op.owner).empty() || w->fresh_values || !waits_by_pubsub(canon(lock_store::identity_of(l).scope), op.lock, *w)) {
    w->withdrawn = true;
    // Right after its refused attempt on this connection (sent on the refusal, within the
    // wake window), nothing between: a clean-up, part of that attempt; what follows
    // decides (waiter_moved_on.hpp). A Redlock quorum holder's release of every server,
    // one that refused it included, comes when its hold ends: no clean-up.
    const std::uint32_t conn = conn_index(op);
    connection_info& c = connections[conn];
    if (c.refused_lock == lock && !c.refusal_cleaned && w->conn == conn &&
        op.request_us - w->last_attempt_us <= options.wake_window_us) {
      w->cleaned_up = true;
      w->last_attempt_us = std::max(w->last_attempt_us, op.at_us());
      note_attempt(x, *w);
      c.refusal_cleaned = true;
    } else if (released_at_cadence(*w, c, lock, conn, op.request_us, options.wake_window_us)) {
      c.refused_lock = no_id;
      give_up(l, lock, w, wait_end::withdrew, op.request_us, op.at_us());
      schedule(lock);
    }
    return;
  }
  // When its wait here ran out is not on the wire: its last attempt bounds it from below.
  report_give_up(l, *w, wait_end::group_decided, w->last_attempt_us, op.at_us(), true);
  drop_waiter(l, lock, w);
  release_closed_holder_if_done(l);
}

// The owner's client took it out of the lock's queue (Redisson's fair acquireFailed,
// sent when its tryLock's wait ran out): its wait ended when the clean-up was sent.
inline void lock_timeline::impl::left_queue(std::uint32_t id, const lock_operation& op, std::uint32_t owner) {
  lock_state& l = locks[id];
  if (waiter* w = find_waiter(l, owner)) give_up(l, id, w, wait_end::left_queue, op.request_us, op.at_us());
  schedule(id);
}

// The waiter left without acquiring: said (gave_up), then dropped. `ended`: when its
// wait ended as far as `how` tells; `at`: now, when that became known.
inline void lock_timeline::impl::give_up(lock_state& l, std::uint32_t lock, waiter* w, wait_end how, std::int64_t ended, std::int64_t at,
                                        bool ended_at_least) {
  report_give_up(l, *w, how, ended, at, ended_at_least || how == wait_end::last_attempt);
  if (w->conn != no_id) {
    connection_info& c = connections[w->conn];
    c.gave_up_owner = w->owner;
    c.gave_up_lock = lock;
    c.gave_up_wait_began_us = w->first_us;
  }
  drop_waiter(l, lock, w);
  release_closed_holder_if_done(l);
}

// The end of the capture (called as the capture ends, before its connections' ends, and
// at finish for a live run's end): a poller still waiting whose next attempt
// was due before the end and never came had stopped polling, though its deadline (the
// TTL it was told, else 30 s, + the margin) lies beyond the end: it gave up somewhere
// from its last attempt to when that next attempt was due. Reported then, at the end, as
// a give-up at its last attempt (portalocker's poller timing out 0.1 s before a 20 s
// recording ended was not reported at all). A pub/sub waiter waits for a message, not a
// cadence, and one whose next attempt was not yet due may still be waiting: kept.
inline void lock_timeline::impl::give_up_stopped_pollers(std::int64_t end_us) {
  locks.for_each_with_id([&](std::uint32_t id, lock_state& l, std::string_view) {
    if (!has_extra(l) || xp(l)->waiters.empty()) return;
    remove_waiters(
        *xp(l),
        [&](const waiter& w) {
          if (w.cut_pending) {  // its end not said yet: at its refusal
            say_held_cut(l, w, end_us);
            unlist_wait(w.conn, id);
            return true;
          }
          if (w.pubsub || w.sub_connection != 0 || w.longest_gap_us <= 0) return false;
          if (w.last_attempt_us + next_attempt_reach_us(w, options.wake_window_us) >= end_us) return false;
          report_give_up(l, w, wait_end::next_attempt_missed, w.last_attempt_us, end_us, true);
          unlist_wait(w.conn, id);
          return true;
        },
        [](const waiter_vector::dormant&) { return false; });  // (one attempt each: no cadence)
    release_closed_holder_if_done(l);
  });
}

// The waiters whose deadline passed by `at` gave up: each as give_up() would, in seq
// order, in one pass (dormant waiters read in place: a storm's deadlines, falling one
// after another, would make every waiter of the lock full again each time).
inline void lock_timeline::impl::give_up_due_waiters(lock_state& l, std::uint32_t lock, std::int64_t at) {
  remove_waiters(
      *xp(l),
      [&](const waiter& w) {
        if (w.deadline_us < 0 || w.deadline_us > at) return false;
        if (w.cut_pending) [[unlikely]] {
          say_held_cut(l, w, at);
          unlist_wait(w.conn, lock);
          return true;
        }
        const bool left = left_waiter(w);
        const wait_end how = left ? wait_end::unsubscribed : wait_end::last_attempt;
        report_give_up(l, w, how, left ? left_until(*xp(l), w) : w.last_attempt_us, at, how == wait_end::last_attempt);
        unlist_wait(w.conn, lock);
        return true;
      },
      [&](const waiter_vector::dormant& d) { return d.deadline_us() <= at; });
  // (Once, not after each: it acts only once no waiter is left.)
  release_closed_holder_if_done(l);
}

// at_least: `ended` is only the latest time it is known to have waited until.
inline void lock_timeline::impl::report_give_up(lock_state& l, const waiter& w, wait_end how, std::int64_t ended, std::int64_t at,
                                               bool at_least) {
  lock_extra& x = ex(l);
  ++x.gave_up;
  lock_event e = base(l, at);
  e.event = lock_event_kind::gave_up;
  e.owner = owners.text(w.owner);
  name_connection(e, w.conn);
  e.wait_ended = how;
  e.wait_us = std::max<std::int64_t>(ended - w.first_us, 0);
  // Its last attempt bounds the wait from below; so does a first attempt that may not
  // have been its first (see on_acquired).
  const bool began_before = w.mid_stream && !w.quick_second &&
                            w.first_us - first_op_us <= std::max(w.longest_gap_us, w.first_ttl_us) + options.wake_window_us;
  e.wait_at_least = at_least || began_before;
  // Its end only bounded from below (`ended`, its last attempt): it gave up before the
  // event that says so (`at`: the close, the deadline, the group's decision) and before
  // its next attempt was due, which never came. Not when its start is a bound too.
  if (at_least && !began_before && ended < at) {
    std::int64_t latest = how == wait_end::last_attempt && w.deadline_us >= 0 ? std::min(at, w.deadline_us) : at;
    // (A poller's cadence: a pub/sub waiter's next attempt waits for a message.)
    if (!w.pubsub && w.longest_gap_us > 0) latest = std::min(latest, w.last_attempt_us + next_attempt_reach_us(w, options.wake_window_us));
    e.wait_at_most_us = std::max<std::int64_t>(latest - w.first_us, e.wait_us);
  }
  if (!e.wait_at_least) {
    remember_exact_give_up(x, w, e.wait_us);
  } else if (at_least && !began_before) {
    likely_wait(x, w, e);
  }
  e.interval_start_us = w.first_us;
  e.interval_us = e.wait_us;
  if (w.last_ttl_us >= 0) e.ttl_ms = w.last_ttl_us / 1000;
  attribute_to_closed_holder(l, e, w.first_us, ended);
  if (!at_least) stretch_waited_through_before_give_up(l, w, ended, at, e);
  emit(l, e);
}

inline void lock_timeline::impl::remember_exact_give_up(lock_extra& x, const waiter& w, std::int64_t wait_us) {
  x.exact_give_ups[x.next_exact_give_up] = {hash_text(owners.text(w.owner)), wait_us};
  x.next_exact_give_up = static_cast<std::uint8_t>((x.next_exact_give_up + 1) % x.exact_give_ups.size());
}

// A give-up dated only by bounds (its last attempt, the close): its owner's earlier
// give-ups on this lock, when two or more were exact and agree within 10%, give the wait
// it likely had (their middle), if that lies within the bounds. A client that times out
// after a fixed wait leaves nothing on the wire when it does (Redisson's tryLock while
// another thread keeps the channel subscribed); its earlier waits, ended by its next
// attempt or its close, were seen whole.
inline void lock_timeline::impl::likely_wait(const lock_extra& x, const waiter& w, lock_event& e) {
  const std::uint32_t h = hash_text(owners.text(w.owner));
  std::int64_t shortest = -1, longest = -1;
  std::uint8_t count = 0;
  for (const auto& g : x.exact_give_ups) {
    if (g.wait_us < 0 || g.owner_hash != h) continue;
    shortest = count == 0 ? g.wait_us : std::min(shortest, g.wait_us);
    longest = count == 0 ? g.wait_us : std::max(longest, g.wait_us);
    ++count;
  }
  if (count < 2 || longest * 10 > shortest * 11) return;
  const std::int64_t likely = (shortest + longest) / 2;
  if (likely < e.wait_us || (e.wait_at_most_us >= 0 && likely > e.wait_at_most_us)) return;
  e.wait_likely_us = likely;
  e.wait_likely_from = count;
}

// A free stretch kept for a waiter's next attempt to confirm (free_interval_ends) that
// began after this waiter's first attempt and ended before its wait did (`ended`, exact):
// it waited through it and gave up without the attempt that would have told (retry()).
// Said as retry() says it, before the gave_up: for a pub/sub waiter, a missed wake-up
// rests on its link (certain), else it is only named on the gave_up (link_not_certain);
// one told by a message since its last attempt, or that subscribed after the lock went
// free, missed nothing.
inline void lock_timeline::impl::stretch_waited_through_before_give_up(lock_state& l, const waiter& w, std::int64_t ended,
                                                                       std::int64_t at, lock_event& gave_up) {
  lock_extra& x = *xp(l);
  const auto inside = [&](std::int64_t start, std::int64_t end) { return start >= 0 && start >= w.first_us && end <= ended; };
  std::int64_t* start = nullptr;
  std::int64_t* end = nullptr;
  if (inside(x.idle_start_us, x.idle_end_us)) {
    start = &x.idle_start_us;
    end = &x.idle_end_us;
  } else if (inside(x.later_idle_start_us, x.later_idle_end_us)) {
    start = &x.later_idle_start_us;
    end = &x.later_idle_end_us;
  } else {
    return;
  }
  const bool listens = w.pubsub && !polls(w);
  if (listens && (w.notified || w.subscribed_us > *start)) return;
  if (listens && w.sub_connection != 0 && !link_certain(w)) {
    gave_up.link_not_certain = anomaly_kind::idle_with_waiters;
    return;
  }
  const anomaly_finding finding = listens ? anomaly_finding::idle_while_this_waiter_waited : anomaly_finding::idle_while_this_poller_slept;
  anomaly(l, at, anomaly_kind::idle_with_waiters, w.owner, w.conn, {finding}, false, *start, *end - *start);
  *start = *end = -1;
}

// A waiter that waited (from first_us to until_us) while a holder whose connection had closed held
// the lock: the event names that holder, when its connection closed and when its lease
// ran out (what the waiter actually waited for, not a missed wake-up).
inline void lock_timeline::impl::attribute_to_closed_holder(const lock_state& l, lock_event& e, std::int64_t first_us,
                                                           std::int64_t until_us) const {
  const lock_extra* x = xp(l);
  // Strictly after: a waiter whose process exited with the holder's (their connections
  // closed at one instant) did not wait on a closed holder.
  if (x == nullptr || x->closed_at_us < 0 || x->closed_owner == no_id || until_us <= x->closed_at_us) return;
  if (x->closed_expired_us >= 0 && first_us > x->closed_expired_us) return;
  e.closed_holder = owners.text(x->closed_owner);
  e.closed_holder_us = x->closed_at_us;
  e.closed_holder_expired_us = x->closed_expired_us;
}

// The time a waiter gives its next attempt: the TTL it was given (Redisson waits for a
// message at most that long), else the holder's remaining lease, else 30 s.
inline std::int64_t lock_timeline::impl::expected_wait_us(lock_state& l, const lock_operation& op, std::int64_t at) {
  if (op.ttl_ms >= 0) return std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000;
  std::int64_t remaining = -1;
  for_each_holder(l, [&](holder& h) {
    if (h.lease_end_us() > at) remaining = std::max(remaining, h.lease_end_us() - at);
  });
  return remaining >= 0 ? remaining : 30'000'000;
}

// A pub/sub waiter whose command connection ended while its subscriber, another
// connection, is still subscribed to the lock's channel: its client reconnects and
// goes on waiting (Redisson's thread does, under the same owner id), and its next
// attempt, on the new connection, continues this wait. It leaves with its
// subscription (subscription_ended), or at its deadline.
// Only a link the traffic makes sure of: a waiter kept for a subscription that is
// another client's would outlive its process.
inline bool lock_timeline::impl::waits_on_subscription(const waiter& w, std::uint32_t lock, std::uint64_t ended) {
  return w.pubsub && w.sub_connection != 0 && w.sub_connection != ended &&
         (w.confidence == link_confidence::certain || w.confidence == link_confidence::high) && subscribed(w, lock);
}

// For a SUBSCRIBE (or the first message on a subscription begun before the capture):
// the waiter on the same connection (RESP3); else the waiter of the client the
// traffic has established as the subscriber's; else the most recent waiter from the
// same IP within link_window, preferring the client the evidence points to.
inline bool lock_timeline::impl::polls(const waiter& w) {
  return w.attempts >= 3 && w.sub_connection == 0 && w.subscribed_us < 0 && w.last_ttl_us > 0 &&
         w.longest_gap_us * 4 < w.last_ttl_us;
}

// Another waiter of the same client waits for the lock: which of them an event is
// about is not sure. One that left the channel after its latest attempt listens no more
// (left_waiter, waiter_moved_on.hpp).
inline bool lock_timeline::impl::has_sibling(lock_state& l, std::uint32_t owner, std::uint64_t client) {
  if (!has_extra(l)) return false;
  for (const waiter& w : xp(l)->waiters) {
    if (w.owner != owner && w.client == client && !left_waiter(w)) return true;
  }
  return false;
}

}  // namespace lockscope::locks
