// A real redis-server child process on a free loopback port, for tests.
//
//   TEST_CASE("...") {
//     LOCKSCOPE_REQUIRE_REDIS_SERVER();          // catch_support.hpp: skip if absent
//     lockscope::test::redis_server server({"--requirepass", "x"});
//     lockscope::test::resp_connection c(server.host(), server.port());
//     ...
//     server.restart();                           // same port, for reconnect tests
//   }                                             // stopped and its directory removed
//
// The server runs with no persistence (--save "" --appendonly no), in its own
// temporary directory, with DEBUG allowed from loopback. Its stdout/stderr go to
// <directory>/redis.log; startup failures throw with the log's tail.
//
// With `tls` set it listens for TLS on tls_port() (certificates: tls_certificates.hpp),
// and on plain TCP only if tls->plain_port_too (port() is 0 otherwise).
//
// The child gets PR_SET_PDEATHSIG, so it dies with the thread that started it even if
// the test process crashes: start servers from a thread that outlives them (any test
// body does).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockscope::test {

// The server could not be started or did not become ready.
struct redis_server_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// redis-server's --tls-* options.
struct redis_tls_options {
  std::filesystem::path certificate;
  std::filesystem::path private_key;
  std::filesystem::path ca;  // --tls-ca-cert-file: checks client certificates
  bool auth_clients = false; // --tls-auth-clients yes: a client certificate is required
  bool plain_port_too = false;
};

struct redis_server_options {
  // Appended after the defaults, so they can override them (e.g. "--save", "60 1").
  std::vector<std::string> extra_args;
  // How long start() waits for PING to be answered.
  std::chrono::milliseconds startup_timeout{5000};
  // How long stop() waits after SIGTERM before it sends SIGKILL.
  std::chrono::milliseconds stop_timeout{5000};
  std::optional<redis_tls_options> tls;
  // Set: a redis-sentinel (found like redis-server) with this text as its config file
  // (<directory>/sentinel.conf, which the sentinel rewrites as it learns).
  std::optional<std::string> sentinel_config;
};

class redis_server {
 public:
  // $LOCKSCOPE_REDIS_SERVER if set, else redis-server found on $PATH, /usr/bin or
  // /usr/local/bin; nullopt when there is none.
  static std::optional<std::filesystem::path> find_executable();
  static bool available() { return find_executable().has_value(); }
  // redis-sentinel, looked for the same way ($LOCKSCOPE_REDIS_SENTINEL overrides).
  static std::optional<std::filesystem::path> find_sentinel_executable();

  // Picks a free port and starts the server; throws redis_server_error on failure.
  explicit redis_server(redis_server_options options = {});
  explicit redis_server(std::vector<std::string> extra_args);
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  const std::string& host() const noexcept { return host_; }
  std::uint16_t port() const noexcept { return port_; }
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }
  const std::filesystem::path& directory() const noexcept { return directory_; }
  std::filesystem::path log_path() const { return directory_ / "redis.log"; }

  // Starts the server again on the same port; a no-op if it is running.
  void start();
  // SIGTERM, wait up to stop_timeout, then SIGKILL. A no-op if it is not running.
  void stop() noexcept;
  void restart();
  // SIGKILL at once: a crash, as far as clients can tell.
  void kill() noexcept;
  // SIGSTOP / SIGCONT: a server that accepts bytes but never answers.
  void suspend();
  void resume();

  // The last `lines` lines of the server's log, for failure messages.
  std::string log_tail(std::size_t lines = 20) const;

 private:
  void spawn();
  void wait_until_ready();
  void reap(int signal, std::chrono::milliseconds grace) noexcept;

  redis_server_options options_;
  std::filesystem::path executable_;
  std::filesystem::path directory_;
  std::string host_ = "127.0.0.1";
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
  std::uintmax_t log_size_at_spawn_ = 0;
};

// A loopback TCP port that was free a moment ago (bind 127.0.0.1:0, read it, close).
std::uint16_t find_free_port();

}  // namespace lockscope::test
