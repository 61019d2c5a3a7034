// The Asio adapter around sentinel_discovery: the endpoint source of a Sentinel
// client's command and subscriber connections.
//
// - locate(): the known master, or a discovery round (SENTINEL GET-MASTER-ADDR-BY-NAME
//   to each sentinel in turn, on a short-lived connection each) shared by every
//   connection that asks meanwhile.
// - check_role(): the handshake's ROLE must say master; a replica makes the next
//   locate() ask the sentinels again.
// - A subscriber connection to one sentinel (the next one after a drop) follows
//   +switch-master and moves the attached connections that are up elsewhere to the new
//   master; after it reconnects it runs a round, in case it missed one.
// - A write refused with READONLY (a demoted master) moves them too.
//
// Everything runs on the client's strand.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockscope/lock/connection.hpp"
#include "lockscope/lock/sentinel.hpp"

namespace lockscope::lock::detail {

class sentinel_monitor final : public endpoint_source, public std::enable_shared_from_this<sentinel_monitor> {
 public:
  // `data` is the client's config: its sentinel part, TLS, timeouts and client name.
  sentinel_monitor(strand_type strand, const client_config& data);

  // A data connection (whose endpoint source this is) to move when the master moves.
  void attach(const std::shared_ptr<connection>& c) { attached_.push_back(c); }
  // Wraps a write's completion: a READONLY reply sends the attached connections back
  // to the sentinels.
  reply_handler watch_writes(reply_handler done);
  // A command that failed this way was never applied: queued while no master was
  // reachable, or refused by a demoted one.
  static bool retryable(std::error_code ec, const resp::value& reply) noexcept;

  void locate(unique_function<void(located)> done) override;
  bool wants_role_check() const noexcept override { return true; }
  std::string check_role(const server_address& at, const resp::value& reply) override;
  // The master died, or was never reachable at that address: ask again next time.
  void dropped(const server_address& at) override { forget_master(at); }

  // `at` refused a write with READONLY: it is no longer the master.
  void forget_master(const server_address& at);
  // Closes the sentinel connections (QUIT), then calls `done`; pending locates fail
  // with errc::shut_down.
  void close(unique_function<void()> done);

 private:
  void start_round(bool check);
  void act(sentinel_step step);
  void ask(std::size_t sentinel);
  void end_query();
  void round_done(located result);
  void learned(const server_address& master, bool announce);
  void move_attached(const server_address& from_other_than, const std::string& why, bool only_elsewhere);
  void watch_switches();
  void on_watcher_push(const resp::value& push);
  client_config sentinel_connection_config(const server_address& at) const;

  strand_type strand_;
  client_config data_;
  sentinel_discovery discovery_;
  std::vector<std::weak_ptr<connection>> attached_;
  std::optional<server_address> master_;       // confirmed or given, not yet refuted
  std::optional<server_address> last_master_;  // the last address any source gave
  std::vector<unique_function<void(located)>> waiters_;
  std::shared_ptr<connection> query_;
  std::vector<std::shared_ptr<connection>> retired_;  // answered queries, closing
  std::uint64_t query_id_ = 0;  // bumped per question: late events of an old one are dropped
  std::shared_ptr<connection> watcher_;
  std::uint64_t switches_ = 0;  // +switch-master announcements followed
  std::uint64_t switches_at_round_start_ = 0;
  bool round_is_check_ = false;  // started after the watcher reconnected, not for a connection
  bool closed_ = false;
};

}  // namespace lockscope::lock::detail
