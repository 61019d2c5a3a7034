// What the timeline and the lock groups make of operations and every output reads: one
// change in a lock's life (acquired, contended, released, expired, an anomaly...), and
// the sink that receives events. Below the stages: the outputs include this header, not
// the timeline's.
#pragma once

#include <cstddef>
#include <cstdint>
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
};
inline constexpr std::size_t lock_event_kind_count = 17;

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
};
inline constexpr std::size_t anomaly_kind_count = 14;

enum class link_confidence : std::uint8_t { none, certain, high, low };

std::string_view to_string(lock_event_kind k) noexcept;
std::string_view to_string(anomaly_kind k) noexcept;
std::string_view to_string(link_confidence c) noexcept;

struct lock_group;  // lock_groups.hpp

// One change in a lock's life. Views are valid during the sink call only. Durations
// are microseconds internally; -1 = does not apply.
struct lock_event {
  std::int64_t ts_us = 0;
  lock_event_kind event = lock_event_kind::acquired;
  anomaly_kind kind = anomaly_kind::none;
  std::string_view lock;
  std::string_view owner;
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
  std::string_view detail;   // a short human explanation (anomalies)
  const lock_group* group = nullptr;  // quorum / multilock events (lock_groups.hpp)
  // Redis Cluster. redirected: the reply, its slot and target node (MOVED/ASK), and the
  // call it answered (`operation`). Any event: `asking`, the call went to the importing
  // node after an ASK (it followed an answered ASKING).
  cluster_reply redirect = cluster_reply::none;
  std::int32_t slot = -1;
  std::string_view redirect_to;
  lock_op_kind operation = lock_op_kind::acquire;
  bool asking = false;
};

class lock_event_sink {
 public:
  virtual ~lock_event_sink() = default;
  virtual void on_event(const lock_event& e) = 0;
};

}  // namespace lockscope::locks
