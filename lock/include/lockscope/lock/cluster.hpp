// Redis Cluster, sans-I/O: hash slots (CRC16/XMODEM with hash tags, as redis-server's
// keyHashSlot), the slot map read from CLUSTER SHARDS (Redis 7) or CLUSTER SLOTS, and
// what to do with a command's error reply (MOVED, ASK, TRYAGAIN, CLUSTERDOWN). No
// sockets and no clocks of its own: the Asio router (cluster_router) feeds it replies
// and time, and the tests feed it by hand.
//
//   slot_map map;
//   map.load(cluster_shards_reply, /*tls=*/false);       // or CLUSTER SLOTS' reply
//   const auto* node = map.node_for(key_slot("redisson_lock__channel:{myLock}"));
//   redirect r = parse_redirect("MOVED 3999 127.0.0.1:7002");
//   if (r.kind == redirect_kind::moved) map.assign(r.slot, r.node);
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

inline constexpr std::uint16_t cluster_slots = 16384;

// CRC16/XMODEM (polynomial 0x1021, init 0), the checksum Redis Cluster hashes keys with.
std::uint16_t crc16_xmodem(std::string_view bytes) noexcept;
// The key's hash slot: CRC16 of the part between the first '{' and the next '}' when
// that part is not empty (a hash tag), else of the whole key; modulo 16384.
std::uint16_t key_slot(std::string_view key) noexcept;

struct node_address {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const node_address&) const = default;
  std::string text() const;  // host:port, [v6]:port
};

// "host:port" (the last ':' splits, so an IPv6 address works unbracketed, as Redis
// writes it in MOVED). nullopt when the port is missing or not a number.
std::optional<node_address> parse_node_address(std::string_view text);

// Which master serves each of the 16384 slots.
class slot_map {
 public:
  static constexpr std::uint16_t no_node = 0xffff;

  // Replaces the map with CLUSTER SHARDS' reply (RESP2 arrays or RESP3 maps). Only
  // masters are kept; `tls` picks a node's tls-port over its port. Returns an error
  // text when the reply is not a CLUSTER SHARDS reply or covers no slot.
  std::optional<std::string> load_shards(const resp::value& reply, bool tls);
  // The same from CLUSTER SLOTS' reply (Redis 3-6; deprecated in 7).
  std::optional<std::string> load_slots(const resp::value& reply);

  // A MOVED told us `slot` is now served by `node`.
  void assign(std::uint16_t slot, const node_address& node);

  // The slot's master, or nullptr when no master serves it (an incomplete cluster).
  const node_address* node_for(std::uint16_t slot) const noexcept;
  const std::vector<node_address>& masters() const noexcept { return nodes_; }
  // Slots with a master.
  std::size_t covered() const noexcept;
  bool empty() const noexcept { return nodes_.empty(); }

 private:
  std::uint16_t intern(const node_address& node);
  void clear();

  std::vector<node_address> nodes_;
  std::array<std::uint16_t, cluster_slots> owner_{};
};

enum class redirect_kind : std::uint8_t {
  none,         // not a cluster error: the reply stands
  moved,        // the slot lives on `node` for good: update the map, resend there
  ask,          // the key is being migrated to `node`: ASKING + the command there, once
  try_again,    // TRYAGAIN: a multi-key command during a migration; retry after a pause
  cluster_down, // CLUSTERDOWN: no quorum or the slot is not served; retry after a pause
};

struct redirect {
  redirect_kind kind = redirect_kind::none;
  std::uint16_t slot = 0;
  node_address node;  // moved / ask; an empty host means "the node that replied"
};

// Reads an error reply's text ("MOVED 3999 127.0.0.1:6381", "ASK ...", "TRYAGAIN ...",
// "CLUSTERDOWN ..."). A malformed MOVED/ASK is kind none: the error goes to the caller.
redirect parse_redirect(std::string_view error_text);

// How a routed command goes on after an error reply. Redirects are bounded, as
// Redisson's retryAttempts: a command bounced more often than this fails with the last
// error rather than loop.
struct redirect_policy {
  int max_redirects = 16;
  std::chrono::milliseconds backoff_min{10};
  std::chrono::milliseconds backoff_max{500};
  // The pause before retry number `attempt` (1-based) after TRYAGAIN/CLUSTERDOWN or a
  // connection that is not there: doubling from backoff_min, capped.
  std::chrono::milliseconds backoff(int attempt) const noexcept;
};

struct client_config;

// Parses `redis[s]-cluster://[[user]:password@]host[:port][,host[:port]...][/0]` into
// `config` (credentials, TLS, cluster.enabled, cluster.seeds; host/port = the first
// seed). parse_url() hands cluster URLs here.
std::error_code parse_cluster_url(std::string_view url, client_config& config, std::string* why);
bool is_cluster_url(std::string_view url) noexcept;

// "redis-cluster://" / "rediss-cluster://" seeds: "h1:p1,h2:p2,[::1]:p3". Throws
// nothing; returns an error text naming the bad seed.
std::optional<std::string> parse_seed_list(std::string_view list, std::uint16_t default_port,
                                           std::vector<node_address>& seeds);

}  // namespace lockscope::lock
