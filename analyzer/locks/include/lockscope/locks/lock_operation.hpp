// What the recognizer makes of an exchange and every later stage reads: one operation on
// a lock (an acquire, an unlock, a renewal, a subscription, a message...), with its
// outcome, and the sink that receives operations. Below the stages: the timeline, the
// groups and the outputs include this header, not the recognizer's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lockscope/ingest/exchange.hpp"

namespace lockscope::locks {

// The ingest's vocabulary that the lock stages read: the exchange (with its message and
// endpoints) and the session's events. Anything else of the ingest is named ingest::.
using ingest::endpoint;
using ingest::exchange;
using ingest::exchange_kind;
using ingest::exchange_sink;
using ingest::message;
using ingest::message_node;
using ingest::session_event;
using ingest::session_event_kind;

enum class lock_family : std::uint8_t {
  redisson,        // RedissonLock (hash owner → count, pub/sub wake-ups)
  redisson_fair,   // RedissonFairLock (queue + timeout zset, per-waiter channel)
  redisson_read,   // RedissonReadLock (shared)
  redisson_write,  // RedissonWriteLock
  redisson_spin,   // RedissonSpinLock (no channel: back-off retries)
  redisson_fenced, // RedissonFencedLock (token in the reply)
  set_based,       // SET NX PX + get==token scripts (redis-py, redsync, redis-plus-plus)
  redlock_multi,   // node-redlock's multi-key scripts
  setnx,           // SETNX + EXPIRE (non-atomic)
  unknown,
  // Several holders (permits): see `permits` / `limit` below and timeline/permits.hpp.
  redisson_semaphore,   // RSemaphore: the key holds the free permits; no owner on the
                        // wire (a holder is the connection that took the permit)
  redisson_expirable,   // RPermitExpirableSemaphore: each permit an id with an expiry
  redisson_latch,       // RCountDownLatch: the key holds the count; waiters go at zero
  semaphore,            // another client's sorted-set semaphore (a member per holder,
                        // the limit from the script's comparison argument)
  subscription,         // held by a pub/sub subscription (PUBSUB NUMSUB, then SUBSCRIBE:
                        // portalocker): the owner is the client host; no lease
};
// A family whose lock has several holders by design (semaphores, latches): the
// timeline counts its permits instead of judging holders' overlaps.
inline bool permit_family(lock_family f) noexcept {
  return f == lock_family::redisson_semaphore || f == lock_family::redisson_expirable ||
         f == lock_family::redisson_latch || f == lock_family::semaphore;
}

enum class lock_op_kind : std::uint8_t {
  acquire,       // reply: acquired / contended (ttl_ms when known) / error
  unlock,        // reply: released / partially released / rejected
  renew,         // reply: renewed / failed
  force_unlock,  // reply: released / nothing to release
  expire,        // plain EXPIRE/PEXPIRE on a key (a renewal when the key is a held lock)
  del,           // plain DEL on a key (a release when the key is a held lock); of the
                 // set_based family: deleted on the server's check of the value (DELEX
                 // IFDEQ, by its digest): the release of whoever holds it
  subscribe,
  unsubscribe,
  message,       // a pub/sub message delivered on `channel`
  cluster_link,  // no lock: server_text and redirect_to are nodes of one Redis Cluster
                 // (a MOVED/ASK target, a CLUSTER SLOTS/SHARDS reply's nodes)
  set_permits,   // a semaphore's permits set (trySetPermits: ok = set, none = already
                 // set), added (addPermits: `permits` may be negative) or drained; a
                 // latch's trySetCount (`permits` = the count)
  count_down,    // a latch's countDown
};

// A Redis Cluster reply that did not run the command: the client is to retry it
// elsewhere (MOVED: the slot lives on another node; ASK: this once, on the importing
// node, after ASKING) or later (TRYAGAIN: a multi-key call during a slot's migration;
// CLUSTERDOWN: the cluster cannot serve the slot now).
enum class cluster_reply : std::uint8_t { none, moved, ask, tryagain, clusterdown };
std::string_view to_string(cluster_reply r) noexcept;
std::string_view to_string(lock_op_kind k) noexcept;  // "acquire", "unlock", ...

// `-MOVED 3999 127.0.0.1:6381` / `-ASK …` / `-TRYAGAIN …` / `-CLUSTERDOWN …`: the kind,
// the slot and the target ("ip:port", an IPv6 address bracketed as the analyzer names
// endpoints: "[::1]:6381"). An error text that is none of these gives kind none; a
// MOVED/ASK that does not parse (no slot, a slot beyond 16383, no port) gives kind none
// and `malformed` set, so the caller can say so and keep the plain error.
struct cluster_redirect {
  cluster_reply kind = cluster_reply::none;
  std::int32_t slot = -1;
  std::string_view host;   // as sent (no brackets)
  std::uint16_t port = 0;
  bool malformed = false;
};
cluster_redirect parse_cluster_error(std::string_view error_text) noexcept;
// "host:port" as lock_operation::server_text spells endpoints ("[host]:port" for IPv6).
std::string cluster_node_text(std::string_view host, std::uint16_t port);

enum class op_outcome : std::uint8_t {
  ok,         // acquired / released / renewed / subscribed
  contended,  // acquire: held by someone else
  partial,    // unlock: one reentrant level released, still held
  rejected,   // unlock/renew/extend: not held by this owner (nil / 0 / -1)
  expired,    // redsync release: -1, the key was already gone
  redirected, // a cluster reply (MOVED/ASK/TRYAGAIN/CLUSTERDOWN: see `redirect`): not
              // run here, to be retried elsewhere or later; no state changed
  none,       // force unlock / del / expire that found no key; a value-checked call that
              // changed nothing: a failed attempt's clean-up release, a retried refused
              // release, a quorum retry on a server the value already holds, a
              // retried Redisson unlock (its latch replays the first reply)
  error,      // an error reply
  no_reply,   // no reply was captured
  abandoned,  // acquire: the owner stopped waiting, and its client cleaned up after it
              // (Redisson's fair acquireFailed): its wait ends here, as a give-up
};

struct lock_operation {
  lock_op_kind kind = lock_op_kind::acquire;
  lock_family family = lock_family::unknown;
  op_outcome outcome = op_outcome::no_reply;
  bool inferred = false;          // EVALSHA of an unknown script: kind guessed
  bool shared = false;            // a read lock: several holders are legal
  bool lease_added = false;       // renew: lease_ms is added to the remaining TTL (redis-py's extend)
  bool server_dropped = false;    // unsubscribe: the server dropped the shard channel (its slot
                                  // moved); the client asked for nothing and may subscribe again
  std::uint8_t keys_named = 0;    // del: the keys the call named (DEL k1 k2: 2; at most 255); 0 other calls
  std::string_view lock;          // the lock's key
  std::string_view owner;         // Redisson owner, or the SET value/token
  std::string_view channel;       // wake-up channel when the operation names one
  std::int64_t lease_ms = -1;     // requested lease; -1 none/unknown
  std::int64_t ttl_ms = -1;       // contended acquire: the holder's remaining TTL
  std::int64_t token = -1;        // fenced lock token
  std::string_view message;       // kind == message: the payload
  std::int64_t sub_count = -1;    // (un)subscribe: the count in the server's confirmation
                                  // of this channel (subscriptions left); -1 not seen
  // Permit families (permit_family): acquire/unlock: the permits asked or given back;
  // set_permits: the permits set or added (latch: the count); -1 unknown. `limit`: the
  // semaphore's limit when the call tells it (a sorted-set semaphore's comparison
  // argument; set_permits: the free permits after the call when known); -1 unknown.
  // A permit id (RPermitExpirableSemaphore) or a sorted-set member is the `owner`.
  std::int64_t permits = -1;
  std::int64_t limit = -1;
  // The caller's clock (Unix ms) as the call passed it (a permit-expirable or sorted-set
  // semaphore's `now`: the server judges its permits' expiry by it); -1 none.
  std::int64_t caller_now_ms = -1;
  // Redis Cluster: the reply that redirected this call (outcome redirected), its slot
  // and target node ("ip:port"; MOVED/ASK only); `asking`: the call followed an
  // answered ASKING on its connection (sent to the importing node after an ASK).
  cluster_reply redirect = cluster_reply::none;
  bool asking = false;
  // renew: a hold the capture shows neither taken nor freed (its key named by no call
  // that takes or frees it: an unseen script builds it), known from its renewals alone.
  // Its holder may have freed it unseen at any time, so its lease's end is no expiry.
  // (Here and below, beside `asking`, where the operation has spare bytes.)
  bool ends_unseen : 1 = false;
  // A semaphore's acquire whose owner each try draws anew: a waiter's refused tries
  // are its connection's on the lock.
  bool fresh_owner : 1 = false;
  // subscribe / message / unsubscribe read from a keyspace notification channel
  // (`__keyspace@<db>__:<key>`, `__keyevent@<db>__:<event>`): `lock` is a key named by a
  // channel or a payload, any key of the database, so it counts only for a key already
  // known as a lock; `db` is the channel's.
  // (Bit-fields: the three share the byte the struct had spare.)
  bool by_notification : 1 = false;
  std::int32_t slot = -1;
  std::string_view redirect_to;
  std::uint64_t connection = 0;
  // The connection's database (SELECT answered +OK, RESET; 0 for a connection seen
  // from its SYN); -1: unknown (joined mid-stream, or a gap before any SELECT).
  std::int32_t db = 0;
  // The exchange's place among its connection's (exchange::connection_sequence): how
  // much else the connection did between two of its lock operations.
  std::uint32_t connection_sequence = 0;
  const endpoint* client = nullptr;
  const endpoint* server = nullptr;
  std::string_view client_text;
  std::string_view server_text;
  std::int64_t request_us = 0;
  std::int64_t reply_us = -1;     // -1: no reply (pushes: == request_us)
  // The connection's life, which ties a subscriber connection to its process's command
  // connection: when its SYN was captured (-1: joined mid-stream), and the name it gave
  // itself (CLIENT SETNAME, HELLO ... SETNAME; empty: none seen).
  std::int64_t opened_us = -1;
  std::string_view client_name;

  // When the operation took effect: the reply's time (the server ran it before).
  std::int64_t at_us() const noexcept { return reply_us >= 0 ? reply_us : request_us; }
};

class lock_operation_sink {
 public:
  virtual ~lock_operation_sink() = default;
  virtual void on_operation(const lock_operation& op) = 0;
  // Forwarded from the ingest pipeline (gaps, decode errors); ignored by default.
  virtual void on_session_event(const session_event&) {}
  // The connection ended (closed, reset, idled out or evicted): no operation names it
  // after this call. Forwarded from the ingest pipeline; ignored by default.
  virtual void on_connection_end(std::uint64_t /*connection*/, std::int64_t /*at_us*/) {}
  // The operations this sink is given next, in this order (each then through
  // on_operation): a sink may start loading the memory they touch, so that the cache
  // misses of many overlap instead of each stalling in turn. Changes nothing that can
  // be observed. Ignored by default. The texts the announced operations view stay as
  // they are until those operations are delivered (another operation may be delivered
  // in an announced one's place: it is then handled as if unannounced).
  virtual void will_handle(std::span<const lock_operation> /*upcoming*/) noexcept {}
};

}  // namespace lockscope::locks
