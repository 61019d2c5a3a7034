// The pub/sub registry of a client, sans-I/O: channel -> waiters. It decides when to
// SUBSCRIBE and UNSUBSCRIBE (it appends the commands for the caller to write on the
// subscriber connection) and tells waiters when their channel is confirmed and when a
// message arrives.
//
// Rules it keeps:
//   - SUBSCRIBE on the first waiter of a channel, UNSUBSCRIBE only when the last one
//     leaves; a waiter leaving never unsubscribes a channel others still wait on.
//   - A channel counts as subscribed only once every SUBSCRIBE/UNSUBSCRIBE sent for
//     it has been confirmed and the last one was a SUBSCRIBE: a confirmation from an
//     older subscribe/unsubscribe cycle is not mistaken for the current one.
//   - After a reconnect every channel with waiters is subscribed again, and its
//     waiters are told (on_subscribed) once that is confirmed, so they retry: a
//     message published while the connection was down is not waited for forever.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

class subscription_listener {
 public:
  // The channel is (again) subscribed: anything published from now on will arrive.
  virtual void on_subscribed() = 0;
  // A message on the channel.
  virtual void on_message(std::string_view payload) = 0;

 protected:
  ~subscription_listener() = default;
};

class subscription_registry {
 public:
  using waiter_id = std::uint64_t;

  // `sharded`: Redis 7's sharded pub/sub (SSUBSCRIBE / SUNSUBSCRIBE, `smessage`), for
  // a subscriber connection to the channels' shard master in a cluster.
  explicit subscription_registry(bool sharded = false) : sharded_(sharded) {}
  struct added {
    waiter_id id;
    bool subscribed;  // already confirmed: on_subscribed will not be called for this one
  };

  // Registers `listener` on `channel`; appends SUBSCRIBE to `commands` if needed.
  added add(std::string_view channel, subscription_listener& listener, std::string& commands);
  // Unregisters; appends UNSUBSCRIBE to `commands` when it was the channel's last waiter.
  void remove(std::string_view channel, waiter_id id, std::string& commands);

  // A pub/sub message or confirmation from the subscriber connection. Returns the
  // channel when the server unsubscribed it on its own (a cluster node sends
  // `sunsubscribe` for the channels of a slot it no longer serves): it is then no
  // longer subscribed here, its waiters stay, and the caller must move it elsewhere.
  std::optional<std::string> on_push(const resp::value& push);
  // Takes every waiter of `channel` out (no UNSUBSCRIBE is written: the server already
  // dropped it), for moving them to another registry.
  std::vector<subscription_listener*> take_waiters(std::string_view channel);
  // The subscriber connection is up (again): appends SUBSCRIBE for every channel that
  // has waiters.
  void on_connected(std::string& commands);
  // The subscriber connection dropped: nothing is subscribed any more.
  void on_disconnected();

  bool connected() const noexcept { return connected_; }
  bool subscribed(std::string_view channel) const;
  std::size_t waiters(std::string_view channel) const;
  std::size_t channels() const noexcept { return channels_.size(); }

 private:
  struct waiter {
    waiter_id id;
    subscription_listener* listener;
  };
  struct channel_state {
    std::vector<waiter> waiters;
    std::uint32_t unconfirmed = 0;  // SUBSCRIBE/UNSUBSCRIBE sent, confirmation not yet seen
    bool want_subscribed = false;   // the last command sent (or to send) is SUBSCRIBE
    bool confirmed = false;         // want_subscribed, and every command confirmed
  };
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using channel_map = std::unordered_map<std::string, channel_state, string_hash, std::equal_to<>>;

  void notify(std::string_view channel, bool message, std::string_view payload);

  channel_map channels_;
  waiter_id next_id_ = 1;
  bool connected_ = false;
  bool sharded_ = false;
};

}  // namespace lockscope::lock
