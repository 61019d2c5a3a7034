// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Finding a lock's waiters without a scan of them all: by seq, by subscriber connection
// and client (waiter_keys, for a lock with many), and their earliest deadline (kept).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// The waiter with `seq`, if it still waits (`waiters` is in seq order).
inline waiter* lock_timeline::impl::waiter_at(lock_extra& x, std::uint64_t seq) {
  return x.waiters.find_seq(seq);
}

// The keys of the lock's waiters, made from them the first time.
inline waiter_keys& lock_timeline::impl::keys_of(lock_extra& x) {
  if (!x.keys) {
    x.keys = std::make_unique<waiter_keys>();
    for (const waiter& w : x.waiters) {
      index_keys(x, w);
      x.keys->forgotten_until_us = std::max(x.keys->forgotten_until_us, w.last_attempt_us);  // before the keys: not noted
    }
  }
  return *x.keys;
}

// `w` (a new waiter, its links set) joins the keys, if kept (a lock without them, most,
// pays a test: the rest is out of line).
inline void lock_timeline::impl::index_keys(lock_extra& x, const waiter& w) {
  if (x.keys) index_kept_keys(*x.keys, w);
}

inline void lock_timeline::impl::index_kept_keys(waiter_keys& keys, const waiter& w) {
  waiter_keys::add(keys.by_client, w.client, w.seq);
  waiter_keys::add(keys.by_conn, w.conn, w.seq);
  waiter_keys::add(keys.by_ip, w.ip_tag, w.seq);
  if (w.sub_connection != 0) waiter_keys::add(keys.by_sub, w.sub_connection, w.seq);
  keys.note_attempt(w.seq, w.last_attempt_us);
}

// The waiter's latest attempt is now `w.last_attempt_us` (waiter_keys::recent).
inline void lock_timeline::impl::note_attempt(lock_extra& x, const waiter& w) {
  if (x.keys) x.keys->note_attempt(w.seq, w.last_attempt_us);
}

// `w` leaves: out of the keys, and its deadline no longer counts.
inline void lock_timeline::impl::unindex_keys(lock_extra& x, const waiter& w) {
  if (x.keys) {
    waiter_keys::remove(x.keys->by_client, w.client, w.seq);
    waiter_keys::remove(x.keys->by_conn, w.conn, w.seq);
    waiter_keys::remove(x.keys->by_ip, w.ip_tag, w.seq);
    if (w.sub_connection != 0) waiter_keys::remove(x.keys->by_sub, w.sub_connection, w.seq);
  }
  if (w.deadline_us >= 0 && w.deadline_us == x.earliest_deadline_us) x.earliest_deadline_known = false;
}

// The lock has no waiter left: nothing kept for them.
inline void lock_timeline::impl::no_waiters_left(lock_extra& x) {
  x.keys.reset();
  x.later_leaves.clear();
  x.earliest_deadline_us = -1;
  x.earliest_deadline_known = true;
}

inline void lock_timeline::impl::set_sub_connection(lock_extra& x, waiter& w, std::uint64_t sub) {
  if (w.sub_connection == sub) return;
  if (x.keys) {
    if (w.sub_connection != 0) waiter_keys::remove(x.keys->by_sub, w.sub_connection, w.seq);
    if (sub != 0) waiter_keys::add(x.keys->by_sub, sub, w.seq);
  }
  w.sub_connection = sub;
}

// The waiter's latest attempt came over `conn`, from the address tagged `ip_tag` (move_waiter).
inline void lock_timeline::impl::set_waiter_conn(lock_extra& x, waiter& w, std::uint32_t conn, std::uint16_t ip_tag) {
  if (x.keys) {
    waiter_keys::remove(x.keys->by_conn, w.conn, w.seq);
    waiter_keys::add(x.keys->by_conn, conn, w.seq);
    if (ip_tag != w.ip_tag) {
      waiter_keys::remove(x.keys->by_ip, w.ip_tag, w.seq);
      waiter_keys::add(x.keys->by_ip, ip_tag, w.seq);
    }
  }
  w.conn = conn;
  w.ip_tag = ip_tag;
}

// The waiter whose latest attempt came over `conn` first (in the waiters' order), for a
// lock whose keys are kept.
inline waiter* lock_timeline::impl::first_on_conn(lock_extra& x, std::uint32_t conn) {
  const std::optional<std::uint64_t> seq = waiter_keys::first(keys_of(x).by_conn, conn);
  return seq ? waiter_at(x, *seq) : nullptr;
}

inline void lock_timeline::impl::set_waiter_deadline(lock_extra& x, waiter& w, std::int64_t t) {
  const std::int64_t old = w.deadline_us;
  w.deadline_us = t;
  if (!x.earliest_deadline_known) return;
  if (t >= 0 && (x.earliest_deadline_us < 0 || t <= x.earliest_deadline_us)) {
    x.earliest_deadline_us = t;
  } else if (old >= 0 && old == x.earliest_deadline_us) {
    x.earliest_deadline_known = false;  // it may have been the only one that early
  }
}

inline std::int64_t lock_timeline::impl::earliest_waiter_deadline(lock_extra& x) {
  if (!x.earliest_deadline_known) {
    x.earliest_deadline_us = x.waiters.earliest_deadline();  // dormant waiters read in place
    x.earliest_deadline_known = true;
  }
  return x.earliest_deadline_us;
}

}  // namespace lockscope::locks
