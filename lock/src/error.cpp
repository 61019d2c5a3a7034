#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

namespace {

class lock_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "lockscope.lock"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::timeout: return "operation timed out";
      case errc::not_connected: return "not connected to Redis";
      case errc::connection_lost: return "connection to Redis lost with the command in flight";
      case errc::auth_failed: return "authentication failed";
      case errc::handshake_failed: return "connection handshake failed";
      case errc::server_error: return "Redis replied with an error";
      case errc::protocol_error: return "protocol error";
      case errc::unexpected_reply: return "unexpected reply type";
      case errc::not_owner: return "attempt to unlock lock, not locked by current thread";
      case errc::invalid_url: return "invalid Redis URL";
      case errc::tls_failed: return "TLS handshake failed";
      case errc::invalid_argument: return "invalid argument";
      case errc::shut_down: return "client shut down";
      case errc::would_deadlock: return "blocking call on the client's own I/O thread";
      case errc::replica_sync_failed: return "fewer replicas acknowledged the lock write than asked (WAIT)";
      case errc::no_master: return "no sentinel gave the master's address";
    }
    return "unknown lock error";
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const lock_category instance;
  return instance;
}

}  // namespace lockscope::lock
