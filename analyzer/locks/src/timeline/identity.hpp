// Part of lock_timeline::impl (its data: timeline_state.hpp).
// A lock's identity: the (server, database) scopes a lock is filed under (Redis Cluster
// nodes linked into one), and finding a lock's id by scope and name.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

inline std::uint32_t lock_timeline::impl::canon(std::uint32_t s) const noexcept {
  if (scope_links == 0) return s;
  while (scopes[s].alias != no_id) s = scopes[s].alias;
  return s;
}

inline std::uint32_t lock_timeline::impl::scope_of(const lock_operation& op) {
  const std::uint32_t s = canon(raw_scope(options.merge_servers ? std::string_view() : op.server_text, op.db < 0 ? 0 : op.db));
  scopes[s].seen = true;
  return s;
}

// Redis Cluster: the two nodes' db-0 scopes become one (the older one stays), and
// the locks filed under the other are found under it from now on.
inline void lock_timeline::impl::link_servers(std::string_view a, std::string_view b) {
  if (options.merge_servers || a.empty() || b.empty()) return;
  const std::uint32_t sa = canon(raw_scope(a, 0));
  const std::uint32_t sb = canon(raw_scope(b, 0));
  if (sa == sb) return;
  const std::uint32_t keep = std::min(sa, sb), gone = std::max(sa, sb);
  scopes[gone].alias = keep;
  ++scope_links;
  scopes[keep].seen = scopes[keep].seen || scopes[gone].seen;
  if (scopes[keep].label.empty()) scopes[keep].label = "cluster:" + scopes[keep].server;
  last_scope = no_id;
  lock_ids.rehash([&](std::uint32_t id) { return lock_hash(canon(lock_store::scope_of(locks[id])), name_of(locks[id])); });
}

[[gnu::always_inline]] inline std::uint32_t lock_timeline::impl::raw_scope(std::string_view server, std::int32_t db) {
  if (last_scope != no_id && scopes[last_scope].db == db && ingest::same_bytes(scopes[last_scope].server, server)) return last_scope;
  return find_scope(server, db);
}

// An unknown database counts as db 0, unless the key is not known there but is known
// in exactly one other database of that server: the traffic says where it lives.
inline std::uint32_t lock_timeline::impl::scope_of_unknown_db(std::uint32_t db0, std::string_view name) const {
  if (find_lock(db0, name) != no_id) return db0;
  const auto it = scope_by_server.find(std::string_view(scopes[db0].server));
  std::uint32_t found = db0;
  for (std::uint32_t raw = it == scope_by_server.end() ? no_id : it->second; raw != no_id; raw = scopes[raw].next) {
    const std::uint32_t s = canon(raw);
    if (s == db0 || find_lock(s, name) == no_id) continue;
    if (found != db0) return db0;  // in several: no telling
    found = s;
  }
  return found;
}

inline std::uint32_t lock_timeline::impl::lock_hash(std::uint32_t where, std::string_view name) noexcept {
  return hash_text(name) ^ (where * 0x9e3779b9u);
}

inline bool lock_timeline::impl::lock_is(std::uint32_t id, std::uint32_t where, std::string_view name) const {
  const lock_store::identity row = lock_store::identity_of(locks[id]);
  return canon(row.scope) == where && ingest::same_bytes(row.name, name);
}

inline std::uint32_t lock_timeline::impl::find_lock(std::uint32_t where, std::string_view name) const {
  return lock_ids.find_if(lock_hash(where, name), [&](std::uint32_t id) { return lock_is(id, where, name); });
}

inline std::string_view lock_timeline::impl::name_of(const lock_state& l) noexcept { return lock_store::name_of(l); }

inline std::uint32_t lock_timeline::impl::lock_id(std::uint32_t where, std::string_view name, std::uint32_t found,
                                                  const lock_slot& slot) {
  if (found != no_id) return found;
  const std::uint32_t id = locks.add(where, name);
  if (id == no_id) return no_id;  // 4 GiB of locks: new locks are not followed
  if (slot.empty != id_table::no_slot) lock_ids.insert_at(slot.empty, id, slot.hash);
  else lock_ids.insert(id, slot.hash);
  return id;
}

}  // namespace lockscope::locks
