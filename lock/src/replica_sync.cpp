#include "lockscope/lock/replica_sync.hpp"

#include <fmt/format.h>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/resp/encoder.hpp"

namespace lockscope::lock {

sync_result classify_wait_reply(std::error_code ec, const resp::value& reply, int replicas) {
  sync_result r;
  if (ec) {
    r.outcome = sync_outcome::failed;
    r.error = ec;
    if (reply.is_error()) r.text = reply.text;
    return r;
  }
  if (reply.type != resp::type::integer || reply.integer < 0) {
    r.outcome = sync_outcome::failed;
    r.error = errc::unexpected_reply;
    r.text = fmt::format("unexpected reply to WAIT: type {}", resp::to_string(reply.type));
    return r;
  }
  r.acks = reply.integer;
  r.outcome = reply.integer >= replicas ? sync_outcome::synced : sync_outcome::too_few;
  return r;
}

void append_wait(std::string& out, int replicas, std::chrono::milliseconds timeout) {
  resp::append_command(out, "WAIT", replicas, static_cast<std::int64_t>(timeout.count()));
}

bool synced_write::on_script_reply(std::error_code ec, resp::value&& reply) {
  if (done_) return false;
  have_script_ = true;
  script_error_ = ec;
  script_reply_ = std::move(reply);
  if (ec) done_ = true;
  return done_;
}

bool synced_write::on_wait_reply(std::error_code ec, const resp::value& reply) {
  if (done_ || !have_script_) return false;
  sync_ = classify_wait_reply(ec, reply, replicas_);
  done_ = true;
  return true;
}

synced_acquire after_acquire_sync(const acquire_reply& reply, const sync_result& sync) noexcept {
  if (reply.outcome != acquire_reply::kind::acquired) return synced_acquire::not_acquired;
  return sync.ok() ? synced_acquire::keep : synced_acquire::release_and_fail;
}

std::string describe_sync_failure(std::string_view what, const sync_result& sync, int replicas,
                                  std::chrono::milliseconds timeout) {
  if (sync.outcome == sync_outcome::too_few)
    return fmt::format("{} reached {} of {} replicas within {} ms (WAIT)", what, sync.acks, replicas,
                       timeout.count());
  const std::string reason = sync.text.empty() ? sync.error.message() : sync.text;
  return fmt::format("{}: WAIT {} {} failed: {}", what, replicas, timeout.count(), reason);
}

std::error_code check_replica_sync(const client_config& config, std::string* why) {
  std::string reason;
  if (config.sync_replicas < 0) {
    reason = fmt::format("sync_replicas is {}: it must be 0 (off) or more", config.sync_replicas);
  } else if (config.sync_replicas > 0 && config.sync_timeout.count() <= 0) {
    reason = fmt::format("sync_timeout is {} ms: it must be positive with sync_replicas (WAIT 0 blocks forever)",
                         config.sync_timeout.count());
  } else {
    return {};
  }
  if (why != nullptr) *why = std::move(reason);
  return errc::invalid_argument;
}

}  // namespace lockscope::lock
