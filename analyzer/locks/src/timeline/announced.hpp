// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Announced operations (lock_timeline::will_handle): their lookups done ahead, in
// passes whose cache misses overlap, and taken by handle() when still valid.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// Queues `ops` behind those announced before (while there is room; the ones left
// out are handled without their announcement).
inline void lock_timeline::impl::will_handle(std::span<const lock_operation> ops) noexcept {
  if (upcoming_head > 0) {  // the ones still to come to the front
    std::copy(upcoming.begin() + upcoming_head, upcoming.begin() + upcoming_tail, upcoming.begin());
    upcoming_tail -= upcoming_head;
    upcoming_head = 0;
  }
  const std::size_t queued = upcoming_tail;
  for (const lock_operation& op : ops) {
    if (upcoming_tail == announced_capacity) break;
    announced& a = upcoming[upcoming_tail++];
    a = announced{};
    a.op = &op;
    if (op.lock.empty() || op.kind == lock_op_kind::cluster_link) continue;
    a.where = known_scope(op);
    if (a.where == no_id) continue;
    a.server = op.server_text.data();
    a.server_size = static_cast<std::uint32_t>(op.server_text.size());
    a.db = op.db;
    a.scope_links = scope_links;
    a.hash = lock_hash(a.where, op.lock);
    a.lock_text = op.lock.data();
    a.lock_size = static_cast<std::uint32_t>(op.lock.size());
    lock_ids.prefetch(a.hash);
  }
  for (std::size_t i = queued; i < upcoming_tail; ++i) {
    announced& a = upcoming[i];
    if (a.where == no_id) continue;
    a.generation = lock_ids.generation();
    a.id = lock_ids.first_with_hash(a.hash);
  }
  // The passes over rows and holders take no branch on what they load: a branch that
  // waits for a miss and is mispredicted (does the name reach the next line? is the
  // lock held?) throws away the loads issued after it, and the misses come one by one
  // (the replay spent ~130 ns an operation here). So both ends of each record are read
  // whatever lines they are on, and an unheld lock reads the pool's first slot instead.
  for (std::size_t i = queued; i < upcoming_tail; ++i) {
    const announced& a = upcoming[i];
    if (a.id == no_id) continue;
    // The row, and its name's end (a short scope index and name length: 2 bytes of varints).
    touched += touch_ends(&locks[a.id], sizeof(lock_state) + 2 + a.op->lock.size());
  }
  if (pool.empty()) return;
  for (std::size_t i = queued; i < upcoming_tail; ++i) {
    const announced& a = upcoming[i];
    if (a.id == no_id) continue;
    const std::uint32_t active = locks[a.id].active;
    touched += touch_ends(&pool[active != no_id ? active : 0], sizeof(holder));
  }
}

// The announcement of `op` when it is the next one announced (else they are all
// dropped: the caller delivers other operations than it announced).
inline auto lock_timeline::impl::take_announced(const lock_operation& op) noexcept -> const announced* {
  if (upcoming_head == upcoming_tail) return nullptr;
  const announced& a = upcoming[upcoming_head];
  if (a.op != &op) {
    upcoming_head = upcoming_tail = 0;
    return nullptr;
  }
  ++upcoming_head;
  return &a;  // its entry is reused only by a later will_handle()
}

// The scope scope_of(op) gives, when `a` resolved it from the same texts (the same
// bytes: an announced operation's texts do not change before its delivery) and no
// scopes were linked since; no_id otherwise.
inline std::uint32_t lock_timeline::impl::announced_scope(const announced* a, const lock_operation& op) noexcept {
  if (a == nullptr || a->where == no_id || a->server != op.server_text.data() ||
      a->server_size != op.server_text.size() || a->db != op.db || a->scope_links != scope_links) {
    return no_id;
  }
  scopes[a->where].seen = true;
  return a->where;
}

// The lock find_lock(where, name) gives, taken from the announcement when it can. When
// it is not there, `slot` says where lock_id() puts it: the name is hashed once, by the
// announcement when it hashed this name under this scope (the hash depends on nothing
// else; the name's bytes, like the server's, do not change before delivery, and one of
// another size is another name), and probed for once.
inline std::uint32_t lock_timeline::impl::find_announced(const announced* a, std::uint32_t where, std::string_view name,
                                                         lock_slot& slot) const {
  const bool same_scope = a != nullptr && a->where != no_id && a->where == where;
  if (same_scope && a->id != no_id && a->generation == lock_ids.generation() && lock_is(a->id, where, name)) {
    return a->id;
  }
  const bool same_name = same_scope && a->lock_text == name.data() && a->lock_size == name.size();
  slot.hash = same_name ? a->hash : lock_hash(where, name);
  return lock_ids.find_if_slot(slot.hash, [&](std::uint32_t id) { return lock_is(id, where, name); }, slot.empty);
}

// Reads the first and last bytes of [p, p + bytes) (at most two cache lines).
inline unsigned lock_timeline::impl::touch_ends(const void* p, std::size_t bytes) noexcept {
  const auto* c = static_cast<const volatile unsigned char*>(p);
  return c[0] + c[bytes - 1];
}

// The scope handle() would file `op` under, when it is the last one used (read only).
inline std::uint32_t lock_timeline::impl::known_scope(const lock_operation& op) const noexcept {
  if (last_scope == no_id) return no_id;
  const scope& s = scopes[last_scope];
  if (s.db != (op.db < 0 ? 0 : op.db) || !ingest::same_bytes(s.server, options.merge_servers ? std::string_view() : op.server_text)) {
    return no_id;
  }
  return canon(last_scope);
}

}  // namespace lockscope::locks
