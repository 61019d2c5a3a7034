// A real Redis Cluster for tests: `masters * (1 + replicas)` redis-server processes
// with --cluster-enabled yes on free loopback ports (bus ports chosen free too), joined
// by `redis-cli --cluster create ... --cluster-replicas N --cluster-yes`, and ready
// once every node reports cluster_state:ok and agrees on who serves each slot.
//
//   if (auto why = redis_cluster::unsupported()) { WARN(*why); return; }
//   static redis_cluster cluster;              // once per test process: it takes seconds
//   client_config::from_url(cluster.url());    // redis-cluster://127.0.0.1:p1,...
//   cluster.move_slot(slot, to);               // a live resharding of one slot
//   cluster.failover(cluster.replica_of(m));   // CLUSTER FAILOVER on a replica
//
// With TLS (`redis_cluster_tls`), every node also serves TLS, and the cluster bus and
// replication run over TLS: url() is then rediss-cluster:// over the TLS ports, while
// node(i).port() and connect(i) stay plain TCP for the test's own checks.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

namespace lockscope::test {

struct redis_cluster_tls {
  redis_tls_options server;  // each node's TLS port (plain_port_too is forced on)
  // The certificate a node shows when it connects to another (the cluster bus and
  // replication always authenticate the connecting node).
  std::filesystem::path client_certificate;
  std::filesystem::path client_private_key;
};

class redis_cluster {
 public:
  // Why no cluster can be started here (redis-server missing or without cluster
  // support, redis-cli missing), or nullopt.
  static std::optional<std::string> unsupported();

  explicit redis_cluster(int masters = 3, int replicas = 1, std::optional<redis_cluster_tls> tls = std::nullopt);
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  // redis-cluster://127.0.0.1:<port of node 0>,127.0.0.1:<port of node 1>; with TLS
  // rediss-cluster:// and their TLS ports.
  std::string url() const;
  std::size_t size() const noexcept { return nodes_.size(); }
  redis_server& node(std::size_t i) { return *nodes_.at(i); }
  const std::string& id(std::size_t i) const { return ids_.at(i); }
  // A fresh connection to node i.
  resp_connection connect(std::size_t i) const;

  // Indexes of the current masters, and the node serving `slot` (asked of node 0).
  std::vector<std::size_t> masters();
  std::size_t master_of(std::uint16_t slot);
  // A replica of master `m`.
  std::size_t replica_of(std::size_t m);

  // Moves `slot` to master `to` as redis-cli --cluster reshard does: SETSLOT IMPORTING
  // and MIGRATING, MIGRATE its keys in batches, SETSLOT NODE everywhere. `pause` is
  // slept between the steps, so clients meet the ASK state; `while_migrating(from)` is
  // called once both nodes are in it, before any key moves.
  void move_slot(std::uint16_t slot, std::size_t to, std::chrono::milliseconds pause = std::chrono::milliseconds(0),
                 const std::function<void(std::size_t from)>& while_migrating = {});
  // CLUSTER FAILOVER on `replica`; returns once it is master in every node's view.
  void failover(std::size_t replica);

  // Every node says cluster_state:ok and all agree on the slot owners.
  void wait_until_consistent(std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));

 private:
  std::size_t index_of_id(const std::string& id) const;
  bool tls_ = false;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace lockscope::test
