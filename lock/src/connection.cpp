#include "lockscope/lock/connection.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "lockscope/lock/error.hpp"
#include "tls_stream.hpp"

namespace lockscope::lock {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::milliseconds quit_timeout{500};
constexpr std::size_t read_chunk = 64 * 1024;

// Redis's answer to a bad or missing password, whatever the command.
bool is_auth_error(std::string_view text) noexcept {
  return text.starts_with("WRONGPASS") || text.starts_with("NOAUTH") || text.starts_with("NOPERM") ||
         text.starts_with("ERR invalid password") || text.starts_with("ERR AUTH");
}

}  // namespace

std::shared_ptr<connection> connection::create(strand_type strand, client_config config, std::string name,
                                               bool subscriber, connection_events events) {
  return std::make_shared<connection>(std::move(strand), std::move(config), std::move(name), subscriber,
                                      std::move(events));
}

connection::connection(strand_type strand, client_config config, std::string name, bool subscriber,
                       connection_events events)
    : strand_(std::move(strand)),
      config_(std::move(config)),
      name_(std::move(name)),
      events_(std::move(events)),
      endpoint_{config_.host, config_.port},
      pipeline_(pipeline_options{subscriber}),
      resolver_(strand_),
      socket_(strand_),
      connect_timer_(strand_),
      backoff_timer_(strand_),
      deadline_timer_(strand_),
      ping_timer_(strand_),
      read_buffer_(read_chunk) {
  pipeline_.set_ready(false);
  if (events_.on_push) pipeline_.set_push_handler(std::move(events_.on_push));
  last_error_ = errc::not_connected;
  last_error_text_ = events_.endpoints ? std::string("not connected yet (the address is being looked up)")
                                       : "not connected yet to " + endpoint_text();
}

std::string connection::endpoint_text() const {
  if (endpoint_.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", endpoint_.host, endpoint_.port);
  return fmt::format("{}:{}", endpoint_.host, endpoint_.port);
}

void connection::start() {
  if (state_ != state::idle) return;
  connect_attempt();
}

void connection::connect_attempt() {
  state_ = state::connecting;
  const std::uint64_t attempt = ++attempt_;
  if (!events_.endpoints) return connect_to(attempt);
  // The source may answer at once or after asking elsewhere (the sentinels): its own
  // timeouts bound that, the connect timer starts after it.
  events_.endpoints->locate([self = shared_from_this(), attempt](endpoint_source::located where) {
    if (attempt != self->attempt_ || self->state_ != state::connecting) return;
    if (where.ec) return self->drop(where.ec, std::move(where.why));
    self->endpoint_ = std::move(where.address);
    self->connect_to(attempt);
  });
}

void connection::connect_to(std::uint64_t attempt) {
  auto self = shared_from_this();
  connect_timer_.expires_after(config_.connect_timeout);
  connect_timer_.async_wait([self, attempt](boost::system::error_code ec) {
    if (ec || attempt != self->attempt_) return;
    if (self->state_ != state::connecting && self->state_ != state::handshaking) return;
    if (self->tls_handshaking_) {
      self->drop(errc::tls_failed,
                 fmt::format("TLS handshake with {} timed out after {} ms: no answer to the ClientHello (a plain "
                             "redis:// port?)",
                             self->endpoint_text(), self->config_.connect_timeout.count()));
      return;
    }
    self->drop(errc::timeout, fmt::format("connect to {} timed out after {} ms", self->endpoint_text(),
                                          self->config_.connect_timeout.count()));
  });
  resolver_.async_resolve(
      endpoint_.host, std::to_string(endpoint_.port),
      [self, attempt](boost::system::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (attempt != self->attempt_ || self->state_ != state::connecting) return;
        if (ec) {
          self->drop(ec, fmt::format("cannot resolve {}: {}", self->endpoint_.host, ec.message()));
          return;
        }
        asio::async_connect(self->socket_, results,
                            [self, attempt](boost::system::error_code cec, const asio::ip::tcp::endpoint&) {
                              if (attempt != self->attempt_ || self->state_ != state::connecting) return;
                              if (cec) {
                                self->drop(cec, fmt::format("connect to {}: {}", self->endpoint_text(),
                                                            cec.message()));
                                return;
                              }
                              self->on_connected(attempt);
                            });
      });
}

// One branch per I/O call picks the stream; the plain path calls the socket itself.
// The handler holds the TLS session (null for plain TCP) until it runs.
template <class Handler>
void connection::read_some(Handler&& handler) {
  if (tls_) {
    tls_->stream.async_read_some(asio::buffer(read_buffer_), std::forward<Handler>(handler));
  } else {
    socket_.async_read_some(asio::buffer(read_buffer_), std::forward<Handler>(handler));
  }
}

template <class Handler>
void connection::write_all(Handler&& handler) {
  if (tls_) {
    asio::async_write(tls_->stream, asio::buffer(write_buffer_), std::forward<Handler>(handler));
  } else {
    asio::async_write(socket_, asio::buffer(write_buffer_), std::forward<Handler>(handler));
  }
}

void connection::on_connected(std::uint64_t attempt) {
  boost::system::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  state_ = state::handshaking;
  if (config_.tls.enabled) {
    start_tls(attempt);
  } else {
    start_redis_handshake(attempt);
  }
}

void connection::start_tls(std::uint64_t attempt) {
  if (!tls_context_) {
    std::string why;
    tls_context_ = detail::make_tls_context(config_.tls, why);
    // A file that cannot be loaded is a configuration error; the next attempt reads
    // the files again, in case they are being put in place.
    if (!tls_context_) {
      drop(errc::invalid_argument, std::move(why));
      return;
    }
  }
  tls_ = detail::make_tls_session(*tls_context_, socket_, config_.tls, endpoint_.host);
  tls_handshaking_ = true;
  auto self = shared_from_this();
  tls_->stream.async_handshake(
      asio::ssl::stream_base::client, [self, attempt, session = tls_](boost::system::error_code ec) {
        if (attempt != self->attempt_ || self->state_ != state::handshaking) return;
        self->tls_handshaking_ = false;
        if (ec) {
          const std::string endpoint = self->endpoint_text();
          self->drop(errc::tls_failed,
                     session->failure.error != 0
                         ? detail::describe_certificate_failure(session->failure, endpoint, self->endpoint_.host)
                         : detail::describe_tls_error(ec, endpoint, !self->config_.tls.certificate.empty()));
          return;
        }
        self->start_redis_handshake(attempt);
      });
}

void connection::start_redis_handshake(std::uint64_t attempt) {
  start_read();
  handshake_ = handshake_plan(config_, name_);
  role_step_ = SIZE_MAX;
  if (events_.endpoints && events_.endpoints->wants_role_check()) {
    // Before anything else is written: the address may be a replica by now.
    handshake_step role{{}, "ROLE", errc::handshake_failed};
    resp::append_command(role.command, "ROLE");
    role_step_ = handshake_.size();
    handshake_.push_back(std::move(role));
  }
  // A PING last: with no password configured, a server that wants one says NOAUTH
  // here rather than on the first lock command.
  handshake_step ping{{}, "PING", errc::handshake_failed};
  resp::append_command(ping.command, "PING");
  handshake_.push_back(std::move(ping));
  handshake_done_ = 0;
  const clock_type::time_point deadline = clock_type::now() + config_.connect_timeout;
  auto self = shared_from_this();
  for (std::size_t i = 0; i < handshake_.size(); ++i) {
    pipeline_.send_encoded_now(handshake_[i].command, deadline,
                               [self, attempt, i](std::error_code ec, resp::value&& reply) {
                                 self->handshake_reply(attempt, i, ec, std::move(reply));
                               });
  }
  write_pending();
  arm_deadline_timer(deadline);
}

void connection::handshake_reply(std::uint64_t attempt, std::size_t step, std::error_code ec, resp::value&& reply) {
  if (attempt != attempt_ || state_ != state::handshaking) return;
  if (ec) {
    const handshake_step& s = handshake_[step];
    const std::string text = reply.is_error() ? reply.text : ec.message();
    const std::error_code code = is_auth_error(text) ? std::error_code(errc::auth_failed)
                                 : ec == errc::server_error ? s.error_code
                                                            : ec;
    // Dropping from inside the pipeline's feed is safe: it stops walking replies.
    drop(code, fmt::format("{} to {} failed: {}", s.name, endpoint_text(), text));
    return;
  }
  if (step == role_step_) {
    if (std::string wrong = events_.endpoints->check_role(endpoint_, reply); !wrong.empty()) {
      drop(errc::handshake_failed, std::move(wrong));
      return;
    }
  }
  if (++handshake_done_ == handshake_.size()) become_ready();
}

void connection::become_ready() {
  connect_timer_.cancel();
  state_ = state::ready;
  backoff_ = std::chrono::milliseconds(0);
  ++ready_count_;
  last_error_ = {};
  last_error_text_.clear();
  pipeline_.set_ready(true);
  write_pending();
  schedule_ping();
  if (events_.on_ready) events_.on_ready();
}

void connection::drop(std::error_code ec, std::string why) {
  if (state_ == state::closed) return;
  boost::system::error_code ignored;
  socket_.close(ignored);
  tls_.reset();  // handlers still pending hold it until they run
  tls_handshaking_ = false;
  resolver_.cancel();
  connect_timer_.cancel();
  ping_timer_.cancel();
  writing_ = false;
  ++attempt_;
  if (state_ == state::closing) {
    finish_close();
    return;
  }
  const bool was_ready = state_ == state::ready;
  last_error_ = ec;
  last_error_text_ = why;
  pipeline_.set_ready(false);
  pipeline_.fail_in_flight(was_ready ? std::error_code(errc::connection_lost) : ec, why);
  state_ = state::backoff;
  schedule_reconnect();
  if (events_.endpoints) events_.endpoints->dropped(endpoint_);
  if (events_.on_down) events_.on_down(ec, why);
}

void connection::schedule_reconnect() {
  backoff_ = backoff_.count() == 0 ? config_.reconnect_backoff_min
                                   : std::min(backoff_ * 2, config_.reconnect_backoff_max);
  auto self = shared_from_this();
  const std::uint64_t attempt = attempt_;
  backoff_timer_.expires_after(backoff_);
  backoff_timer_.async_wait([self, attempt](boost::system::error_code ec) {
    if (ec || attempt != self->attempt_ || self->state_ != state::backoff) return;
    self->connect_attempt();
  });
}

void connection::start_read() {
  auto self = shared_from_this();
  const std::uint64_t attempt = attempt_;
  read_some([self, attempt, session = tls_](boost::system::error_code ec, std::size_t n) {
    if (attempt != self->attempt_) return;
    if (ec) {
      self->read_failed(ec, session != nullptr);
      return;
    }
    if (const std::error_code perr = self->pipeline_.feed(std::string_view(self->read_buffer_.data(), n))) {
      self->drop(perr, fmt::format("{} sent bytes out of step with the requests", self->endpoint_text()));
      return;
    }
    if (attempt != self->attempt_) return;  // a completion dropped or closed the connection
    self->start_read();
  });
}

void connection::read_failed(boost::system::error_code ec, bool tls) {
  // A TLS server that closes without close_notify (a restart, a kill) is just a close.
  const bool closed = ec == asio::error::eof || (tls && ec == asio::ssl::error::stream_truncated);
  // TLS 1.3 servers check the client certificate after the client's side of the
  // handshake is done: their refusal arrives as an alert on the first read.
  if (tls && state_ == state::handshaking &&
      (ec.category() == asio::error::get_ssl_category() || closed || ec == asio::error::connection_reset)) {
    drop(errc::tls_failed, detail::describe_tls_error(ec, endpoint_text(), !config_.tls.certificate.empty()));
    return;
  }
  if (closed) {
    drop(errc::connection_lost, fmt::format("{} closed the connection", endpoint_text()));
    return;
  }
  // A TLS port resets a client that speaks plain RESP to it.
  const bool maybe_tls_port = !tls && state_ == state::handshaking && ec == asio::error::connection_reset;
  drop(ec, fmt::format("reading from {}: {}{}", endpoint_text(), ec.message(),
                       maybe_tls_port ? " during the handshake (a TLS port? use rediss://)" : ""));
}

void connection::write_pending() {
  if (writing_ || pipeline_.output().empty()) return;
  if (state_ != state::ready && state_ != state::handshaking && state_ != state::closing) return;
  if (!socket_.is_open()) return;
  pipeline_.swap_output(write_buffer_);
  writing_ = true;
  auto self = shared_from_this();
  const std::uint64_t attempt = attempt_;
  write_all([self, attempt, session = tls_](boost::system::error_code ec, std::size_t) {
    if (attempt != self->attempt_) return;
    self->writing_ = false;
    if (ec) {
      if (session && self->state_ == state::handshaking) {  // refused right after the TLS handshake
        self->drop(errc::tls_failed,
                   detail::describe_tls_error(ec, self->endpoint_text(), !self->config_.tls.certificate.empty()));
        return;
      }
      self->drop(ec, fmt::format("writing to {}: {}", self->endpoint_text(), ec.message()));
      return;
    }
    self->write_pending();
  });
}

void connection::execute_encoded(std::string_view command, clock_type::time_point deadline, reply_handler done) {
  pipeline_.send_encoded(command, deadline, std::move(done));
  after_queue(deadline);
}

void connection::after_queue(clock_type::time_point deadline) {
  if (state_ == state::closed) {
    pipeline_.fail_all(errc::shut_down);
    return;
  }
  write_pending();
  arm_deadline_timer(deadline);
}

void connection::reconnect(std::string why) {
  if (state_ != state::connecting && state_ != state::handshaking && state_ != state::ready) return;
  drop(errc::connection_lost, std::move(why));
}

void connection::fail_held(std::error_code ec, const std::string& why) { pipeline_.fail_held(ec, why); }

void connection::send_without_reply(std::string_view command) {
  if (state_ != state::ready) return;
  pipeline_.send_without_reply(command);
  write_pending();
}

void connection::arm_deadline_timer(clock_type::time_point when) {
  if (when >= deadline_armed_at_) return;  // an earlier wake-up is already set
  deadline_armed_at_ = when;
  const std::uint64_t generation = ++deadline_generation_;
  auto self = shared_from_this();
  deadline_timer_.expires_at(when);
  deadline_timer_.async_wait([self, generation](boost::system::error_code) {
    if (generation != self->deadline_generation_) return;  // re-armed earlier since
    self->on_deadline_timer();
  });
}

void connection::on_deadline_timer() {
  deadline_armed_at_ = clock_type::time_point::max();
  if (state_ == state::closed) return;
  const bool up = state_ == state::ready;
  pipeline_.expire(clock_type::now(), up ? std::error_code(errc::timeout) : std::error_code(errc::not_connected),
                   up ? std::string_view() : std::string_view(last_error_text_));
  const clock_type::time_point next = pipeline_.next_deadline();
  if (next != clock_type::time_point::max()) arm_deadline_timer(next);
}

void connection::schedule_ping() {
  if (config_.ping_interval.count() <= 0) return;
  auto self = shared_from_this();
  const std::uint64_t attempt = attempt_;
  ping_timer_.expires_after(config_.ping_interval);
  ping_timer_.async_wait([self, attempt](boost::system::error_code ec) {
    if (ec || attempt != self->attempt_ || self->state_ != state::ready) return;
    const auto timeout = std::min(self->config_.ping_interval, self->config_.command_timeout);
    self->execute(clock_type::now() + timeout, [self, attempt](std::error_code pec, resp::value&&) {
      if (attempt != self->attempt_ || self->state_ != state::ready) return;
      if (pec == errc::timeout) {
        self->drop(errc::timeout, fmt::format("{} did not answer PING", self->endpoint_text()));
        return;
      }
      self->schedule_ping();
    }, "PING");
  });
}

void connection::close(detail::unique_function<void()> done) {
  if (state_ == state::closed || state_ == state::closing) {
    if (done) {
      if (state_ == state::closed) {
        done();
      } else if (!close_done_) {
        close_done_ = std::move(done);
      }
    }
    return;
  }
  close_done_ = std::move(done);
  const bool was_ready = state_ == state::ready;
  state_ = state::closing;
  backoff_timer_.cancel();
  ping_timer_.cancel();
  if (!was_ready) {
    finish_close();
    return;
  }
  auto self = shared_from_this();
  pipeline_.send_encoded_now("*1\r\n$4\r\nQUIT\r\n", clock_type::now() + quit_timeout,
                             [self](std::error_code, resp::value&&) { self->finish_close(); });
  write_pending();
  arm_deadline_timer(clock_type::now() + quit_timeout);
}

void connection::finish_close() {
  if (state_ == state::closed) return;
  state_ = state::closed;
  ++attempt_;
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  resolver_.cancel();
  connect_timer_.cancel();
  backoff_timer_.cancel();
  ping_timer_.cancel();
  ++deadline_generation_;
  deadline_timer_.cancel();
  deadline_armed_at_ = clock_type::time_point::max();
  pipeline_.set_ready(false);
  pipeline_.fail_all(errc::shut_down, "the client was closed");
  if (close_done_) std::exchange(close_done_, nullptr)();
}

}  // namespace lockscope::lock
