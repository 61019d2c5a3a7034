#include "lockscope/locks/lock_timeline.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <queue>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>


#include "lockscope/lock/naming.hpp"
#include "lockscope/ingest/short_bytes.hpp"
#include "duration_histogram.hpp"
#include "lock_store.hpp"
#include "stable_vector.hpp"
#include "text_interner.hpp"
#include "timer_queue.hpp"

namespace lockscope::locks {

namespace {

using namespace timeline_detail;

struct address {
  std::array<std::uint8_t, 16> bytes{};
  std::uint8_t family = 0;
  // Two 8-byte compares: the defaulted form called memcmp, a quarter of the time of a
  // herd of subscribed waiters (choose_waiter compares every waiter's address).
  bool operator==(const address& o) const noexcept {
    std::uint64_t a[2], b[2];
    std::memcpy(a, bytes.data(), sizeof a);
    std::memcpy(b, o.bytes.data(), sizeof b);
    return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0 && family == o.family;
  }
  // Equal addresses have equal tags: a waiter keeps its connection's, so a scan of
  // waiters rules most out without reading the connection table.
  std::uint16_t tag() const noexcept {
    std::uint64_t a[2];
    std::memcpy(a, bytes.data(), sizeof a);
    const std::uint64_t h = (a[0] ^ (a[1] * 0x9e3779b97f4a7c15ull) ^ family) * 0xff51afd7ed558ccdull;
    return static_cast<std::uint16_t>(h >> 48);
  }
};

address address_of(const endpoint* e) {
  address a;
  if (e != nullptr) {
    a.bytes = e->address;
    a.family = e->family;
  }
  return a;
}

// One owner waiting for a lock: from its first failed attempt until it acquires or
// shows it gave up (its connection ends, or no attempt comes within the last TTL it
// was given plus timeline_options::waiter_margin_us). Its subscription is a property
// of the wait: it may subscribe, lose the subscription and subscribe again.
struct waiter {
  std::uint64_t seq = 0;             // its lock's count of waiters before it (waiters stay in this order)
  std::uint32_t owner = no_id;
  std::uint32_t conn = no_id;        // the connection of its latest attempt
  std::uint64_t connection = 0;
  std::uint64_t client = 0;          // the client it belongs to (client_key)
  std::int64_t first_us = 0;         // its first failed attempt (request time)
  std::int64_t last_attempt_us = 0;  // its latest attempt (reply time)
  std::int64_t deadline_us = -1;     // it gave up if no attempt comes by then
  std::int64_t last_ttl_us = -1;     // the TTL its latest failed attempt was given
  std::uint64_t sub_connection = 0;  // linked subscriber connection; 0 none
  std::int64_t subscribed_us = -1;   // when that subscription was confirmed
  std::int64_t unsubscribed_us = -1; // when it ended while this waiter waited
  std::int64_t lost_release_us = -1; // a release while it was not subscribed, since its latest attempt
  link_confidence confidence = link_confidence::none;
  std::uint16_t ip_tag = 0;          // its connection's address's tag()
  bool pubsub = false;               // its lock wakes waiters by pub/sub
  bool notified = false;             // woken by a message since its latest attempt
  bool timeout_reported = false;
  bool lost_reported = false;
  bool left_channel = false;         // its own subscription ended by an UNSUBSCRIBE, no sibling sharing it
  // Whether its wait may have begun before the capture (the acquisition's wait_at_least):
  bool mid_stream = false;           // its first attempt seen came on a connection joined mid-stream
  bool quick_second = false;         // its second attempt came at once (a first failure's retry)
  std::uint32_t attempts = 1;
  std::int64_t first_ttl_us = -1;    // the TTL its first attempt seen was given
  std::int64_t longest_gap_us = 0;   // the longest time between two of its attempts seen
};

// Something that wakes a waiter on a subscriber connection (a message on the lock's
// channel; node-redisson's UNSUBSCRIBE before it retries), kept for wake_window_us to
// see which client attempts first: when no other client attempts nearly as soon, that
// client's waiter reacted, and the subscriber is its client's.
struct wake {
  std::int64_t at_us = -1;         // -1: free slot
  std::uint64_t sub = 0;           // the subscriber connection
  std::uint64_t first_client = 0;  // the first client that attempted since; 0 none yet
  std::int64_t first_delay_us = -1;
  std::int64_t other_delay_us = -1;  // the first attempt by another client
  bool message = false;
  bool fanout = false;             // one publish reached several subscribers: no episode
};

// Rarely needed parts, allocated on demand to keep the common lock small.
struct lock_extra {
  std::vector<holder> more_holders;  // read locks, overlaps
  // Owner to position in `more_holders`, for a read lock with many readers; made when
  // first needed, and made again after one leaves once enough lookups have scanned
  // (a reader leaving between every lookup then costs what a scan did, no more).
  std::unordered_map<std::uint32_t, std::uint32_t> holder_index;
  bool holder_index_valid = false;
  std::size_t holder_scans = 0;  // lookups that scanned since the index went stale
  std::vector<waiter> waiters;
  // Owner to seq of its waiter, for a lock with many (a thundering herd when it stalls:
  // 60,000 waiters took 17 s to analyze by scans); made when first needed, then kept up
  // as waiters come and go. `waiters` is in seq order, so a seq's position is a binary
  // search away, whatever left before it.
  std::unordered_map<std::uint32_t, std::uint64_t> waiter_index;
  bool waiter_index_valid = false;
  std::uint64_t next_waiter_seq = 0;
  std::int64_t free_since_us = -1;   // when the last holder left (only kept with waiters)
  std::int64_t last_freed_us = -1;   // when it last went free (released, expired), whoever took it since
  bool idle_reported = false;
  // The longest completed free interval >= idle_threshold that no waiter has yet shown
  // it waited through (its next attempt does); forgotten when the last waiter leaves.
  std::int64_t idle_start_us = -1, idle_end_us = -1;
  std::array<wake, 4> wakes{};
  // The latest SUBSCRIBE whose waiter was a guess among several waiters of its address
  // (link_confidence::low): Redisson's waiter retries right after its SUBSCRIBE is
  // confirmed, and that retry may name it better (retry()). sub == 0: none pending.
  struct guessed_subscribe {
    std::uint64_t sub = 0;
    std::int64_t request_us = -1;
    std::int64_t confirmed_us = -1;
    std::uint32_t owner = no_id;
  } guessed;
  std::int64_t acquired_us = -1;       // the latest acquisition by a subscribed waiter, and by whom
  std::uint64_t acquired_client = 0;
  std::uint32_t acquired_owner = no_id;  // retained
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
  // Its database was not seen (no SELECT since the capture began): counted as db 0.
  bool database_guessed = false;
  // Lock channels this connection is subscribed to, with the owner linked when it
  // subscribed (reported on notified/unsubscribed).
  // Lock channels this connection is subscribed to (active), or was seen leaving
  // (inactive: known not to be subscribed; at most max_inactive kept).
  struct subscription {
    std::uint32_t lock;
    std::uint32_t owner;
    std::uint64_t client;
    link_confidence confidence;
    bool active = true;
  };
  static constexpr std::size_t max_inactive = 8;
  std::vector<subscription> subscriptions;
  // The owners that last acquired or renewed a lock on this connection (the 4 most
  // recent locks): a plain DEL carries no owner, so this says whose it was.
  struct lock_owner {
    std::uint32_t lock = no_id;
    std::uint32_t owner = no_id;
  };
  std::array<lock_owner, 4> last_owners{};
  // Locks where a waiter's latest attempt came over this connection (one entry a
  // waiter): they give up when it ends.
  std::vector<std::uint32_t> waits;
  // As a subscriber connection: the clients whose attempts followed its wake-ups alone
  // (episodes), the evidence of whose subscriber it is.
  struct partner {
    std::uint64_t client = 0;
    std::uint32_t episodes = 0;
  };
  std::array<partner, 3> partners{};
};

// What the traffic says about a subscriber connection belonging to a client.
enum class pairing : std::uint8_t {
  none,          // no episode yet
  consistent,    // its episodes all point to this client, fewer than certain_after
  established,   // at least certain_after episodes, and at most 1 in 8 point elsewhere
  contradicted,  // episodes point to another client
};
constexpr std::uint32_t certain_after = 3;

bool pubsub_family(lock_family f) noexcept {
  return f == lock_family::redisson || f == lock_family::redisson_fair || f == lock_family::redisson_read ||
         f == lock_family::redisson_write || f == lock_family::redisson_fenced;
}

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
  // The connections (indexes) with a record naming an owner of the client: a new
  // waiter finds its client's subscription here, not by walking every connection's
  // records (a herd of 20,000 subscribed waiters: 20,000 walks of 40,000 connections).
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> subscribers_by_client;
  stable_vector<connection_info> connections;
  std::vector<std::uint32_t> free_connections;  // indices of freed entries, reused first
  stable_vector<lock_side> sides;
  stable_vector<lock_extra> extras;
  std::int64_t now = -1;
  std::int64_t first = -1;
  // Exclusive acquisitions while another owner still held the lock, not reported yet:
  // replies on different connections can be captured out of the server's order, so an
  // unlock by that owner sent before this acquisition's reply (its reply captured just
  // after) means the server ran the unlock first. Reported once reply_skew_us passed.
  struct suspected_overlap {
    std::uint32_t lock = no_id, owner = no_id, other = no_id, conn = no_id;
    std::int64_t at = 0;
    bool inferred = false;
    bool database_guessed = false;  // either connection's database was counted as db 0
  };
  std::vector<suspected_overlap> suspected_overlaps;
  // Every (server, database) a lock was seen in; a lock's row names its scope's index.
  // Found through the server's first scope (its others chained), the last one cached.
  struct scope {
    std::string server;  // "" with merge_servers
    std::int32_t db = 0;
    std::uint32_t next = no_id;  // the server's next scope (another database)
    // Redis Cluster: the scope of the cluster this node's scope joined (no_id: it is
    // its own); `label` names a cluster's scope; `seen`: an operation named it (not
    // only a cluster_link).
    std::uint32_t alias = no_id;
    std::string label;
    bool seen = false;
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  stable_vector<scope> scopes;
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> scope_by_server;
  std::uint32_t last_scope = no_id;
  // link_servers' re-filings so far: a scope resolved before one may be stale, and while
  // there are none every scope is its own (canon() has no alias to walk).
  std::uint64_t scope_links = 0;
  // A client's subscriber connection as far as the episodes tell (its best partner);
  // entries go when that connection ends.
  std::unordered_map<std::uint64_t, std::uint64_t> subscriber_of_client;

  impl(const timeline_options& o, lock_event_sink& s) : options(o), sink(s), forget_at(o.max_locks) {}

  // ---- storage ----
  std::uint32_t canon(std::uint32_t s) const noexcept {
    if (scope_links == 0) return s;
    while (scopes[s].alias != no_id) s = scopes[s].alias;
    return s;
  }
  std::uint32_t scope_of(const lock_operation& op) {
    const std::uint32_t s = canon(raw_scope(options.merge_servers ? std::string_view() : op.server_text, op.db < 0 ? 0 : op.db));
    scopes[s].seen = true;
    return s;
  }
  // Redis Cluster: the two nodes' db-0 scopes become one (the older one stays), and
  // the locks filed under the other are found under it from now on.
  void link_servers(std::string_view a, std::string_view b) {
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
  [[gnu::always_inline]] std::uint32_t raw_scope(std::string_view server, std::int32_t db) {
    if (last_scope != no_id && scopes[last_scope].db == db && same_bytes(scopes[last_scope].server, server)) return last_scope;
    return find_scope(server, db);
  }
  [[gnu::noinline]] std::uint32_t find_scope(std::string_view server, std::int32_t db) {
    auto it = scope_by_server.find(server);
    if (it == scope_by_server.end()) it = scope_by_server.emplace(std::string(server), no_id).first;
    std::uint32_t* link = &it->second;
    for (; *link != no_id; link = &scopes[*link].next) {
      if (scopes[*link].db == db) return last_scope = *link;
    }
    *link = static_cast<std::uint32_t>(scopes.size());
    scope fresh;
    fresh.server = std::string(server);
    fresh.db = db;
    scopes.push_back(std::move(fresh));
    return last_scope = *link;
  }
  // An unknown database counts as db 0, unless the key is not known there but is known
  // in exactly one other database of that server: the traffic says where it lives.
  std::uint32_t scope_of_unknown_db(std::uint32_t db0, std::string_view name) const {
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
  static std::uint32_t lock_hash(std::uint32_t where, std::string_view name) noexcept {
    return hash_text(name) ^ (where * 0x9e3779b9u);
  }
  std::uint32_t find_lock(std::uint32_t where, std::string_view name) const {
    return lock_ids.find_if(lock_hash(where, name), [&](std::uint32_t id) {
      const lock_store::identity row = lock_store::identity_of(locks[id]);
      return canon(row.scope) == where && same_bytes(row.name, name);
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
  // `found`: find_lock(where, name).
  std::uint32_t lock_id(std::uint32_t where, std::string_view name, std::uint32_t found) {
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
  // The first holder of `owner`, in for_each_holder's order.
  holder* find_holder(lock_state& l, std::uint32_t owner) {
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
  static constexpr std::size_t scanned_holders = 32;  // more: found by holder_index
  // A new holder naming `owner` and `conn` (both retained until it goes).
  holder& add_holder(lock_state& l, std::uint32_t owner, std::uint32_t conn) {
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
  void remove_holder(lock_state& l, holder* h) {
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
  void clear_holders(lock_state& l) {
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
  static constexpr std::size_t scanned_waiters = 32;  // more: found by waiter_index
  waiter* find_waiter(lock_state& l, std::uint32_t owner) {
    if (!has_extra(l)) return nullptr;
    lock_extra& x = *xp(l);
    if (x.waiters.size() <= scanned_waiters) {
      for (waiter& w : x.waiters) {
        if (w.owner == owner) return &w;
      }
      return nullptr;
    }
    if (!x.waiter_index_valid) {
      x.waiter_index.clear();
      for (const waiter& w : x.waiters) x.waiter_index.emplace(w.owner, w.seq);
      x.waiter_index_valid = true;
    }
    const auto it = x.waiter_index.find(owner);
    if (it == x.waiter_index.end()) return nullptr;
    const auto at = std::lower_bound(x.waiters.begin(), x.waiters.end(), it->second,
                                     [](const waiter& w, std::uint64_t seq) { return w.seq < seq; });
    return at != x.waiters.end() && at->seq == it->second ? &*at : nullptr;
  }
  // `w` leaves its lock's waiters: out of the index, and what it retained released (the
  // caller removes it from the vector).
  void forget_waiter(lock_extra& x, const waiter& w) {
    if (x.waiter_index_valid) {
      const auto it = x.waiter_index.find(w.owner);
      if (it != x.waiter_index.end() && it->second == w.seq) x.waiter_index.erase(it);
    }
    owners.release(w.owner);
    release_connection(w.conn);
  }
  // The subscriber connection's entry while it is open; nullptr once it has ended.
  connection_info* open_connection(std::uint64_t id) {
    if (id == 0) return nullptr;
    const auto it = connection_ids.find(id);
    if (it == connection_ids.end() || !connections[it->second].open) return nullptr;
    return &connections[it->second];
  }
  // The connection's active subscription to the lock's channel.
  static connection_info::subscription* subscription_of(connection_info& c, std::uint32_t lock) {
    connection_info::subscription* s = record_of(c, lock);
    return s != nullptr && s->active ? s : nullptr;
  }
  static connection_info::subscription* record_of(connection_info& c, std::uint32_t lock) {
    for (auto& sub : c.subscriptions) {
      if (sub.lock == lock) return &sub;
    }
    return nullptr;
  }
  // The connection is known not to be subscribed to the lock's channel now: the most
  // recently left channels are remembered, at most max_inactive (a subscriber
  // connection lives as long as its client and may leave a channel per lock).
  void set_inactive(std::uint32_t conn, std::uint32_t lock) {
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
    c.subscriptions.push_back({lock, no_id, 0, link_confidence::none, false});
  }
  // Writes the connection's record of the lock's channel (over `r`, else a new one),
  // keeping subscribers_by_client exact.
  void put_subscription(std::uint32_t conn, connection_info::subscription* r, const connection_info::subscription& v) {
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
  void unindex_subscriber(std::uint32_t conn, std::uint64_t client) {
    for (const auto& sub : connections[conn].subscriptions) {
      if (sub.owner != no_id && sub.client == client) return;
    }
    const auto it = subscribers_by_client.find(client);
    if (it == subscribers_by_client.end()) return;
    std::erase(it->second, conn);
    if (it->second.empty()) subscribers_by_client.erase(it);
  }
  // The waiter's subscriber connection is subscribed to the lock's channel right now.
  bool subscribed(const waiter& w, std::uint32_t lock) {
    connection_info* c = open_connection(w.sub_connection);
    return c != nullptr && subscription_of(*c, lock) != nullptr;
  }
  bool has_subscribed_waiter(lock_state& l, std::uint32_t lock) {
    if (!has_extra(l)) return false;
    for (const waiter& w : xp(l)->waiters) {
      if (subscribed(w, lock)) return true;
    }
    return false;
  }
  // The waiters `leaves` picks leave, in one pass that keeps the others' order (it may
  // update those it keeps).
  template <class Leaves>
  void remove_waiters(lock_extra& x, Leaves&& leaves) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.waiters.size(); ++i) {
      if (leaves(x.waiters[i])) {
        forget_waiter(x, x.waiters[i]);
        continue;
      }
      if (kept != i) x.waiters[kept] = x.waiters[i];
      ++kept;
    }
    if (kept == x.waiters.size()) return;
    x.waiters.resize(kept);
    if (x.waiters.empty()) x.idle_start_us = x.idle_end_us = -1;
  }
  // The waiter leaves (acquired or gave up).
  void drop_waiter(lock_state& l, std::uint32_t lock, waiter* w) {
    auto& ws = xp(l)->waiters;
    const waiter gone = *w;
    ws.erase(ws.begin() + (w - ws.data()));
    unlist_wait(gone.conn, lock);
    forget_waiter(*xp(l), gone);
    if (ws.empty()) xp(l)->idle_start_us = xp(l)->idle_end_us = -1;
  }
  void unlist_wait(std::uint32_t conn, std::uint32_t lock) {
    auto& waits = connections[conn].waits;
    const auto it = std::find(waits.begin(), waits.end(), lock);
    if (it != waits.end()) {
      *it = waits.back();
      waits.pop_back();
    }
  }
  // The waiter's latest attempt came over `conn` (clients with connection pools retry
  // over any of them): the connection whose end means it gave up.
  void move_waiter(waiter& w, std::uint32_t lock, std::uint32_t conn, std::uint64_t connection) {
    if (w.conn == conn) return;
    unlist_wait(w.conn, lock);
    retain_connection(conn);
    release_connection(w.conn);
    w.conn = conn;
    w.ip_tag = connections[conn].ip.tag();
    w.connection = connection;
    connections[conn].waits.push_back(lock);
  }

  std::uint32_t conn_index(const lock_operation& op) {
    if (last_conn_ != no_id && connections[last_conn_].id == op.connection) return last_conn_;
    last_conn_ = conn_lookup(op);
    // Noted on a change of connection only (not each operation's cost): a connection's
    // database changes only by a SELECT.
    connections[last_conn_].database_guessed = op.db < 0;
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
  void connection_ended(std::uint64_t connection, std::int64_t at) {
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
    const lock_store::identity row = lock_store::identity_of(l);
    e.lock = row.name;
    const scope& sc = scopes[canon(row.scope)];
    e.lock_server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
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
    e.asking = op.asking;
    return e;
  }
  // A call the cluster did not run here: shown, and nothing changes (its retry, on the
  // node named or after a pause, is the operation that counts).
  void on_redirect(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    lock_event e = from_op(l, op, lock_event_kind::redirected);
    e.redirect = op.redirect;
    e.slot = op.slot;
    e.redirect_to = op.redirect_to;
    e.operation = op.kind;
    emit(l, e);
    schedule(id);
  }
  void emit(lock_state& l, lock_event& e) {
    if (e.event == lock_event_kind::anomaly) ++ex(l).anomalies[static_cast<std::size_t>(e.kind)];
    sink.on_event(e);
  }
  void anomaly(lock_state& l, std::int64_t ts, anomaly_kind kind, std::uint32_t owner, std::uint32_t conn,
               const anomaly_facts& found, bool inferred = false, std::int64_t interval_start = -1,
               std::int64_t interval = -1) {
    lock_event e = base(l, ts);
    e.event = lock_event_kind::anomaly;
    e.kind = kind;
    e.owner = owners.text(owner);
    e.client = client_of(conn);
    e.server = server_of(conn);
    e.found = found;
    e.inferred = inferred;
    e.interval_start_us = interval_start;
    e.interval_us = interval;
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
    if (has_extra(l)) {
      for (const waiter& w : xp(l)->waiters) consider(w.deadline_us);
      if (!has_holder(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported && has_subscribed_waiter(l, id)) {
        consider(xp(l)->free_since_us + options.idle_threshold_us);
      }
    }
    if (next < 0 || (l.queued_us >= 0 && l.queued_us <= next)) return;
    l.queued_us = next;
    timers.push(timer{next, id});
  }

  // schedule(id) when only one deadline, `t`, changed: the entry queued is no later than
  // every other deadline (schedule() keeps it so, and fire() calls it), so it is enough
  // to queue `t` when it comes first.
  void schedule_at(std::uint32_t id, std::int64_t t) {
    if (t < 0) return;
    lock_state& l = locks[id];
    t = std::max(t, now);
    if (l.queued_us >= 0 && l.queued_us <= t) return;
    l.queued_us = t;
    timers.push(timer{t, id});
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
        expire(l, *due, std::max(due->deadline_us.get(), now));  // a deadline set in the past fires now
        again = true;
      }
    }
    for_each_holder(l, [&](holder& h) {
      if (!h.long_hold_reported() && h.since_us >= 0 && options.long_hold_us > 0 && h.since_us + options.long_hold_us <= at) {
        h.set_long_hold_reported();
        anomaly(l, h.since_us + options.long_hold_us, anomaly_kind::long_hold, h.owner, h.conn,
                {anomaly_finding::held_too_long, options.long_hold_us});
      }
    });
    // Waiters that made no attempt within their last TTL plus the margin gave up.
    if (has_extra(l)) {
      for (std::size_t i = 0; i < xp(l)->waiters.size();) {
        waiter& w = xp(l)->waiters[i];
        if (w.deadline_us >= 0 && w.deadline_us <= at) drop_waiter(l, id, &w);
        else ++i;
      }
    }
    // A subscribed waiter still waits (clients unsubscribe when they give up): the
    // idleness is certain at the threshold, live or not.
    if (!has_holder(l) && has_extra(l) && xp(l)->free_since_us >= 0 && !xp(l)->idle_reported &&
        has_subscribed_waiter(l, id) && xp(l)->free_since_us + options.idle_threshold_us <= at) {
      lock_extra& x = *xp(l);
      x.idle_reported = true;
      const waiter* longest = nullptr;
      for (const waiter& w : x.waiters) {
        if (subscribed(w, id) && (longest == nullptr || w.first_us < longest->first_us)) longest = &w;
      }
      // At the threshold, or now when the waiter only appeared after it had passed.
      const std::int64_t ts = std::max(x.free_since_us + options.idle_threshold_us, at);
      anomaly(l, ts, anomaly_kind::idle_with_waiters, longest->owner, longest->conn,
              {anomaly_finding::idle_while_subscribed_waiter_waits}, false, x.free_since_us,
              ts - x.free_since_us);
    }
    schedule(id);
  }

  [[gnu::always_inline]] void advance(std::int64_t to) {
    for (timer t; timers.pop_due(to, t);) {
      if (locks[t.lock].queued_us != t.at_us) continue;  // superseded by an earlier entry
      report_overlaps(t.at_us);
      if (t.at_us > now) now = t.at_us;
      fire(t.lock, t.at_us);
    }
    if (!suspected_overlaps.empty()) report_overlaps(to);
    if (to > now) now = to;
  }

  // Reports the suspected overlaps certain by `until` (reply_skew_us after their
  // acquisition; `all`: the rest too, now: the capture ended), at that moment: events
  // stay in time order.
  void report_overlaps(std::int64_t until, bool all = false) {
    if (suspected_overlaps.empty()) return;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < suspected_overlaps.size(); ++i) {
      const suspected_overlap p = suspected_overlaps[i];
      const std::int64_t certain = p.at + options.reply_skew_us;
      if (certain > until && !all) {
        suspected_overlaps[kept++] = p;
        continue;
      }
      // The interval: from the acquisition to when it became certain (or the end).
      const std::int64_t ts = certain <= until ? std::max(now, certain) : now;
      // Mid-stream, a connection's SELECT may be before the capture: the same key in two
      // databases would read as one lock held twice.
      const anomaly_finding finding = p.database_guessed ? anomaly_finding::acquired_while_held_db_guessed
                                                         : anomaly_finding::acquired_while_held;
      anomaly(locks[p.lock], ts, anomaly_kind::overlapping_holders, p.owner, p.conn,
              {finding, owners.text(p.other)}, p.inferred, p.at,
              ts - p.at);
      forget_overlap(p);
    }
    suspected_overlaps.resize(kept);
  }
  void forget_overlap(const suspected_overlap& p) {
    owners.release(p.owner);
    owners.release(p.other);
    release_connection(p.conn);
  }
  // `owner` released lock `id` with an unlock sent at request_us: an overlap suspected
  // with an acquisition whose reply came after that was the capture's order, not the
  // server's.
  void released_before(std::uint32_t id, std::uint32_t owner, std::int64_t request_us) {
    std::erase_if(suspected_overlaps, [&](const suspected_overlap& p) {
      if (p.lock != id || p.other != owner || request_us > p.at) return false;
      forget_overlap(p);
      return true;
    });
  }

  void became_free(lock_state& l, std::int64_t at) {
    if (!has_holder(l) && has_extra(l)) {
      lock_extra& x = *xp(l);
      x.free_since_us = at;
      x.last_freed_us = at;
      x.idle_reported = false;
      if (x.acquired_owner != no_id && at - x.acquired_us > options.wake_window_us) {
        owners.release(x.acquired_owner);  // its UNSUBSCRIBE would have come by now
        x.acquired_owner = no_id;
        x.acquired_us = -1;
      }
    }
  }
  // The lock is taken again at `at`: a free interval >= the threshold that no waiter has
  // shown it waited through yet is kept (the longest) for the next attempt to confirm.
  void free_interval_ends(lock_state& l, std::int64_t at) {
    if (!has_extra(l)) return;
    lock_extra& x = *xp(l);
    if (x.free_since_us >= 0 && !x.idle_reported && !x.waiters.empty() &&
        at - x.free_since_us >= options.idle_threshold_us &&
        (x.idle_start_us < 0 || at - x.free_since_us > x.idle_end_us - x.idle_start_us)) {
      x.idle_start_us = x.free_since_us;
      x.idle_end_us = at;
    }
    x.free_since_us = -1;
  }
  // A release that publishes (an unlock, a forced unlock): a waiter of a pub/sub lock
  // that is not subscribed now will not hear it.
  void released_publishing(lock_state& l, std::uint32_t lock, std::int64_t at) {
    if (!has_extra(l)) return;
    for (waiter& w : xp(l)->waiters) {
      if (w.pubsub && w.lost_release_us < 0 && !subscribed(w, lock)) w.lost_release_us = at;
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
  // The client a waiter belongs to: a Redisson-style owner's UUID (its threads share
  // one subscriber connection, whatever command connection they use), else its command
  // connection.
  std::uint64_t client_key(std::uint32_t owner, std::uint64_t connection) const {
    const std::string_view uuid = owner == no_id ? std::string_view() : client_part(owners.text(owner));
    if (uuid.empty()) return (connection & ~(std::uint64_t{3} << 62)) | (std::uint64_t{1} << 62);  // never 0
    return std::hash<std::string_view>{}(uuid) | (std::uint64_t{1} << 63);
  }
  // The client part of a Redisson owner id (`<uuid>:<thread>` → uuid): the owners of
  // one client share its subscriber connection. Empty for other owners.
  static std::string_view client_part(std::string_view owner) {
    const std::size_t colon = owner.find(':');
    if (colon == std::string_view::npos || !lock::is_uuid(owner.substr(0, colon))) return {};
    return owner.substr(0, colon);
  }

  // ---- which subscriber connection is whose ----
  static pairing pairing_of(const connection_info& s, std::uint64_t client) {
    std::uint32_t mine = 0, others = 0;
    for (const auto& p : s.partners) {
      if (p.episodes == 0) continue;
      if (p.client == client) mine = p.episodes;
      else others += p.episodes;
    }
    if (mine == 0 && others == 0) return pairing::none;
    if (mine >= certain_after && others * 8 <= mine) return pairing::established;
    if (others == 0) return pairing::consistent;
    return pairing::contradicted;
  }
  static std::uint64_t best_partner(const connection_info& s) {
    const connection_info::partner* best = nullptr;
    for (const auto& p : s.partners) {
      if (p.episodes > 0 && (best == nullptr || p.episodes > best->episodes)) best = &p;
    }
    return best == nullptr ? 0 : best->client;
  }
  // One episode: `client` alone reacted to a wake-up of subscriber `s` (or alone had
  // just failed when `s` subscribed).
  void learn(connection_info& s, std::uint64_t client) {
    connection_info::partner* slot = nullptr;
    for (auto& p : s.partners) {
      if (p.episodes > 0 && p.client == client) slot = &p;
    }
    if (slot == nullptr) {
      for (auto& p : s.partners) {
        if (slot == nullptr || p.episodes < slot->episodes) slot = &p;
      }
      if (slot->episodes > 0) forget_subscriber(slot->client, s.id);
      *slot = {client, 0};  // the weakest evidence makes room
    }
    if (slot->episodes < 0xffffffffu) ++slot->episodes;
    if (best_partner(s) != client) return;
    // The client's subscriber is the connection with the most episodes for it.
    std::uint64_t& mapped = subscriber_of_client[client];
    if (mapped != s.id) {
      const connection_info* current = open_connection(mapped);
      if (current == nullptr || best_partner(*current) != client || episodes_of(*current, client) < slot->episodes) {
        mapped = s.id;
      }
    }
  }
  static std::uint32_t episodes_of(const connection_info& s, std::uint64_t client) {
    for (const auto& p : s.partners) {
      if (p.episodes > 0 && p.client == client) return p.episodes;
    }
    return 0;
  }
  void forget_subscriber(std::uint64_t client, std::uint64_t sub) {
    const auto found = subscriber_of_client.find(client);
    if (found != subscriber_of_client.end() && found->second == sub) subscriber_of_client.erase(found);
  }
  // The client's episodes point to another open subscriber connection than `s`.
  bool subscribes_elsewhere(std::uint64_t client, const connection_info& s) {
    const auto it = subscriber_of_client.find(client);
    if (it == subscriber_of_client.end() || it->second == s.id) return false;
    const connection_info* other = open_connection(it->second);
    return other != nullptr && best_partner(*other) == client && pairing_of(*other, client) != pairing::contradicted;
  }
  // The confidence of naming `client`'s waiter for subscriber `s`; `guess` when the
  // traffic has said nothing yet.
  static link_confidence confidence_of(const connection_info& s, std::uint64_t client, link_confidence guess) {
    switch (pairing_of(s, client)) {
      case pairing::established: return link_confidence::certain;
      case pairing::consistent: return guess == link_confidence::certain ? guess : link_confidence::high;
      case pairing::contradicted: return guess == link_confidence::certain ? guess : link_confidence::low;
      case pairing::none: break;
    }
    return guess;
  }
  // The wake-ups (messages) whose window has passed by `t` teach who reacted alone.
  void settle_wakes(lock_extra& x, std::int64_t t) {
    for (wake& k : x.wakes) {
      if (k.at_us < 0 || t <= k.at_us + options.wake_window_us) continue;
      // The first client, alone by a wide margin: the others were not reacting to it.
      const bool alone = k.other_delay_us < 0 || k.other_delay_us >= 4 * k.first_delay_us + 1'000;
      if (!k.fanout && k.first_client != 0 && alone) {
        if (connection_info* s = open_connection(k.sub)) learn(*s, k.first_client);
      }
      k = wake{};
    }
  }
  // An attempt by `client` at `t` (request time): maybe a reaction to a wake-up before.
  void attribute_wakes(lock_extra& x, std::uint64_t client, std::int64_t t) {
    settle_wakes(x, t);
    for (wake& k : x.wakes) {
      if (k.at_us < 0 || t < k.at_us) continue;
      if (k.first_client == 0) {
        k.first_client = client;
        k.first_delay_us = t - k.at_us;
      } else if (k.first_client != client && k.other_delay_us < 0) {
        k.other_delay_us = t - k.at_us;
      }
    }
  }
  void note_wake(lock_extra& x, std::uint64_t sub, std::int64_t at, bool message) {
    settle_wakes(x, at);
    wake* slot = nullptr;
    bool fanout = false;
    for (wake& k : x.wakes) {
      // Messages on several subscribers at once: one publish fanned out.
      if (message && k.at_us >= 0 && k.message && k.sub != sub && at - k.at_us <= 2'000) k.fanout = fanout = true;
    }
    for (wake& k : x.wakes) {
      if (slot == nullptr || k.at_us < slot->at_us) slot = &k;  // a free slot (-1) or the oldest
    }
    *slot = wake{};
    slot->at_us = at;
    slot->sub = sub;
    slot->message = message;
    slot->fanout = fanout;
  }
  // The waiter's attempt at `t` came right after a message on a subscriber that may be
  // its client's.
  bool woken_by_message(lock_extra& x, const waiter& w, std::int64_t t) {
    for (const wake& k : x.wakes) {
      if (!k.message || k.at_us < 0 || k.at_us < w.last_attempt_us || t < k.at_us || t - k.at_us > options.wake_window_us) continue;
      if (k.sub == w.sub_connection) return true;
      connection_info* s = open_connection(k.sub);
      if (s != nullptr && pairing_of(*s, w.client) != pairing::contradicted) return true;
    }
    return false;
  }

  // An attempt by a waiter that already failed before: a retry. It shows the waiter
  // waited all along, which confirms what happened meanwhile.
  void retry(lock_state& l, std::uint32_t lock, waiter& w, const lock_operation& op, std::int64_t at) {
    lock_extra& x = ex(l);
    const std::int64_t t = op.request_us;
    if (x.guessed.sub != 0) take_guessed_subscription(l, lock, w, t);
    if (!w.notified) w.notified = woken_by_message(x, w, t);
    w.longest_gap_us = std::max(w.longest_gap_us, t - w.last_attempt_us);
    // A first failure's retry comes at once and unprompted; a retry a message woke
    // may come as soon, mid-wait, when releases follow each other.
    if (++w.attempts == 2) w.quick_second = t - w.last_attempt_us <= options.wake_window_us && !w.notified;
    // Redisson retries once its SUBSCRIBE is confirmed; node-redisson retries at once
    // after its first failure: neither waited for anything. A wait shorter than the
    // TTL it was given (or than the wake window) was not a timer either.
    const bool after_subscribe = w.subscribed_us >= w.last_attempt_us && t - w.subscribed_us <= options.wake_window_us;
    const std::int64_t quick = w.last_ttl_us >= 0 ? std::clamp<std::int64_t>(w.last_ttl_us * 9 / 10, 2'000, options.wake_window_us)
                                                 : options.wake_window_us;
    // Only a waiter that subscribes at all waits for a message (RedLock and spin-lock
    // clients poll by design).
    const bool by_timer = w.pubsub && w.sub_connection != 0 && !w.notified && !after_subscribe &&
                          t - w.last_attempt_us >= quick;

    // The lock was free >= threshold while it waited: this attempt proves it waited.
    if (!has_holder(l) && x.free_since_us >= 0 && !x.idle_reported && x.free_since_us >= w.first_us &&
        at - x.free_since_us >= options.idle_threshold_us) {
      x.idle_reported = true;
      // A poller (no pub/sub: redis-py, RedLock, spin locks) misses nothing: it slept
      // longer than the lock stayed free.
      const anomaly_finding finding = !w.pubsub || polls(w) ? anomaly_finding::idle_while_poller_slept
                                      : subscribed(w, lock) ? anomaly_finding::idle_while_subscribed_waiter_waited
                                                            : anomaly_finding::idle_while_unsubscribed_waiter_waited;
      anomaly(l, at, anomaly_kind::idle_with_waiters, w.owner, w.conn, {finding}, op.inferred, x.free_since_us,
              at - x.free_since_us);
    } else if (x.idle_start_us >= 0 && x.idle_start_us >= w.first_us) {
      const anomaly_finding finding = w.pubsub && !polls(w) ? anomaly_finding::idle_while_this_waiter_waited
                                                            : anomaly_finding::idle_while_this_poller_slept;
      anomaly(l, at, anomaly_kind::idle_with_waiters, w.owner, w.conn, {finding}, op.inferred, x.idle_start_us,
              x.idle_end_us - x.idle_start_us);
      x.idle_start_us = x.idle_end_us = -1;
    }
    if (by_timer && w.lost_release_us >= 0 && !w.lost_reported) {
      w.lost_reported = true;  // once per wait
      anomaly_facts found{anomaly_finding::not_subscribed_at_release};
      if (w.unsubscribed_us >= 0 && w.unsubscribed_us <= w.lost_release_us) {
        found = {anomaly_finding::unsubscribed_before_release, w.lost_release_us - w.unsubscribed_us};
      }
      anomaly(l, at, anomaly_kind::subscription_lost, w.owner, w.conn, found, op.inferred, w.lost_release_us,
              at - w.lost_release_us);
    }
    // Held all along since its previous attempt (a watchdog renewing), there was nothing
    // to be told: a retry when its TTL, or tryLock's wait time, runs out is the client's
    // design, not a missed wake-up.
    if (by_timer && !w.timeout_reported && x.last_freed_us >= w.last_attempt_us - options.reply_skew_us) {
      w.timeout_reported = true;  // once per wait: a client may then retry in a tight loop
      anomaly(l, at, anomaly_kind::woken_by_timeout, w.owner, w.conn,
              {anomaly_finding::retried_without_notification}, op.inferred);
    }
    w.notified = false;
    w.lost_release_us = -1;
    w.last_attempt_us = at;
  }

  // Redisson's waiter fails, SUBSCRIBEs at once, and retries as soon as the SUBSCRIBE is
  // confirmed. When the subscription was guessed to be another waiter's (the latest
  // failure from that address before it, among several), and instead `w` retries first,
  // within subscribe_retry_us of the confirmation, having failed within wake_window
  // before the SUBSCRIBE went out (a client may connect its subscriber first), the
  // subscription is w's: the guessed waiter had not tried again. Not when the traffic
  // has shown w's client subscribing on another connection: a client that retries at
  // once after its first failure (node-redisson's way) looks the same. Seen in churn on
  // one host: a poller's attempt landed between a Redisson-style waiter's failure and
  // its SUBSCRIBE, and the poller was then charged with that subscription's loss and a
  // timer wake-up.
  static constexpr std::int64_t subscribe_retry_us = 2'000;
  void take_guessed_subscription(lock_state& l, std::uint32_t lock, waiter& w, std::int64_t t) {
    lock_extra& x = *xp(l);
    lock_extra::guessed_subscribe& g = x.guessed;
    if (t < g.confirmed_us) return;  // not yet confirmed: nobody's retry answers it
    if (t - g.confirmed_us > subscribe_retry_us || w.owner == g.owner) {
      g = {};  // too late for anyone, or the guessed waiter retried first: it stands
      return;
    }
    if (!w.pubsub || polls(w) || w.last_attempt_us > g.request_us || g.request_us - w.last_attempt_us > options.wake_window_us ||
        (w.sub_connection != 0 && w.sub_connection != g.sub && subscribed(w, lock))) {
      return;
    }
    const auto it = connection_ids.find(g.sub);
    if (it == connection_ids.end() || !connections[it->second].open) {
      g = {};
      return;
    }
    const std::uint32_t conn = it->second;
    connection_info& s = connections[conn];
    connection_info::subscription* sub = subscription_of(s, lock);
    if (!(connections[w.conn].ip == s.ip) || sub == nullptr || sub->owner != g.owner) {
      g = {};
      return;
    }
    // The traffic has shown w's client subscribing on another connection: not w's.
    if (subscribes_elsewhere(w.client, s)) return;
    const std::int64_t confirmed = g.confirmed_us;
    g = {};
    if (waiter* guessed = find_waiter(l, sub->owner)) {
      const std::uint64_t client = guessed->client;
      for (waiter& o : x.waiters) {
        if (o.client != client || o.sub_connection != s.id) continue;
        o.sub_connection = 0;
        o.confidence = link_confidence::none;
        o.subscribed_us = -1;
      }
    }
    link(l, lock, w, s, link_confidence::low, confirmed);
    owners.retain(w.owner);
    owners.release(sub->owner);
    put_subscription(conn, sub, {lock, w.owner, w.client, link_confidence::low, true});
  }
  // A new waiter whose client already has a subscription on the lock's channel shares
  // it: Redisson shares one subscription among a client's threads.
  // The first such connection in table order, as a walk of the table would find.
  void link_existing_subscription(std::uint32_t lock, waiter& w) {
    const auto it = subscribers_by_client.find(w.client);
    if (it == subscribers_by_client.end()) return;
    std::uint32_t found = no_id;
    for (const std::uint32_t conn : it->second) {
      const connection_info& c = connections[conn];
      if (!c.open || conn >= found) continue;
      for (const auto& sub : c.subscriptions) {
        if (sub.lock == lock && sub.owner != no_id && sub.client == w.client) {
          found = conn;
          break;
        }
      }
    }
    if (found == no_id) return;
    const connection_info& c = connections[found];
    w.sub_connection = c.id;
    w.confidence = c.id == w.connection ? link_confidence::certain : confidence_of(c, w.client, link_confidence::high);
  }

  // Remembers `owner` as the connection's last owner of lock `id` (see last_owners).
  void note_owner(std::uint32_t conn, std::uint32_t id, std::uint32_t owner) {
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
  std::uint32_t last_owner_on(std::uint32_t conn, std::uint32_t id) const {
    for (const auto& s : connections[conn].last_owners) {
      if (s.lock == id) return s.owner;
    }
    return no_id;
  }

  // The waiter `owner`'s attempt continues, if any. A pub/sub waiter whose own
  // subscription (its SUBSCRIBE's, shared with no other waiter of its client) left the
  // lock's channel by an UNSUBSCRIBE after its latest attempt, and whose owner attempts again
  // neither at once (node-redisson leaves, then retries) nor when its TTL runs out (a
  // waiter that lost its subscription retries then), gave up when it left (Redisson's
  // tryLock at its wait time): this attempt begins a new wait. Carried on, the old wait
  // ran into the new one, and a thread's next tryLock seconds later showed the whole
  // span as its wait, with a missed wake-up, a lost subscription and a timer retry.
  waiter* continuing_waiter(lock_state& l, std::uint32_t lock, std::uint32_t owner, const lock_operation& op) {
    waiter* w = find_waiter(l, owner);
    // Redisson's order: its first attempt, SUBSCRIBE, the retry after it, and nothing
    // more (a tryLock that heard no release). A waiter with more attempts may be a poller
    // that a subscriber was linked to by mistake, whose next poll is no new wait; one
    // that subscribed after its retry is node-redisson's, whose stale timer sends an
    // UNSUBSCRIBE while it still waits.
    if (w == nullptr || !w->pubsub || !w->left_channel || w->attempts > 2 || w->subscribed_us > w->last_attempt_us ||
        w->unsubscribed_us < w->last_attempt_us || w->last_ttl_us < 0) {
      return w;
    }
    if (op.request_us - w->unsubscribed_us <= options.wake_window_us) return w;
    const std::int64_t slack = std::max(options.wake_window_us, w->last_ttl_us / 20);
    if (op.request_us >= w->last_attempt_us + w->last_ttl_us - slack) return w;  // its timer
    drop_waiter(l, lock, w);
    return nullptr;
  }

  // The time a waiter gives its next attempt: the TTL it was given (Redisson waits for a
  // message at most that long), else the holder's remaining lease, else 30 s.
  std::int64_t expected_wait_us(lock_state& l, const lock_operation& op, std::int64_t at) {
    if (op.ttl_ms >= 0) return std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000;
    std::int64_t remaining = -1;
    for_each_holder(l, [&](holder& h) {
      if (h.lease_end_us() > at) remaining = std::max(remaining, h.lease_end_us() - at);
    });
    return remaining >= 0 ? remaining : 30'000'000;
  }

  void on_acquire(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    const std::uint32_t owner = owners.id(op.owner);
    const std::int64_t at = op.at_us();
    if (op.outcome == op_outcome::ok || op.outcome == op_outcome::contended) note_owner(conn, id, owner);
    // Only locks with waiters or wake-ups need the client (not the uncontended hot path).
    std::uint64_t client = 0;
    if (has_extra(l) || op.outcome == op_outcome::contended) client = client_key(owner, op.connection);
    if (has_extra(l)) attribute_wakes(*xp(l), client, op.request_us);
    if (op.outcome == op_outcome::contended) {
      waiter* w = continuing_waiter(l, id, owner, op);
      if (w == nullptr) {
        lock_extra& x = ex(l);
        if (!has_holder(l) && x.waiters.empty()) x.free_since_us = -1;  // free since unknown
        w = &x.waiters.emplace_back();
        w->seq = x.next_waiter_seq++;
        if (x.waiter_index_valid) x.waiter_index.emplace(owner, w->seq);
        w->owner = owner;
        w->conn = conn;
        w->ip_tag = connections[conn].ip.tag();
        owners.retain(owner);
        retain_connection(conn);
        connections[conn].waits.push_back(id);
        w->connection = op.connection;
        w->client = client;
        w->pubsub = pubsub_family(op.family);
        w->first_us = op.request_us;
        w->last_attempt_us = at;
        w->mid_stream = op.db < 0;  // its database unseen: no SELECT, no SYN
        w->first_ttl_us = op.ttl_ms >= 0 ? std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000 : -1;
        link_existing_subscription(id, *w);
      } else {
        move_waiter(*w, id, conn, op.connection);
        retry(l, id, *w, op, at);
      }
      w->last_ttl_us = op.ttl_ms >= 0 ? std::min<std::int64_t>(op.ttl_ms, 0x7fffffff) * 1000 : -1;
      w->deadline_us = at + expected_wait_us(l, op, at) + options.waiter_margin_us;
      lock_event e = from_op(l, op, lock_event_kind::contended);
      e.ttl_ms = op.ttl_ms;
      emit(l, e);
      // While the lock is held, only this waiter's deadline changed: no scan of the others.
      if (has_holder(l)) schedule_at(id, w->deadline_us);
      else schedule(id);
      return;
    }
    if (op.outcome != op_outcome::ok) return;

    // SET-based and node-redlock locks cannot be re-entered (their acquire fails while
    // the key exists, whoever set it).
    if (holder* h = find_holder(l, owner); h != nullptr && !op.shared && op.family != lock_family::setnx &&
                                           op.family != lock_family::set_based &&
                                           op.family != lock_family::redlock_multi) {
      h->reenter();
      if (op.lease_ms >= 0) h->set_lease(op, at);
      lock_event e = from_op(l, op, lock_event_kind::reentered);
      e.hold_count = h->hold_count() > 0 ? h->hold_count() : -1;
      e.lease_ms = op.lease_ms;
      emit(l, e);
      schedule_at(id, h->deadline_us);  // only this holder's deadline changed
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
      bool guessed = op.db < 0;
      for_each_holder(l, [&](holder& h) {
        if (h.owner != owner && other == no_id) {
          other = h.owner;
          guessed = guessed || (h.conn != no_id && connections[h.conn].database_guessed);
        }
      });
      if (other != no_id) {
        owners.retain(owner);
        owners.retain(other);
        retain_connection(conn);
        suspected_overlaps.push_back({id, owner, other, conn, at, op.inferred, guessed});
      }
    }
    std::int64_t wait = -1;
    bool wait_at_least = false;
    // A waiter still subscribed when it acquires leaves the channel next (Redisson, our
    // client); node-redisson left it before retrying: then the next UNSUBSCRIBE is not its.
    bool leaves_next = false;
    if (waiter* w = continuing_waiter(l, id, owner, op)) {
      leaves_next = subscribed(*w, id);
      client = w->client;
      retry(l, id, *w, op, at);
      wait = at - w->first_us;
      // An attempt before the capture cannot be ruled out: its connection was joined
      // mid-stream, its first attempt seen was not answered by an immediate retry (as a
      // first failure is, by Redisson and node-redisson), and it came no later after the
      // capture's first operation than the client may wait between attempts (the TTL
      // it was given, or its longest gap between attempts).
      wait_at_least = w->mid_stream && !w->quick_second &&
                      w->first_us - first_op_us <= std::max(w->longest_gap_us, w->first_ttl_us) + options.wake_window_us;
      drop_waiter(l, id, w);
    }
    take_expired(l, owner);
    free_interval_ends(l, at);
    if (has_extra(l)) {
      lock_extra& x = *xp(l);
      x.acquired_us = leaves_next ? at : -1;
      x.acquired_client = client;
      const std::uint32_t kept = leaves_next ? owner : no_id;
      owners.retain(kept);
      owners.release(x.acquired_owner);
      x.acquired_owner = kept;
    }
    holder& h = add_holder(l, owner, conn);
    h.set_hold_count(1);
    h.since_us = at;
    h.last_renew_us = at;
    if (op.lease_ms >= 0) h.set_lease(op, at);
    // A holder is present now, so no idleness is timed: its lease and long hold are the
    // only new times (no scan of the other holders and waiters).
    const std::int64_t deadline = h.deadline_us;
    const std::int64_t long_hold = options.long_hold_us > 0 ? at + options.long_hold_us : -1;
    count_acquisition(l);
    if (wait >= 0) {
      ex(l).waits.add(wait);
    }
    lock_event e = from_op(l, op, lock_event_kind::acquired);
    e.hold_count = 1;
    e.lease_ms = op.lease_ms;
    e.wait_us = wait;
    e.wait_at_least = wait_at_least;
    e.token = op.token;
    emit(l, e);
    if (op.family == lock_family::setnx) {
      anomaly(l, at, anomaly_kind::non_atomic_acquire, owner, conn,
              {anomaly_finding::setnx_expiry_not_atomic}, op.inferred);
    }
    schedule_at(id, deadline);
    schedule_at(id, long_hold);
  }

  void rejected_by_owner(lock_state& l, std::uint32_t owner, std::uint32_t conn, std::int64_t at, bool inferred,
                         bool renew) {
    holder* mine = find_holder(l, owner);
    if (take_expired(l, owner) || mine != nullptr) {
      // The lease's end by our clock (reply + lease) is later than the server's by the
      // reply's latency: refused well before it, the key was not expired but lost.
      const std::int64_t left = mine != nullptr && mine->deadline_us >= 0 ? mine->lease_end_us() - at : -1;
      // Past the floor (request + lease) the key may have expired whatever the reply's
      // latency was: the acquisition's reply may have waited on a busy server.
      const bool lease_over = left <= options.reply_skew_us || (mine != nullptr && at >= mine->floor_us());
      if (mine != nullptr && mine->deadline_us >= 0 && lease_over) {
        // Refused about when the lease ends (Redis's clock counts whole milliseconds, so
        // before our deadline): the lease ran out, and the refusal makes that certain.
        expire(l, *mine, at);
        take_expired(l, owner);  // reported below, once
      } else if (mine != nullptr) {
        remove_holder(l, mine);
        became_free(l, at);
      }
      anomaly_facts found;
      if (!lease_over) {
        found.finding = renew ? anomaly_finding::renewal_refused_key_lost : anomaly_finding::unlock_refused_key_lost;
        found.duration_us = left;
      } else {
        found.finding = renew ? anomaly_finding::renewal_refused_lease_over : anomaly_finding::unlock_refused_lease_over;
      }
      anomaly(l, at, anomaly_kind::expired_while_held, owner, conn, found, inferred);
      return;
    }
    if (!renew) {
      anomaly(l, at, anomaly_kind::unlock_by_non_owner, owner, conn,
              {has_holder(l) ? anomaly_finding::unlock_by_non_holder : anomaly_finding::unlock_of_free_lock},
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
        if (!suspected_overlaps.empty()) released_before(id, owner, op.request_us);
        lock_event e = release_holder();
        became_free(l, at);
        if (!has_holder(l)) released_publishing(l, id, at);
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
          free_interval_ends(l, at);
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
        free_interval_ends(l, at);
      } else if (op.family != lock_family::set_based && op.family != lock_family::redlock_multi && op.lease_ms > 0 &&
                 h->last_renew_us >= 0) {
        const std::int64_t gap = at - h->last_renew_us;
        const double limit = options.late_renewal_factor * static_cast<double>(op.lease_ms) * 1000.0 / 3.0;
        if (static_cast<double>(gap) > limit) {
          anomaly(l, at, anomaly_kind::late_renewal, owner, conn,
                  {anomaly_finding::renewed_late, gap, op.lease_ms / 3},
                  op.inferred);
        }
      }
      h->last_renew_us = at;
      if (op.lease_ms >= 0 && op.lease_added) {
        // redis-py's extend adds to the remaining TTL; unknown when the hold was not seen.
        if (h->deadline_us >= 0) {
          lock_operation added = op;
          added.lease_ms = std::max<std::int64_t>(0, (h->lease_end_us() - at) / 1000) + op.lease_ms;
          h->set_lease(added, at);
          e.lease_ms = added.lease_ms;
        }
      } else if (op.lease_ms >= 0) {
        h->set_lease(op, at);
      }
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
      const std::uint32_t conn = conn_index(op);
      const std::uint32_t deleter = last_owner_on(conn, id);
      const std::uint32_t removed = h->owner;
      owners.retain(removed);  // named by the anomaly below, after the holders are gone
      clear_holders(l);  // every holder is gone with the key
      became_free(l, at);
      emit(l, e);
      if (deleter != no_id && deleter != removed) {
        anomaly(l, at, anomaly_kind::released_other_owner, deleter, conn,
                {anomaly_finding::del_removed_other_owner, owners.text(removed)},
                op.inferred);
      }
      if (!has_extra(l) || xp(l)->anomalies[static_cast<std::size_t>(anomaly_kind::unchecked_release)] == 0) {
        anomaly(l, at, anomaly_kind::unchecked_release, removed, conn,
                {anomaly_finding::released_by_plain_del}, op.inferred);
      }
      owners.release(removed);
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
    released_publishing(l, id, at);
    emit(l, e);
    schedule(id);
  }

  // A pub/sub waiter whose command connection ended while its subscriber, another
  // connection, is still subscribed to the lock's channel: its client reconnects and
  // goes on waiting (Redisson's thread does, under the same owner id), and its next
  // attempt, on the new connection, continues this wait. It leaves with its
  // subscription (subscription_ended), or at its deadline.
  // Only a link the traffic makes sure of: a waiter kept for a subscription that is
  // another client's would outlive its process.
  bool waits_on_subscription(const waiter& w, std::uint32_t lock, std::uint64_t ended) {
    return w.pubsub && w.sub_connection != 0 && w.sub_connection != ended &&
           (w.confidence == link_confidence::certain || w.confidence == link_confidence::high) && subscribed(w, lock);
  }
  // Waiters linked to subscriber `sub` lost their subscription to the lock's channel.
  // Those whose command connection had ended already (waits_on_subscription) leave now.
  void subscription_ended(std::uint32_t lock, std::uint64_t sub, std::int64_t at) {
    lock_state& l = locks[lock];
    if (!has_extra(l)) return;
    remove_waiters(*xp(l), [&](waiter& w) {
      if (w.sub_connection != sub) return false;
      w.unsubscribed_us = at;
      if (connections[w.conn].open) return false;
      unlist_wait(w.conn, lock);
      return true;
    });
  }
  // Links `w` to subscriber `s` (and its client's other waiters, which share it).
  void link(lock_state& l, std::uint32_t lock, waiter& w, connection_info& s, link_confidence conf, std::int64_t at) {
    for (waiter& o : xp(l)->waiters) {
      if (&o != &w && o.client != w.client) continue;
      if (&o != &w && o.sub_connection != 0 && o.sub_connection != s.id && subscribed(o, lock)) continue;
      o.sub_connection = s.id;
      o.confidence = conf;
      o.unsubscribed_us = -1;
      o.left_channel = false;
      if (&o == &w) o.subscribed_us = at;  // its own SUBSCRIBE: its next attempt is no timer's
    }
  }
  // The waiter a subscriber connection's event is about, and how sure that is.
  struct linked {
    waiter* w = nullptr;
    link_confidence confidence = link_confidence::none;
  };
  // For a SUBSCRIBE (or the first message on a subscription begun before the capture):
  // the waiter on the same connection (RESP3); else the waiter of the client the
  // traffic has established as the subscriber's; else the most recent waiter from the
  // same IP within link_window, preferring the client the evidence points to.
  static bool polls(const waiter& w) {
    return w.attempts >= 3 && w.sub_connection == 0 && w.subscribed_us < 0 && w.last_ttl_us > 0 &&
           w.longest_gap_us * 4 < w.last_ttl_us;
  }
  linked choose_waiter(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t at, std::int64_t request) {
    linked r;
    if (!has_extra(l)) return r;
    const std::uint64_t partner = best_partner(s);
    const bool established = partner != 0 && pairing_of(s, partner) == pairing::established;
    const std::uint16_t ip_tag = s.ip.tag();
    int candidates = 0;
    bool uncertain = false;
    // The latest failure before the request (an attempt answered after it cannot have
    // caused it): among a client's waiters, the one that subscribes.
    auto distance = [&](const waiter& o) {
      return o.last_attempt_us <= request ? request - o.last_attempt_us : options.link_window_us + o.last_attempt_us - request;
    };
    for (waiter& w : xp(l)->waiters) {
      if (w.connection == s.id) return {&w, link_confidence::certain};
      if (established) {
        if (w.client == partner && (r.w == nullptr || distance(w) < distance(*r.w))) r.w = &w;
        continue;
      }
      // The time first: the address is another table's row.
      if (at - w.last_attempt_us > options.link_window_us || w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip)) continue;
      // A poller (three attempts or more, never subscribed nor linked, far more often than
      // its TTL) listens to no channel: a subscription seen from its address is another
      // client's, one whose waiter may be unseen (subscribed before the capture).
      if (polls(w)) continue;
      // Waiting with a live subscription elsewhere: not this one's (if that link is
      // itself only a guess, this one cannot be sure either).
      if (w.sub_connection != 0 && w.sub_connection != s.id && subscribed(w, lock) &&
          !(partner != 0 && w.client == partner)) {
        if (w.confidence == link_confidence::low) uncertain = true;
        continue;
      }
      ++candidates;
      // The client the evidence points to; else the latest failure before the request.
      auto rank = [&](const waiter& o) { return partner != 0 && o.client == partner ? 2 : subscribes_elsewhere(o.client, s) ? 0 : 1; };
      const int preferred = rank(w);
      const int best_preferred = r.w == nullptr ? -1 : rank(*r.w);
      if (r.w == nullptr || preferred > best_preferred || (preferred == best_preferred && distance(w) < distance(*r.w))) {
        r.w = &w;
      }
    }
    if (r.w == nullptr) return r;
    if (established) {
      r.confidence = link_confidence::certain;
    } else {
      r.confidence = confidence_of(s, r.w->client, candidates == 1 && !uncertain ? link_confidence::high : link_confidence::low);
      if (subscribes_elsewhere(r.w->client, s)) r.confidence = link_confidence::low;  // the traffic says otherwise
      // A guess among several waiters stays low however consistent the few episodes.
      if (candidates > 1 && r.confidence == link_confidence::high && r.w->client != partner) r.confidence = link_confidence::low;
    }
    // The client may be sure while its waiter is not: another waiter of that client
    // failed nearly as recently (e.g. two attempts in one pipeline).
    for (const waiter& o : xp(l)->waiters) {
      if (&o != r.w && o.client == r.w->client && distance(o) < 4 * distance(*r.w) + 1'000) {
        r.confidence = link_confidence::low;
      }
    }
    return r;
  }
  // An UNSUBSCRIBE follows a message on the connection (the woken waiter leaves), or
  // comes when the named waiter's wait for a message ends (its TTL since its latest
  // attempt): else it may be a stale timer of a waiter long gone (node-redisson).
  bool explained_unsubscribe(lock_state& l, const connection_info& s, const connection_info::subscription& sub,
                             const lock_operation& op) {
    if (!has_extra(l)) return false;
    for (const wake& k : xp(l)->wakes) {
      if (k.message && k.sub == s.id && k.at_us <= op.request_us && op.request_us - k.at_us <= options.wake_window_us) {
        return true;
      }
    }
    const waiter* w = find_waiter(l, sub.owner);
    if (w == nullptr || w->last_ttl_us < 0) return false;
    const std::int64_t due = w->last_attempt_us + w->last_ttl_us;
    const std::int64_t slack = std::max(options.wake_window_us, w->last_ttl_us / 20);
    return op.request_us >= due - slack && op.request_us <= due + slack;
  }
  // Another waiter of the same client waits for the lock: which of them an event is
  // about is not sure.
  bool has_sibling(lock_state& l, std::uint32_t owner, std::uint64_t client) {
    if (!has_extra(l)) return false;
    for (const waiter& w : xp(l)->waiters) {
      if (w.owner != owner && w.client == client) return true;
    }
    return false;
  }

  // The waiter of the client the subscriber's episodes point to (not contradicted).
  waiter* partner_waiter(lock_state& l, const connection_info& s) {
    const std::uint64_t partner = best_partner(s);
    if (partner == 0 || !has_extra(l) || pairing_of(s, partner) == pairing::contradicted) return nullptr;
    waiter* found = nullptr;
    for (waiter& w : xp(l)->waiters) {
      if (w.client == partner && (found == nullptr || w.first_us < found->first_us)) found = &w;
    }
    return found;
  }

  // A subscription given to a guessed waiter may be taken by the waiter that retries
  // right after its confirmation (take_guessed_subscription).
  void note_guess(lock_state& l, const connection_info& s, const lock_operation& op, const linked& chosen) {
    if (!has_extra(l)) return;
    if (chosen.w != nullptr && chosen.confidence == link_confidence::low) {
      xp(l)->guessed = {s.id, op.request_us, op.at_us(), chosen.w->owner};
    } else {
      xp(l)->guessed = {};
    }
  }
  void on_subscribe(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    connection_info& s = connections[conn];
    const std::int64_t at = op.at_us();
    if (has_extra(l)) {
      // Episode: one client had just failed when this connection subscribed, and no
      // other client nearly as recently.
      const std::uint16_t ip_tag = s.ip.tag();
      const waiter* latest = nullptr;
      for (const waiter& w : xp(l)->waiters) {
        if (w.connection == s.id || w.last_attempt_us > op.request_us || w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip)) continue;
        // Subscribed on another connection already (its own SUBSCRIBE, just before its
        // retry): a client listens on one subscription per channel, so this one is not
        // its; its retry must not teach this connection that it is.
        if (w.sub_connection != 0 && w.sub_connection != s.id && w.subscribed_us >= 0 && subscribed(w, id)) continue;
        if (latest == nullptr || w.last_attempt_us > latest->last_attempt_us) latest = &w;
      }
      if (latest != nullptr && op.request_us - latest->last_attempt_us <= options.wake_window_us) {
        const std::int64_t d1 = op.request_us - latest->last_attempt_us;
        std::int64_t d2 = -1;
        for (const waiter& w : xp(l)->waiters) {
          if (w.client == latest->client || w.last_attempt_us > op.request_us) continue;
          if (d2 < 0 || op.request_us - w.last_attempt_us < d2) d2 = op.request_us - w.last_attempt_us;
        }
        if (d2 < 0 || d2 >= 4 * d1 + 1'000) learn(s, latest->client);
      }
    }
    const linked chosen = choose_waiter(l, id, s, at, op.request_us);
    std::uint32_t owner = no_id;
    std::uint64_t client = 0;
    if (chosen.w != nullptr) {
      owner = chosen.w->owner;
      client = chosen.w->client;
      link(l, id, *chosen.w, s, chosen.confidence, at);
    }
    // One subscription a channel and connection: a repeated SUBSCRIBE names its latest waiter.
    owners.retain(owner);
    if (auto* sub = record_of(s, id)) {
      // Already subscribed for a waiter of the same client that still waits: the channel
      // stays its (node-redisson's handlers run in subscription order).
      const waiter* earlier = sub->active && sub->owner != no_id ? find_waiter(l, sub->owner) : nullptr;
      if (earlier != nullptr && earlier->client == client) {
        owners.release(owner);
      } else {
        owners.release(sub->owner);
        put_subscription(conn, sub, {id, owner, client, chosen.confidence, true});
        note_guess(l, s, op, chosen);
      }
    } else {
      put_subscription(conn, nullptr, {id, owner, client, chosen.confidence, true});
      note_guess(l, s, op, chosen);
    }
    lock_event e = from_op(l, op, lock_event_kind::subscribed);
    e.owner = owners.text(owner);
    e.confidence = chosen.confidence;
    emit(l, e);
    schedule(id);
  }

  void on_message(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    connection_info& s = connections[conn];
    const std::int64_t at = op.at_us();
    note_wake(ex(l), s.id, at, true);
    // A subscription begun before the capture shows itself by its messages.
    auto* sub = subscription_of(s, id);
    if (sub == nullptr) {
      const linked guess = choose_waiter(l, id, s, at, at);
      std::uint32_t owner = no_id;
      std::uint64_t client = 0;
      if (guess.w != nullptr && guess.confidence != link_confidence::low) {
        owner = guess.w->owner;
        client = guess.w->client;
        link(l, id, *guess.w, s, guess.confidence, at);
      }
      owners.retain(owner);
      put_subscription(conn, record_of(s, id), {id, owner, client, owner == no_id ? link_confidence::none : guess.confidence, true});
    }
    waiter* woken = nullptr;
    const std::uint64_t partner = best_partner(s);
    const bool established = partner != 0 && pairing_of(s, partner) == pairing::established;
    for (waiter& w : xp(l)->waiters) {
      if (w.sub_connection != s.id && !(established && w.client == partner)) continue;
      w.notified = true;
      const bool preferred = !established || w.client == partner;
      const bool best_preferred = woken != nullptr && (!established || woken->client == partner);
      if (woken == nullptr || (preferred && !best_preferred) ||
          (preferred == best_preferred && w.first_us < woken->first_us)) {
        woken = &w;
      }
    }
    if (woken == nullptr) {
      woken = partner_waiter(l, s);
      if (woken != nullptr) woken->notified = true;
    }
    lock_event e = from_op(l, op, lock_event_kind::notified);
    e.owner = {};
    if (woken != nullptr) {
      e.owner = owners.text(woken->owner);
      e.confidence = confidence_of(s, woken->client, woken->confidence);
    }
    emit(l, e);
  }

  void on_unsubscribe(std::uint32_t id, const lock_operation& op) {
    lock_state& l = locks[id];
    const std::uint32_t conn = conn_index(op);
    connection_info& s = connections[conn];
    const std::int64_t at = op.at_us();
    auto* sub = subscription_of(s, id);
    // Clients send UNSUBSCRIBE for channels they are not subscribed to (answered with 0
    // subscriptions left, or seen leaving before): nothing happened.
    // (A fair lock's waiters have a channel each, all one lock here: leaving one says
    // nothing of the others.)
    const bool per_waiter_channel = !op.channel.empty() && op.channel.back() != '}';
    if (sub == nullptr && (op.sub_count == 0 || (!per_waiter_channel && record_of(s, id) != nullptr))) return;
    // Episode: a client unsubscribes right after its waiter acquired (Redisson and
    // our client leave the channel once the wait is over).
    std::uint32_t leaver = no_id;  // the client that just acquired: no waiter any more
    std::uint64_t leaver_client = 0;
    if (has_extra(l) && xp(l)->acquired_us >= 0 && op.request_us >= xp(l)->acquired_us &&
        op.request_us - xp(l)->acquired_us <= options.wake_window_us) {
      leaver_client = xp(l)->acquired_client;
      learn(s, leaver_client);
      leaver = xp(l)->acquired_owner;
      xp(l)->acquired_us = -1;  // one client leaves per acquisition
      owners.release(leaver);   // its text stays valid until the next collect()
      xp(l)->acquired_owner = no_id;
    } else if (has_extra(l) && !xp(l)->waiters.empty()) {
      // node-redisson unsubscribes first, then retries: its next attempt is the reaction.
      note_wake(*xp(l), s.id, at, false);
    }
    lock_event e = from_op(l, op, lock_event_kind::unsubscribed);
    e.owner = {};
    if (sub != nullptr) {
      e.owner = owners.text(sub->owner);
      e.confidence = sub->owner == no_id ? link_confidence::none : confidence_of(s, sub->client, sub->confidence);
      if (sub->owner == no_id) {
        if (const waiter* w = partner_waiter(l, s)) {
          e.owner = owners.text(w->owner);
          e.confidence = confidence_of(s, w->client, link_confidence::low);
        } else if (leaver != no_id) {
          e.owner = owners.text(leaver);
          e.confidence = confidence_of(s, xp(l)->acquired_client, link_confidence::low);
        }
      }
      // The traffic has since established whose subscriber this is: name that client.
      const std::uint64_t partner = best_partner(s);
      if (partner != 0 && partner != sub->client && pairing_of(s, partner) == pairing::established && has_extra(l)) {
        for (const waiter& w : xp(l)->waiters) {
          if (w.client == partner) {
            e.owner = owners.text(w.owner);
            e.confidence = link_confidence::certain;
            break;
          }
        }
      }
      if (leaver != no_id && sub->client == leaver_client) {
        e.owner = owners.text(leaver);  // the waiter that just acquired leaves the channel
      } else if (sub->owner != no_id &&
                 (has_sibling(l, sub->owner, sub->client) || !explained_unsubscribe(l, s, *sub, op))) {
        e.confidence = link_confidence::low;
      }
      // Its own SUBSCRIBE's subscription, which no other waiter of its client shares, left
      // by the client's UNSUBSCRIBE (not the server's, for a moved slot): the waiter
      // surely left with it (continuing_waiter).
      const waiter* own = sub->owner != no_id && leaver == no_id && !op.server_dropped ? find_waiter(l, sub->owner) : nullptr;
      const std::uint32_t leaving = own != nullptr && own->sub_connection == s.id && own->subscribed_us >= 0 &&
                                            !has_sibling(l, sub->owner, sub->client)
                                        ? own->owner
                                        : no_id;
      owners.release(sub->owner);  // freed by the next collect(): the view stays valid until then
      // Its waiters keep waiting, unsubscribed (those whose command connection ended leave).
      subscription_ended(id, s.id, at);
      if (waiter* w = leaving != no_id ? find_waiter(l, leaving) : nullptr) w->left_channel = true;
    }
    set_inactive(conn, id);
    emit(l, e);
    schedule(id);
  }

  std::int64_t first_op_us = -1;  // the capture's first operation (request time)
  void on_operation(const lock_operation& op) {
    if (first_op_us < 0) first_op_us = op.request_us;
    if (forget_at != 0 && locks.size() >= forget_at) forget_idle_locks();
    handle(op, take_announced(op));
    collect();
  }

  // ---- forgetting idle locks (timeline_options::max_locks) ----
  // Between operations (no row is referenced from the stack), the rows of the locks
  // that still matter are copied into a new store and everything that names a lock by
  // id is rewritten; the old rows, their side records and lookup slots go.
  std::size_t forget_at = 0;  // 0: never
  forgotten_locks forgotten;

  // A lock whose owner's lease ran out is kept that long after a pass first finds it
  // idle: a late renewal or unlock by that owner (a paused process resuming) is
  // expired_while_held, which only its row can tell.
  static constexpr std::int64_t expired_memory_us = 600'000'000;
  std::vector<std::pair<std::uint32_t, std::int64_t>> expired_kept;  // (id, since), by id

  bool idle(const lock_state& l) const {
    if (l.active != no_id || l.queued_us >= 0) return false;
    const lock_extra* x = xp(l);
    return x == nullptr || (x->more_holders.empty() && x->waiters.empty());
  }
  // A row's counters (the 16-bit ones with their carries), as the summary shows them.
  lock_stats counts_of(const lock_state& l) const {
    const lock_side* sd = side_ptr(l);
    const lock_extra* x = xp(l);
    lock_stats s;
    s.acquisitions = l.acquisitions + (sd != nullptr ? sd->acquisitions_carry : 0);
    s.renewals = l.renewals + (sd != nullptr ? sd->renewals_carry : 0);
    s.expiries = l.expiries + (sd != nullptr ? sd->expiries_carry : 0);
    if (x != nullptr) {
      s.contended_acquisitions = x->waits.count();
      std::copy(std::begin(x->anomalies), std::end(x->anomalies), std::begin(s.anomalies));
    }
    return s;
  }
  void fold_into_forgotten(const lock_state& l) {
    const lock_stats s = counts_of(l);
    ++forgotten.locks;
    forgotten.acquisitions += s.acquisitions;
    forgotten.contended_acquisitions += s.contended_acquisitions;
    forgotten.renewals += s.renewals;
    forgotten.expiries += s.expiries;
    for (std::size_t k = 0; k < anomaly_kind_count; ++k) forgotten.anomalies[k] += s.anomalies[k];
  }
  void forget_idle_locks() {
    ++forgotten.passes;
    std::unordered_set<std::uint32_t> named;  // by something besides their rows
    for (const suspected_overlap& p : suspected_overlaps) named.insert(p.lock);
    for (const connection_info& c : connections) {
      for (const auto& sub : c.subscriptions) named.insert(sub.lock);
      named.insert(c.waits.begin(), c.waits.end());
    }
    lock_store kept;
    id_table kept_ids;
    stable_vector<lock_side> kept_sides;
    stable_vector<lock_extra> kept_extras;
    std::vector<std::pair<std::uint32_t, std::int64_t>> kept_expired;
    // Once its row is copied, an old row's `active` says where it went (no_id: forgotten).
    locks.for_each_with_id([&](std::uint32_t id, lock_state& l, std::string_view name) {
      std::int64_t expired_since = -1;
      if (idle(l) && !named.contains(id)) {
        if (l.last_expired != no_id) {
          const auto mark = std::lower_bound(expired_kept.begin(), expired_kept.end(), std::pair{id, std::int64_t{-1}});
          expired_since = mark != expired_kept.end() && mark->first == id ? mark->second : now;
        }
        if (expired_since < 0 || now - expired_since >= expired_memory_us) {
          fold_into_forgotten(l);
          if (lock_extra* x = xp(l)) owners.release(x->acquired_owner);
          owners.release(l.last_expired);
          return;
        }
      }
      const std::uint32_t filed_under = lock_store::scope_of(l);
      const std::uint32_t to = kept.add(filed_under, name);  // fewer rows than before: never full
      lock_state& row = kept[to];
      std::memcpy(static_cast<void*>(&row), &l, sizeof(lock_state));
      if (l.side != no_id) {
        row.side = static_cast<std::uint32_t>(kept_sides.size());
        lock_side& sd = kept_sides.emplace_back(std::move(sides[l.side]));
        if (sd.extra != no_id) {
          const std::uint32_t extra = static_cast<std::uint32_t>(kept_extras.size());
          kept_extras.emplace_back(std::move(extras[sd.extra]));
          sd.extra = extra;
        }
      }
      kept_ids.insert(to, lock_hash(canon(filed_under), name));
      if (expired_since >= 0) kept_expired.emplace_back(to, expired_since);  // ids ascend
      l.active = to;
    });
    expired_kept = std::move(kept_expired);
    const auto moved = [&](std::uint32_t old) { return locks[old].active.get(); };
    timers.remap(moved);
    for (suspected_overlap& p : suspected_overlaps) p.lock = moved(p.lock);
    for (connection_info& c : connections) {
      for (auto& sub : c.subscriptions) sub.lock = moved(sub.lock);
      for (std::uint32_t& w : c.waits) w = moved(w);
      for (auto& lo : c.last_owners) {
        if (lo.lock == no_id) continue;
        lo.lock = moved(lo.lock);
        if (lo.lock != no_id) continue;
        owners.release(lo.owner);
        lo.owner = no_id;
      }
    }
    upcoming_head = upcoming_tail = 0;  // their ids and the table's generation are gone
    locks.swap(kept);
    lock_ids = std::move(kept_ids);
    sides = std::move(kept_sides);
    extras = std::move(kept_extras);
    forget_at = std::max(options.max_locks, 2 * locks.size());
  }

  // ---- announced operations (will_handle) ----
  // will_handle() loads what handling the announced operations reads first (their id
  // table slots, rows and holders) in three passes, so that each pass's misses overlap,
  // and keeps what it resolved. Rows and holders are read, not prefetched: on the
  // (virtualized) machines measured, a software prefetch far from its use often came
  // too late or not at all, while a pass of independent loads overlaps its misses
  // for certain (the keep-up replay: ~8% less CPU than prefetching them). handle()
  // then takes an operation's candidate lock instead of hashing its name and probing
  // again, once it has checked that the candidate is what find_lock() would give (the
  // same scope and name, the table not reshaped since). A stale or wrong announcement costs a lookup, never a wrong lock.
  // (Spreading the passes over the operations handled meanwhile, each stage a few
  // operations ahead, measured ~10% slower than these bursts.)
  struct announced {
    const lock_operation* op = nullptr;  // matched by address only, never read later
    std::uint64_t generation = 0;        // lock_ids' when `id` was read
    // What `where` was resolved from: the operation's server text (its bytes unchanged
    // until delivery: lock_operation_sink::will_handle) and database, and scope_links then.
    const char* server = nullptr;
    std::size_t server_size = 0;
    std::int32_t db = 0;
    std::uint64_t scope_links = 0;
    std::uint32_t hash = 0;
    std::uint32_t where = no_id;         // no_id: not looked up
    std::uint32_t id = no_id;            // the first id with `hash` in its probe run
  };
  static constexpr std::size_t announced_capacity = 64;
  std::array<announced, announced_capacity> upcoming{};
  std::size_t upcoming_head = 0, upcoming_tail = 0;  // the announced, not yet handled

  // Queues `ops` behind those announced before (while there is room; the ones left
  // out are handled without their announcement).
  void will_handle(std::span<const lock_operation> ops) noexcept {
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
      a.server_size = op.server_text.size();
      a.db = op.db;
      a.scope_links = scope_links;
      a.hash = lock_hash(a.where, op.lock);
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
  unsigned touched = 0;  // what the passes read (kept, so that the reads stay)
  // The announcement of `op` when it is the next one announced (else they are all
  // dropped: the caller delivers other operations than it announced).
  const announced* take_announced(const lock_operation& op) noexcept {
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
  std::uint32_t announced_scope(const announced* a, const lock_operation& op) noexcept {
    if (a == nullptr || a->where == no_id || a->server != op.server_text.data() ||
        a->server_size != op.server_text.size() || a->db != op.db || a->scope_links != scope_links) {
      return no_id;
    }
    scopes[a->where].seen = true;
    return a->where;
  }
  // The lock find_lock(where, name) gives, taken from the announcement when it can.
  std::uint32_t find_announced(const announced* a, std::uint32_t where, std::string_view name) const {
    if (a != nullptr && a->id != no_id && a->where == where && a->generation == lock_ids.generation()) {
      const lock_store::identity row = lock_store::identity_of(locks[a->id]);
      if (canon(row.scope) == where && same_bytes(row.name, name)) return a->id;
    }
    return find_lock(where, name);
  }
  // Reads the first and last bytes of [p, p + bytes) (at most two cache lines).
  static unsigned touch_ends(const void* p, std::size_t bytes) noexcept {
    const auto* c = static_cast<const volatile unsigned char*>(p);
    return c[0] + c[bytes - 1];
  }
  // The scope handle() would file `op` under, when it is the last one used (read only).
  std::uint32_t known_scope(const lock_operation& op) const noexcept {
    if (last_scope == no_id) return no_id;
    const scope& s = scopes[last_scope];
    if (s.db != (op.db < 0 ? 0 : op.db) || !same_bytes(s.server, options.merge_servers ? std::string_view() : op.server_text)) {
      return no_id;
    }
    return canon(last_scope);
  }
  // An operation the key answered as its holder's (a renewal, an unlock, a PEXPIRE or DEL
  // that found it: not an acquisition, as a reentry and a fresh acquisition after an
  // expiry get the same reply) proves the key was there when the command ran, which
  // was before its reply. A holder's deadline between the request and the reply must not
  // fire first (a server descheduled between running the command and writing its reply):
  // it moves past the reply while the clock catches up, and comes back if the operation
  // left it as it was.
  struct shielded_deadline {
    std::uint32_t owner = no_id;
    std::int64_t deadline_us = -1;
  };
  shielded_deadline shield_answering_holder(std::uint32_t id, const lock_operation& op, std::int64_t at, bool plain) {
    lock_state& l = locks[id];
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
  void unshield(std::uint32_t id, const shielded_deadline& s, std::int64_t at) {
    holder* h = find_holder(locks[id], s.owner);
    if (h == nullptr || h->deadline_us != at + 1) return;
    h->deadline_us = s.deadline_us;
    schedule_at(id, s.deadline_us);
  }

  void handle(const lock_operation& op, const announced* ann) {
    if (op.kind == lock_op_kind::cluster_link) {
      link_servers(op.server_text, op.redirect_to);
      return;
    }
    if (op.lock.empty()) return;
    const std::int64_t at = op.at_us();
    if (first < 0) first = op.request_us;
    // Plain commands only matter for keys already known as locks.
    std::uint32_t where = announced_scope(ann, op);
    if (where == no_id) where = scope_of(op);
    if (op.db < 0) where = scope_of_unknown_db(where, op.lock);
    const bool plain = op.kind == lock_op_kind::expire || op.kind == lock_op_kind::del;
    const std::uint32_t found = find_announced(ann, where, op.lock);
    const std::uint32_t id = plain ? found : lock_id(where, op.lock, found);
    if (id == no_id) {
      advance(at);
      return;
    }
    const bool answered_by_key = op.reply_us > op.request_us &&
                                 (op.outcome == op_outcome::ok || op.outcome == op_outcome::partial) &&
                                 (plain || op.kind == lock_op_kind::renew || op.kind == lock_op_kind::unlock);
    const shielded_deadline shielded = answered_by_key ? shield_answering_holder(id, op, at, plain) : shielded_deadline{};
    advance(at);
    dispatch(id, op, plain);
    if (shielded.owner != no_id) unshield(id, shielded, at);
  }
  [[gnu::always_inline]] void dispatch(std::uint32_t id, const lock_operation& op, bool plain) {
    if (op.outcome == op_outcome::redirected) {
      on_redirect(id, op);
      return;
    }
    if (plain) {
      on_plain(id, op);
      return;
    }
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
void lock_timeline::will_handle(std::span<const lock_operation> upcoming) noexcept { impl_->will_handle(upcoming); }
void lock_timeline::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  // What fell due before the end (a lock left idle while this connection's waiter
  // waited) is judged with the waiter still there.
  impl_->advance(at_us);
  impl_->connection_ended(connection, at_us);
  impl_->collect();
}
void lock_timeline::advance_to(std::int64_t now_us) {
  impl_->advance(now_us);
  impl_->collect();
}
void lock_timeline::finish(std::int64_t end_us) {
  impl_->advance(end_us);
  impl_->report_overlaps(end_us, true);  // no reply can come any more
  impl_->collect();
}
timeline_memory lock_timeline::memory() const noexcept {
  timeline_memory m;
  m.owners = impl_->owners.live();
  m.endpoint_texts = impl_->texts.live();
  m.connections = impl_->connection_ids.size();
  m.text_bytes = impl_->owners.text_bytes() + impl_->texts.text_bytes();
  m.arena_bytes = impl_->owners.arena_bytes() + impl_->texts.arena_bytes();
  m.subscriber_clients = impl_->subscribers_by_client.size();
  return m;
}
std::int64_t lock_timeline::now_us() const noexcept { return impl_->now; }
std::int64_t lock_timeline::first_us() const noexcept { return impl_->first; }
std::size_t lock_timeline::lock_count() const noexcept { return impl_->locks.size(); }
const forgotten_locks& lock_timeline::forgotten() const noexcept { return impl_->forgotten; }
std::size_t lock_timeline::scope_count() const noexcept {
  std::size_t n = 0;
  for (std::uint32_t s = 0; s < impl_->scopes.size(); ++s) n += impl_->scopes[s].alias == no_id && impl_->scopes[s].seen;
  return n;
}

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
    lock_stats s = impl_->counts_of(l);
    const impl::scope& sc = impl_->scopes[impl_->canon(lock_store::scope_of(l))];
    s.server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
    s.db = sc.db;
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

}  // namespace lockscope::locks
