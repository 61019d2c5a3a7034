// The Sentinel side of the client, sans-I/O: which sentinel to ask next for the
// master's address, what their replies, the master's ROLE and a +switch-master
// announcement mean. The Asio adapter (sentinel_monitor) connects and feeds it; the
// tests feed it by hand.
//
//   sentinel_discovery d(config.sentinel);
//   for (auto s = d.begin(); s.kind == sentinel_step::kind_type::ask; )
//     connect to d.sentinels()[s.sentinel]:
//       failed     -> s = d.on_unreachable(s.sentinel, "connection refused")
//       connected  -> send SENTINEL GET-MASTER-ADDR-BY-NAME <name>; s = d.on_reply(s.sentinel, ec, reply)
//   s.kind == found:  connect to s.master, handshake ends with ROLE: check_master_role(reply)
//   s.kind == failed: s.why names every sentinel tried and what each said
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/lock/config.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

struct sentinel_step {
  enum class kind_type : std::uint8_t {
    ask,     // ask sentinel `sentinel` (an index into sentinels())
    found,   // `master` is the address the sentinel gave
    failed,  // no sentinel gave an address; `why` says what each one did
  } kind;
  std::size_t sentinel = 0;
  server_address master;
  std::string why;
};

class sentinel_discovery {
 public:
  explicit sentinel_discovery(sentinel_config config);

  // Starts a round: every sentinel once, the one that answered last time first (as
  // the Sentinel client guidelines on redis.io ask), then the others in their order.
  sentinel_step begin();
  // The sentinel asked could not be reached (refused, timed out, wrong password, ...).
  sentinel_step on_unreachable(std::size_t sentinel, std::string_view why);
  // Its reply to SENTINEL GET-MASTER-ADDR-BY-NAME (`ec` as the request pipeline gives it).
  sentinel_step on_reply(std::size_t sentinel, std::error_code ec, const resp::value& reply);

  // A `+switch-master` message's payload, `<name> <old ip> <old port> <new ip> <new
  // port>`: the new master's address when it is about our master.
  std::optional<server_address> on_switch_master(std::string_view payload) const;

  const std::vector<server_address>& sentinels() const noexcept { return config_.sentinels; }
  const std::string& master_name() const noexcept { return config_.master_name; }
  // The sentinel that gave the last address (the first one before any did).
  std::size_t preferred() const noexcept { return preferred_; }
  bool in_round() const noexcept { return in_round_; }

 private:
  sentinel_step next();

  sentinel_config config_;
  std::vector<std::size_t> order_;  // this round's order of asking
  std::size_t position_ = 0;        // the next entry of order_ to ask
  std::size_t preferred_ = 0;
  std::string tried_;  // "host:port: what it said; ..." for the failure message
  bool in_round_ = false;
};

// `host:port`, or `[v6]:port`.
std::string address_text(const server_address& address);

// ROLE's answer on the address a sentinel gave: empty when it says master; else why it
// is not the master (a replica: the sentinels have not seen a failover yet, or an old
// master that came back as a replica).
std::string check_master_role(const resp::value& reply, const server_address& at);

// A write refused because the server is a replica: `-READONLY You can't write against
// a read only replica.` (an old master that came back as a replica of the new one).
bool is_readonly_error(const resp::value& reply) noexcept;

}  // namespace lockscope::lock
