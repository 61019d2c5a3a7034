// The sans-I/O core of a Redis connection: commands go in as bytes to write, bytes
// read go in and come out as completed replies and routed pub/sub messages. No
// sockets, no clocks of its own (the caller passes "now"), so it is tested by feeding
// it bytes.
//
//   request_pipeline p;
//   p.send(deadline, [](std::error_code ec, resp::value&& reply) { ... }, "GET", "k");
//   write_all(p.output()); p.clear_output();   // the I/O layer's job
//   p.feed(bytes_read);                        // completes requests in FIFO order
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/detail/unique_function.hpp"
#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/encoder.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

using clock_type = std::chrono::steady_clock;

// Completion of one command. On success `ec` is empty and `reply` is what Redis sent.
// When Redis replied with an error, `ec` is errc::server_error and `reply` is that
// error, its text intact (`reply.text`). For other failures (timeout, connection
// lost, ...) `reply` may be an error value whose text says more, or nil.
using reply_handler = detail::unique_function<void(std::error_code ec, resp::value&& reply)>;
// Receives pub/sub messages and subscription confirmations (RESP3 `>` pushes, or in
// subscriber mode their RESP2 array form).
using push_handler = detail::unique_function<void(resp::value&& push)>;

struct pipeline_options {
  // RESP2 subscriber connections get `message` / `subscribe` / ... as plain arrays;
  // with this set they are routed to the push handler instead of matched to requests,
  // and so is an error reply when no request is in flight (a refused SUBSCRIBE).
  bool route_pubsub_arrays = false;
};

// Pipelined request queue: any number of commands in flight, replies matched FIFO.
class request_pipeline {
 public:
  explicit request_pipeline(pipeline_options options = {});

  // Encodes a command (array of bulk strings) and queues its completion. While the
  // pipeline is not ready (see set_ready), the command is held and written later.
  template <class... Args>
  void send(clock_type::time_point deadline, reply_handler done, const Args&... args) {
    if (!ready_) {
      held_.push_back({{}, std::move(done), deadline});
      resp::append_command(held_.back().bytes, args...);
      return;
    }
    resp::append_command(output_, args...);
    in_flight_.push_back({std::move(done), deadline, false});
  }
  // Same for a command already encoded.
  void send_encoded(std::string_view command, clock_type::time_point deadline, reply_handler done);
  // Writes now even when not ready: the handshake's commands.
  void send_encoded_now(std::string_view command, clock_type::time_point deadline, reply_handler done);
  // A command with no reply of its own: SUBSCRIBE / UNSUBSCRIBE, whose confirmations
  // arrive as pub/sub messages. Written now; dropped by the next reset().
  void send_without_reply(std::string_view command);

  // Held commands are appended to the output (in order) once ready.
  void set_ready(bool ready);
  bool ready() const noexcept { return ready_; }

  // Bytes to write. The I/O layer writes them and calls consume_output / swap_output.
  const std::string& output() const noexcept { return output_; }
  // Moves the pending output into `buffer` (whose old contents are discarded), keeping
  // both allocations for reuse.
  void swap_output(std::string& buffer) noexcept {
    buffer.clear();
    buffer.swap(output_);
  }

  // Decodes `bytes`, completing requests and routing pushes. Returns an error when the
  // stream is not RESP or holds a reply nobody asked for; the connection must then be
  // dropped (fail_in_flight).
  std::error_code feed(std::string_view bytes);

  void set_push_handler(push_handler handler) { push_handler_ = std::move(handler); }

  // Completes requests whose deadline is at or before `now`: in flight with
  // errc::timeout (their late replies are then dropped), held ones with `held_error`
  // and an error value holding `held_detail`. Returns how many completed.
  std::size_t expire(clock_type::time_point now, std::error_code held_error = {}, std::string_view held_detail = {});
  // The earliest deadline of a pending request, or clock_type::time_point::max().
  clock_type::time_point next_deadline() const noexcept;

  // The connection dropped: completes every in-flight request with `ec` (held ones
  // stay held), clears the output and restarts the decoder for a new stream.
  void fail_in_flight(std::error_code ec, std::string_view detail = {});
  // Completes every held request (never written, so it never ran) with `ec`; in-flight
  // ones are left alone. For a caller that can send them elsewhere.
  void fail_held(std::error_code ec, std::string_view detail = {});
  // Completes everything, held included, with `ec`.
  void fail_all(std::error_code ec, std::string_view detail = {});

  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  std::size_t held() const noexcept { return held_.size(); }

 private:
  struct request {
    reply_handler done;
    clock_type::time_point deadline;
    bool expired;  // completed with a timeout; its reply will be dropped
  };
  struct held_request {
    std::string bytes;
    reply_handler done;
    clock_type::time_point deadline;
  };
  bool is_push(const resp::value& v) const noexcept;
  void reset_stream();

  pipeline_options options_;
  resp::decoder decoder_;
  resp::value_builder builder_;
  std::vector<resp::value> scratch_;  // replies of one feed, taken out of the builder
  std::string output_;
  std::deque<request> in_flight_;
  std::deque<held_request> held_;
  push_handler push_handler_;
  std::uint64_t generation_ = 0;  // bumped by fail_*: a feed in progress stops
  bool ready_ = true;
};

// One command of a connection handshake and the error its failure maps to.
struct handshake_step {
  std::string command;  // encoded RESP
  std::string name;     // "AUTH", "HELLO", "SELECT", "CLIENT SETNAME"
  std::error_code error_code;
};

// AUTH (or HELLO <protocol> AUTH), SELECT and CLIENT SETNAME as the config asks; empty
// when nothing is needed. `client_name` overrides config.client_name.
std::vector<handshake_step> handshake_plan(const client_config& config, std::string_view client_name);

// The pub/sub message kinds a subscriber connection receives.
bool is_pubsub_kind(std::string_view kind) noexcept;

}  // namespace lockscope::lock
