// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Holders: who holds a lock (the first in the pool, more in the lock's extra part),
// their leases and expiry, and whose a plain DEL was (the connection's last owners).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

inline holder* lock_timeline::impl::first_holder(lock_state& l) { return l.active == no_id ? nullptr : &pool[l.active]; }

inline bool lock_timeline::impl::has_holder(const lock_state& l) const { return l.active != no_id; }

template <class F>
inline void lock_timeline::impl::for_each_holder(lock_state& l, F&& f) {
  if (l.active == no_id) return;
  f(pool[l.active]);
  if (has_extra(l)) {
    for (holder& h : xp(l)->more_holders) f(h);
  }
}

// The first holder of `owner`, in for_each_holder's order.
inline holder* lock_timeline::impl::find_holder(lock_state& l, std::uint32_t owner) {
  if (l.active == no_id) return nullptr;
  if (pool[l.active].owner == owner) return &pool[l.active];
  if (!has_extra(l)) return nullptr;
  lock_extra& x = *xp(l);
  const bool indexed = x.more_holders.size() > scanned_holders &&
                       (x.holder_index_valid || ++x.holder_scans > x.more_holders.size() / 8);
  if (!indexed) {
    for (holder& h : x.more_holders) {
      if (h.owner == owner) return &h;
    }
    return nullptr;
  }
  if (!x.holder_index_valid) {
    x.holder_scans = 0;
    x.holder_index.clear();
    for (std::size_t i = 0; i < x.more_holders.size(); ++i) {
      x.holder_index.emplace(x.more_holders[i].owner, static_cast<std::uint32_t>(i));
    }
    x.holder_index_valid = true;
  }
  const auto it = x.holder_index.find(owner);
  return it == x.holder_index.end() ? nullptr : &x.more_holders[it->second];
}

// A new holder naming `owner` and `conn` (both retained until it goes).
inline holder& lock_timeline::impl::add_holder(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
  holder* h;
  if (l.active == no_id) {
    const std::uint32_t slot = pool.acquire();
    l.active = slot;
    h = &pool[slot];
  } else {
    lock_extra& x = ex(l);
    h = &x.more_holders.emplace_back();
    if (x.holder_index_valid) x.holder_index.emplace(owner, static_cast<std::uint32_t>(x.more_holders.size() - 1));
  }
  h->owner = owner;
  h->conn = conn;
  owners.retain(owner);
  retain_connection(conn);
  return *h;
}

inline void lock_timeline::impl::remove_holder(lock_state& l, holder* h) {
  owners.release(h->owner);
  release_connection(h->conn);
  if (h == &pool[l.active]) {
    if (has_extra(l) && !xp(l)->more_holders.empty()) {
      *h = xp(l)->more_holders.front();
      xp(l)->more_holders.erase(xp(l)->more_holders.begin());
      xp(l)->holder_index_valid = false;
    } else {
      pool.release(l.active);
      l.active = no_id;
    }
    return;
  }
  xp(l)->holder_index_valid = false;
  auto& v = xp(l)->more_holders;
  v.erase(v.begin() + (h - v.data()));
}

inline void lock_timeline::impl::clear_holders(lock_state& l) {
  for_each_holder(l, [&](holder& h) {
    owners.release(h.owner);
    release_connection(h.conn);
  });
  if (l.active != no_id) {
    pool.release(l.active);
    l.active = no_id;
  }
  if (has_extra(l)) {
    xp(l)->more_holders.clear();
    xp(l)->holder_index_valid = false;
  }
}

inline void lock_timeline::impl::expire(lock_state& l, holder& h, std::int64_t at) {
  if (h.ends_unseen()) {
    // A hold known only from its renewals (its taking and freeing in no call the capture
    // shows): its holder may have freed it at any time after its last renewal, unseen.
    // Its lease's end is no expiry, and the lock is not known free since then: the hold
    // just stops being shown.
    remove_holder(l, &h);
    return;
  }
  lock_event e = base(l, at);
  e.event = lock_event_kind::expired;
  e.owner = owners.text(h.owner);
  name_connection(e, h.conn);
  e.lease_ms = h.lease_ms;
  e.hold_count = 0;
  if (h.since_us >= 0) {
    e.held_us = at - h.since_us;
    add_hold(l, e.held_us);
  } else {
    held_since_capture(l, e, at);
  }
  // A holder of a connection that closed holding many locks was not named when it
  // closed (holders_lost_connection): it is now, if someone waits for the lock.
  if (lock_extra* x = xp(l); x != nullptr && !x->waiters.empty() && x->closed_owner != h.owner && h.conn != no_id &&
                             !connections[h.conn].open && connections[h.conn].closed_at_us >= 0) {
    set_closed_holder(l, h.owner, connections[h.conn].closed_at_us);
  }
  if (lock_extra* x = xp(l); x != nullptr && x->closed_owner == h.owner && x->closed_at_us >= 0 && x->closed_expired_us < 0) {
    x->closed_expired_us = at;  // held by a closed connection until now
    e.closed_holder = e.owner;
    e.closed_holder_us = x->closed_at_us;
    e.closed_holder_expired_us = at;
  }
  count_expiry(l);
  set_last_expired(l, h.owner);
  remove_holder(l, &h);
  became_free(l, at);
  emit(l, e);
  release_closed_holder_if_done(l);
}

// Counted in the lock's hold durations as what it is, a lower bound (the summary's "≥").
inline void lock_timeline::impl::held_since_capture(lock_state& l, lock_event& e, std::int64_t at) {
  const std::int64_t start = options.capture_start_us >= 0 ? options.capture_start_us : first_op_us;
  if (start < 0 || at < start) return;
  e.held_us = at - start;
  e.held_since_capture_start = true;
  add_hold(l, e.held_us);
  side_of(l).holds_at_least = true;
}

inline void lock_timeline::impl::set_last_expired(lock_state& l, std::uint32_t owner) {
  owners.retain(owner);
  owners.release(l.last_expired);
  l.last_expired = owner;
}

inline bool lock_timeline::impl::take_expired(lock_state& l, std::uint32_t owner) {
  if (l.last_expired != owner || owner == no_id) return false;
  set_last_expired(l, no_id);
  return true;
}

// Remembers `owner` as the connection's last owner of lock `id` (see last_owners).
inline void lock_timeline::impl::note_owner(std::uint32_t conn, std::uint32_t id, std::uint32_t owner) {
  auto& slots = connections[conn].last_owners;
  std::size_t k = 0;  // the lock's slot, or the least recent when it is not there yet
  while (k + 1 < slots.size() && slots[k].lock != id) ++k;
  if (slots[k].owner != owner) {
    owners.retain(owner);
    owners.release(slots[k].owner);
  }
  // Most recent first. By hand: the loop compiled to a memmove call on every operation.
  static_assert(std::tuple_size_v<std::decay_t<decltype(slots)>> == 4);
  switch (k) {
    case 3: slots[3] = slots[2]; [[fallthrough]];
    case 2: slots[2] = slots[1]; [[fallthrough]];
    case 1: slots[1] = slots[0]; [[fallthrough]];
    default: break;
  }
  slots[0] = {id, owner};
}

inline std::uint32_t lock_timeline::impl::last_owner_on(std::uint32_t conn, std::uint32_t id) const {
  for (const auto& s : connections[conn].last_owners) {
    if (s.lock == id) return s.owner;
  }
  return no_id;
}

inline auto lock_timeline::impl::shield_answering_holder(lock_state& l, const lock_operation& op, std::int64_t at, bool plain)
    -> shielded_deadline {
  const auto due_in_reply = [&](const holder& h) { return h.deadline_us >= op.request_us && h.deadline_us <= at; };
  holder* answering = nullptr;
  if (plain) {
    answering = first_holder(l);  // what a plain command acts on
  } else {
    for_each_holder(l, [&](holder& h) {
      if (answering == nullptr && due_in_reply(h) && owners.text(h.owner) == op.owner) answering = &h;
    });
  }
  if (answering == nullptr || !due_in_reply(*answering)) return {};
  const shielded_deadline s{answering->owner, answering->deadline_us};
  answering->deadline_us = at + 1;
  return s;
}

inline void lock_timeline::impl::unshield(std::uint32_t id, lock_state& l, const shielded_deadline& s, std::int64_t at) {
  holder* h = find_holder(l, s.owner);
  if (h == nullptr || h->deadline_us != at + 1) return;
  h->deadline_us = s.deadline_us;
  schedule_at(id, l, s.deadline_us);
}

}  // namespace lockscope::locks
