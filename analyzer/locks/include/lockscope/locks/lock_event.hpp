// What the timeline and the lock groups make of operations and every output reads: one
// change in a lock's life (acquired, contended, released, expired, an anomaly...), and
// the sink that receives events. Below the stages: the outputs include this header, not
// the timeline's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "lockscope/locks/lock_operation.hpp"

namespace lockscope::locks {

enum class lock_event_kind : std::uint8_t {
  acquired,
  reentered,
  contended,
  renewed,
  renew_failed,
  released,
  partially_released,
  unlock_rejected,
  force_released,
  expired,
  subscribed,
  notified,
  unsubscribed,
  anomaly,
  quorum,     // lock_groups: one owner's attempt on a key over several servers
  multilock,  // lock_groups: one owner acquiring several keys together
  redirected, // Redis Cluster: a call answered MOVED/ASK/TRYAGAIN/CLUSTERDOWN (not run
              // there; the client retries it elsewhere or later); no state changed
  gave_up,    // a waiter left without acquiring: wait_us, wait_ended says how it is known
  // Permit families (semaphores, latches; lock_operation.hpp permit_family). Their
  // acquired / contended / released / expired events carry `permits`, `permits_in_use`
  // and `permit_limit`.
  permits_set,  // a semaphore's permits set, added or drained (permit_limit: the limit
                // now when known); a latch's count set (permits_in_use: the count)
  counted_down, // a latch's countDown (permits_in_use: the count left; 0: its waiters go)
};
inline constexpr std::size_t lock_event_kind_count = 20;

// How a gave_up waiter's wait is known to have ended (the event comes when it is
// known; interval_start_us is the wait's first attempt, wait_us its length).
enum class wait_end : std::uint8_t {
  none,
  last_attempt,       // no attempt within its TTL + the margin: it stopped at its last attempt (a lower bound)
  unsubscribed,       // it left the lock's channel (Redisson's tryLock at its wait time)
  connection_closed,  // the connection of its attempts closed
  new_wait,           // the owner began a new wait (a retry no release, message or timer explains)
  left_queue,         // its client took it out of the lock's queue (Redisson's fair acquireFailed)
  group_decided,      // its MultiLock/RedLock went on without this server: the thread unlocked it (a lower bound)
  forced,             // its connection deleted the hold that refused it (a forced release): it stopped waiting then
  next_attempt_missed,  // a poller whose next attempt was due before the capture ended never made it (a lower bound)
  withdrew,           // where its next attempt was due, its client released the value it had been refused
};

enum class anomaly_kind : std::uint8_t {
  none,
  expired_while_held,
  overlapping_holders,
  unlock_by_non_owner,
  idle_with_waiters,
  woken_by_timeout,
  late_renewal,
  long_hold,
  non_atomic_acquire,
  quorum_lost,   // lock_groups: a quorum holder fell below quorum yet still acts as holder
  split_quorum,  // lock_groups: two owners each hold a quorum of one key's servers at once
  released_other_owner,
  unchecked_release,
  subscription_lost,
  holder_connection_closed,  // the connection that took the lock closed while it held it
};
inline constexpr std::size_t anomaly_kind_count = 15;

enum class link_confidence : std::uint8_t { none, certain, high, low };

// Which finding an anomaly event reports, one per sentence the outputs write for it
// (anomaly_text.hpp): the timeline and the lock groups report findings as data, with
// the figures in anomaly_facts, and never format text on their path.
enum class anomaly_finding : std::uint8_t {
  none,
  // long_hold: held past timeline_options::long_hold_us (duration_us).
  held_too_long,
  // idle_with_waiters, found at the threshold while a subscribed waiter still waits.
  idle_while_subscribed_waiter_waits,
  // idle_with_waiters, found when a waiter's retry proves it waited through the free time.
  idle_while_poller_slept,
  idle_while_subscribed_waiter_waited,
  idle_while_unsubscribed_waiter_waited,
  // ... through an earlier free interval, kept until this waiter's next attempt.
  idle_while_this_waiter_waited,
  idle_while_this_poller_slept,
  // subscription_lost: its subscriber had unsubscribed duration_us before the release.
  unsubscribed_before_release,
  not_subscribed_at_release,
  // woken_by_timeout.
  retried_without_notification,
  // overlapping_holders: acquired while other_owner held it; _db_guessed: a connection's
  // database was not seen (counted as db 0), so the two may be different locks.
  acquired_while_held,
  acquired_while_held_db_guessed,
  // expired_while_held: refused duration_us before the lease would run out (key lost).
  renewal_refused_key_lost,
  unlock_refused_key_lost,
  // expired_while_held: refused once the lease had run out.
  renewal_refused_lease_over,
  unlock_refused_lease_over,
  // unlock_by_non_owner.
  unlock_by_non_holder,
  unlock_of_free_lock,
  // late_renewal: duration_us since the previous renewal, expected every expected_ms.
  renewed_late,
  // non_atomic_acquire.
  setnx_expiry_not_atomic,
  // released_other_owner: the event's owner's connection DELeted other_owner's lock.
  del_removed_other_owner,
  // unchecked_release.
  released_by_plain_del,
  // quorum_lost: holds quorum.held of quorum.total servers (quorum.needed) after
  // quorum.lost ran out or refused a renewal.
  holds_below_quorum,
  // split_quorum: the event's owner holds quorum.held/quorum.total while other_owner
  // holds quorum.other_held/quorum.other_total (quorum.needed).
  two_quorums_held,
  // holder_connection_closed: the lease had duration_us left (-1: no lease, held until
  // released or deleted).
  connection_closed_while_holding,
  // overlapping_holders of a semaphore: its holders hold permits_in_use permits, more
  // than its permit_limit (within the limit, several holders are no anomaly).
  permits_over_limit,
};

// What an anomaly found, as data; which fields apply depends on `finding` (above).
struct anomaly_facts {
  anomaly_facts() = default;
  anomaly_facts(anomaly_finding f) noexcept : finding(f) {}  // NOLINT: a finding alone is its facts
  anomaly_facts(anomaly_finding f, std::int64_t duration, std::int64_t expected = -1) noexcept
      : finding(f), duration_us(duration), expected_ms(expected) {}
  anomaly_facts(anomaly_finding f, std::string_view other) noexcept : finding(f), other_owner(other) {}

  anomaly_finding finding = anomaly_finding::none;
  std::string_view other_owner;  // the other owner the finding names
  std::int64_t duration_us = -1; // the duration it names
  std::int64_t expected_ms = -1; // renewed_late: the expected time between renewals
  struct quorum_counts {
    std::uint32_t held = 0, total = 0, needed = 0, lost = 0, other_held = 0, other_total = 0;
  } quorum;
};

std::string_view to_string(lock_event_kind k) noexcept;
std::string_view to_string(anomaly_kind k) noexcept;
std::string_view to_string(link_confidence c) noexcept;
std::string_view to_string(wait_end w) noexcept;

// What a quorum / multilock event reports (lock_event::group), made by lock_groups.hpp.
struct lock_group {
  std::int64_t start_us = 0;   // the first try
  std::int64_t end_us = 0;     // the last try
  std::uint32_t total = 0;     // quorum: the key's servers; multilock: the keys tried
  std::uint32_t acquired = 0;  // servers / keys acquired
  std::uint32_t needed = 0;    // quorum: total/2 + 1; multilock: total
  bool succeeded = false;      // acquired >= needed
  bool released = false;       // failed, and what it had acquired was released
  // quorum: a Redisson group over 3 servers or more not yet seen to be a RedLock (going on
  // past a refusal) or a MultiLock (giving back after one): without a refusal the two are
  // the same on the wire (the same script on each server in turn, the same lease, an
  // unlock of every server), so `needed` is a RedLock's majority, a MultiLock's `total`.
  bool kind_unknown = false;
  std::span<const std::string_view> acquired_on;  // quorum: servers; multilock: keys
  std::span<const std::string_view> owners;       // quorum: the owner on each of acquired_on
  std::span<const std::string_view> tried;        // multilock: every key tried
};


// One change in a lock's life. Views are valid during the sink call only. Durations
// are microseconds internally; -1 = does not apply.
struct lock_event {
  std::int64_t ts_us = 0;
  lock_event_kind event = lock_event_kind::acquired;
  anomaly_kind kind = anomaly_kind::none;
  std::string_view lock;
  std::string_view owner;
  // The timeline's text hash of `owner` (hash_text, as its owner table keeps it), so that
  // a later stage keyed by owners need not hash it again: valid only while `owner` views
  // the text it came with (owner.data() == owner_hashed; a stage that copies or replaces
  // the text leaves it behind). nullptr: none given.
  const char* owner_hashed = nullptr;
  std::uint32_t owner_hash = 0;
  std::string_view client;   // "ip:port" of the connection concerned
  std::string_view server;   // that connection's server
  // The same two as addresses, when the stage that made the event had them (else null:
  // the texts above are then the only spelling, and a reader parses them).
  const endpoint* client_endpoint = nullptr;
  const endpoint* server_endpoint = nullptr;
  // The lock's identity besides its name: its server ("" when merge_servers) and
  // database (an unknown database: see Identity above).
  std::string_view lock_server;
  std::int32_t db = 0;
  std::int64_t hold_count = -1;
  std::int64_t lease_ms = -1;
  std::int64_t ttl_ms = -1;
  std::int64_t wait_us = -1;
  std::int64_t held_us = -1;
  std::int64_t token = -1;   // fenced lock token
  // The stretch of time an anomaly found after the fact is about (idle_with_waiters:
  // the lock free from interval_start_us for interval_us; subscription_lost: from the
  // release the waiter did not hear to its retry). -1: does not apply.
  std::int64_t interval_start_us = -1;
  std::int64_t interval_us = -1;
  bool inferred = false;
  link_confidence confidence = link_confidence::none;
  // wait_us is a lower bound: the owner's first attempt seen came on a connection joined
  // mid-stream, early enough in the capture that earlier attempts may not be in it.
  bool wait_at_least = false;
  // gave_up only, when its end is only bounded (wait_at_least, its start exact): the
  // longest it can have waited: to the earliest of the event that ended it (its
  // connection's close, the deadline) and when its next attempt was due after its last
  // refusal (next_attempt_reach_us). The client's wait lies in [wait_us, wait_at_most_us].
  // -1: no upper bound other than wait_us (the end is exact) or none known.
  std::int64_t wait_at_most_us = -1;
  // gave_up only, with wait_at_least: the wait its owner's earlier give-ups on this lock
  // had, when at least two were exact, agree within 10% and lie within the bounds (a
  // tryLock timeout, a retry budget: the same each time). Its client's likely wait, not
  // seen on the wire; wait_likely_from: how many give-ups it rests on. -1: none.
  std::int64_t wait_likely_us = -1;
  std::uint8_t wait_likely_from = 0;
  // The hold began before the capture: on the renewal or partial release that first
  // shows its holder, and on its release or expiry, whose held_us is then a lower bound
  // counted from the capture's start (timeline_options::capture_start_us), and marked
  // "≥" in the lock's hold times.
  bool held_since_capture_start = false;
  // On a waiter's `contended` or `acquired`: the anomaly its attempt would have raised
  // (woken_by_timeout, subscription_lost, idle_with_waiters) had its subscriber link been
  // certain; withheld because the link is only a guess (none: nothing withheld).
  anomaly_kind link_not_certain = anomaly_kind::none;
  anomaly_facts found;       // an anomaly's finding (put into words by anomaly_text.hpp)
  const lock_group* group = nullptr;  // quorum / multilock events (lock_groups.hpp)
  // Redis Cluster. redirected: the reply, its slot and target node (MOVED/ASK), and the
  // call it answered (`operation`). Any event: `asking`, the call went to the importing
  // node after an ASK (it followed an answered ASKING).
  cluster_reply redirect = cluster_reply::none;
  std::int32_t slot = -1;
  std::string_view redirect_to;
  lock_op_kind operation = lock_op_kind::acquire;
  bool asking = false;
  wait_end wait_ended = wait_end::none;  // gave_up
  // A holder whose connection closed while it held (holder_connection_closed): on its
  // `expired`, and on the acquired / gave_up of a waiter that waited for it, when its
  // connection closed and (-1: not yet, or not by expiry) when its lease ran out.
  std::string_view closed_holder;
  std::int64_t closed_holder_us = -1;
  std::int64_t closed_holder_expired_us = -1;
  // Permit families: the permits this event took or gave back (-1: not a permit event),
  // the permits held after it (a latch: its count) and the limit (-1: not known, e.g.
  // joined mid-run before the semaphore's permits were set).
  std::int64_t permits = -1;
  std::int64_t permits_in_use = -1;
  std::int64_t permit_limit = -1;
  bool latch = false;  // a count-down latch's event: permits_in_use is its count
  // On a `contended`: the same value holds the lock over another connection to its
  // server, so several clients send this one value (redis-mutex, ioredis-mutex: `mutex`
  // from every process). No identity for the lock groups.
  bool owner_shared = false;
  // On an `acquired`: the key's first operation in the capture, taken by a SET NX-style
  // call (a string value, no waiter, nothing seen of the key before). Such a key may be
  // a marker set once and never used again (an idempotency or dedupe key), not a lock:
  // the set_once_keys stage holds the event until the key is used again.
  bool first_of_key = false;
  // On a `released` by a plain DEL (no owner checked): the keys that call named (1: this
  // one; at most 255). The lock groups read a give-back by it (lock_groups.cpp).
  std::uint8_t keys_named = 0;
};

class lock_event_sink {
 public:
  virtual ~lock_event_sink() = default;
  virtual void on_event(const lock_event& e) = 0;
};

}  // namespace lockscope::locks
