// Client configuration: a struct, or a URL `redis[s]://[[user]:password@]host[:port][/db]`
// (rediss:// is TLS), or for Sentinel (Lettuce's form)
// `redis[s]-sentinel://[[user]:password@]host[:port][,host2[:port2]...][/db]#mastername`,
// or for Redis Cluster `redis[s]-cluster://[[user]:password@]host[:port][,host[:port]...]`
// (the seed nodes; no database: a cluster has only 0).
//
//   auto cfg = lockscope::lock::client_config::from_url("rediss://:secret@redis.internal:6380/2");
//   cfg.tls.ca = "/etc/redis/ca.pem";          // else the system's trust store
//   cfg.watchdog_timeout = std::chrono::seconds(10);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace lockscope::lock {

// How scripts are sent. evalsha is Redisson's default since 3.46: the SHA1 only, with
// SCRIPT LOAD and a retry when the server answers NOSCRIPT.
enum class script_mode : std::uint8_t { evalsha, eval };

// TLS (OpenSSL through Boost.Asio), TLS 1.2 or newer. The server's certificate chain is
// verified and its name checked against `host` (SNI is sent for a DNS name), unless
// verify_peer is false.
struct tls_config {
  bool enabled = false;  // set by rediss://
  // PEM file of trusted CAs, or a directory of them in OpenSSL's hashed layout
  // (`openssl rehash DIR`). Empty: the system's trust store.
  std::string ca;
  // Client certificate (PEM, chain allowed) and its private key, for servers that
  // require one (`tls-auth-clients yes`). Both or neither.
  std::string certificate;
  std::string private_key;
  // false: accept any certificate and name (redis-cli's --insecure). Encrypts, but does
  // not authenticate the server.
  bool verify_peer = true;
};

struct server_address {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const server_address&) const = default;
};

// Sentinel mode: the master's address comes from the sentinels (SENTINEL
// GET-MASTER-ADDR-BY-NAME, confirmed with ROLE on the master), and the client follows
// their +switch-master announcements. host and port are then not used.
struct sentinel_config {
  // Asked in this order; the one that last answered is asked first next time.
  std::vector<server_address> sentinels;
  std::string master_name;  // not empty: Sentinel mode
  // AUTH to the sentinels (their `requirepass` / ACL user), separate from the data
  // password. The sentinels get the data connections' TLS settings.
  std::string username;
  std::optional<std::string> password;
  bool enabled() const noexcept { return !master_name.empty(); }
};

// The sentinels' default port.
inline constexpr std::uint16_t default_sentinel_port = 26379;

// Redis Cluster, set by redis-cluster:// or rediss-cluster:// (see cluster_router.hpp
// and the README's "Redis Cluster"). Each lock's scripts go to the master of its key's
// hash slot; MOVED, ASK, TRYAGAIN and CLUSTERDOWN are followed within the command's
// deadline.
struct cluster_config {
  bool enabled = false;
  // "host:port" of the nodes the slot map is loaded from, tried in order; empty: host
  // and port above.
  std::vector<std::string> seeds;
  // Redirects (MOVED/ASK) and retries (TRYAGAIN/CLUSTERDOWN) one command may take
  // before its error is returned.
  int max_redirects = 16;
};

// Who owns a lock handle's holds.
enum class owner_model : std::uint8_t {
  // Each handle that get_lock() (get_fair_lock(), ...) returns is one owner, with a
  // number of its own (never a thread's): copies of the handle share it. Safe for
  // coroutines and callbacks, which may resume on any thread (a thread pool) and share
  // a thread with others: give each task its own handle, and two tasks never both hold
  // the lock, while one task's unlock works from wherever it runs. Reentrant through
  // one handle. A blocking acquire from a second thread while another thread holds (or
  // is acquiring) through the same handle would re-enter that hold, so it throws
  // std::logic_error instead (after asking the server, in case the hold expired).
  per_handle,
  // Redisson's model: the calling thread (a small per-process number, like Java's
  // thread ids), so threads that share one handle exclude each other as Redisson's
  // threads sharing an RLock do. The blocking API only: an async completion may run
  // elsewhere, and two coroutines on one thread would be one owner.
  per_thread,
};

struct client_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Both empty: no AUTH. Only a password: `AUTH password`. A user: `HELLO <protocol>
  // AUTH user password`.
  std::string username;
  std::optional<std::string> password;
  int database = 0;  // SELECT when not 0
  int protocol = 2;  // 2: RESP2 (AUTH); 3: HELLO 3, pushes
  // CLIENT SETNAME (or HELLO SETNAME); empty: not set. The subscriber connection adds ":sub".
  std::string client_name = "lockscope";
  tls_config tls;
  sentinel_config sentinel;
  cluster_config cluster;

  // With Sentinel, a failover leaves no master for a few seconds: commands queued then
  // fail after command_timeout (acquires retry them within their wait), so keep it
  // above the failover time (down-after-milliseconds plus the promotion).
  std::chrono::milliseconds connect_timeout{3000};  // TCP connect, TLS and Redis handshakes
  std::chrono::milliseconds command_timeout{3000};  // each command, queued or in flight
  std::chrono::milliseconds ping_interval{30000};   // health check of idle connections; 0: off
  std::chrono::milliseconds reconnect_backoff_min{50};
  std::chrono::milliseconds reconnect_backoff_max{2000};

  // Lease of a lock taken without one; the watchdog renews it every third of it.
  std::chrono::milliseconds watchdog_timeout{30000};
  script_mode scripts = script_mode::evalsha;
  // Fair locks: how long a queued waiter keeps its place without retrying (Redisson's
  // threadWaitTime). A crashed waiter delays the ones behind it by up to this much.
  std::chrono::milliseconds fair_lock_thread_wait{300000};

  // Which Redisson release's lock scripts and behaviour to speak: a release from
  // "3.11.1" to "4.7.0" (any tag of Redisson's in that range). The scripts are that
  // release's own bytes (lock/scripts.hpp's redisson_catalogue) with its KEYS/ARGV
  // layout: from 3.22 the publish command as an argument (SPUBLISH on a cluster with
  // sharded pub/sub, for every lock type, the semaphores and the latch; before, they
  // PUBLISH and SUBSCRIBE as Redisson did), from 3.24 the unlock latch, from 3.44 the
  // batched renewal script. Share a lock with Java only in the dialect its Redisson
  // speaks, or in one with the same pub/sub (before 3.22: PUBLISH everywhere).
  std::string redisson_dialect = "4.7.0";

  // Who owns the holds of a handle from get_lock() and its kin (without an explicit
  // owner). Either way the owner id is Redisson's `<client uuid>:<n>`.
  owner_model owners = owner_model::per_handle;

  // Replica sync (Redisson's syncSlaves): `WAIT sync_replicas sync_timeout` pipelined
  // behind every acquire, unlock and force-unlock script, on the same connection. An
  // acquisition whose write reached fewer replicas is released and fails with
  // errc::replica_sync_failed; an unlock or force-unlock reports it (the lock is gone
  // from the master anyway). Watchdog renewals are not waited for. 0: off. A WAIT holds
  // the command connection for up to sync_timeout while replicas lag, delaying what is
  // queued behind it: keep command_timeout well above sync_timeout.
  int sync_replicas = 0;
  std::chrono::milliseconds sync_timeout{1000};

  // Called on the client's I/O thread when the watchdog cannot renew a lock: the renew
  // script found another owner (or no key), or no renewal succeeded for a whole lease.
  // Renewal of that lock stops.
  std::function<void(const std::string& lock_name)> on_lock_lost;
  // Called when rlock::unlock() (which must not throw: it runs in destructors) fails,
  // with the lock name and the error text. Empty: one line on stderr.
  std::function<void(const std::string& lock_name, const std::string& message)> on_unlock_error;

  // Parses a redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URL over the
  // defaults. Throws lock_error (invalid_url) with a message naming the bad part.
  static client_config from_url(std::string_view url);
};

// Fills host, port, username, password, database and tls.enabled from `url`, leaving
// the rest of `config` alone. On failure returns the error and sets `why` to a one-line reason.
// User and password may be percent-encoded; a host may be [IPv6]. A Sentinel URL
// fills sentinel.sentinels (port 26379 when none is given) and sentinel.master_name
// instead of host and port; its user and password are the data nodes' (as Lettuce
// reads them), the sentinels' own are set in sentinel.username/password.
std::error_code parse_url(std::string_view url, client_config& config, std::string* why = nullptr);

// `500ms`, `10s`, `2m`, `1h`, or a bare `0`. nullopt for anything else.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace lockscope::lock
