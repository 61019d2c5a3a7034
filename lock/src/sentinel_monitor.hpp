// The Asio adapter around sentinel_discovery: the endpoint source of a Sentinel
// client's command and subscriber connections.
//
// - locate(): the known master, or a discovery round (SENTINEL GET-MASTER-ADDR-BY-NAME
//   to each sentinel in turn, on a short-lived connection each) shared by every
//   connection that asks meanwhile.
// - check_role(): the handshake's ROLE must say master; a replica makes the next
//   locate() ask the sentinels again.
// - A subscriber connection to one sentinel (the next one after a drop) follows
//   +switch-master and calls on_switch with the new master; after it reconnects it
//   runs a round, in case it missed one.
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
  using switch_handler = unique_function<void(const server_address& master)>;

  // `data` is the client's config: its sentinel part, TLS, timeouts and client name.
  sentinel_monitor(strand_type strand, const client_config& data, switch_handler on_switch);

  void locate(unique_function<void(located)> done) override;
  bool wants_role_check() const noexcept override { return true; }
  std::string check_role(const server_address& at, const resp::value& reply) override;
  // The master died, or was never reachable at that address: ask again next time.
  void dropped(const server_address& at) override { forget_master(at); }

  // `at` refused a write with READONLY: it is no longer the master.
  void forget_master(const server_address& at);
  // Closes the sentinel connections; pending locates fail with errc::shut_down.
  void close();

 private:
  void start_round(bool check);
  void act(sentinel_step step);
  void ask(std::size_t sentinel);
  void end_query();
  void round_done(located result);
  void learned(const server_address& master, bool announce);
  void watch_switches();
  void on_watcher_push(const resp::value& push);
  client_config sentinel_connection_config(const server_address& at) const;

  strand_type strand_;
  client_config data_;
  sentinel_discovery discovery_;
  switch_handler on_switch_;
  std::optional<server_address> master_;       // confirmed or given, not yet refuted
  std::optional<server_address> last_master_;  // the last address any source gave
  std::vector<unique_function<void(located)>> waiters_;
  std::shared_ptr<connection> query_;
  std::uint64_t query_id_ = 0;  // bumped per question: late events of an old one are dropped
  std::shared_ptr<connection> watcher_;
  std::uint64_t switches_ = 0;  // +switch-master announcements followed
  std::uint64_t switches_at_round_start_ = 0;
  bool round_is_check_ = false;  // started after the watcher reconnected, not for a connection
  bool closed_ = false;
};

}  // namespace lockscope::lock::detail
