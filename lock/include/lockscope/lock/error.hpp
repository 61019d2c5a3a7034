// Errors of the lock client as std::error_code values, and the exception the
// blocking API throws.
#pragma once

#include <string>
#include <system_error>

namespace lockscope::lock {

enum class errc {
  timeout = 1,         // the operation's deadline passed before its reply arrived
  not_connected,       // no usable connection before the deadline (see the connect error)
  connection_lost,     // the connection dropped with the command in flight: it may have run
  auth_failed,         // AUTH or HELLO ... AUTH was rejected (wrong password or user)
  handshake_failed,    // HELLO, SELECT or CLIENT SETNAME failed
  server_error,        // Redis replied with an error; its text travels with the error
  protocol_error,      // the server sent bytes that are not RESP, or an unrequested reply
  unexpected_reply,    // a reply of a type the command cannot produce
  not_owner,           // unlock by an owner that does not hold the lock
  invalid_url,         // the Redis URL could not be parsed
  tls_failed,          // TLS handshake or certificate check failed (the text says which)
  invalid_argument,    // a bad duration, lease or name
  shut_down,           // the client was closed or destroyed
  would_deadlock,      // a blocking call was made on the client's own I/O thread
  replica_sync_failed, // fewer replicas acknowledged the lock write than sync_replicas (WAIT)
  no_master,           // Sentinel: no sentinel gave the master's address (the text names each one tried)
};

const std::error_category& category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

// What the blocking API throws. what() is the full text: Redis's own error text for
// server errors, Redisson's message for an unlock by a non-owner, or the code's
// message followed by detail.
class lock_error : public std::system_error {
 public:
  lock_error(std::error_code code, std::string message)
      : std::system_error(code), message_(std::move(message)) {}
  explicit lock_error(std::error_code code) : lock_error(code, code.message()) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace lockscope::lock

template <>
struct std::is_error_code_enum<lockscope::lock::errc> : std::true_type {};
