// Replica sync (Redisson's syncSlaves): after a lock write, `WAIT <replicas> <timeout>`
// is pipelined right behind the script on the same connection, so it covers that write,
// and the two replies are read together. Sans-I/O: the client's Asio layer sends the
// commands and feeds the replies in; the tests feed them by hand.
//
//   synced_write w(replicas);
//   send the script, then append_wait(out, replicas, timeout)   // (again after a NOSCRIPT retry)
//   script's reply -> if (w.on_script_reply(ec, std::move(reply))) done   // it failed: no WAIT needed
//   WAIT's reply   -> if (w.on_wait_reply(ec, reply)) done
//   done: w.script_error(), w.script_reply(), w.sync()
//
// What it does not give: WAIT only says that `replicas` replicas had received the write
// when it returned (in memory, not on disk), not that a failover will promote one of
// them. See the README's "Replica sync".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "lockscope/lock/lock_fsm.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

struct client_config;

enum class sync_outcome : std::uint8_t {
  synced,       // at least the replicas asked for acknowledged (or none were asked for)
  too_few,      // WAIT returned fewer acknowledgements than asked
  failed,       // WAIT itself failed (an error reply, a timeout, the connection)
  not_checked,  // the script failed, so its WAIT's answer was not looked at
};

struct sync_result {
  sync_outcome outcome = sync_outcome::not_checked;
  std::int64_t acks = 0;  // WAIT's answer
  std::error_code error;  // failed: why
  std::string text;       // failed: Redis's error text, when it sent one
  bool ok() const noexcept { return outcome == sync_outcome::synced; }
};

// WAIT's completion, `replicas` being the number asked for.
sync_result classify_wait_reply(std::error_code ec, const resp::value& reply, int replicas);

// `WAIT <replicas> <timeout ms>`, encoded, appended to `out`.
void append_wait(std::string& out, int replicas, std::chrono::milliseconds timeout);

// Joins a write script's reply with the WAIT behind it. Replies arrive in order: the
// script's, then its WAIT's. When EVALSHA is answered NOSCRIPT the client retries (SCRIPT
// LOAD, EVALSHA, WAIT again) without passing that NOSCRIPT on, so a WAIT reply that
// comes before any script reply belongs to the dropped attempt and is skipped.
class synced_write {
 public:
  explicit synced_write(int replicas) noexcept : replicas_(replicas) {}

  // The script's final reply. True when the result is complete: the script failed, so
  // nothing waits on its WAIT.
  bool on_script_reply(std::error_code ec, resp::value&& reply);
  // A WAIT's reply. True when it completes the result; false for a skipped one.
  bool on_wait_reply(std::error_code ec, const resp::value& reply);

  bool done() const noexcept { return done_; }
  std::error_code script_error() const noexcept { return script_error_; }
  resp::value& script_reply() noexcept { return script_reply_; }
  const sync_result& sync() const noexcept { return sync_; }

 private:
  int replicas_;
  bool have_script_ = false;
  bool done_ = false;
  std::error_code script_error_;
  resp::value script_reply_;
  sync_result sync_;
};

// An acquire script's reply and its WAIT: the lock was written and reached the replicas
// (keep it), was written and did not (release it, then fail the acquisition), or was
// not written (busy or unexpected: the acquire loop goes on as without sync).
enum class synced_acquire : std::uint8_t { keep, release_and_fail, not_acquired };
synced_acquire after_acquire_sync(const acquire_reply& reply, const sync_result& sync) noexcept;

// The one-line text of a sync that did not succeed, e.g.
// "lock 'orders:42' reached 1 of 2 replicas within 500 ms (WAIT)". `what` names the write.
std::string describe_sync_failure(std::string_view what, const sync_result& sync, int replicas,
                                  std::chrono::milliseconds timeout);

// sync_replicas must not be negative, and with sync on sync_timeout must be positive
// (WAIT 0 would block the connection forever). Sets `why` on failure.
std::error_code check_replica_sync(const client_config& config, std::string* why = nullptr);

}  // namespace lockscope::lock
