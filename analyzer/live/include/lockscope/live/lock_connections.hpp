// The flight recorder's bookkeeping (`lockscope analyze --save-anomalies`): per lock, the
// connections seen in its events within the last `window` (holders, waiters and their
// subscriber connections: every event names its connection), and which anomalies to
// save (at most one per lock and kind every `min_interval`).
//
//   lock_connections c(options, report, [&](const lock_event& e, std::span<const connection_ref> conns) {
//     ... save the packets of conns ...
//   });
//   lock_groups groups(group_opts, c);   // c sits in the event chain and passes every event on
//
// Sans-I/O: fed with events (their times are the clock). A lock is its name here (a
// RedLock's or a failover's servers together), so a quorum anomaly gets the
// connections to every server. Bounded: at most max_locks locks and
// max_connections_per_lock connections each (the least recently seen goes); locks with
// no event in the window are forgotten.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockscope/ingest/packet.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

// A connection by its client endpoint and, when known, its server's.
struct connection_ref {
  endpoint client;
  endpoint server;
  bool has_server = false;
  // Whether a packet between `a` and `b` belongs to this connection.
  bool matches(const endpoint& a, const endpoint& b) const noexcept {
    if (a == client) return !has_server || b == server;
    if (b == client) return !has_server || a == server;
    return false;
  }
};

struct lock_connections_options {
  std::int64_t window_us = 30'000'000;
  std::int64_t min_interval_us = 30'000'000;  // per lock and anomaly kind
  std::size_t max_locks = 65'536;
  std::size_t max_connections_per_lock = 64;
};

struct lock_connections_stats {
  std::uint64_t anomalies = 0;      // seen
  std::uint64_t rate_limited = 0;   // not handed on: the same lock and kind too recently
  std::uint64_t untracked_locks = 0;  // events of locks beyond max_locks
};

class lock_connections final : public lock_event_sink {
 public:
  using anomaly_handler = std::function<void(const lock_event&, std::span<const connection_ref>)>;

  lock_connections(const lock_connections_options& options, lock_event_sink& next, anomaly_handler on_anomaly);

  void on_event(const lock_event& e) override;
  // The connections of `lock` seen within the window before now_us (tests).
  std::vector<connection_ref> connections_of(std::string_view lock, std::int64_t now_us) const;
  std::size_t locks_tracked() const noexcept { return locks_.size(); }
  const lock_connections_stats& stats() const noexcept { return stats_; }

 private:
  struct seen_connection {
    connection_ref ref;
    std::int64_t last_us;
  };
  struct lock_entry {
    std::int64_t last_us = 0;
    std::vector<seen_connection> connections;
    std::vector<std::pair<anomaly_kind, std::int64_t>> last_saved;
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  void note(lock_entry& entry, const lock_event& e);
  void sweep(std::int64_t now_us);

  lock_connections_options options_;
  lock_event_sink& next_;
  anomaly_handler on_anomaly_;
  std::unordered_map<std::string, lock_entry, text_hash, std::equal_to<>> locks_;
  std::int64_t last_sweep_us_ = 0;
  std::vector<connection_ref> scratch_;
  lock_connections_stats stats_;
};

}  // namespace lockscope::live
