// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The connection table: a connection's texts and address, what names it (holders,
// waiters), and what its end means (its subscriptions end, its waiters give up).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// The subscriber connection's entry while it is open; nullptr once it has ended.
inline connection_info* lock_timeline::impl::open_connection(std::uint64_t id) {
  if (id == 0) return nullptr;
  const auto it = connection_ids.find(id);
  if (it == connection_ids.end() || !connections[it->second].open) return nullptr;
  return &connections[it->second];
}

inline std::uint32_t lock_timeline::impl::conn_index(const lock_operation& op) {
  if (last_conn_ != no_id && connections[last_conn_].id == op.connection) return last_conn_;
  last_conn_ = conn_lookup(op);
  // Noted on a change of connection only (not each operation's cost): a connection's
  // database changes only by a SELECT.
  connections[last_conn_].database_guessed = op.db < 0;
  return last_conn_;
}

inline std::uint32_t lock_timeline::impl::conn_lookup(const lock_operation& op) {
  auto [it, inserted] = connection_ids.try_emplace(op.connection, 0);
  if (inserted) {
    if (free_connections.empty()) {
      it->second = static_cast<std::uint32_t>(connections.size());
      connections.emplace_back();
    } else {
      it->second = free_connections.back();
      free_connections.pop_back();
    }
    connection_info& c = connections[it->second];
    c.client = texts.id(op.client_text);
    c.server = texts.id(op.server_text);
    texts.retain(c.client);
    texts.retain(c.server);
    c.ip = address_of(op.client);
    c.has_client_address = op.client != nullptr;
    if (op.client != nullptr) c.client_address = *op.client;
    c.has_server_address = op.server != nullptr;
    if (op.server != nullptr) c.server_address = *op.server;
    c.id = op.connection;
  }
  return it->second;
}

inline void lock_timeline::impl::retain_connection(std::uint32_t conn) noexcept {
  if (conn != no_id) ++connections[conn].refs;
}

inline void lock_timeline::impl::release_connection(std::uint32_t conn) {
  if (conn == no_id) return;
  connection_info& c = connections[conn];
  if (--c.refs == 0 && !c.open) free_connection(conn);
}

inline void lock_timeline::impl::free_connection(std::uint32_t conn) {
  connection_info& c = connections[conn];
  connection_ids.erase(c.id);
  texts.release(c.client);
  texts.release(c.server);
  std::vector<connection_info::subscription> records = std::move(c.subscriptions);
  c.subscriptions = {};
  for (const auto& sub : records) {
    owners.release(sub.owner);
    if (sub.owner != no_id) unindex_subscriber(conn, sub.client);
  }
  for (const auto& lo : c.last_owners) owners.release(lo.owner);
  c = connection_info{};
  free_connections.push_back(conn);
  if (last_conn_ == conn) last_conn_ = no_id;
}

// The connection has ended: it subscribes to nothing any more, and is freed unless a
// holder or waiter still names it.
inline void lock_timeline::impl::connection_ended(std::uint64_t connection, std::int64_t at) {
  const auto it = connection_ids.find(connection);
  if (it == connection_ids.end()) return;
  const std::uint32_t conn = it->second;
  connection_info& c = connections[conn];
  c.open = false;
  for (const auto& p : c.partners) {
    if (p.episodes > 0) forget_subscriber(p.client, connection);
  }
  std::vector<connection_info::subscription> records = std::move(c.subscriptions);
  c.subscriptions = {};
  for (const auto& sub : records) {
    owners.release(sub.owner);
    if (sub.owner != no_id) unindex_subscriber(conn, sub.client);
    if (sub.active) subscription_ended(sub.lock, connection, at);
  }
  // Its waiters gave up. A waiter names the connection (refs): it stays until the last
  // one is dropped, so `c` stays valid until then.
  // A lock is listed once per waiter: each is visited once, in the order listed, and its
  // waiters of this connection leave in one pass (one by one cost a scan and a shift
  // each: minutes for a connection with thousands of waiters).
  std::vector<std::uint32_t> waits = std::move(c.waits);
  c.waits = {};
  if (waits.size() > 1) {
    std::unordered_set<std::uint32_t> seen;
    std::erase_if(waits, [&](std::uint32_t lock) { return !seen.insert(lock).second; });
  }
  retain_connection(conn);
  for (const std::uint32_t lock : waits) {
    lock_state& l = locks[lock];
    if (!has_extra(l)) continue;
    remove_waiters(*xp(l), [&](const waiter& w) { return w.conn == conn && !waits_on_subscription(w, lock, connection); });
    // No schedule(lock): the timer queued is no later than every deadline left (fire()
    // and every deadline set keep it so), and leaving only takes deadlines away; one
    // that fires early finds nothing due and queues the next. schedule() walks every
    // waiter: a herd's connections ending one by one made that quadratic.
  }
  release_connection(conn);
}

// Frees the texts nothing names any more; no view into them may be held.
inline void lock_timeline::impl::collect() {
  owners.collect();
  texts.collect();
}

inline void lock_timeline::impl::name_connection(lock_event& e, std::uint32_t conn) const {
  if (conn == no_id) return;
  const connection_info& c = connections[conn];
  e.client = texts.text(c.client);
  e.server = texts.text(c.server);
  if (c.has_client_address) e.client_endpoint = &c.client_address;
  if (c.has_server_address) e.server_endpoint = &c.server_address;
}

}  // namespace lockscope::locks
