#include "lockscope/lock/protocol.hpp"

#include <algorithm>
#include <array>

#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

namespace {

resp::value detail_value(std::string_view detail) {
  return detail.empty() ? resp::value::nil() : resp::value::error(detail);
}

}  // namespace

bool is_pubsub_kind(std::string_view kind) noexcept {
  static constexpr std::array<std::string_view, 9> kinds{
      "message", "pmessage", "smessage", "subscribe", "unsubscribe",
      "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"};
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

request_pipeline::request_pipeline(pipeline_options options) : options_(options) {}

void request_pipeline::send_encoded(std::string_view command, clock_type::time_point deadline, reply_handler done) {
  if (!ready_) {
    held_.push_back({std::string(command), std::move(done), deadline});
    return;
  }
  send_encoded_now(command, deadline, std::move(done));
}

void request_pipeline::send_encoded_now(std::string_view command, clock_type::time_point deadline,
                                        reply_handler done) {
  output_.append(command);
  in_flight_.push_back({std::move(done), deadline, false});
}

void request_pipeline::send_without_reply(std::string_view command) { output_.append(command); }

void request_pipeline::set_ready(bool ready) {
  ready_ = ready;
  if (!ready_) return;
  while (!held_.empty()) {
    held_request h = std::move(held_.front());
    held_.pop_front();
    output_.append(h.bytes);
    in_flight_.push_back({std::move(h.done), h.deadline, false});
  }
}

bool request_pipeline::is_push(const resp::value& v) const noexcept {
  if (v.type == resp::type::push) return true;
  return options_.route_pubsub_arrays && v.type == resp::type::array && !v.elements.empty() &&
         v.elements.front().is_string() && is_pubsub_kind(v.elements.front().text);
}

std::error_code request_pipeline::feed(std::string_view bytes) {
  const std::uint64_t generation = generation_;
  decoder_.feed(bytes, builder_);
  // Take the replies out first: a completion may send more commands, or fail the
  // connection, while we walk them.
  scratch_.clear();
  scratch_.swap(builder_.values());
  std::error_code result;
  for (resp::value& v : scratch_) {
    if (is_push(v) || (in_flight_.empty() && v.is_error() && options_.route_pubsub_arrays && push_handler_)) {
      // A subscriber's error with nothing in flight is the answer to a SUBSCRIBE-like
      // command (a cluster's MOVED/ASK to an SSUBSCRIBE): its handler pairs it up.
      if (push_handler_) push_handler_(std::move(v));
    } else if (in_flight_.empty()) {
      result = errc::protocol_error;  // a reply nobody asked for: the stream is out of step
      break;
    } else {
      request r = std::move(in_flight_.front());
      in_flight_.pop_front();
      if (!r.expired) {
        const std::error_code ec = v.is_error() ? std::error_code(errc::server_error) : std::error_code();
        r.done(ec, std::move(v));
      }
    }
    if (generation_ != generation) return {};  // the stream was reset by a completion
  }
  if (!result && decoder_.error()) result = errc::protocol_error;
  scratch_.clear();
  if (builder_.values().capacity() < scratch_.capacity()) builder_.values().swap(scratch_);
  return result;
}

std::size_t request_pipeline::expire(clock_type::time_point now, std::error_code held_error, std::string_view held_detail) {
  // Collect first, complete after: a completion may queue more commands.
  std::vector<reply_handler> timed_out;
  for (request& r : in_flight_) {
    if (!r.expired && r.deadline <= now) {
      r.expired = true;
      timed_out.push_back(std::move(r.done));
    }
  }
  std::vector<reply_handler> never_sent;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->deadline <= now) {
      never_sent.push_back(std::move(it->done));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  if (!held_error) held_error = errc::timeout;
  for (reply_handler& done : timed_out) done(errc::timeout, resp::value::nil());
  for (reply_handler& done : never_sent) done(held_error, detail_value(held_detail));
  return timed_out.size() + never_sent.size();
}

clock_type::time_point request_pipeline::next_deadline() const noexcept {
  clock_type::time_point earliest = clock_type::time_point::max();
  for (const request& r : in_flight_) {
    if (!r.expired) earliest = std::min(earliest, r.deadline);
  }
  for (const held_request& h : held_) earliest = std::min(earliest, h.deadline);
  return earliest;
}

void request_pipeline::reset_stream() {
  ++generation_;
  decoder_.reset();
  builder_ = resp::value_builder{};
  output_.clear();
}

void request_pipeline::fail_in_flight(std::error_code ec, std::string_view detail) {
  reset_stream();
  std::deque<request> failed;
  failed.swap(in_flight_);
  for (request& r : failed) {
    if (!r.expired) r.done(ec, detail_value(detail));
  }
}

void request_pipeline::fail_held(std::error_code ec, std::string_view detail) {
  // Swapped out first: a completion may queue more commands.
  std::deque<held_request> failed;
  failed.swap(held_);
  for (held_request& h : failed) h.done(ec, detail_value(detail));
}

void request_pipeline::fail_all(std::error_code ec, std::string_view detail) {
  fail_in_flight(ec, detail);
  fail_held(ec, detail);
}

std::vector<handshake_step> handshake_plan(const client_config& config, std::string_view client_name) {
  std::vector<handshake_step> steps;
  const bool hello = config.protocol == 3 || !config.username.empty();
  if (hello) {
    handshake_step s{{}, "HELLO", errc::handshake_failed};
    if (config.password) {
      const std::string user = config.username.empty() ? "default" : config.username;
      resp::append_command(s.command, "HELLO", config.protocol, "AUTH", user, *config.password);
      s.error_code = errc::auth_failed;
    } else {
      resp::append_command(s.command, "HELLO", config.protocol);
    }
    steps.push_back(std::move(s));
  } else if (config.password) {
    handshake_step s{{}, "AUTH", errc::auth_failed};
    resp::append_command(s.command, "AUTH", *config.password);
    steps.push_back(std::move(s));
  }
  if (config.database != 0) {
    handshake_step s{{}, "SELECT", errc::handshake_failed};
    resp::append_command(s.command, "SELECT", config.database);
    steps.push_back(std::move(s));
  }
  if (!client_name.empty()) {
    handshake_step s{{}, "CLIENT SETNAME", errc::handshake_failed};
    resp::append_command(s.command, "CLIENT", "SETNAME", client_name);
    steps.push_back(std::move(s));
  }
  return steps;
}

}  // namespace lockscope::lock
