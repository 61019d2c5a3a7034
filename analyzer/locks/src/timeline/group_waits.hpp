// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Per-server waits of Redisson's MultiLock and RedLock threads. Such a group takes one
// lock per server with one client a server: the thread's owner id differs per server
// (`<uuid>:<thread>`), only the client's IP and the thread id are shared. A thread runs
// one call at a time, so once it acts on the same lock name on another server (an
// acquisition or an unlock, after its latest attempt here) its tryLock here is over:
// its wait ended for a reason that is not pub/sub (its wait here ran out and the group
// went on, won or lost elsewhere), and it is ended then (gave_up, group_decided) rather
// than joined with the thread's next attempt here, whose retry would read the lock's
// free time meanwhile as a missed wake-up.
// Watchdog renewals carry the thread's id but are sent by a timer: they prove nothing.
// Two processes on one host may number their threads alike; a name and IP whose
// attempts on one server came from two clients is left alone (which process acted is
// not known), except for a thread's own unlock (withdrew_attempt).
// Inline, included by lock_timeline.cpp.
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

namespace group_waits_detail {

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
  return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

inline std::uint64_t hash_of(std::string_view s) noexcept { return std::hash<std::string_view>{}(s); }

}  // namespace group_waits_detail

// (name, client IP, thread id) and (name, client IP), or {0, 0} for an owner that is no
// Redisson thread.
inline lock_timeline::impl::thread_keys lock_timeline::impl::group_thread_keys(const lock_operation& op) {
  using namespace group_waits_detail;
  if (op.client == nullptr || op.owner.size() < 38 || op.owner[36] != ':') return {};
  const auto parts = lock::parse_owner_id(op.owner);
  if (!parts) return {};
  std::uint64_t ip = hash_of(op.lock) + op.client->family;
  for (std::size_t i = 0; i < (op.client->family == 6 ? 16u : 4u); ++i) ip = mix(ip, op.client->address[i]);
  ip |= 1;  // never 0
  return {mix(ip, parts->thread_number + 1) | 1, ip, hash_of(parts->client_id)};
}

// Before an operation is handled: a Redisson thread's attempt or unlock on this server
// ends its wait on another server of the same name; a refused attempt opens (or moves)
// the thread's wait to this one.
inline void lock_timeline::impl::group_thread_acted(std::uint32_t where, const lock_operation& op) {
  if (op.kind != lock_op_kind::acquire && op.kind != lock_op_kind::unlock) return;
  const bool refused = op.kind == lock_op_kind::acquire && op.outcome == op_outcome::contended;
  // (Every acquisition counts the clients; an unlock matters only to a thread waiting.)
  if (op.kind == lock_op_kind::unlock && thread_waits.empty()) return;
  const thread_keys k = group_thread_keys(op);
  if (k.thread == 0) return;
  // Two clients from this IP on this server for this name: two processes.
  if (op.kind == lock_op_kind::acquire) {
    if (group_clients.size() >= max_group_entries) group_clients.clear(), group_ambiguous.clear();
    const std::uint64_t here = group_waits_detail::mix(k.name_ip, where + 1);
    const auto [it, fresh] = group_clients.try_emplace(here, k.client);
    if (!fresh && it->second != k.client) group_ambiguous.insert(k.name_ip);
  }
  const auto it = thread_waits.find(k.thread);
  if (it != thread_waits.end() && it->second.scope != where) {
    const thread_wait tw = it->second;
    thread_waits.erase(it);
    if (!group_ambiguous.contains(k.name_ip)) {
      const std::uint32_t id = find_lock(tw.scope, op.lock);
      if (id != no_id) {
        lock_state& l = locks[id];
        waiter* w = nullptr;
        if (has_extra(l)) {
          for (waiter& c : xp(l)->waiters) {
            if (group_waits_detail::hash_of(owners.text(c.owner)) == tw.owner_hash) w = &c;
          }
        }
        if (w != nullptr && w->last_attempt_us < op.request_us) {
          // Its tryLock there returned before this request was sent.
          report_give_up(l, *w, wait_end::group_decided, op.request_us, op.at_us(), false);
          drop_waiter(l, id, w);
          release_closed_holder_if_done(l);
          schedule(id);
        }
      }
    }
  }
  if (refused) {
    if (thread_waits.size() >= max_group_entries) thread_waits.clear();  // bounded whatever the churn
    thread_waits.insert_or_assign(k.thread, thread_wait{where, group_waits_detail::hash_of(op.owner)});
  }
}

}  // namespace lockscope::locks
