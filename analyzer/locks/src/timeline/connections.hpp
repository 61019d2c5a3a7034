// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The connection table: a connection's texts and address, what names it (holders,
// waiters), and what its end means (its subscriptions end, its waiters give up).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"
#include "timeline/waiter_moved_on.hpp"  // next_attempt_reach_us

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
  connection_info& c = connections[last_conn_];
  c.database_guessed = op.db < 0;
  // (Nothing to note for an unnamed connection whose client is known: the common case.)
  if (!op.client_name.empty() || c.known_client == 0 || c.name != no_id) note_connection_life(last_conn_, op);
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
    c.opened_us = op.opened_us;
    if (op.opened_us >= 0) opened_connections.emplace(op.opened_us, it->second);
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
  // Its name's entry goes with it (a long live capture sees a name per process); another
  // connection of its client brings it back at its next operation. A name found shared
  // by several clients stays so.
  if (c.name != no_id && c.known_client != 0 && !client_of_name.empty()) {
    const auto it = client_of_name.find(texts.text(c.name));
    if (it != client_of_name.end() && it->second == c.known_client) client_of_name.erase(it);
  }
  texts.release(c.name);
  if (c.opened_us >= 0) {
    for (auto [o, end] = opened_connections.equal_range(c.opened_us); o != end; ++o) {
      if (o->second == conn) {
        opened_connections.erase(o);
        break;
      }
    }
  }
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
  // A semaphore's permit waiters are kept by connection, not in connection_ids.
  if (!capture_ending && permits.waiters_on_connection.count(connection) != 0) {
    permit_waiters_connection_closed(connection, at);  // (permits.hpp)
  }
  const auto it = connection_ids.find(connection);
  if (it == connection_ids.end()) return;
  const std::uint32_t conn = it->second;
  outgoing.settle_connection(connection);  // its guessed events: nothing more will tell
  closed_after_cleanup(conn, at);  // (waiter_moved_on.hpp; while the connection is open)
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
  keep_first_listings(waits);  // each lock once, in the order listed (flat_id_map.hpp)
  if (defer_capture_end_waits(conn, at, waits)) waits.clear();  // they leave with the others ending (capture_end.hpp)
  retain_connection(conn);
  std::size_t waiters_kept = 0;  // names of the connection besides its holders
  for (const std::uint32_t lock : waits) {
    lock_state& l = locks[lock];
    if (!has_extra(l)) continue;
    // The waiter of this connection: whether it leaves (said), out of line so the scan
    // of the lock's other waiters stays a compare each (a herd's lock has thousands).
    auto leaves = [&](const waiter& w) __attribute__((noinline)) {
      if (waits_on_subscription(w, lock, connection) || (w.connection_per_attempt && !capture_ending)) {
        ++waiters_kept;
        return false;
      }
      if (capture_ending) return true;  // still waiting when the capture ended
      if (w.cut_pending) {  // a single try read as given up at another value's, not said yet
        say_held_cut(l, w, at);
        return true;
      }
      const bool left = w.left_channel && w.unsubscribed_us >= w.last_attempt_us;
      if (left) {
        report_give_up(l, w, wait_end::unsubscribed, left_until(*xp(l), w), at, false);
        return true;
      }
      // It waited until the close if the close came while it could still be waiting
      // for its next attempt (next_attempt_reach_us, waiter_moved_on.hpp: its cadence
      // or backoff; at once, for a single attempt). A close after that (a process that
      // gave up, then exited or went on with other work; a pool's connection closed at
      // shutdown) is only an upper bound, often late: the wait lasted at least to its
      // last attempt, where most clients log their give-up. Not the TTL of a pub/sub
      // waiter: Redisson's tryLock gives up within it, with nothing on the wire, and
      // its attempts go over a pool's connections (seen: a 1.5 s tryLock on real
      // Redisson 3.27.2 whose pool connection closed 2.5 s later, at shutdown).
      // Nor one whose connection went on to a whole hold of another lock since its latest
      // attempt (moved_on_before_close, waiter_moved_on.hpp).
      // Nor a poller whose last try came early, no spacing shrunk before (last_gap_cut_short): it
      // tried once more at its deadline (@meta-1/nest-common: every 100 ms, given up after 250).
      const bool tried_at_deadline = w.last_gap_cut_short && w.attempts >= 4 && !w.pubsub;
      const bool waited_to_close = at - w.last_attempt_us <= next_attempt_reach_us(w, options.wake_window_us) &&
                                   !moved_on_before_close(w, c) && !tried_at_deadline;
      report_give_up(l, w, wait_end::connection_closed, waited_to_close ? at : w.last_attempt_us, at, !waited_to_close);
      return true;
    };
    lock_extra& x = *xp(l);
    if (x.waiters.size() > scanned_waiters && x.waiters.dormant_count() == 0) {
      remove_waiters_keyed(x, &waiter_keys::by_conn, conn, leaves);  // found by key
    } else {
      remove_waiters(x, [&](const waiter& w) { return w.conn == conn && leaves(w); },
                     [&](const waiter_vector::dormant& d) { return d.conn == conn; });  // only this connection's waiters
    }
    release_closed_holder_if_done(l);
    // No schedule(lock): the timer queued is no later than every deadline left (fire()
    // and every deadline set keep it so), and leaving only takes deadlines away; one
    // that fires early finds nothing due and queues the next. schedule() walks every
    // waiter: a herd's connections ending one by one made that quadratic.
  }
  // What still names it besides this function: its holders, the waiters kept, overlaps.
  std::int64_t named = std::int64_t{connections[conn].refs} - 1 - static_cast<std::int64_t>(waiters_kept);
  for (const suspected_overlap& p : suspected_overlaps) named -= p.conn == conn ? 1 : 0;
  if (named > 0 && !capture_ending) holders_lost_connection(conn, static_cast<std::size_t>(named), at);
  release_connection(conn);
}

// The connection `conn` that took `holders` holds closed at `at`. The lock stays held
// until its lease runs out, unless the holder renews or releases it from another
// connection (a client with a pool may: its process need not have died), so this is
// said as what is known (holder_connection_closed), and the waiters' wait is put down
// to it. Its locks are found among the connection's last owners (the 4 locks it
// acquired or renewed most recently); a connection that held more is rare, and then
// every lock is looked at.
inline void lock_timeline::impl::holders_lost_connection(std::uint32_t conn, std::size_t holders, std::int64_t at) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> held;  // (lock, owner)
  auto look = [&](std::uint32_t id) {
    for_each_holder(locks[id], [&](holder& h) {
      if (h.conn == conn) held.emplace_back(id, h.owner);
    });
  };
  for (const auto& lo : connections[conn].last_owners) {
    if (lo.lock != no_id) look(lo.lock);
  }
  // One order whichever way they were found, each once (last_owners may name a lock twice).
  auto sort_unique = [&] {
    std::sort(held.begin(), held.end());
    held.erase(std::unique(held.begin(), held.end()), held.end());
  };
  sort_unique();
  // Every lock is looked at only for a connection that held a few more than its last
  // owners tell: a scan of every lock at each close of a connection holding hundreds
  // (the keep-up load's 100 connections closing over 100,000 locks) was a fifth of its
  // CPU. A holder not found here is still named when a waiter's wait ends (expire).
  if (held.size() < holders && holders <= options.closed_holders_reported) {
    held.clear();
    locks.for_each_with_id([&](std::uint32_t id, lock_state&, std::string_view) { look(id); });
    sort_unique();
  }
  connections[conn].closed_at_us = at;
  // A connection that held many locks nobody waited for (a batch job, a load generator
  // leaving 20,000 locks each to their lease) is named on the locks someone waits for,
  // and on the first few of the rest: an anomaly per lock would give each one its
  // lock_extra (hundreds of bytes: 330 MB on the offline benchmark's capture). The rest
  // are still known by their holder's connection, and named if a waiter comes (expire).
  std::size_t quiet_reported = 0;
  for (const auto& [id, owner] : held) {
    lock_state& l = locks[id];
    holder* h = find_holder(l, owner);
    // A hold known only from its renewals may have been freed unseen before the close.
    if (h == nullptr || h->ends_unseen()) continue;
    if (!has_extra(l) && quiet_reported++ >= options.closed_holders_reported) continue;
    const std::int64_t left = h->deadline_us >= 0 ? std::max<std::int64_t>(h->lease_end_us() - at, 0) : -1;
    set_closed_holder(l, owner, at);
    anomaly(l, at, anomaly_kind::holder_connection_closed, owner, conn,
            {anomaly_finding::connection_closed_while_holding, left});
  }
}

// Once the closed holder's hold has ended and no waiter is left to name it, it is
// forgotten (its owner's text is released).
// (Inlined: a check at each of a lock's waiters' leaving.)
[[gnu::always_inline]] inline void lock_timeline::impl::release_closed_holder_if_done(lock_state& l) {
  lock_extra* x = xp(l);
  if (x == nullptr || x->closed_owner == no_id || x->closed_expired_us < 0 || !x->waiters.empty()) return;
  owners.release(x->closed_owner);
  x->closed_owner = no_id;
  x->closed_at_us = x->closed_expired_us = -1;
}

inline void lock_timeline::impl::set_closed_holder(lock_state& l, std::uint32_t owner, std::int64_t at) {
  lock_extra& x = ex(l);
  owners.retain(owner);
  owners.release(x.closed_owner);
  x.closed_owner = owner;
  x.closed_at_us = at;
  x.closed_expired_us = -1;
}

// A holder renewed or released its lock over `conn`: when the connection that took it
// had closed, the holder lives on there (a pool's other connection), and it is no
// holder of a closed connection any more.
inline void lock_timeline::impl::holder_acted_elsewhere(lock_state& l, holder& h, std::uint32_t conn) {
  if (h.conn == conn || h.conn == no_id || connections[h.conn].open) return;
  retain_connection(conn);
  release_connection(h.conn);
  h.conn = conn;
  if (lock_extra* x = xp(l); x != nullptr && x->closed_owner == h.owner && x->closed_expired_us < 0) {
    owners.release(x->closed_owner);
    x->closed_owner = no_id;
    x->closed_at_us = -1;
  }
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
