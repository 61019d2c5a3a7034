// Stage 2 of `lockscope analyze`: lock operations in, per-lock events out.
//
//   lock_timeline t(options, event_sink);   // is a lock_operation_sink
//   t.on_operation(op);      // in time order; advances the clock to op.at_us() first
//   t.advance_to(now_us);    // live: lets lease deadlines pass with no traffic
//   t.finish(last_ts_us);    // end of the capture (deadlines after it do not fire)
//
// Per lock it keeps the holders (owner, hold count, lease deadline = reply time +
// lease), the waiters and emits one lock_event per change, plus anomalies.
//
// A waiter waits from its first failed attempt until it acquires or shows it gave up:
// its connection ends, or it makes no attempt within the last TTL it was given (the
// contended reply's PTTL; else the holder's remaining lease; else 30 s) plus
// waiter_margin_us. Its subscription is a property of the wait, not its definition:
// it may subscribe, lose the subscription (node-redisson UNSUBSCRIBEs a channel while
// its waiters still wait) and subscribe again. Each attempt shows the waiter waited
// since its previous one, so what happened meanwhile is judged at that attempt:
//   expired_while_held   the owner renews or unlocks after its lease ran out (renew 0,
//                        unlock nil, redsync -1) — "not locked by current thread"
//   overlapping_holders  an exclusive lock acquired by B while A's lease cannot yet
//                        have run out (B's reply came before A's request time + lease),
//                        unless A's unlock was sent before B's reply and its reply came
//                        within reply_skew_us (the capture's order, not the server's);
//                        so it is emitted reply_skew_us late, with B's acquisition time
//   unlock_by_non_owner  an unlock rejected while someone else (or nobody) holds it
//   idle_with_waiters    the lock stayed free >= idle_threshold while a waiter waited,
//                        subscribed or not. Emitted when certain, in time order, with
//                        the free interval (interval_start_us, interval_us): at free +
//                        threshold when a waiter is subscribed then (clients unsubscribe
//                        when they give up), else at the waiter's next attempt (the
//                        interval up to it or to whoever took the lock meanwhile)
//   subscription_lost    a waiter of a pub/sub lock whose subscriber connection had
//                        unsubscribed from the channel (or had not subscribed yet) when
//                        the lock was released (unlock, forced unlock), and which then
//                        retried by its timer: nobody told it. Emitted at that retry,
//                        the interval from the release; once per wait
//   woken_by_timeout     a waiter of a pub/sub lock that has subscribed in this wait
//                        retried with no message on its subscriber since its previous
//                        attempt, subscribed or not by then. Not a timer: a retry within
//                        wake_window_us of its SUBSCRIBE's confirmation (Redisson), or
//                        sooner than min(wake_window_us, 0.9 x its TTL) after its previous
//                        attempt (node-redisson retries once at once). Once per wait
//   late_renewal         a Redisson renewal came > 1.5 × lease/3 after the previous
//                        renewal (or the acquisition)
//   long_hold            held longer than long_hold (emitted when the time passes)
//   non_atomic_acquire   SETNX acquired the lock: its expiry, if any, comes from a
//                        separate EXPIRE, and a crash in between leaves it forever
//   released_other_owner a plain DEL removed a holder other than the owner that last
//                        acquired (or renewed) the lock on the DEL's connection: a client
//                        whose lease ran out deleted its successor's lock
//   unchecked_release    a plain DEL released the lock (it checks no owner); once per lock
// Identity: a lock is its (server, database, key): the same key on two redis-servers,
// or in two databases of one, is two locks (merge_servers: the key on any server). The
// server is the connection's "ip:port"; the database the operation's (unknown: 0, or
// the one other database of that server where the key is known, if exactly one).
// Redis Cluster: nodes the traffic shows to be one cluster (a MOVED/ASK naming another
// node, a CLUSTER SLOTS/SHARDS reply: cluster_link operations) are one server for
// identity, named "cluster:<the first node seen>": a lock whose slot moved between
// masters stays one lock, its redirects events of it. Locks seen on a node before it
// was linked join the cluster's; a name seen on two nodes before they were linked (a
// key on two separate servers, then told they are one cluster) stays two rows, the
// first-seen one receiving later operations.
// Expiries are emitted AT the deadline by the clock (advance_to), even when nothing
// follows for that lock.
//
// Memory: owners, connections and their "ip:port" texts are reference-counted and
// freed when nothing names them: a connection once it has ended (on_connection_end:
// closed, reset, idled out or evicted by the ingest) and no holder or waiter names it,
// an owner once no holder, waiter, subscription or expired-lease record names it. A
// capture of short-lived connections with fresh owners therefore holds only what the
// locks held at the moment need, however long it runs. Every lock kept (all of them, or
// up to timeline_options::max_locks: see forgotten()) has a 32-byte row (its summary: counters, the first
// hold inline) directly followed by its (server, database) scope index and its name
// (1 byte each for the scope index and the length, no padding), and an 8-byte id slot
// at most 7/10 full: 45-49 bytes + the name's length a lock. A held lock
// adds a 44-byte holder and an 8-byte timer entry (12 bytes if it came out of order).
// Later hold samples, waiters and anomaly counts live in side records only the locks
// that have them pay for; a lock's samples are exact up to duration_exact_limit, then
// a histogram of at most a few KiB, so no lock grows with the capture's length.
// Waiters go when they acquire or give up (connection end, TTL + margin); what a
// subscriber connection learns (3 partner clients, 8 channels it left) lives in its
// connection entry and goes with it.
//
// Waiter ↔ subscriber connection linking: Redisson subscribes on a separate
// connection, and several processes on one host share the client IP. A waiter belongs
// to a client: the UUID of a Redisson-style owner id (its threads share one subscriber
// connection, over any command connection), else its command connection. Each
// subscriber connection learns from episodes which client it serves:
//   - it SUBSCRIBEs right after a client's failed attempt, no other client's failure
//     being nearly as recent (within wake_window_us; the next one 4x + 1 ms older);
//   - after a message on it (one publish that reached several subscribers teaches
//     nothing) or an UNSUBSCRIBE on it (node-redisson leaves, then retries), one client
//     attempts first, no other client nearly as soon;
//   - it UNSUBSCRIBEs within wake_window_us of the acquisition by a waiter that was
//     still subscribed (Redisson and our client leave the channel once they hold it).
// A pairing is established after certain_after (3) episodes with at most 1 in 8
// pointing elsewhere. Events on the connection then name that client's waiter,
// `certain`. Otherwise a SUBSCRIBE is linked to the waiter of the same client IP within
// link_window whose failure came last before it (the client the episodes point to
// first, a client whose episodes point to another subscriber last): `high` only when
// it was the one candidate and no episode contradicts it, else `low`. The same
// connection (RESP3 commands and pushes on one) is `certain`. Confidence is worked out
// again at every event from the episodes so far, and an established pairing re-links.
// An UNSUBSCRIBE answered with 0 on a channel the connection is not subscribed to, or of
// a channel it was seen leaving, is no event.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_event.hpp"
#include "lockscope/locks/lock_operation.hpp"

namespace lockscope::locks {


struct timeline_options {
  std::int64_t idle_threshold_us = 50'000;
  // When the capture began (its first packet; live: when capturing began): a hold begun
  // before it is held from then (lock_event::held_since_capture_start). -1: from the
  // first lock operation.
  std::int64_t capture_start_us = -1;
  std::int64_t long_hold_us = 60'000'000;
  std::int64_t link_window_us = 1'000'000;
  // A waiter that makes no attempt within the last TTL it was given plus this margin
  // gave up (as does one whose connection ends).
  std::int64_t waiter_margin_us = 2'000'000;
  // An attempt this soon after a wake-up (a message on its subscriber, its SUBSCRIBE's
  // confirmation) or after its previous attempt is a reaction to it, not a timer.
  std::int64_t wake_window_us = 20'000;
  double late_renewal_factor = 1.5;  // × lease/3
  // A connection that closes holding locks: holder_connection_closed on every lock
  // someone waits for, and on this many of those nobody waits for, when it held at most
  // this many (or they are among the 4 locks it used last); the rest are named when a
  // waiter's wait ends. A connection holding thousands (a batch job, a load generator)
  // costs neither an anomaly record per lock nor a scan of every lock.
  std::size_t closed_holders_reported = 64;
  // Replies on different connections can be captured up to this far out of the order
  // the server ran the commands in (redis-server writes a loop's replies client by
  // client): an acquisition while another owner holds the lock is reported as
  // overlapping_holders only once this long passed without that owner's unlock sent
  // before the acquisition's reply.
  std::int64_t reply_skew_us = 10'000;
  // A subscriber event whose link is a guess (`low`: processes of one address that
  // subscribed within milliseconds of each other; or none, on a subscription begun
  // before the capture) waits up to this long (capture time) for the traffic to tell
  // whose it is (the process that acquires and then leaves the channel), and goes out
  // naming that process; every later event waits behind it, so
  // outputs stay in time order. Past the bound (or 512 such events a lock, 2048 events
  // held in all), or when its connection ends first, it goes out with its guess. A
  // herd's guesses (more than 32 waiters on the lock) are not held. 0: no holding (each
  // event as it happens; `analyze` live: 1 s).
  std::int64_t link_hold_us = 10'000'000;
  // A lock is (server, database, key); merge_servers drops the server from it (one
  // logical lock service behind several endpoints: a failover, a resharding). The
  // database still tells locks apart.
  bool merge_servers = false;
  // Rows kept (0: no limit). A lock's row is its summary, so a capture or a live run
  // with ever-new lock names (a lock per order id) would grow without end. When the
  // rows reach max_locks, the idle ones are forgotten (forget_idle_locks below); when
  // more than half are busy, the next pass waits until there are twice as many.
  std::size_t max_locks = 0;
};

// Percentiles of one lock's hold or wait times (microseconds; -1: no samples).
// Exact (nearest rank over every sample) up to duration_exact_limit samples; beyond,
// p50/p99 come from a log-linear histogram (64 sub-buckets per power of two: within
// 0.8% of the true value, never above max) while count and max stay exact.
inline constexpr std::size_t duration_exact_limit = 256;
struct duration_stats {
  std::uint64_t count = 0;
  std::int64_t p50 = -1, p99 = -1, max = -1;
  bool exact = true;
  // Some samples are lower bounds (a wait or hold begun before the capture): so are the
  // figures (the summary writes them "≥").
  bool at_least = false;
};

// Aggregates per lock, for the summary table.
struct lock_stats {
  std::string_view server;  // the lock's identity besides its name (see lock_event)
  std::int32_t db = 0;
  std::uint64_t acquisitions = 0;            // acquired (not reentered)
  std::uint64_t contended_acquisitions = 0;  // acquired after at least one failed attempt
  std::uint64_t gave_up = 0;                 // waits that ended without an acquisition (gave_up)
  std::uint64_t renewals = 0;
  std::uint64_t expiries = 0;
  std::uint64_t anomalies[anomaly_kind_count] = {};
  duration_stats hold;                       // completed holds
  duration_stats wait;                       // waits that ended in an acquisition
  // The samples themselves, in time order, while they are kept exactly (else empty).
  std::span<const std::int64_t> hold_us;
  std::span<const std::int64_t> wait_us;
  // A semaphore or latch (lock_operation.hpp permit_family); permits_peak -1: not one.
  // Semaphore: its limit (-1 not known), the most permits held at once, those held at
  // the end, and the attempts refused. Latch (`latch`): permit_limit and permits_in_use
  // are its count at the end (-1 not known).
  std::int64_t permit_limit = -1;
  std::int64_t permits_peak = -1;
  std::int64_t permits_in_use = -1;
  std::uint64_t permit_refusals = 0;
  bool latch = false;
  std::uint64_t anomaly_total() const noexcept {
    std::uint64_t n = 0;
    for (std::uint64_t a : anomalies) n += a;
    return n;
  }
};

// How a lock ranks where only the busiest are shown (the summary's top N, the HTML
// report's blocks): by trouble (contended acquisitions + waits given up + anomalies), then by activity
// (acquisitions + renewals + expiries); ties go to the lock seen first.
struct lock_rank {
  std::uint64_t trouble = 0;
  std::uint64_t activity = 0;
  explicit lock_rank(const lock_stats& s) noexcept
      : trouble(s.contended_acquisitions + s.gave_up + s.anomaly_total()), activity(s.acquisitions + s.renewals + s.expiries) {}
};

// Locks whose rows were given up (timeline_options::max_locks), and what their rows
// had counted: the summary's totals, never its per-lock percentiles. A forgotten lock
// seen again starts a new row.
struct forgotten_locks {
  std::uint64_t passes = 0;  // times the rows were reached
  std::uint64_t locks = 0;
  std::uint64_t acquisitions = 0;
  std::uint64_t contended_acquisitions = 0;
  std::uint64_t gave_up = 0;
  std::uint64_t renewals = 0;
  std::uint64_t expiries = 0;
  std::uint64_t anomalies[anomaly_kind_count] = {};
};

// Owners, connections and "ip:port" texts held right now: those named by a holder, a
// waiter, a subscription or a lock's last expired owner, and connections not yet ended.
struct timeline_memory {
  std::size_t owners = 0;
  std::size_t endpoint_texts = 0;
  std::size_t connections = 0;
  std::size_t text_bytes = 0;   // the live texts
  std::size_t arena_bytes = 0;  // the blocks that hold them (live + dead not yet compacted)
  std::size_t subscriber_clients = 0;  // clients with a subscription a new waiter of theirs would share
};

// Not a connection (ingest numbers them from 1): its end says that the capture ends, and
// that the connection ends after it close flows still open (lock_pipeline sends it).
inline constexpr std::uint64_t capture_ends_connection = 0;

class lock_timeline final : public lock_operation_sink {
 public:
  lock_timeline(const timeline_options& options, lock_event_sink& sink);
  ~lock_timeline() override;
  lock_timeline(const lock_timeline&) = delete;
  lock_timeline& operator=(const lock_timeline&) = delete;

  void on_operation(const lock_operation& op) override;
  // Loads the locks of the operations that come next (see operation_batch).
  void will_handle(std::span<const lock_operation> upcoming) noexcept override;
  // The connection's texts are freed once no holder or waiter names it any more. A
  // connection seen closing (FIN, RST; also an idle or evicted flow) while its owner
  // holds a lock is holder_connection_closed, and its waiters gave up (gave_up). After
  // on_connection_end(capture_ends_connection, _) the ends that follow are the flows
  // still open when the capture ended: nothing closed, nobody gave up.
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override;
  // Emits every timed event (expiry, idle, long hold) due at or before now_us.
  void advance_to(std::int64_t now_us);
  // The end of the capture: advance_to(end_us), and what waited for later replies is
  // decided (an overlap suspected within reply_skew_us of the end is reported).
  void finish(std::int64_t end_us);

  std::int64_t now_us() const noexcept;
  std::int64_t first_us() const noexcept;  // the first operation's time (-1: none)
  // The time of the oldest event still held back (timeline_options::link_hold_us), -1:
  // none: the events emitted so far are complete up to there (a stage downstream that
  // closes time windows, lock_groups, must not pass it).
  std::int64_t held_from_us() const noexcept;
  // The rows kept now (forgotten and set-aside ones not counted).
  std::size_t lock_count() const noexcept;
  // After finish(): takes the lock (its key, its server as its events name it, its
  // database) out of the locks, a key that turned out not to be one (a marker set once
  // and never used again: set_once_keys.hpp). for_each_lock, for_each_lock_name and
  // lock_count leave it out from then on; set_aside_families() counts it under `shape`
  // (the family of keys it belongs to). False: no such lock.
  bool set_aside(std::string_view lock, std::string_view lock_server, std::int32_t db, std::string_view shape);
  struct set_aside_family {
    std::string shape;
    std::string example;  // its first key set aside
    std::uint64_t keys = 0;
  };
  // The locks set aside, by family, in the order their first key was set aside.
  const std::vector<set_aside_family>& set_aside_families() const noexcept;
  // Idle locks are forgotten when the rows reach timeline_options::max_locks: a lock
  // with no holder, no waiter, no pending timer, no expired-lease record (that owner's
  // late renewal is an anomaly) and that no subscription, pending overlap or waiting
  // connection names. What its row counted goes into these totals; its next operation
  // finds no history (so a once-per-lock anomaly such as unchecked_release may be
  // reported again). Events are otherwise the same as without the limit.
  const forgotten_locks& forgotten() const noexcept;
  // The distinct (server, database) pairs locks were seen in (1: no name can be ambiguous).
  std::size_t scope_count() const noexcept;
  // Every lock seen, in first-seen order.
  void for_each_lock(const std::function<void(std::string_view lock, const lock_stats&)>& f) const;
  void for_each_lock_name(const std::function<void(std::string_view lock)>& f) const;
  // Every semaphore and latch (lock_operation.hpp permit_family), in no set order, with
  // its server, database and permit fields of lock_stats (the others left zero): a
  // walk over these few, not over every lock.
  void for_each_permit_lock(const std::function<void(std::string_view lock, const lock_stats&)>& f) const;
  // Part `part` of `parts` (part < parts, else std::invalid_argument): the locks in
  // first-seen order cut into consecutive runs of about equal size. Visiting parts
  // 0..parts-1 in turn visits every lock once, in order. Different parts may be visited
  // from different threads at once (nothing else may use the timeline meanwhile).
  void for_each_lock(std::size_t part, std::size_t parts,
                     const std::function<void(std::string_view lock, const lock_stats&)>& f) const;
  // The length of the longest lock name seen (0: none).
  std::size_t longest_lock_name() const noexcept;
  // What the timeline holds besides its locks (tests, diagnostics).
  timeline_memory memory() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace lockscope::locks
