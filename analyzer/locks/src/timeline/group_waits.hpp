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

// A thread that waits on a server listens to the lock's channel there (Redisson's tryLock
// subscribes, or shares its client's subscription, which the traffic may not tie to it):
// the waiter is linked to a subscriber, or the lock's channel there carries messages. A
// client that sends its attempts to every server at once and polls (no pub/sub at all)
// keeps one wait per server across its rounds: its attempt on the next server says
// nothing of its wait here.
inline bool lock_timeline::impl::waits_by_pubsub(std::uint32_t where, std::string_view name, const waiter& w) const {
  if (!w.pubsub) return false;
  if (w.sub_connection != 0 || w.subscribed_us >= 0) return true;
  return channels_heard.contains(group_waits_detail::mix(group_waits_detail::hash_of(name), where + 1));
}

// Before an operation is handled: a Redisson thread's attempt or unlock on this server
// ends its wait on another server of the same name; a refused attempt opens (or moves)
// the thread's wait to this one.
inline void lock_timeline::impl::group_thread_acted(std::uint32_t where, const lock_operation& op) {
  using group_waits_detail::mix;
  if (op.kind == lock_op_kind::subscribe || op.kind == lock_op_kind::message) {
    const std::uint64_t channel = mix(group_waits_detail::hash_of(op.lock), where + 1);
    if (channels_heard.contains(channel)) return;
    if (channels_heard.size() >= max_group_entries) channels_heard.clear();
    channels_heard.insert(channel);
    return;
  }
  if (op.kind != lock_op_kind::acquire && op.kind != lock_op_kind::unlock) return;
  // One server (and database) seen: no group, and nothing to pay on the hot path.
  if (scopes.size() < 2) return;
  const bool refused = op.kind == lock_op_kind::acquire && op.outcome == op_outcome::contended;
  const thread_keys k = group_thread_keys(op);
  if (k.thread == 0) return;
  if (group_clients.size() >= max_group_entries || thread_waits.size() >= max_group_entries) {  // bounded
    thread_waits.clear();
    group_clients.clear();
    group_ambiguous.clear();
    group_pairs.clear();
  }
  // Two clients from this IP on this server for this name: two processes.
  if (op.kind == lock_op_kind::acquire) {
    const auto [it, fresh] = group_clients.try_emplace(mix(k.name_ip, where + 1), k.client);
    if (!fresh && it->second != k.client) group_ambiguous.insert(k.name_ip);
  }
  // A thread's entry: made by its first refusal or unlock (an acquisition alone needs none).
  auto found = thread_waits.find(k.thread);
  if (found == thread_waits.end()) {
    if (op.kind == lock_op_kind::acquire && !refused) return;
    found = thread_waits.emplace(k.thread, thread_slots{}).first;
  }
  thread_slots& slots = found->second;
  // A group's unlock goes to every server at once (unlockInner): this thread's unlocks in
  // other scopes from other clients sent within pair_window_us are one process's.
  if (op.kind == lock_op_kind::unlock) {
    for (const thread_slots::unlock_seen& u : slots.unlocks) {
      if (u.client != 0 && u.client != k.client && u.scope != where && op.request_us - u.request_us <= pair_window_us) {
        group_pairs.insert(u.client < k.client ? mix(u.client, k.client) : mix(k.client, u.client));
      }
    }
    slots.unlocks[slots.next_unlock++ % slots.unlocks.size()] = {k.client, where, op.request_us};
  }
  const bool ambiguous = group_ambiguous.contains(k.name_ip);
  for (thread_wait& tw : slots.waits) {
    if (tw.owner_hash == 0 || tw.scope == where) continue;
    // Another process's thread of the same number, as far as is known: not this one's.
    if (ambiguous && !group_pairs.contains(tw.client < k.client ? mix(tw.client, k.client) : mix(k.client, tw.client))) {
      continue;
    }
    const thread_wait ended = tw;
    tw = thread_wait{};
    const std::uint32_t id = find_lock(ended.scope, op.lock);
    if (id == no_id) continue;
    lock_state& l = locks[id];
    waiter* w = nullptr;
    if (has_extra(l)) {
      for (waiter& c : xp(l)->waiters) {
        if ((group_waits_detail::hash_of(owners.text(c.owner)) | 1) == ended.owner_hash) w = &c;
      }
    }
    if (w != nullptr && w->last_attempt_us < op.request_us && waits_by_pubsub(ended.scope, op.lock, *w)) {
      // Its tryLock there returned before this request was sent.
      report_give_up(l, *w, wait_end::group_decided, op.request_us, op.at_us(), false);
      drop_waiter(l, id, w);
      release_closed_holder_if_done(l);
      schedule(id);
    }
  }
  if (refused) {
    // This client's slot, else a free one, else the oldest.
    thread_wait* slot = nullptr;
    for (thread_wait& tw : slots.waits) {
      if (tw.client == k.client && tw.owner_hash != 0) slot = &tw;
    }
    for (thread_wait& tw : slots.waits) {
      if (slot == nullptr && tw.owner_hash == 0) slot = &tw;
    }
    if (slot == nullptr) slot = &slots.waits[slots.next_wait++ % slots.waits.size()];
    *slot = thread_wait{where, group_waits_detail::hash_of(op.owner) | 1, k.client};
  }
}

}  // namespace lockscope::locks
