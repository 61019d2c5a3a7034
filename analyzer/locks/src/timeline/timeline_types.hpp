// The timeline's records besides a lock's row (lock_store.hpp): a connection's address,
// a waiter, a wake-up, a lock's rarely needed extra part and side record, a connection's
// entry, and what the traffic says of a subscriber connection's client.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "lockscope/locks/lock_event.hpp"
#include "lockscope/locks/lock_operation.hpp"
#include "timeline/duration_histogram.hpp"
#include "timeline/flat_id_map.hpp"
#include "timeline/lock_store.hpp"
#include "timeline/waiter_keys.hpp"
#include "timeline/waiter_vector.hpp"

namespace lockscope::locks::timeline_detail {

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

inline address address_of(const endpoint* e) {
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
  std::uint8_t unused_a = 0;         // (the unused_ fields: padding made explicit, always 0)
  std::uint16_t ip_tag = 0;          // its connection's address's tag()
  bool pubsub : 1 = false;           // its lock wakes waiters by pub/sub
  bool notified : 1 = false;         // woken by a message since its latest attempt
  bool timeout_reported : 1 = false;
  bool lost_reported : 1 = false;
  bool left_channel : 1 = false;     // its own subscription ended by an UNSUBSCRIBE, no sibling sharing it
  // Whether its wait may have begun before the capture (the acquisition's wait_at_least):
  bool mid_stream : 1 = false;       // its first attempt seen came on a connection joined mid-stream
  bool quick_second : 1 = false;     // its second attempt came at once (a first failure's retry)
  bool gaps_shrank : 1 = false;      // a spacing came under 3/4 of the one before (no backoff: note_gap)
  // The most exchanges its connection carried between a refusal of it and its retry
  // there (255: that many or more): what its retry loop does between tries (nothing, a
  // read of the lock, a pool's other work). value_redrawn_at_cadence holds a new value to it.
  std::uint8_t busy_between_retries = 0;
  std::uint16_t first_gap_ms = 0;    // its first spacing not at once, ms (note_gap); 0 none yet
  std::uint32_t attempts = 1;
  // Attempts without a stable owner (waiter_of_fresh_value): its owner came back in a
  // later attempt (a stable one, never relinked), or changed from one attempt to the next.
  bool owner_repeated : 1 = false;
  bool fresh_values : 1 = false;
  bool withdrawn : 1 = false;  // its client released its latest value after it was refused
  // That release came right after the refused attempt, nothing else on its connection
  // between: a clean-up, part of the attempt (waiter_moved_on.hpp, retry_after_cleanup).
  bool cleaned_up : 1 = false;
  // Its leave (left_channel) was an UNSUBSCRIBE that nothing explained: no message just
  // before it, not when its TTL's timer was due (explained_unsubscribe). Another wait's
  // stale timer may have sent it while this one went on (left_again, waiter_moved_on.hpp).
  bool left_unexplained : 1 = false;
  // Its first retry came after its connection took and released another lock, no
  // spacing known yet to judge it by: decided at its next attempt (poller_moved_on).
  bool hold_in_first_gap : 1 = false;
  // Its client opens a connection for each attempt (a lock held by a subscription,
  // lock_family::subscription): a connection's close does not end its wait.
  bool connection_per_attempt : 1 = false;
  // Its single try was read as given up at another value's attempt on the lock over its
  // connection (waiter_of_fresh_value), and that is not said yet: it stays listed until
  // the connection shows which it was (end_pending_cuts, waiters.hpp).
  bool cut_pending : 1 = false;
  // A single try of a value kept over its attempts: one of the waits a connection may
  // carry side by side, which a cut is held for (cut_pending) until it shows which.
  bool single_try_of_kept_value() const noexcept { return attempts == 1 && !fresh_values && !withdrawn; }
  // Its latest spacing came under half the one before, none having shrunk until then: a
  // poller's last try at its deadline, its sleep cut to the time left (note_gap).
  bool last_gap_cut_short : 1 = false;
  std::uint8_t unused_d : 7 = 0;
  std::uint16_t last_gap_ms = 0;     // its latest spacing, ms (note_gap)
  std::int64_t first_ttl_us = -1;    // the TTL its first attempt seen was given
  std::int64_t longest_gap_us = 0;   // the longest time between two of its attempts seen
  // An attempt that nothing explains as this wait's (continuing_waiter): its request
  // time, and when the wait before it ended at the latest; -1: none. Confirmed as a new
  // wait's first attempt when the next attempt follows at once.
  std::int64_t unexplained_us = -1;
  std::int64_t unexplained_end_us = -1;

  bool operator==(const waiter&) const = default;  // every field (waiter_vector's dormant records)
};
// (Its flags are bits: 144 bytes, not 152; an anomaly storm keeps 300,000 waiters.)
// No padding: two waiters are equal exactly when their bytes are (dormant_record::of
// compares them so).
static_assert(sizeof(waiter) == 144 && std::has_unique_object_representations_v<waiter>);

using waiter_vector = dormant_waiter_vector<waiter>;  // a lock's waiters (waiter_vector.hpp)
using waiter_context = dormant_context<waiter>;
static_assert(sizeof(waiter_vector::dormant) == 40);

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
  flat_id_map<std::uint32_t> holder_index;
  bool holder_index_valid = false;
  std::size_t holder_scans = 0;  // lookups that scanned since the index went stale
  waiter_vector waiters;
  // Owner to seq of its waiter, for a lock with many (a thundering herd when it stalls:
  // 60,000 waiters took 17 s to analyze by scans); made when first needed, then kept up
  // as waiters come and go. `waiters` is in seq order, so a seq's position is a binary
  // search away, whatever left before it.
  flat_id_map<seq32> waiter_index;
  bool waiter_index_valid = false;
  // Subscriber connection and client to waiters, for a lock with many (on_message): made
  // when first needed, then kept up as waiters come, go and relink; gone with the last.
  std::unique_ptr<waiter_keys> keys;
  // The earliest of the waiters' deadlines (-1: none), kept as deadlines are set, and
  // found again by a scan only once the waiter that had it left or moved it later.
  std::int64_t earliest_deadline_us = -1;
  bool earliest_deadline_known = true;
  std::uint64_t next_waiter_seq = 0;
  std::int64_t free_since_us = -1;   // when the last holder left (only kept with waiters)
  std::int64_t last_freed_us = -1;   // when it last went free (released, expired), whoever took it since
  bool idle_reported = false;
  // The longest completed free interval >= idle_threshold that no waiter has yet shown
  // it waited through (its next attempt does); forgotten when the last waiter leaves.
  std::int64_t idle_start_us = -1, idle_end_us = -1;
  // A later, shorter one, for the waiters that began after the kept one did (free_interval_ends).
  std::int64_t later_idle_start_us = -1, later_idle_end_us = -1;
  std::array<wake, 4> wakes{};
  // The latest publishing release's request time (an unlock that left the lock free):
  // messages after it on several subscribers are that one publish (note_wake).
  std::int64_t published_us = -1;
  // The latest SUBSCRIBE whose waiter was a guess among several waiters of its address
  // (link_confidence::low): Redisson's waiter retries right after its SUBSCRIBE is
  // confirmed, and that retry may name it better (retry()). sub == 0: none pending.
  struct guessed_subscribe {
    std::uint64_t sub = 0;
    std::int64_t request_us = -1;
    std::int64_t confirmed_us = -1;
    std::uint32_t owner = no_id;
  } guessed;
  // The latest SUBSCRIBEs of the lock's channel (any link): a waiter whose client listens
  // nowhere retries once its client's SUBSCRIBE is confirmed, so its first retry names
  // the one SUBSCRIBE sent since its refusal (take_subscription_by_retry). A ring;
  // evicted_subscribe_us: the latest request pushed out (older refusals cannot be judged).
  struct recent_subscribe {
    std::uint64_t sub = 0;  // 0: a free slot
    std::int64_t request_us = -1;
    std::int64_t confirmed_us = -1;
    // The failure of the waiter it was linked to when sent (-1: none): the latest from its
    // address unless the evidence preferred an earlier one (choose_waiter).
    std::int64_t linked_failure_us = -1;
    std::uint64_t linked_client = 0;
  };
  std::array<recent_subscribe, 4> recent_subscribes{};
  std::int64_t evicted_subscribe_us = -1;
  // The latest messages on the lock's channel (a ring; evicted_message_us: the latest
  // pushed out): a waiter of a client already subscribed retries on them, not on a
  // SUBSCRIBE (take_subscription_by_retry).
  struct recent_message {
    std::uint64_t sub = 0;  // 0: a free slot
    std::int64_t at_us = -1;
  };
  std::array<recent_message, 8> recent_messages{};
  std::int64_t evicted_message_us = -1;
  std::int64_t acquired_us = -1;       // the latest acquisition by a subscribed waiter, and by whom
  std::uint64_t acquired_client = 0;
  std::uint32_t acquired_owner = no_id;  // retained
  // The latest acquisition that ended a wait (subscribed or not), and from which address:
  // its client's UNSUBSCRIBE may come well after it on a slow client (learn_lone_acquirer).
  std::int64_t waited_acquired_us = -1;
  std::uint64_t waited_acquired_client = 0;
  std::uint16_t waited_acquired_ip_tag = 0;
  std::uint64_t anomalies[anomaly_kind_count] = {};
  duration_samples waits;  // their count is the contended acquisitions
  std::uint64_t gave_up = 0;  // waiters that left without acquiring (gave_up events)
  // The holder whose connection closed while it held (holder_connection_closed; retained),
  // when, and when its lease then ran out (-1: not yet); until a new hold begins.
  std::uint32_t closed_owner = no_id;
  std::int64_t closed_at_us = -1;
  std::int64_t closed_expired_us = -1;
  bool waits_at_least = false;  // some wait in `waits` may have begun before the capture
  bool refused_unseen = false;  // an attempt was refused while no holder was known (held_before_capture)
  bool unseen_hold_released = false;  // since then, a hold seen from the capture's start was released (held_before_capture)
  bool subscribed_unseen = false;  // a subscription to its channel was first seen at a message
  bool owner_shared = false;    // a value was refused while it held over another connection (waiter_of_owner)
  // Waiters that left their channel unexplained (waiter::left_unexplained) whose
  // subscriber connection unsubscribed it again since, no SUBSCRIBE between: by seq, the
  // latest such UNSUBSCRIBE, as late as their wait may have run (left_again,
  // waiter_moved_on.hpp). Rare: empty on almost every lock.
  struct later_leave {
    std::uint64_t seq = 0;
    std::int64_t at_us = -1;
  };
  std::vector<later_leave> later_leaves;
  // The latest give-ups whose wait was exact, by their owner's text hash: a client that
  // gives up after the same wait each time (a tryLock timeout, a retry budget) tells how
  // long a give-up the wire does not date lasted (likely_wait, waiters.hpp).
  struct exact_give_up {
    std::uint32_t owner_hash = 0;
    std::int64_t wait_us = -1;
  };
  std::array<exact_give_up, 4> exact_give_ups{};
  std::uint8_t next_exact_give_up = 0;
};

// What a lock with more than one completed hold adds (common: kept apart from the
// larger lock_extra, which only locks with waiters, several holders or anomalies need).
struct lock_side {
  duration_samples holds;        // every completed hold after the first
  std::uint64_t acquisitions_carry = 0;  // the lock's 16-bit counters overflow here
  std::uint64_t renewals_carry = 0;
  std::uint64_t expiries_carry = 0;
  std::int64_t first_hold_spilled_us = -1;  // the row's first hold when it does not fit there
  std::uint32_t extra = no_id;   // index into the extras
  bool holds_at_least = false;   // some hold (the first included) began before the capture
};

struct connection_info {
  std::uint32_t client = no_id;  // interned "ip:port"
  std::uint32_t server = no_id;
  address ip;
  std::uint64_t id = 0;
  // The two ends as addresses, for the events that name this connection.
  endpoint client_address{}, server_address{};
  bool has_client_address = false, has_server_address = false;
  // Holders and waiters that name it (they print its texts later); a connection is
  // freed once it has ended and nothing names it.
  std::uint32_t refs = 0;
  bool open = true;
  std::int64_t closed_at_us = -1;  // when it closed while it still held a lock (-1: it did not)
  std::int64_t last_acquired_us = -1;  // its latest acquisition of any lock (waiter_of_fresh_value)
  std::int64_t last_released_us = -1;  // its latest release of any lock (poller_moved_on)
  std::int64_t last_renewed_us = -1;  // its latest renewal of any lock, refused or not (poller_moved_on)
  // The value of that latest acquisition (own_value_went_on, waiter_moved_on.hpp). Not
  // retained: it is compared only with a waiter's value that stayed interned since
  // before that acquisition, so an id reused meanwhile cannot match.
  std::uint32_t last_acquired_owner = no_id;
  // The latest wait over it that gave up (give_up, waiters.hpp): its value, its lock and
  // when it began (own_value_gave_up_elsewhere, waiter_moved_on.hpp; not retained either).
  std::uint32_t gave_up_owner = no_id;
  std::uint32_t gave_up_lock = no_id;
  std::int64_t gave_up_wait_began_us = -1;
  // The latest few waits over it taken to have ended at another value's attempt on their
  // lock (waiter_of_fresh_value): their lock, their value's hash and length (its id is
  // released with the wait: the value sent again may be interned anew) and latest attempt
  // (note_value_back_beside_another, waiters.hpp).
  struct cut_wait {
    std::uint32_t lock = no_id;
    std::uint32_t owner_size = 0;
    std::uint32_t owner_hash = 0;
    std::int64_t last_attempt_us = -1;
  };
  std::array<cut_wait, 4> cut_waits{};
  std::uint8_t next_cut_wait = 0;
  bool multiplexes = false;  // a waiter polled on while it held a lock taken meanwhile (poller_moved_on)
  // Refused a lock it held itself under another value (note_refused_by_own_hold): tasks side
  // by side, so a new value after a single try is no continuation of it (waiter_of_fresh_value).
  bool tried_what_it_holds = false;
  // Either sign of tasks side by side: a new value after a single try begins its own wait.
  bool carries_tasks_side_by_side() const noexcept { return multiplexes || tried_what_it_holds; }
  std::uint32_t pending_cuts = 0;  // its waiters whose give-up is not said yet (waiter::cut_pending)
  // A new value at once after a single try began a new wait over it (split_at_once, until
  // that wait's next attempt), and that wait's next came at once too: a spinner
  // (waiter_of_fresh_value).
  bool split_at_once = false;
  bool spins = false;
  bool keeps_values = false;  // a waiter over it retried with the same value (waiter_of_fresh_value)
  // Its latest lock operation was a refused attempt on this lock, or that attempt's
  // clean-up release when refusal_cleaned (waiter_moved_on.hpp: follow_up_refusal); no_id: neither.
  bool refusal_cleaned = false;
  std::uint32_t refused_lock = no_id;
  // That refused attempt's place among the connection's exchanges (lock_operation::connection_sequence).
  std::uint32_t refused_sequence = 0;
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
    // Active: when its SUBSCRIBE was confirmed (-1: seen by a message). Inactive: when it
    // was left (-1: not seen).
    std::int64_t since_us = -1;
    // Messages (unlock publishes) it received that no retry of its client's waiters
    // has answered yet: Redisson's one permit per message (waiters.hpp, retry).
    std::uint32_t unanswered = 0;
    bool wakes_all = false;  // its latest message was a read unlock's (every thread wakes)
    std::int64_t message_us = -1;  // its latest message
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
  // Its life, which ties a subscriber to the process whose command connections share it:
  // when its SYN was captured (-1: joined mid-stream), the name it gave itself (interned
  // in texts; no_id: none), and the client its lock operations named (client_key; 0:
  // none yet, a subscriber's never).
  std::int64_t opened_us = -1;
  std::uint32_t name = no_id;
  std::uint64_t known_client = 0;
  // Its opening was seen beside two clients' (tie_of): it ties it to neither for good,
  // even once the other client's connections have closed and left the table (seen: a
  // subscriber "tied" to its JVM when the other JVMs exited, and an anomaly raised on it).
  mutable bool opening_shared = false;
  // The clients whose openings were as near when it was found shared (their gaps from
  // it), and the nearest of connections whose client was not known yet: kept, as their
  // connections may close and leave the table, for a later SUBSCRIBE to tell them apart
  // by exclusion (tie_of with a lock).
  struct opening_near {
    std::uint64_t client = 0;
    std::int64_t gap_us = -1;
  };
  mutable std::array<opening_near, 4> near{};
  mutable std::int64_t near_unknown_gap_us = -1;
  // The client its opening was tied to once the others as near were excluded (each
  // listening to the channel on its own subscriber, for certain): for its whole life.
  mutable std::uint64_t tied_client = 0;
  // The client whose first retry answered a SUBSCRIBE on it, the only one its refusal
  // could have been waiting for (take_subscription_by_retry): a connection is one
  // process's, so its later SUBSCRIBEs are that client's first. 0: none.
  std::uint64_t retry_client = 0;
};

// What the traffic says about a subscriber connection belonging to a client.
enum class pairing : std::uint8_t {
  none,          // no episode yet
  consistent,    // its episodes all point to this client, fewer than certain_after
  established,   // at least certain_after episodes, and at most 1 in 8 point elsewhere
  contradicted,  // episodes point to another client
};
inline constexpr std::uint32_t certain_after = 3;

inline bool pubsub_family(lock_family f) noexcept {
  return f == lock_family::redisson || f == lock_family::redisson_fair || f == lock_family::redisson_read ||
         f == lock_family::redisson_write || f == lock_family::redisson_fenced;
}

}  // namespace lockscope::locks::timeline_detail
