#include "lockscope/locks/lock_timeline.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <queue>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "lockscope/lock/naming.hpp"
#include "duration_histogram.hpp"
#include "lock_store.hpp"
#include "text_interner.hpp"
#include "timer_queue.hpp"

namespace lockscope::analyzer {

std::string_view to_string(lock_event_kind k) noexcept {
  static constexpr std::string_view names[] = {
      "acquired", "reentered",       "contended",      "renewed",    "renew_failed",
      "released", "partially_released", "unlock_rejected", "force_released", "expired",
      "subscribed", "notified",      "unsubscribed",   "anomaly",    "quorum",
      "multilock"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(anomaly_kind k) noexcept {
  static constexpr std::string_view names[] = {
      "none",         "expired_while_held", "overlapping_holders", "unlock_by_non_owner", "idle_with_waiters",
      "woken_by_timeout", "late_renewal",   "long_hold",           "non_atomic_acquire",  "quorum_lost",
      "split_quorum"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(link_confidence c) noexcept {
  static constexpr std::string_view names[] = {"none", "certain", "high", "low"};
  return names[static_cast<std::size_t>(c)];
}

namespace {

using namespace timeline_detail;

struct address {
  std::array<std::uint8_t, 16> bytes{};
  std::uint8_t family = 0;
  bool operator==(const address&) const = default;
};

address address_of(const endpoint* e) {
  address a;
  if (e != nullptr) {
    a.bytes = e->address;
    a.family = e->family;
  }
  return a;
}

struct waiter {
  std::uint32_t owner = no_id;
  std::uint32_t conn = no_id;
  std::uint64_t connection = 0;
  std::int64_t first_us = 0;
  std::int64_t last_attempt_us = 0;
  std::uint64_t sub_connection = 0;  // linked subscriber connection; 0 none
  link_confidence confidence = link_confidence::none;
  int attempts_since_subscribe = 0;
  bool notified = false;
  bool timeout_reported = false;
};

// Rarely needed parts, allocated on demand to keep the common lock small.
struct lock_extra {
  std::vector<holder> more_holders;  // read locks, overlaps
  std::vector<waiter> waiters;
  std::int64_t free_since_us = -1;   // when the last holder left (only kept with waiters)
  bool idle_reported = false;
  std::uint64_t anomalies[anomaly_kind_count] = {};
  duration_samples waits;  // their count is the contended acquisitions
};

// What a lock with more than one completed hold adds (common: kept apart from the
// larger lock_extra, which only locks with waiters, several holders or anomalies need).
struct lock_side {
  duration_samples holds;        // every completed hold after the first
  std::uint64_t acquisitions_carry = 0;  // the lock's 16-bit counters overflow here
  std::uint64_t renewals_carry = 0;
  std::uint64_t expiries_carry = 0;
  std::uint32_t extra = no_id;   // index into the extras
};

struct connection_info {
  std::uint32_t client = no_id;  // interned "ip:port"
  std::uint32_t server = no_id;
  address ip;
  std::uint64_t id = 0;
  // Holders and waiters that name it (they print its texts later); a connection is
  // freed once it has ended and nothing names it.
  std::uint32_t refs = 0;
  bool open = true;
  // Lock channels this connection is subscribed to, with the owner linked when it
  // subscribed (reported on notified/unsubscribed).
  struct subscription {
    std::uint32_t lock;
    std::uint32_t owner;
    link_confidence confidence;
  };
  std::vector<subscription> subscriptions;
};

}  // namespace

struct lock_timeline::impl {
  timeline_options options;
  lock_event_sink& sink;
  interner owners;
  interner texts;                     // "ip:port"
  id_table lock_ids;
  lock_store locks;
  holder_pool pool;                   // first holders of held locks
  timer_queue timers;
  std::unordered_map<std::uint64_t, std::uint32_t> connection_ids;
  std::deque<connection_info> connections;
  std::vector<std::uint32_t> free_connections;  // indices of freed entries, reused first
  std::deque<lock_side> sides;
  std::deque<lock_extra> extras;
  std::int64_t now = -1;
  std::int64_t first = -1;
  std::string detail;  // scratch for event details
  // Every (server, database) a lock was seen in; a lock's row names its scope's index.
  // Found through the server's first scope (its others chained), the last one cached.
  struct scope {
    std::string server;  // "" with merge_servers
    std::int32_t db = 0;
    std::uint32_t next = no_id;  // the server's next scope (another database)
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::deque<scope> scopes;
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> scope_by_server;
  std::uint32_t last_scope = no_id;

  impl(const timeline_options& o, lock_event_sink& s) : options(o), sink(s) {}

  // ---- storage ----
  std::uint32_t scope_of(const lock_operation& op) {
    const std::string_view server = options.merge_servers ? std::string_view() : op.server_text;
    const std::int32_t db = op.db < 0 ? 0 : op.db;
    if (last_scope != no_id && scopes[last_scope].db == db && scopes[last_scope].server == server) return last_scope;
    auto it = scope_by_server.find(server);
    if (it == scope_by_server.end()) it = scope_by_server.emplace(std::string(server), no_id).first;
    std::uint32_t* link = &it->second;
    for (; *link != no_id; link = &scopes[*link].next) {
      if (scopes[*link].db == db) return last_scope = *link;
    }
    *link = static_cast<std::uint32_t>(scopes.size());
    scopes.push_back(scope{std::string(server), db, no_id});
    return last_scope = *link;
  }
  // An unknown database counts as db 0, unless the key is not known there but is known
  // in exactly one other database of that server: the traffic says where it lives.
  std::uint32_t scope_of_unknown_db(std::uint32_t db0, std::string_view name) const {
    if (find_lock(db0, name) != no_id) return db0;
    const auto it = scope_by_server.find(std::string_view(scopes[db0].server));
    std::uint32_t found = db0;
    for (std::uint32_t s = it == scope_by_server.end() ? no_id : it->second; s != no_id; s = scopes[s].next) {
      if (s == db0 || find_lock(s, name) == no_id) continue;
      if (found != db0) return db0;  // in several: no telling
      found = s;
    }
    return found;
  }
  static std::uint32_t lock_hash(std::uint32_t where, std::string_view name) noexcept {
    return hash_text(name) ^ (where * 0x9e3779b9u);
  }
  std::uint32_t find_lock(std::uint32_t where, std::string_view name) const {
    return lock_ids.find_if(lock_hash(where, name), [&](std::uint32_t id) {
      return lock_store::scope_of(locks[id]) == where && name_of(locks[id]) == name;
    });
  }
  static std::string_view name_of(const lock_state& l) noexcept { return lock_store::name_of(l); }
  // 16-bit counters in the lock's row, carried into its side record on overflow.
  void count_acquisition(lock_state& l) {
    if (++l.acquisitions == 0) side_of(l).acquisitions_carry += 0x10000;
  }
  void count_renewal(lock_state& l) {
    if (++l.renewals == 0) side_of(l).renewals_carry += 0x10000;
  }
  void count_expiry(lock_state& l) {
    if (++l.expiries == 0) side_of(l).expiries_carry += 0x10000;
  }
  std::uint32_t lock_id(std::uint32_t where, std::string_view name) {
    const std::uint32_t found = find_lock(where, name);
    if (found != no_id) return found;
    const std::uint32_t h = lock_hash(where, name);
    const std::uint32_t id = locks.add(where, name);
    if (id == no_id) return no_id;  // 4 GiB of locks: new locks are not followed
    lock_ids.insert(id, h);
    return id;
  }
  lock_extra& ex(lock_state& l) {
    lock_side& sd = side_of(l);
    if (sd.extra == no_id) {
      sd.extra = static_cast<std::uint32_t>(extras.size());
      extras.emplace_back();
    }
    return extras[sd.extra];
  }
  lock_side& side_of(lock_state& l) {
    if (l.side == no_id) {
      l.side = static_cast<std::uint32_t>(sides.size());
      sides.emplace_back();
    }
    return sides[l.side];
  }
  const lock_side* side_ptr(const lock_state& l) const { return l.side == no_id ? nullptr : &sides[l.side]; }
  bool has_extra(const lock_state& l) const { return l.side != no_id && sides[l.side].extra != no_id; }
  lock_extra* xp(const lock_state& l) { return has_extra(l) ? &extras[sides[l.side].extra] : nullptr; }
  const lock_extra* xp(const lock_state& l) const { return has_extra(l) ? &extras[sides[l.side].extra] : nullptr; }
  void add_hold(lock_state& l, std::int64_t us) {
    if (l.first_hold_us < 0) l.first_hold_us = us;
    else side_of(l).holds.add(us);
  }
  holder* first_holder(lock_state& l) { return l.active == no_id ? nullptr : &pool[l.active]; }
  bool has_holder(const lock_state& l) const { return l.active != no_id; }
  template <class F>
  void for_each_holder(lock_state& l, F&& f) {
    if (l.active == no_id) return;
    f(pool[l.active]);
    if (has_extra(l)) {
      for (holder& h : xp(l)->more_holders) f(h);
    }
  }
  holder* find_holder(lock_state& l, std::uint32_t owner) {
    holder* found = nullptr;
    for_each_holder(l, [&](holder& h) {
      if (found == nullptr && h.owner == owner) found = &h;
    });
    return found;
  }
  // A new holder naming `owner` and `conn` (both retained until it goes).
  holder& add_holder(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
    holder* h;
    if (l.active == no_id) {
      const std::uint32_t slot = pool.acquire();
      l.active = slot;
      h = &pool[slot];
    } else {
      h = &ex(l).more_holders.emplace_back();
    }
    h->owner = owner;
    h->conn = conn;
    owners.retain(owner);
    retain_connection(conn);
    return *h;
  }
  void remove_holder(lock_state& l, holder* h) {
    owners.release(h->owner);
    release_connection(h->conn);
    if (h == &pool[l.active]) {
      if (has_extra(l) && !xp(l)->more_holders.empty()) {
        *h = xp(l)->more_holders.front();
        xp(l)->more_holders.erase(xp(l)->more_holders.begin());
      } else {
        pool.release(l.active);
        l.active = no_id;
      }
      return;
    }
    auto& v = xp(l)->more_holders;
    v.erase(v.begin() + (h - v.data()));
  }
  void clear_holders(lock_state& l) {
    for_each_holder(l, [&](holder& h) {
      owners.release(h.owner);
      release_connection(h.conn);
    });
    if (l.active != no_id) {
      pool.release(l.active);
      l.active = no_id;
    }
    if (has_extra(l)) xp(l)->more_holders.clear();
  }
  waiter* find_waiter(lock_state& l, std::uint32_t owner) {
    if (!has_extra(l)) return nullptr;
    for (waiter& w : xp(l)->waiters) {
      if (w.owner == owner) return &w;
    }
    return nullptr;
  }
  bool has_subscribed_waiter(const lock_state& l) const {
    if (!has_extra(l)) return false;
    for (const waiter& w : xp(l)->waiters) {
      if (w.sub_connection != 0) return true;
    }
    return false;
  }

  std::uint32_t conn_index(const lock_operation& op) {
    if (last_conn_ != no_id && connections[last_conn_].id == op.connection) return last_conn_;
    last_conn_ = conn_lookup(op);
    return last_conn_;
  }
  std::uint32_t last_conn_ = no_id;
  std::uint32_t conn_lookup(const lock_operation& op) {
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
      c.id = op.connection;
    }
    return it->second;
  }
  void retain_connection(std::uint32_t conn) noexcept {
    if (conn != no_id) ++connections[conn].refs;
  }
  void release_connection(std::uint32_t conn) {
    if (conn == no_id) return;
    connection_info& c = connections[conn];
    if (--c.refs == 0 && !c.open) free_connection(conn);
  }
  void free_connection(std::uint32_t conn) {
    connection_info& c = connections[conn];
    connection_ids.erase(c.id);
    texts.release(c.client);
    texts.release(c.server);
    for (const auto& sub : c.subscriptions) owners.release(sub.owner);
    c = connection_info{};
    free_connections.push_back(conn);
    if (last_conn_ == conn) last_conn_ = no_id;
  }
  // The connection has ended: it subscribes to nothing any more, and is freed unless a
  // holder or waiter still names it.
  void connection_ended(std::uint64_t connection) {
    const auto it = connection_ids.find(connection);
    if (it == connection_ids.end()) return;
    const std::uint32_t conn = it->second;
    connection_info& c = connections[conn];
    c.open = false;
    for (const auto& sub : c.subscriptions) owners.release(sub.owner);
    c.subscriptions = {};
    if (c.refs == 0) free_connection(conn);
  }
  // Frees the texts nothing names any more; no view into them may be held.
  void collect() {
    owners.collect();
    texts.collect();
  }
  std::string_view client_of(std::uint32_t conn) const { return conn == no_id ? "" : texts.text(connections[conn].client); }
  std::string_view server_of(std::uint32_t conn) const { return conn == no_id ? "" : texts.text(connections[conn].server); }

  // ---- events ----
  lock_event base(const lock_state& l, std::int64_t ts) const {
    lock_event e;
    e.ts_us = ts;
    e.lock = name_of(l);
    const scope& sc = scopes[lock_store::scope_of(l)];
    e.lock_server = sc.server;
    e.db = sc.db;
    return e;
  }
  lock_event from_op(const lock_state& l, const lock_operation& op, lock_event_kind kind) const {
    lock_event e = base(l, op.at_us());
    e.event = kind;
    e.owner = op.owner;
    e.client = op.client_text;
    e.server = op.server_text;
    e.inferred = op.inferred;
    return e;
  }
  void emit(lock_state& l, lock_event& e) {
    if (e.event == lock_event_kind::anomaly) ++ex(l).anomalies[static_cast<std::size_t>(e.kind)];
    sink.on_event(e);
  }
  void anomaly(lock_state& l, std::int64_t ts, anomaly_kind kind, std::uint32_t owner, std::uint32_t conn,
               std::string_view why, bool inferred = false) {
    lock_event e = base(l, ts);
    e.event = lock_event_kind::anomaly;
    e.kind = kind;
    e.owner = owners.text(owner);
    e.client = client_of(conn);
    e.server = server_of(conn);
    e.detail = why;
    e.inferred = inferred;
    emit(l, e);
  }

  // ---- the clock ----
  // Queues the lock's next timed event unless an earlier entry is already queued (a
  // later deadline is found when that entry fires: renewals push nothing).
  void schedule(std::uint32_t id) {
    lock_state& l = locks[id];
    std::int64_t next = -1;
    auto consider = [&](std::int64_t t) {
      if (t < 0) return;
      t = std::max(t, now);  // already due (e.g. a waiter subscribed to a long-free lock): fire now
      if (next < 0 || t < next) next = t;
    };
    for_each_holder(l, [&](holder& h) {
      consider(h.deadline_us);
      if (!h.long_hold_reported() && h.since_us >= 0 && options.long_hold_us > 0) consider(h.since_us + options.long_hold_us);
    });
    if (!has_holder(l) && has_extra(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported && has_subscribed_waiter(l)) {
      consider(xp(l)->free_since_us + options.idle_threshold_us);
    }
    if (next < 0 || (l.queued_us >= 0 && l.queued_us <= next)) return;
    l.queued_us = next;
    timers.push(timer{next, id});
  }

  void fire(std::uint32_t id, std::int64_t at) {
    lock_state& l = locks[id];
    l.queued_us = -1;
    // Expiries first (in deadline order), then long holds, then idleness.
    for (bool again = true; again;) {
      again = false;
      holder* due = nullptr;
      for_each_holder(l, [&](holder& h) {
        if (h.deadline_us >= 0 && h.deadline_us <= at && (due == nullptr || h.deadline_us < due->deadline_us)) due = &h;
      });
      if (due != nullptr) {
        expire(l, *due, std::max(due->deadline_us, now));  // a deadline set in the past fires now
        again = true;
      }
    }
    for_each_holder(l, [&](holder& h) {
      if (!h.long_hold_reported() && h.since_us >= 0 && options.long_hold_us > 0 && h.since_us + options.long_hold_us <= at) {
        h.set_long_hold_reported();
        detail = "held longer than " + std::to_string(options.long_hold_us / 1000) + " ms";
        anomaly(l, h.since_us + options.long_hold_us, anomaly_kind::long_hold, h.owner, h.conn, detail);
      }
    });
    if (!has_holder(l) && has_extra(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported &&
        has_subscribed_waiter(l) && xp(l)->free_since_us + options.idle_threshold_us <= at) {
      xp(l)->idle_reported = true;
      const waiter* longest = nullptr;
      for (const waiter& w : xp(l)->waiters) {
        if (w.sub_connection != 0 && (longest == nullptr || w.first_us < longest->first_us)) longest = &w;
      }
      detail = "free for " + std::to_string(options.idle_threshold_us / 1000) +
               " ms while a subscribed waiter waits (missed wake-up?)";
      // At the threshold, or now when the waiter only appeared after it had passed.
      anomaly(l, std::max(xp(l)->free_since_us + options.idle_threshold_us, at), anomaly_kind::idle_with_waiters,
              longest->owner, longest->conn, detail);
    }
    schedule(id);
  }

  void advance(std::int64_t to) {
    for (timer t; timers.pop_due(to, t);) {
      if (locks[t.lock].queued_us != t.at_us) continue;  // superseded by an earlier entry
      if (t.at_us > now) now = t.at_us;
      fire(t.lock, t.at_us);
    }
    if (to > now) now = to;
  }

  void became_free(lock_state& l, std::int64_t at) {
    if (!has_holder(l) && has_extra(l)) {
      xp(l)->free_since_us = at;
      xp(l)->idle_reported = false;
    }
  }

  void expire(lock_state& l, holder& h, std::int64_t at) {
    lock_event e = base(l, at);
    e.event = lock_event_kind::expired;
    e.owner = owners.text(h.owner);
    e.client = client_of(h.conn);
    e.server = server_of(h.conn);
    e.lease_ms = h.lease_ms;
    e.hold_count = 0;
    if (h.since_us >= 0) {
      e.held_us = at - h.since_us;
      add_hold(l, e.held_us);
    }
    count_expiry(l);
    set_last_expired(l, h.owner);
    remove_holder(l, &h);
    became_free(l, at);
    emit(l, e);
  }

  void set_last_expired(lock_state& l, std::uint32_t owner) {
    owners.retain(owner);
    owners.release(l.last_expired);
    l.last_expired = owner;
  }
  bool take_expired(lock_state& l, std::uint32_t owner) {
    if (l.last_expired != owner || owner == no_id) return false;
    set_last_expired(l, no_id);
    return true;
  }

  // ---- operations ----
  // An acquisition attempt by a waiter that already failed before: a retry.
  void retry(lock_state& l, waiter& w, std::int64_t at) {
    if (w.sub_connection != 0) {
      if (w.attempts_since_subscribe >= 1 && !w.notified && !w.timeout_reported) {
        w.timeout_reported = true;  // once per wait: a client may then retry in a tight loop
        anomaly(l, at, anomaly_kind::woken_by_timeout, w.owner, w.conn,
                "retried with no notification since the previous attempt");
      }
      ++w.attempts_since_subscribe;
    }
    w.notified = false;
    w.last_attempt_us = at;
  }

  // The client part of a Redisson owner id (`<uuid>:<thread>` → uuid): the owners of
  // one client share its subscriber connection. Empty for other owners.
  static std::string_view client_part(std::string_view owner) {
    const std::size_t colon = owner.find(':');
    if (colon == std::string_view::npos || !lock::is_uuid(owner.substr(0, colon))) return {};
    return owner.substr(0, colon);
  }
  bool same_client(std::uint32_t a, std::uint32_t b) const {
    if (a == no_id || b == no_id) return false;
    const std::string_view ca = client_part(owners.text(a));
    return !ca.empty() && ca == client_part(owners.text(b));
  }

  // A waiter whose client (same Redisson UUID) already has a subscription on the
  // lock's channel: Redisson shares one subscription among a client's threads.
  void link_existing_subscription(std::uint32_t lock, waiter& w) {
    for (const connection_info& c : connections) {
      for (const auto& sub : c.subscriptions) {
        if (sub.lock == lock && same_client(sub.owner, w.owner)) {
          w.sub_connection = c.id;
          w.confidence = c.id == w.connection ? link_confidence::certain : link_confidence::high;
          return;
        }
      }
    }
  }

  void on_acquire(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    const std::uint32_t owner = owners.id(op.owner);
    const std::int64_t at = op.at_us();
    if (op.outcome == op_outcome::contended) {
      waiter* w = find_waiter(l, owner);
      if (w == nullptr) {
        lock_extra& x = ex(l);
        if (!has_holder(l) && x.waiters.empty()) x.free_since_us = -1;  // free since unknown
        w = &x.waiters.emplace_back();
        w->owner = owner;
        w->conn = conn;
        owners.retain(owner);
        retain_connection(conn);
        w->connection = op.connection;
        w->first_us = op.request_us;
        w->last_attempt_us = at;
        link_existing_subscription(id, *w);
      } else {
        retry(l, *w, at);
      }
      lock_event e = from_op(l, op, lock_event_kind::contended);
      e.ttl_ms = op.ttl_ms;
      emit(l, e);
      schedule(id);
      return;
    }
    if (op.outcome != op_outcome::ok) return;

    if (holder* h = find_holder(l, owner); h != nullptr && !op.shared && op.family != lock_family::setnx &&
                                           op.family != lock_family::set_based) {
      h->reenter();
      if (op.lease_ms >= 0) h->set_lease(op, at);
      lock_event e = from_op(l, op, lock_event_kind::reentered);
      e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
      e.lease_ms = op.lease_ms;
      emit(l, e);
      schedule(id);
      return;
    }
    // Other holders: either their lease has run out (we had not seen it yet), or
    // two owners hold an exclusive lock at once.
    if (!op.shared) {
      for (bool again = true; again;) {
        again = false;
        holder* stale = nullptr;
        for_each_holder(l, [&](holder& h) {
          if (stale == nullptr && h.owner != owner && h.floor_us() >= 0 && at >= h.floor_us()) stale = &h;
        });
        if (stale != nullptr) {
          expire(l, *stale, at);
          again = true;
        }
      }
      std::uint32_t other = no_id;
      for_each_holder(l, [&](holder& h) {
        if (h.owner != owner && other == no_id) other = h.owner;
      });
      if (other != no_id) {
        detail = "acquired while " + std::string(owners.text(other)) + " still holds it";
        anomaly(l, at, anomaly_kind::overlapping_holders, owner, conn, detail, op.inferred);
      }
    }
    std::int64_t wait = -1;
    if (waiter* w = find_waiter(l, owner)) {
      retry(l, *w, at);
      wait = at - w->first_us;
      auto& ws = xp(l)->waiters;
      owners.release(w->owner);
      release_connection(w->conn);
      ws.erase(ws.begin() + (w - ws.data()));
    }
    take_expired(l, owner);
    holder& h = add_holder(l, owner, conn);
    h.set_hold_count(1);
    h.since_us = at;
    h.last_renew_us = at;
    if (op.lease_ms >= 0) h.set_lease(op, at);
    if (has_extra(l)) xp(l)->free_since_us = -1;
    count_acquisition(l);
    if (wait >= 0) {
      ex(l).waits.add(wait);
    }
    lock_event e = from_op(l, op, lock_event_kind::acquired);
    e.hold_count = 1;
    e.lease_ms = op.lease_ms;
    e.wait_us = wait;
    e.token = op.token;
    emit(l, e);
    if (op.family == lock_family::setnx) {
      anomaly(l, at, anomaly_kind::non_atomic_acquire, owner, conn,
              "SETNX: the expiry is not set atomically with the lock", op.inferred);
    }
    schedule(id);
  }

  void rejected_by_owner(lock_state& l, std::uint32_t owner, std::uint32_t conn, std::int64_t at, bool inferred,
                         bool renew) {
    holder* mine = find_holder(l, owner);
    if (take_expired(l, owner) || mine != nullptr) {
      if (mine != nullptr) {
        // Our deadline (reply + lease) was later than the server's: it is gone now.
        remove_holder(l, mine);
        became_free(l, at);
      }
      anomaly(l, at, anomaly_kind::expired_while_held, owner, conn,
              renew ? "renewal refused: the lease had already run out" : "unlock refused: the lease had already run out",
              inferred);
      return;
    }
    if (!renew) {
      anomaly(l, at, anomaly_kind::unlock_by_non_owner, owner, conn,
              has_holder(l) ? "unlock by an owner that does not hold the lock" : "unlock of a lock nobody holds",
              inferred);
    }
  }

  void on_unlock(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    const std::uint32_t owner = owners.id(op.owner);
    const std::int64_t at = op.at_us();
    holder* h = find_holder(l, owner);
    auto release_holder = [&] {
      lock_event e = from_op(l, op, lock_event_kind::released);
      e.hold_count = 0;
      if (h != nullptr) {
        if (h->since_us >= 0) {
          e.held_us = at - h->since_us;
          add_hold(l, e.held_us);
        }
        remove_holder(l, h);
      }
      return e;
    };
    switch (op.outcome) {
      case op_outcome::ok: {
        lock_event e = release_holder();
        became_free(l, at);
        emit(l, e);
        break;
      }
      case op_outcome::partial: {
        // A read unlock answers 0 while any read hold remains, other readers' included:
        // a reader's last level is its release even though the lock stays held.
        if (op.shared && h != nullptr && h->hold_count() <= 1) {
          lock_event e = release_holder();
          emit(l, e);
          break;
        }
        lock_event e = from_op(l, op, lock_event_kind::partially_released);
        if (h == nullptr) {
          h = &add_holder(l, owner, conn);
          if (has_extra(l)) xp(l)->free_since_us = -1;
        } else if (h->hold_count() > 1) {
          h->set_hold_count(h->hold_count() - 1);
        }
        if (op.lease_ms >= 0) h->set_lease(op, at);
        e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
        emit(l, e);
        break;
      }
      case op_outcome::rejected:
      case op_outcome::expired: {
        lock_event e = from_op(l, op, lock_event_kind::unlock_rejected);
        emit(l, e);
        rejected_by_owner(l, owner, conn, at, op.inferred, false);
        break;
      }
      default:
        return;
    }
    schedule(id);
  }

  void on_renew(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    const std::uint32_t owner = owners.id(op.owner);
    const std::int64_t at = op.at_us();
    lock_event e = from_op(l, op, lock_event_kind::renewed);
    e.lease_ms = op.lease_ms;
    if (op.outcome == op_outcome::ok) {
      holder* h = find_holder(l, owner);
      if (h == nullptr) {
        take_expired(l, owner);
        h = &add_holder(l, owner, conn);
        if (has_extra(l)) xp(l)->free_since_us = -1;
      } else if (op.family != lock_family::set_based && op.family != lock_family::redlock_multi && op.lease_ms > 0 &&
                 h->last_renew_us >= 0) {
        const std::int64_t gap = at - h->last_renew_us;
        const double limit = options.late_renewal_factor * static_cast<double>(op.lease_ms) * 1000.0 / 3.0;
        if (static_cast<double>(gap) > limit) {
          detail = "renewed " + std::to_string(gap / 1000) + " ms after the previous renewal (expected every " +
                   std::to_string(op.lease_ms / 3) + " ms)";
          anomaly(l, at, anomaly_kind::late_renewal, owner, conn, detail, op.inferred);
        }
      }
      h->last_renew_us = at;
      if (op.lease_ms >= 0) h->set_lease(op, at);
      e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
      count_renewal(l);
      emit(l, e);
    } else if (op.outcome == op_outcome::rejected) {
      e.event = lock_event_kind::renew_failed;
      emit(l, e);
      rejected_by_owner(l, owner, conn, at, op.inferred, true);
    } else {
      return;
    }
    schedule(id);
  }

  // Plain EXPIRE/PEXPIRE/DEL on a key that is a held lock (SETNX pattern, old Redisson).
  void on_plain(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    holder* h = first_holder(l);
    if (h == nullptr || op.outcome != op_outcome::ok) return;
    const std::int64_t at = op.at_us();
    lock_event e = from_op(l, op, lock_event_kind::renewed);
    e.owner = owners.text(h->owner);
    if (op.kind == lock_op_kind::expire) {
      h->set_lease(op, at);
      h->last_renew_us = at;
      e.lease_ms = op.lease_ms;
      e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
      count_renewal(l);
      emit(l, e);
    } else {
      e.event = lock_event_kind::released;
      e.hold_count = 0;
      if (h->since_us >= 0) {
        e.held_us = at - h->since_us;
        add_hold(l, e.held_us);
      }
      clear_holders(l);  // every holder is gone with the key
      became_free(l, at);
      emit(l, e);
    }
    schedule(id);
  }

  void on_force_unlock(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    if (op.outcome != op_outcome::ok) return;
    const std::int64_t at = op.at_us();
    lock_event e = from_op(l, op, lock_event_kind::force_released);
    e.owner = {};
    e.hold_count = 0;
    if (holder* h = first_holder(l)) {
      e.owner = owners.text(h->owner);
      if (h->since_us >= 0) {
        e.held_us = at - h->since_us;
        add_hold(l, e.held_us);
      }
    }
    clear_holders(l);
    became_free(l, at);
    emit(l, e);
    schedule(id);
  }

  void on_subscribe(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    const address ip = connections[conn].ip;
    const std::int64_t at = op.at_us();
    // Link the most recent unlinked waiter of this lock from the same client IP.
    waiter* best = nullptr;
    int candidates = 0;
    if (has_extra(l)) {
      for (waiter& w : xp(l)->waiters) {
        if (w.sub_connection != 0 || !(connections[w.conn].ip == ip) || at - w.last_attempt_us > options.link_window_us) {
          continue;
        }
        ++candidates;
        if (best == nullptr || w.connection == op.connection || w.last_attempt_us > best->last_attempt_us) best = &w;
      }
    }
    link_confidence conf = link_confidence::none;
    std::uint32_t owner = no_id;
    if (best != nullptr) {
      conf = best->connection == op.connection ? link_confidence::certain
             : candidates == 1                 ? link_confidence::high
                                               : link_confidence::low;
      best->sub_connection = op.connection;
      best->confidence = conf;
      best->attempts_since_subscribe = 0;
      best->notified = false;
      owner = best->owner;
      // Other waiters of the same client share the subscription.
      for (waiter& w : xp(l)->waiters) {
        if (&w != best && w.sub_connection == 0 && same_client(w.owner, owner)) {
          w.sub_connection = op.connection;
          w.confidence = conf;
        }
      }
    }
    connections[conn].subscriptions.push_back({id, owner, conf});
    owners.retain(owner);
    lock_event e = from_op(l, op, lock_event_kind::subscribed);
    e.owner = owners.text(owner);
    e.confidence = conf;
    emit(l, e);
    schedule(id);
  }

  void on_message(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    conn_index(op);
    waiter* woken = nullptr;
    if (has_extra(l)) {
      for (waiter& w : xp(l)->waiters) {
        if (w.sub_connection != op.connection) continue;
        w.notified = true;
        if (woken == nullptr || w.first_us < woken->first_us) woken = &w;
      }
    }
    lock_event e = from_op(l, op, lock_event_kind::notified);
    e.owner = {};
    if (woken != nullptr) {
      e.owner = owners.text(woken->owner);
      e.confidence = woken->confidence;
    }
    emit(l, e);
  }

  void on_unsubscribe(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    connection_info& c = connections[conn_index(op)];
    lock_event e = from_op(l, op, lock_event_kind::unsubscribed);
    e.owner = {};
    for (auto it = c.subscriptions.begin(); it != c.subscriptions.end(); ++it) {
      if (it->lock == id) {
        e.owner = owners.text(it->owner);
        e.confidence = it->confidence;
        owners.release(it->owner);  // freed by the next collect(): the view stays valid until then
        c.subscriptions.erase(it);
        break;
      }
    }
    // Waiters still linked to it gave up (Redisson unsubscribes when its last waiter leaves).
    if (has_extra(l)) {
      auto& ws = xp(l)->waiters;
      ws.erase(std::remove_if(ws.begin(), ws.end(),
                              [&](const waiter& w) {
                                if (w.sub_connection != op.connection) return false;
                                owners.release(w.owner);
                                release_connection(w.conn);
                                return true;
                              }),
               ws.end());
    }
    emit(l, e);
    schedule(id);
  }

  void on_operation(const lock_operation& op) {
    handle(op);
    collect();
  }
  void handle(const lock_operation& op) {
    if (op.lock.empty()) return;
    const std::int64_t at = op.at_us();
    if (first < 0) first = op.request_us;
    advance(at);
    // Plain commands only matter for keys already known as locks.
    std::uint32_t where = scope_of(op);
    if (op.db < 0) where = scope_of_unknown_db(where, op.lock);
    if (op.kind == lock_op_kind::expire || op.kind == lock_op_kind::del) {
      const std::uint32_t id = find_lock(where, op.lock);
      if (id != no_id) on_plain(id, op);
      return;
    }
    const std::uint32_t id = lock_id(where, op.lock);
    if (id == no_id) return;
    switch (op.kind) {
      case lock_op_kind::acquire: on_acquire(id, op); break;
      case lock_op_kind::unlock: on_unlock(id, op); break;
      case lock_op_kind::renew: on_renew(id, op); break;
      case lock_op_kind::force_unlock: on_force_unlock(id, op); break;
      case lock_op_kind::subscribe: on_subscribe(id, op); break;
      case lock_op_kind::unsubscribe: on_unsubscribe(id, op); break;
      case lock_op_kind::message: on_message(id, op); break;
      default: break;
    }
  }
};

lock_timeline::lock_timeline(const timeline_options& options, lock_event_sink& sink)
    : impl_(std::make_unique<impl>(options, sink)) {}
lock_timeline::~lock_timeline() = default;

void lock_timeline::on_operation(const lock_operation& op) { impl_->on_operation(op); }
void lock_timeline::on_connection_end(std::uint64_t connection, std::int64_t) {
  impl_->connection_ended(connection);
  impl_->collect();
}
void lock_timeline::advance_to(std::int64_t now_us) {
  impl_->advance(now_us);
  impl_->collect();
}
timeline_memory lock_timeline::memory() const noexcept {
  timeline_memory m;
  m.owners = impl_->owners.live();
  m.endpoint_texts = impl_->texts.live();
  m.connections = impl_->connection_ids.size();
  m.text_bytes = impl_->owners.text_bytes() + impl_->texts.text_bytes();
  m.arena_bytes = impl_->owners.arena_bytes() + impl_->texts.arena_bytes();
  return m;
}
std::int64_t lock_timeline::now_us() const noexcept { return impl_->now; }
std::int64_t lock_timeline::first_us() const noexcept { return impl_->first; }
std::size_t lock_timeline::lock_count() const noexcept { return impl_->locks.size(); }
std::size_t lock_timeline::scope_count() const noexcept { return impl_->scopes.size(); }

void lock_timeline::for_each_lock_name(const std::function<void(std::string_view)>& f) const {
  impl_->locks.for_each([&](const lock_state&, std::string_view name) { f(name); });
}

std::size_t lock_timeline::longest_lock_name() const noexcept { return impl_->locks.longest_name(); }

void lock_timeline::for_each_lock(const std::function<void(std::string_view, const lock_stats&)>& f) const {
  for_each_lock(0, 1, f);
}

void lock_timeline::for_each_lock(std::size_t part, std::size_t parts,
                                  const std::function<void(std::string_view, const lock_stats&)>& f) const {
  if (parts == 0 || part >= parts) throw std::invalid_argument("lock_timeline::for_each_lock: part out of range");
  static const duration_samples none;
  std::vector<std::int64_t> scratch;
  std::vector<std::int64_t> hold_us;
  impl_->locks.for_each(part, parts, [&](const lock_state& l, std::string_view name) {
    const lock_extra* x = impl_->xp(l);
    const lock_side* sd = impl_->side_ptr(l);
    const duration_samples& holds = sd != nullptr ? sd->holds : none;
    const duration_samples& waits = x != nullptr ? x->waits : none;
    lock_stats s;
    const impl::scope& sc = impl_->scopes[lock_store::scope_of(l)];
    s.server = sc.server;
    s.db = sc.db;
    s.acquisitions = l.acquisitions + (sd != nullptr ? sd->acquisitions_carry : 0);
    s.contended_acquisitions = waits.count();
    s.renewals = l.renewals + (sd != nullptr ? sd->renewals_carry : 0);
    s.expiries = l.expiries + (sd != nullptr ? sd->expiries_carry : 0);
    if (x != nullptr) std::copy(std::begin(x->anomalies), std::end(x->anomalies), std::begin(s.anomalies));
    s.hold = holds.summarize(l.first_hold_us, scratch);
    s.wait = waits.summarize(-1, scratch);
    hold_us.clear();
    if (s.hold.exact) {
      if (l.first_hold_us >= 0) hold_us.push_back(l.first_hold_us);
      hold_us.insert(hold_us.end(), holds.samples().begin(), holds.samples().end());
    }
    s.hold_us = hold_us;
    s.wait_us = waits.samples();
    f(name, s);
  });
}

}  // namespace lockscope::analyzer
