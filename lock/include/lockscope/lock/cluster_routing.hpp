// The cluster router's decisions, sans-I/O: what a routed command does after a reply
// or a failure, when a retry gives up, which nodes are down and which of them to
// forget, where the slot map is reloaded from and when it is reloaded again. The Asio
// router (cluster_router) owns the connections and timers and asks these; the tests
// ask them by hand, with no sockets and no clock.
//
//   route_attempts tries;                                   // one per routed command
//   route_decision d = after_reply(ec, reply, from, tries, policy, time_left);
//   if (d.reload_map) schedule.request();
//   if (d.what == route_decision::action::retry_later)
//     if (auto pause = retry_pause(tries, policy, time_left)) ...wait *pause, send again
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "lockscope/lock/cluster.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

// A routed command's redirects and retries so far.
struct route_attempts {
  int redirects = 0;  // MOVED and ASK followed
  int retries = 0;    // pauses taken (TRYAGAIN, CLUSTERDOWN, no connection)
};

struct route_decision {
  enum class action : std::uint8_t {
    finish,       // the reply (or the error) goes to the caller
    resend,       // send the command to `to` now (ASKING first when `asking`)
    retry_later,  // send it where the slot map says after retry_pause()
  };
  action what = action::finish;
  node_address to;
  bool asking = false;
  // MOVED: the slot map learns that `slot` is `to`'s.
  bool learn_slot = false;
  std::uint16_t slot = 0;
  // The slot map may be stale (MOVED, CLUSTERDOWN, an unreachable node): reload it.
  bool reload_map = false;
};

// What a command sent to `from` does after its outcome: `ec` and `reply` as the
// connection gave them (errc::server_error with the error text for an error reply,
// errc::not_connected for a command that was never written). `time_left`: its
// deadline has not passed; `closing`: the client is shutting down. Counts a followed
// redirect in `attempts`; past policy.max_redirects, the redirect error is finished.
// A MOVED or ASK without a host ("MOVED 12 :7001") names `from`'s host.
route_decision after_reply(std::error_code ec, const resp::value& reply, const node_address& from,
                           route_attempts& attempts, const redirect_policy& policy, bool time_left,
                           bool closing = false);

// The pause before the next try of a command to retry, counted in `attempts`; nullopt
// when it should fail now instead: more than 4 × policy.max_redirects retries, or its
// deadline (`time_left` from now) comes before the pause ends.
std::optional<std::chrono::milliseconds> retry_pause(route_attempts& attempts, const redirect_policy& policy,
                                                     std::chrono::nanoseconds time_left);

// `map` names the node `key` (node_address::text()) as a master.
bool is_master(const slot_map& map, std::string_view key);

// The cluster's nodes as the router sees them: which are down (their command
// connection failed its last attempt or dropped, until it is ready again), which of
// those to forget, and where to load the slot map from. Nodes are named by
// node_address::text().
class cluster_nodes {
 public:
  explicit cluster_nodes(std::vector<node_address> seeds) : seeds_(std::move(seeds)) {}

  void mark_down(const std::string& key) { down_.insert(key); }
  void mark_up(const std::string& key) { down_.erase(key); }
  bool is_down(const std::string& key) const { return down_.contains(key); }
  bool is_down(const node_address& node) const { return is_down(node.text()); }

  // The down nodes that `map` does not name as masters (a failed master its replica
  // replaced, a removed node, a seed that is not a master): their connections are
  // closed rather than left reconnecting for good. They leave the down set; a later
  // map or MOVED that names one connects again. A down master stays: its slots need it
  // until the map changes.
  std::vector<std::string> take_unmapped_down(const slot_map& map);

  // Where to load the slot map from, in order: the map's masters, then the seeds that
  // are not among them; down nodes last (asking them first costs a connect timeout per
  // round), each group in that order.
  std::vector<node_address> reload_candidates(const slot_map& map) const;

  const std::vector<node_address>& seeds() const noexcept { return seeds_; }

 private:
  std::vector<node_address> seeds_;
  std::unordered_set<std::string> down_;
};

// When the slot map is (re)loaded. One load at a time: a request during a load is
// remembered and served by a reload shortly after it. A round in which no candidate
// gave a map is tried again after a backoff that doubles per failed round; a map that
// leaves slots without a master (a failover under way) is reloaded after a backoff
// that doubles per such map, until every slot is served.
class map_reload_schedule {
 public:
  map_reload_schedule(std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max)
      : min_(backoff_min), max_(backoff_max) {}

  // A reload is wanted. True: start one now; false: one is under way, and another will
  // follow it (loaded() says when).
  bool request() noexcept;
  bool loading() const noexcept { return loading_; }
  // The round asked every candidate and none gave a map: the delay before the next one.
  std::chrono::milliseconds round_failed() noexcept;
  // A map covering `covered` of the 16384 slots was loaded: the delay before the next
  // reload, if one is due (requests during this load, or slots without a master).
  std::optional<std::chrono::milliseconds> loaded(std::size_t covered) noexcept;

  // backoff_min doubled `rounds` times (at most 6), capped at backoff_max.
  std::chrono::milliseconds backoff(int rounds) const noexcept;

 private:
  std::chrono::milliseconds min_, max_;
  bool loading_ = false;
  bool again_ = false;      // requested while loading
  int failed_rounds_ = 0;   // in a row, since the last map
  int uncovered_maps_ = 0;  // in a row, maps that left slots without a master
};

// Slots learned from MOVED redirects, remembered for a moment. Right after a failover
// the cluster's nodes learn the new owner at different times (by gossip): the map a
// MOVED makes us reload can come from a node still naming the old master, whose own
// MOVED just said otherwise. Trusted, that map sends the slot's commands back to the
// old master, and, worse, its shard subscriptions: the old master, now a replica,
// accepts SSUBSCRIBE and says nothing when the new master's messages never reach it,
// so a waiter sleeps out the holder's whole lease (seen: 30 s in the failover test).
// So a loaded map that contradicts a redirect younger than `hold` gets the redirect's
// node back for that slot, and is reloaded soon, until a map agrees or the redirect is
// `hold` old. A wrong redirect (the slot moved back meanwhile) costs one more MOVED.
class redirect_memory {
 public:
  using clock_type = std::chrono::steady_clock;
  static constexpr std::size_t max_slots = 256;

  explicit redirect_memory(std::chrono::milliseconds hold = std::chrono::seconds(2)) noexcept : hold_(hold) {}

  // A MOVED said `slot` is served by `node` (the latest one for a slot counts).
  void learned(std::uint16_t slot, const node_address& node, clock_type::time_point now);
  // After a map was loaded into `map`: gives back the redirects' nodes for the slots it
  // contradicts; true when any was, and the map should be reloaded soon. Slots the map
  // agrees on, and redirects `hold` old, are forgotten.
  bool reconcile(slot_map& map, clock_type::time_point now);
  std::size_t size() const noexcept { return learned_.size(); }

 private:
  struct entry {
    std::uint16_t slot;
    node_address node;
    clock_type::time_point at;
  };
  std::chrono::milliseconds hold_;
  std::vector<entry> learned_;  // oldest first
};

}  // namespace lockscope::lock
