// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Subscriptions: a connection's records of the lock channels it is subscribed to (or
// was seen leaving), kept indexed by client.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"
#include "timeline/waiter_moved_on.hpp"

namespace lockscope::locks {

// The connection's active subscription to the lock's channel.
inline connection_info::subscription* lock_timeline::impl::subscription_of(connection_info& c, std::uint32_t lock) {
  connection_info::subscription* s = record_of(c, lock);
  return s != nullptr && s->active ? s : nullptr;
}

inline connection_info::subscription* lock_timeline::impl::record_of(connection_info& c, std::uint32_t lock) {
  for (auto& sub : c.subscriptions) {
    if (sub.lock == lock) return &sub;
  }
  return nullptr;
}

// The connection is known not to be subscribed to the lock's channel now (left at `at`):
// the most recently left channels are remembered, at most max_inactive (a subscriber
// connection lives as long as its client and may leave a channel per lock).
inline void lock_timeline::impl::set_inactive(std::uint32_t conn, std::uint32_t lock, std::int64_t at) {
  connection_info& c = connections[conn];
  if (const auto* r = record_of(c, lock)) {
    const connection_info::subscription gone = *r;
    c.subscriptions.erase(c.subscriptions.begin() + (r - c.subscriptions.data()));
    if (gone.owner != no_id) unindex_subscriber(conn, gone.client);
  }
  std::size_t inactive = 0;
  for (const auto& sub : c.subscriptions) inactive += sub.active ? 0 : 1;
  if (inactive >= connection_info::max_inactive) {
    const auto oldest = std::find_if(c.subscriptions.begin(), c.subscriptions.end(),
                                     [](const connection_info::subscription& s) { return !s.active; });
    c.subscriptions.erase(oldest);
  }
  c.subscriptions.push_back({lock, no_id, 0, link_confidence::none, false, at});
}

// Writes the connection's record of the lock's channel (over `r`, else a new one),
// keeping subscribers_by_client exact.
inline void lock_timeline::impl::put_subscription(std::uint32_t conn, connection_info::subscription* r, const connection_info::subscription& v) {
  connection_info& c = connections[conn];
  const std::uint64_t before = r != nullptr && r->owner != no_id ? r->client : 0;
  if (r != nullptr) *r = v;
  else c.subscriptions.push_back(v);
  if (v.owner != no_id) {
    auto& conns = subscribers_by_client[v.client];
    if (std::find(conns.begin(), conns.end(), conn) == conns.end()) conns.push_back(conn);
  }
  if (before != 0 && !(v.owner != no_id && v.client == before)) unindex_subscriber(conn, before);
}

// `c` leaves `client`'s list unless one of its records still names that client.
inline void lock_timeline::impl::unindex_subscriber(std::uint32_t conn, std::uint64_t client) {
  for (const auto& sub : connections[conn].subscriptions) {
    if (sub.owner != no_id && sub.client == client) return;
  }
  const auto it = subscribers_by_client.find(client);
  if (it == subscribers_by_client.end()) return;
  std::erase(it->second, conn);
  if (it->second.empty()) subscribers_by_client.erase(it);
}

// The waiter's subscriber connection is subscribed to the lock's channel right now.
inline bool lock_timeline::impl::subscribed(const waiter& w, std::uint32_t lock) {
  connection_info* c = open_connection(w.sub_connection);
  return c != nullptr && subscription_of(*c, lock) != nullptr;
}

inline bool lock_timeline::impl::has_subscribed_waiter(lock_state& l, std::uint32_t lock) {
  if (!has_extra(l)) return false;
  const lock_extra& x = *xp(l);
  if (x.keys) {  // every waiter's subscriber connection is a key there: each asked once, not each waiter
    for (const auto& [sub, seqs] : x.keys->by_sub) {
      connection_info* c = open_connection(sub);
      if (c != nullptr && subscription_of(*c, lock) != nullptr) return true;
    }
    return false;
  }
  for (const waiter& w : xp(l)->waiters) {
    if (subscribed(w, lock)) return true;
  }
  return false;
}

// Waiters linked to subscriber `sub` lost their subscription to the lock's channel.
// Those whose command connection had ended already (waits_on_subscription) leave now.
inline void lock_timeline::impl::subscription_ended(std::uint32_t lock, std::uint64_t sub, std::int64_t at) {
  lock_state& l = locks[lock];
  if (!has_extra(l)) return;
  const auto leaves = [&](waiter& w) {
    if (w.sub_connection != sub) return false;
    if (!left_waiter(w)) w.unsubscribed_us = at;  // one that left keeps when it left (waiter_moved_on.hpp)
    if (connections[w.conn].open) return false;
    unlist_wait(w.conn, lock);
    if (!capture_ending) report_give_up(l, w, wait_end::connection_closed, at, at, false);  // its subscriber's end too
    return true;
  };
  lock_extra& x = *xp(l);
  if (sub != 0 && x.waiters.size() > scanned_waiters && x.waiters.dormant_count() == 0) {  // (0: by_sub keys none)
    remove_waiters_keyed(x, &waiter_keys::by_sub, sub, leaves);  // a herd's lock: its subscriber's waiters only
  } else {
    remove_waiters(x, leaves);
  }
  release_closed_holder_if_done(l);
}

}  // namespace lockscope::locks
