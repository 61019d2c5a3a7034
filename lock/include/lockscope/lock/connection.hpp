// The Boost.Asio adapter around request_pipeline: one TCP (or TLS, for rediss://)
// connection to Redis that connects with a timeout, runs the handshake (AUTH / HELLO, SELECT, CLIENT SETNAME,
// PING), reconnects with capped exponential backoff, health-checks with PING, gives
// every command a deadline and sends QUIT on close.
//
// Every member function must be called on the connection's strand; every callback
// runs on it. Commands issued while the connection is down are held and written once
// it is back, unless their deadline passes first (errc::not_connected, with the last
// connect error as the reply text).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/detail/tls.hpp"
#include "lockscope/lock/protocol.hpp"

namespace lockscope::lock {

using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

// Where each connect attempt goes, for connections whose server is found at run time
// (Sentinel: the current master). Called on the connection's strand.
class endpoint_source {
 public:
  struct located {
    std::error_code ec;  // set: no address now (the attempt fails with it, a retry follows)
    std::string why;
    server_address address;
  };
  virtual ~endpoint_source() = default;
  // Before each attempt. `done` may run later, on the strand.
  virtual void locate(detail::unique_function<void(located)> done) = 0;
  // True: the handshake ends with ROLE, whose reply goes to check_role.
  virtual bool wants_role_check() const noexcept { return false; }
  // Empty when the server at `at` is the one wanted; else why not (the attempt fails
  // with errc::handshake_failed and that text).
  virtual std::string check_role(const server_address& at, const resp::value& reply) = 0;
  // An attempt on `at` failed, or the connection to it dropped.
  virtual void dropped(const server_address& at) = 0;
};

struct connection_events {
  // Connected and the handshake succeeded (first time or after a reconnect).
  detail::unique_function<void()> on_ready;
  // A connect attempt failed or the ready connection was lost; a reconnect follows.
  detail::unique_function<void(std::error_code ec, const std::string& why)> on_down;
  // Pub/sub messages and confirmations.
  push_handler on_push;
  // Null: config host and port, every attempt.
  std::shared_ptr<endpoint_source> endpoints;
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  enum class state : std::uint8_t { idle, connecting, handshaking, ready, backoff, closing, closed };

  // `name` is sent with CLIENT SETNAME (empty: none). A subscriber connection routes
  // RESP2 pub/sub arrays to on_push.
  static std::shared_ptr<connection> create(strand_type strand, client_config config, std::string name,
                                            bool subscriber, connection_events events);

  // Starts connecting; keeps reconnecting until close().
  void start();

  // Queues a command with a deadline.
  template <class... Args>
  void execute(clock_type::time_point deadline, reply_handler done, const Args&... args) {
    pipeline_.send(deadline, std::move(done), args...);
    after_queue(deadline);
  }
  void execute_encoded(std::string_view command, clock_type::time_point deadline, reply_handler done);
  // A command without a reply of its own (SUBSCRIBE, UNSUBSCRIBE); only when ready.
  void send_without_reply(std::string_view command);

  // Sends QUIT when connected, waits briefly for its reply, closes the socket and
  // completes everything still pending with errc::shut_down. No reconnect follows.
  void close(detail::unique_function<void()> done);

  // Drops the connection (in-flight commands fail with errc::connection_lost; queued
  // ones stay queued) and reconnects, asking the endpoint source again. A no-op unless
  // connecting, handshaking or ready.
  void reconnect(std::string why);

  // Completes the commands held while the connection is not ready (never written) with
  // `ec` and `why`, at once instead of at their deadlines: for a caller that can send
  // them to another server (the cluster router, when a node is down). Commands queued
  // later are held again.
  void fail_held(std::error_code ec, const std::string& why);

  state current_state() const noexcept { return state_; }
  bool ready() const noexcept { return state_ == state::ready; }
  // Why the last attempt failed or the connection dropped ("connect to ...: refused").
  std::error_code last_error() const noexcept { return last_error_; }
  const std::string& last_error_text() const noexcept { return last_error_text_; }
  // Successful handshakes so far (1 after the first connect).
  std::uint64_t ready_count() const noexcept { return ready_count_; }
  const strand_type& strand() const noexcept { return strand_; }
  std::string endpoint_text() const;
  // The server of the current (or last) attempt.
  const server_address& endpoint() const noexcept { return endpoint_; }

  connection(strand_type strand, client_config config, std::string name, bool subscriber,
             connection_events events);

 private:
  void connect_attempt();
  void connect_to(std::uint64_t attempt);
  void on_connected(std::uint64_t attempt);
  void start_tls(std::uint64_t attempt);
  void start_redis_handshake(std::uint64_t attempt);
  template <class Handler>
  void read_some(Handler&& handler);
  template <class Handler>
  void write_all(Handler&& handler);
  void handshake_reply(std::uint64_t attempt, std::size_t step, std::error_code ec, resp::value&& reply);
  void become_ready();
  void drop(std::error_code ec, std::string why);
  void schedule_reconnect();
  void start_read();
  void read_failed(boost::system::error_code ec, bool tls);
  void write_pending();
  void after_queue(clock_type::time_point deadline);
  void arm_deadline_timer(clock_type::time_point when);
  void on_deadline_timer();
  void schedule_ping();
  void finish_close();

  strand_type strand_;
  client_config config_;
  std::string name_;
  connection_events events_;
  server_address endpoint_;
  std::size_t role_step_ = SIZE_MAX;  // the handshake's ROLE step, when there is one
  request_pipeline pipeline_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  // rediss://: built on the first attempt; a new session per attempt. Plain TCP leaves
  // both null and reads and writes the socket directly.
  std::shared_ptr<detail::tls_context> tls_context_;
  std::shared_ptr<detail::tls_session> tls_;
  bool tls_handshaking_ = false;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer backoff_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer ping_timer_;
  std::vector<handshake_step> handshake_;
  std::size_t handshake_done_ = 0;
  std::string write_buffer_;
  std::vector<char> read_buffer_;
  state state_ = state::idle;
  std::uint64_t attempt_ = 0;  // bumped per connect attempt: stale callbacks check it
  std::chrono::milliseconds backoff_{0};
  clock_type::time_point deadline_armed_at_ = clock_type::time_point::max();
  std::uint64_t deadline_generation_ = 0;
  bool writing_ = false;
  std::uint64_t ready_count_ = 0;
  std::error_code last_error_;
  std::string last_error_text_;
  detail::unique_function<void()> close_done_;
};

}  // namespace lockscope::lock
