// The Asio side of Redis Cluster for the lock client (the decisions are cluster.hpp's
// and cluster_routing.hpp's, sans-I/O):
// loads the slot map from the seeds (CLUSTER SHARDS, else CLUSTER SLOTS), keeps one
// command connection per master (opened on first use), sends each command to its
// slot's master, follows MOVED (map updated, refreshed in the background) and ASK
// (ASKING pipelined before the command on the target), and retries TRYAGAIN and
// CLUSTERDOWN with backoff while the command's deadline allows. A master that cannot
// be reached (killed, partitioned) does not hold commands on its connection: they are
// taken back and retried the same way while the slot map is reloaded from the other
// nodes, so that once a replica is promoted they go to it.
//
// Pub/sub: a channel whose publisher sends SPUBLISH (`sharded`) is SSUBSCRIBEd on a
// subscriber connection to its shard's master, and moved to the new master when that
// one drops it (`sunsubscribe` after a resharding or failover); others are SUBSCRIBEd
// classically on one node (a PUBLISH reaches every node of a cluster). Without CLUSTER
// SHARDS (Redis < 7) every channel is classic.
//
// Everything runs on the client's strand.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "lockscope/lock/cluster.hpp"
#include "lockscope/lock/cluster_routing.hpp"
#include "lockscope/lock/connection.hpp"
#include "lockscope/lock/subscriptions.hpp"

namespace lockscope::lock::detail {

class cluster_router : public std::enable_shared_from_this<cluster_router> {
 public:
  struct events {
    unique_function<void()> on_ready;  // the slot map is loaded (first time or again)
    unique_function<void(std::error_code ec, const std::string& why)> on_down;  // no seed answered
  };

  cluster_router(strand_type strand, client_config config);
  ~cluster_router();
  void start(events e);

  bool ready() const noexcept { return !map_.empty(); }
  // The masters answered CLUSTER SHARDS: unlock scripts should SPUBLISH.
  bool sharded_pubsub() const noexcept { return sharded_; }

  // Sends `command` (encoded RESP) to the master of `slot`.
  void execute(std::uint16_t slot, std::string_view command, clock_type::time_point deadline, reply_handler done);
  // A command that failed this way never ran and may be sent again later: no reachable
  // master (not_connected), CLUSTERDOWN, TRYAGAIN.
  static bool retryable(std::error_code ec, const resp::value& reply);

  subscription_registry::added subscribe(const std::string& channel, subscription_listener& listener, bool sharded);
  void unsubscribe(const std::string& channel, subscription_registry::waiter_id id);

  void close(unique_function<void()> done);

 private:
  struct routed;
  struct relay;
  struct shard_subscriber {
    std::shared_ptr<connection> conn;
    subscription_registry registry{true};
    // Channels of the SSUBSCRIBE/SUNSUBSCRIBE commands sent and not yet answered, in
    // order: an error reply (MOVED/ASK) names no channel, its place in line does.
    std::deque<std::string> unanswered;
  };

  std::shared_ptr<connection> node_connection(const node_address& node);
  void node_down(const std::string& key);
  void forget_unmapped_nodes();
  void dispatch(const std::shared_ptr<routed>& op);
  void send_to(const std::shared_ptr<routed>& op, const node_address& node, bool asking);
  void on_reply(const std::shared_ptr<routed>& op, const node_address& node, std::error_code ec, resp::value&& reply);
  void retry_later(const std::shared_ptr<routed>& op, std::error_code ec, resp::value&& reply);

  void refresh();
  // refresh() after `delay`, unless one is already due sooner.
  void refresh_within(std::chrono::milliseconds delay);
  void load_from(std::size_t candidate, bool use_slots);
  void load_round_failed();
  void map_loaded();
  void expire_pending();

  shard_subscriber& shard_for(const node_address& node);
  void on_shard_push(const std::string& node_key, resp::value&& push);
  void send_to_shard(shard_subscriber& sub, const std::string& commands);
  void evict(relay& r, shard_subscriber& sub);
  void rehome_soon();
  void home(relay& r);
  void rehome_moved_channels();
  // A MOVED named the slot's master: into the map, and remembered (redirect_memory).
  void learn_redirect(std::uint16_t slot, const node_address& node);
  connection& classic_subscriber();

  strand_type strand_;
  client_config config_;
  redirect_policy policy_;
  slot_map map_;
  bool sharded_ = false;
  events events_;
  std::unordered_map<std::string, std::shared_ptr<connection>> nodes_;
  cluster_nodes node_states_;  // the seeds, and which nodes are down
  map_reload_schedule map_reloads_;
  redirect_memory redirects_;  // MOVEDs a lagging node's map must not undo
  std::vector<std::shared_ptr<routed>> pending_;  // waiting for the first slot map
  boost::asio::steady_timer pending_timer_;
  boost::asio::steady_timer refresh_timer_;
  boost::asio::steady_timer rehome_timer_;
  bool rehome_armed_ = false;
  bool refresh_armed_ = false;
  std::vector<node_address> candidates_;
  std::string last_error_;
  std::error_code last_code_;

  std::unordered_map<std::string, std::unique_ptr<shard_subscriber>> shard_subscribers_;
  std::unordered_map<std::string, std::unique_ptr<relay>> relays_;
  std::shared_ptr<connection> classic_connection_;
  subscription_registry classic_registry_;
  subscription_registry::waiter_id next_waiter_ = 1;
  bool closed_ = false;
  int closing_ = 0;
  unique_function<void()> close_done_;
};

}  // namespace lockscope::lock::detail
