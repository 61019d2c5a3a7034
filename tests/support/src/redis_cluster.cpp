#include "lockscope/test/redis_cluster.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace lockscope::test {

namespace {

using namespace std::chrono_literals;

std::optional<std::string> find_redis_cli() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string path = std::string(dir) + "/redis-cli";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return std::nullopt;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct node_line {
  std::string id;
  std::string flags;
  std::string master;
  std::vector<std::pair<int, int>> slots;  // ranges, migration markers left out
  bool is_master() const { return flags.find("master") != std::string::npos; }
};

std::vector<node_line> parse_nodes(const std::string& text) {
  std::vector<node_line> out;
  for (const std::string& line : split(text, '\n')) {
    const auto f = split(line, ' ');
    if (f.size() < 8) continue;
    node_line n{f[0], f[2], f[3], {}};
    for (std::size_t i = 8; i < f.size(); ++i) {
      if (f[i].starts_with('[')) continue;
      const std::size_t dash = f[i].find('-');
      const int from = std::stoi(f[i].substr(0, dash));
      const int to = dash == std::string::npos ? from : std::stoi(f[i].substr(dash + 1));
      n.slots.emplace_back(from, to);
    }
    std::sort(n.slots.begin(), n.slots.end());
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const node_line& a, const node_line& b) { return a.id < b.id; });
  return out;
}

// Who serves what, as one node sees it.
std::string ownership(const std::vector<node_line>& nodes) {
  std::string out;
  for (const node_line& n : nodes) {
    if (!n.is_master() || n.slots.empty()) continue;
    out += n.id + ":";
    for (const auto& [from, to] : n.slots) out += fmt::format("{}-{},", from, to);
    out += ' ';
  }
  return out;
}

}  // namespace

std::optional<std::string> redis_cluster::unsupported() {
  const auto server = redis_server::find_executable();
  if (!server) return "redis-server is not installed: skipping the Redis Cluster test";
  if (!find_redis_cli()) return "redis-cli is not installed (needed to create the cluster): skipping";
  // Cluster mode came with Redis 3.0.
  std::string version;
  if (FILE* p = ::popen((server->string() + " --version").c_str(), "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, p) != nullptr) version += buffer;
    ::pclose(p);
  }
  const std::size_t v = version.find("v=");
  if (v == std::string::npos || std::atoi(version.c_str() + v + 2) < 3)
    return "redis-server lacks Redis Cluster support (" + version + "needs 3.0 or newer): skipping";
  return std::nullopt;
}

redis_cluster::redis_cluster(int masters, int replicas, std::optional<redis_cluster_tls> tls)
    : tls_(tls.has_value()) {
  const int count = masters * (1 + replicas);
  for (int i = 0; i < count; ++i) {
    redis_server_options options;
    if (tls) {
      options.tls = tls->server;
      options.tls->plain_port_too = true;
    }
    options.extra_args = {"--cluster-enabled", "yes",
                          "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", "2000",
                          "--cluster-port", std::to_string(find_free_port()),
                          "--cluster-allow-replica-migration", "no",
                          "--cluster-replica-validity-factor", "0",
                          "--appendonly", "no"};
    if (tls) {
      for (std::string a : {"--tls-cluster", "yes", "--tls-replication", "yes"}) options.extra_args.push_back(a);
      options.extra_args.push_back("--tls-client-cert-file");
      options.extra_args.push_back(tls->client_certificate.string());
      options.extra_args.push_back("--tls-client-key-file");
      options.extra_args.push_back(tls->client_private_key.string());
    }
    try {
      nodes_.push_back(std::make_unique<redis_server>(options));
    } catch (const redis_server_error& e) {
      throw redis_server_error(std::string("redis-server without Redis Cluster support? ") + e.what());
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) ids_.push_back(connect(i).command("CLUSTER", "MYID").text);

  // Over TLS, redis-cli must meet the nodes on their TLS ports: those are the ports the
  // nodes announce to each other.
  std::string command = *find_redis_cli() + " --cluster create";
  if (tls) command += fmt::format(" --tls --cacert '{}'", tls->server.ca.string());
  for (const auto& n : nodes_) command += fmt::format(" {}:{}", n->host(), tls ? n->tls_port() : n->port());
  const std::string log = (nodes_.front()->directory() / "cluster-create.log").string();
  command += fmt::format(" --cluster-replicas {} --cluster-yes > '{}' 2>&1", replicas, log);
  if (std::system(command.c_str()) != 0) {
    std::ifstream in(log);
    std::stringstream s;
    s << in.rdbuf();
    throw redis_server_error("redis-cli --cluster create failed: " + s.str());
  }
  wait_until_consistent();
  // Replicas attached and in sync: a failover needs them.
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  for (std::size_t m : this->masters()) {
    for (;;) {
      const std::string info = connect(m).command("INFO", "replication").text;
      if (info.find("connected_slaves:" + std::to_string(replicas)) != std::string::npos &&
          (replicas == 0 || info.find("state=online") != std::string::npos))
        break;
      if (std::chrono::steady_clock::now() > deadline) throw redis_server_error("replicas never attached: " + info);
      std::this_thread::sleep_for(20ms);
    }
  }
}

redis_cluster::~redis_cluster() = default;

std::string redis_cluster::url() const {
  if (tls_)
    return fmt::format("rediss-cluster://{}:{},{}:{}", nodes_[0]->host(), nodes_[0]->tls_port(), nodes_[1]->host(),
                       nodes_[1]->tls_port());
  return fmt::format("redis-cluster://{}:{},{}:{}", nodes_[0]->host(), nodes_[0]->port(), nodes_[1]->host(),
                     nodes_[1]->port());
}

resp_connection redis_cluster::connect(std::size_t i) const {
  return resp_connection(nodes_.at(i)->host(), nodes_.at(i)->port());
}

std::size_t redis_cluster::index_of_id(const std::string& id) const {
  const auto it = std::find(ids_.begin(), ids_.end(), id);
  if (it == ids_.end()) throw std::runtime_error("unknown cluster node id " + id);
  return static_cast<std::size_t>(it - ids_.begin());
}

std::vector<std::size_t> redis_cluster::masters() {
  std::vector<std::size_t> out;
  for (const node_line& n : parse_nodes(connect(0).command("CLUSTER", "NODES").text))
    if (n.is_master() && !n.slots.empty()) out.push_back(index_of_id(n.id));
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t redis_cluster::master_of(std::uint16_t slot) {
  for (const node_line& n : parse_nodes(connect(0).command("CLUSTER", "NODES").text)) {
    if (!n.is_master()) continue;
    for (const auto& [from, to] : n.slots)
      if (slot >= from && slot <= to) return index_of_id(n.id);
  }
  throw std::runtime_error(fmt::format("no master serves slot {}", slot));
}

std::size_t redis_cluster::replica_of(std::size_t m) {
  for (const node_line& n : parse_nodes(connect(0).command("CLUSTER", "NODES").text))
    if (!n.is_master() && n.master == ids_.at(m)) return index_of_id(n.id);
  throw std::runtime_error(fmt::format("node {} has no replica", m));
}

void redis_cluster::wait_until_consistent(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    bool ok = true;
    std::string first;
    for (std::size_t i = 0; i < nodes_.size() && ok; ++i) {
      auto c = connect(i);
      if (c.command("CLUSTER", "INFO").text.find("cluster_state:ok") == std::string::npos) {
        ok = false;
        last = fmt::format("node {} not ok", i);
        break;
      }
      const std::string view = ownership(parse_nodes(c.command("CLUSTER", "NODES").text));
      if (i == 0) first = view;
      if (view != first) {
        ok = false;
        last = fmt::format("node {} sees {}; node 0 sees {}", i, view, first);
      }
    }
    if (ok) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string views;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        try {
          auto c = connect(i);
          views += fmt::format("\nnode {} (port {}):\n{}{}", i, nodes_[i]->port(), c.command("CLUSTER", "INFO").text.substr(0, 40),
                               c.command("CLUSTER", "NODES").text);
        } catch (const std::exception& e) {
          views += fmt::format("\nnode {}: {}", i, e.what());
        }
      }
      throw redis_server_error("cluster never became consistent: " + last + views);
    }
    std::this_thread::sleep_for(20ms);
  }
}

void redis_cluster::move_slot(std::uint16_t slot, std::size_t to, std::chrono::milliseconds pause,
                              const std::function<void(std::size_t from)>& while_migrating) {
  const std::size_t from = master_of(slot);
  if (from == to) return;
  const std::string s = std::to_string(slot);
  auto source = connect(from);
  auto target = connect(to);
  target.command("CLUSTER", "SETSLOT", s, "IMPORTING", ids_[from]);
  source.command("CLUSTER", "SETSLOT", s, "MIGRATING", ids_[to]);
  if (while_migrating) while_migrating(from);
  std::this_thread::sleep_for(pause);
  for (;;) {
    const resp::value keys = source.command("CLUSTER", "GETKEYSINSLOT", s, "100");
    if (keys.elements.empty()) break;
    // With tls-cluster, MIGRATE connects over TLS: to the target's TLS port.
    const std::uint16_t port = tls_ ? nodes_[to]->tls_port() : nodes_[to]->port();
    std::vector<std::string> migrate{"MIGRATE", nodes_[to]->host(), std::to_string(port), "", "0",
                                     "5000", "KEYS"};
    for (const auto& k : keys.elements) migrate.push_back(k.text);
    source.send_command_argv(migrate);
    const resp::value reply = source.read_value();
    if (reply.is_error()) throw std::runtime_error("MIGRATE failed: " + reply.text);
    std::this_thread::sleep_for(pause);
  }
  // The target first, so that it never bounces a client back to the source.
  target.command("CLUSTER", "SETSLOT", s, "NODE", ids_[to]);
  source.command("CLUSTER", "SETSLOT", s, "NODE", ids_[to]);
  for (std::size_t i : masters())
    if (i != from && i != to) connect(i).command("CLUSTER", "SETSLOT", s, "NODE", ids_[to]);
  wait_until_consistent();
}

void redis_cluster::failover(std::size_t replica) {
  auto c = connect(replica);
  const resp::value reply = c.command("CLUSTER", "FAILOVER");
  if (reply.is_error()) throw std::runtime_error("CLUSTER FAILOVER failed: " + reply.text);
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (c.command("ROLE").elements.empty() || c.command("ROLE").elements[0].text != "master") {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the replica never became master");
    std::this_thread::sleep_for(10ms);
  }
  wait_until_consistent();
}

}  // namespace lockscope::test
