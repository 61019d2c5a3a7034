// The events that keep a subscriber connection and its subscription_registry in step,
// shared by the single-server client and the cluster's classic (SUBSCRIBE) connection.
#pragma once

#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/connection.hpp"
#include "lockscope/lock/subscriptions.hpp"

namespace lockscope::lock::detail {

// Once ready: subscribe every channel that has waiters. When down: forget what the server
// had confirmed. Pushes go to the registry. `parts(owner)` returns the owner's registry
// and connection as a std::pair of pointers; nothing runs once the owner is gone (the
// connection holds only a weak reference to it).
template <class Owner, class Parts>
connection_events subscriber_events(const std::weak_ptr<Owner>& weak, Parts parts) {
  connection_events events;
  events.on_ready = [weak, parts] {
    auto owner = weak.lock();
    if (!owner) return;
    auto [registry, conn] = parts(*owner);
    std::string commands;
    registry->on_connected(commands);
    if (!commands.empty()) conn->send_without_reply(commands);
  };
  events.on_down = [weak, parts](std::error_code, const std::string&) {
    if (auto owner = weak.lock()) parts(*owner).first->on_disconnected();
  };
  events.on_push = [weak, parts](resp::value&& push) {
    if (auto owner = weak.lock()) parts(*owner).first->on_push(push);
  };
  return events;
}

// CLIENT SETNAME of a subscriber connection: the client's name + ":sub" (none without one).
inline std::string subscriber_name(const client_config& config) {
  return config.client_name.empty() ? std::string() : config.client_name + ":sub";
}

}  // namespace lockscope::lock::detail
