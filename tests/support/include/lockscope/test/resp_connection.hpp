// A blocking RESP client over POSIX TCP, for tests only.
//
//   lockscope::test::resp_connection c("127.0.0.1", server.port());
//   c.command("HELLO", 3);                        // returns the decoded reply
//   c.send_command("SUBSCRIBE", "ch");            // or send now, read later
//   resp::value push = c.read_value(2s);
//   std::string_view wire = c.last_value_bytes(); // exactly the bytes of `push`
//
// Every wait has a deadline: a silent peer throws io_timeout, a closed one
// connection_closed, malformed bytes decode_failure. None of them hangs a test.
// Pushes are not told apart from replies: values are returned in arrival order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/resp/encoder.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::test {

// Connecting, sending or receiving failed (refused, reset, ...).
struct connection_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The peer closed the connection while a value was awaited.
struct connection_closed : connection_error {
  using connection_error::connection_error;
};
// Nothing (or not enough) arrived before the deadline.
struct io_timeout : connection_error {
  using connection_error::connection_error;
};
// The peer sent bytes that are not RESP; the message names the stream offset.
struct decode_failure : connection_error {
  using connection_error::connection_error;
};

class resp_connection {
 public:
  static constexpr std::chrono::milliseconds default_timeout{5000};

  resp_connection() = default;
  // Connects at once; see connect().
  resp_connection(const std::string& host, std::uint16_t port,
                  std::chrono::milliseconds timeout = default_timeout);
  ~resp_connection();
  resp_connection(resp_connection&& other) noexcept;
  resp_connection& operator=(resp_connection&& other) noexcept;
  resp_connection(const resp_connection&) = delete;
  resp_connection& operator=(const resp_connection&) = delete;

  // Connects to a numeric IPv4/IPv6 address or a host name; closes any previous
  // connection and forgets its undecoded bytes. Throws connection_error or io_timeout.
  void connect(const std::string& host, std::uint16_t port,
               std::chrono::milliseconds timeout = default_timeout);
  bool is_open() const noexcept { return fd_ >= 0; }
  void close() noexcept;

  // The timeout command() and read_value() use when none is given.
  void set_default_timeout(std::chrono::milliseconds t) noexcept { timeout_ = t; }

  // Writes all of `bytes` (raw, unencoded) or throws.
  void send_raw(std::string_view bytes);

  // Sends one command as an array of bulk strings.
  template <class... Args>
  void send_command(const Args&... args) {
    scratch_.clear();
    resp::append_command(scratch_, args...);
    send_raw(scratch_);
  }
  void send_command_argv(const std::vector<std::string>& args);

  // Sends a command and returns the next value received (its reply, unless a push
  // arrives first).
  template <class... Args>
  resp::value command(const Args&... args) {
    send_command(args...);
    return read_value();
  }
  resp::value command_argv(const std::vector<std::string>& args);

  // The next complete top-level value. Bytes beyond it are kept for the next call.
  resp::value read_value() { return read_value(timeout_); }
  resp::value read_value(std::chrono::milliseconds timeout);
  // Like read_value, but returns nullopt instead of throwing io_timeout: for checking
  // that nothing arrives.
  std::optional<resp::value> try_read_value(std::chrono::milliseconds timeout);

  // The exact wire bytes of the value last returned (attributes included).
  std::string_view last_value_bytes() const noexcept { return last_value_bytes_; }
  // Bytes received and not yet returned as part of a value.
  std::size_t buffered_bytes() const noexcept { return unparsed_.size() + current_value_bytes_.size(); }
  std::uint64_t bytes_received() const noexcept { return bytes_received_; }
  int native_handle() const noexcept { return fd_; }

 private:
  using clock = std::chrono::steady_clock;
  // Decodes buffered bytes; true once a whole value is ready in ready_.
  bool decode_buffered();
  // Waits for and appends more bytes; false on timeout.
  bool receive_more(clock::time_point deadline);
  std::string describe() const;
  struct decode_state;  // on the heap, so a move leaves the builder's pointers valid

  int fd_ = -1;
  std::string peer_;  // "host:port" for messages
  std::chrono::milliseconds timeout_ = default_timeout;
  std::string scratch_;
  std::string unparsed_;             // received, not yet fed to the decoder
  std::string current_value_bytes_;  // fed bytes of the value being decoded
  std::string last_value_bytes_;
  std::unique_ptr<decode_state> state_;
  std::uint64_t bytes_received_ = 0;
};

}  // namespace lockscope::test
