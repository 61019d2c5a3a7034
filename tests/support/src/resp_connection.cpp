#include "lockscope/test/resp_connection.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "lockscope/resp/decoder.hpp"

namespace lockscope::test {

namespace {

std::string errno_text(int e) { return fmt::format("{} (errno {})", std::strerror(e), e); }

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

// Waits for `events` on fd until the deadline; false on timeout. EINTR restarts the wait.
bool wait_for(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw connection_error("poll failed: " + errno_text(errno));
  }
}

}  // namespace

// The builder sees every node; the decoder is paused after each top-level message so
// that exactly one value's bytes are consumed at a time.
struct resp_connection::decode_state final : resp::handler {
  resp::decoder decoder;
  resp::value_builder builder;
  void on_node(const resp::node& n) override {
    builder.on_node(n);
    if (n.ends_message()) decoder.pause();
  }
};

resp_connection::resp_connection(const std::string& host, std::uint16_t port,
                                 std::chrono::milliseconds timeout) {
  connect(host, port, timeout);
}

resp_connection::~resp_connection() { close(); }

resp_connection::resp_connection(resp_connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      peer_(std::move(other.peer_)),
      timeout_(other.timeout_),
      unparsed_(std::move(other.unparsed_)),
      current_value_bytes_(std::move(other.current_value_bytes_)),
      last_value_bytes_(std::move(other.last_value_bytes_)),
      state_(std::move(other.state_)),
      bytes_received_(other.bytes_received_) {}

resp_connection& resp_connection::operator=(resp_connection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    peer_ = std::move(other.peer_);
    timeout_ = other.timeout_;
    unparsed_ = std::move(other.unparsed_);
    current_value_bytes_ = std::move(other.current_value_bytes_);
    last_value_bytes_ = std::move(other.last_value_bytes_);
    state_ = std::move(other.state_);
    bytes_received_ = other.bytes_received_;
  }
  return *this;
}

void resp_connection::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void resp_connection::connect(const std::string& host, std::uint16_t port,
                              std::chrono::milliseconds timeout) {
  close();
  peer_ = fmt::format("{}:{}", host, port);
  unparsed_.clear();
  current_value_bytes_.clear();
  last_value_bytes_.clear();
  state_ = std::make_unique<decode_state>();
  bytes_received_ = 0;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw connection_error(fmt::format("cannot resolve {}: {}", peer_, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);

  const auto deadline = clock::now() + timeout;
  std::string failures;
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      failures += " socket: " + errno_text(errno) + ";";
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_for(fd, POLLOUT, deadline)) {
        ::close(fd);
        throw io_timeout(fmt::format("connecting to {} timed out after {} ms", peer_, timeout.count()));
      }
      int error = 0;
      socklen_t size = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      rc = error == 0 ? 0 : -1;
      errno = error;
    }
    if (rc != 0) {
      failures += " " + errno_text(errno) + ";";
      ::close(fd);
      continue;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    fd_ = fd;
    return;
  }
  throw connection_error(fmt::format("cannot connect to {}:{}", peer_, failures));
}

void resp_connection::send_raw(std::string_view bytes) {
  if (fd_ < 0) throw connection_error("send on a closed resp_connection");
  const auto deadline = clock::now() + timeout_;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) {
        throw io_timeout(fmt::format("{}: sending timed out with {} bytes unsent", describe(), bytes.size()));
      }
      continue;
    }
    throw connection_error(fmt::format("{}: send failed: {}", describe(), errno_text(errno)));
  }
}

void resp_connection::send_command_argv(const std::vector<std::string>& args) {
  scratch_.clear();
  resp::writer w(scratch_);
  w.array(args.size());
  for (const std::string& a : args) w.bulk_string(a);
  send_raw(scratch_);
}

resp::value resp_connection::command_argv(const std::vector<std::string>& args) {
  send_command_argv(args);
  return read_value();
}

resp::value resp_connection::read_value(std::chrono::milliseconds timeout) {
  std::optional<resp::value> v = try_read_value(timeout);
  if (!v) {
    throw io_timeout(fmt::format("{}: no complete value within {} ms ({} bytes of a partial value buffered)",
                                 describe(), timeout.count(), buffered_bytes()));
  }
  return std::move(*v);
}

std::optional<resp::value> resp_connection::try_read_value(std::chrono::milliseconds timeout) {
  if (!state_) throw connection_error("read on a resp_connection that was never connected");
  const auto deadline = clock::now() + timeout;
  while (!decode_buffered()) {
    if (fd_ < 0) throw connection_error(describe() + ": read on a closed resp_connection");
    if (!receive_more(deadline)) return std::nullopt;
  }
  std::vector<resp::value>& values = state_->builder.values();
  resp::value v = std::move(values.front());
  values.clear();
  last_value_bytes_ = std::move(current_value_bytes_);
  current_value_bytes_.clear();
  return v;
}

bool resp_connection::decode_buffered() {
  resp::decoder& d = state_->decoder;
  while (!unparsed_.empty() && state_->builder.values().empty()) {
    const std::size_t used = d.feed(unparsed_, *state_);
    current_value_bytes_.append(unparsed_, 0, used);
    unparsed_.erase(0, used);
    if (d.error()) {
      throw decode_failure(fmt::format("{}: undecodable reply: {} at stream offset {}", describe(),
                                       d.error().message(), d.error_offset()));
    }
    if (used == 0) break;  // defensive: never spin on a decoder that takes nothing
  }
  return !state_->builder.values().empty();
}

bool resp_connection::receive_more(clock::time_point deadline) {
  char buffer[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      unparsed_.append(buffer, static_cast<std::size_t>(n));
      bytes_received_ += static_cast<std::uint64_t>(n);
      return true;
    }
    if (n == 0) {
      close();
      throw connection_closed(fmt::format("{}: peer closed the connection ({} bytes of a partial value buffered)",
                                          describe(), buffered_bytes()));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_, POLLIN, deadline)) return false;
      continue;
    }
    const int e = errno;
    close();
    if (e == ECONNRESET) throw connection_closed(fmt::format("{}: connection reset by peer", describe()));
    throw connection_error(fmt::format("{}: recv failed: {}", describe(), errno_text(e)));
  }
}

std::string resp_connection::describe() const { return "resp_connection to " + peer_; }

}  // namespace lockscope::test
