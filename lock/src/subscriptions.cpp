#include "lockscope/lock/subscriptions.hpp"

#include <algorithm>

#include "lockscope/resp/encoder.hpp"

namespace lockscope::lock {

subscription_registry::added subscription_registry::add(std::string_view channel, subscription_listener& listener,
                                                        std::string& commands) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) it = channels_.emplace(std::string(channel), channel_state{}).first;
  channel_state& state = it->second;
  const waiter_id id = next_id_++;
  state.waiters.push_back({id, &listener});
  if (!state.want_subscribed) {
    state.want_subscribed = true;
    state.confirmed = false;
    if (connected_) {
      resp::append_command(commands, sharded_ ? "SSUBSCRIBE" : "SUBSCRIBE", channel);
      ++state.unconfirmed;
    }
  }
  return {id, state.confirmed};
}

void subscription_registry::remove(std::string_view channel, waiter_id id, std::string& commands) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  channel_state& state = it->second;
  std::erase_if(state.waiters, [id](const waiter& w) { return w.id == id; });
  if (!state.waiters.empty()) return;
  if (state.want_subscribed && connected_) {
    resp::append_command(commands, sharded_ ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", channel);
    ++state.unconfirmed;
  }
  state.want_subscribed = false;
  state.confirmed = false;
  if (state.unconfirmed == 0) channels_.erase(it);
}

std::optional<std::string> subscription_registry::on_push(const resp::value& push) {
  const auto& e = push.elements;
  if (e.size() < 3 || !e[0].is_string() || !e[1].is_string()) return std::nullopt;
  const std::string_view kind = e[0].text;
  const std::string_view channel = e[1].text;
  if (kind == (sharded_ ? "smessage" : "message")) {
    notify(channel, true, e[2].text);
    return std::nullopt;
  }
  const bool subscribe = kind == (sharded_ ? "ssubscribe" : "subscribe");
  const bool unsubscribe = kind == (sharded_ ? "sunsubscribe" : "unsubscribe");
  if (!subscribe && !unsubscribe) return std::nullopt;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return std::nullopt;
  channel_state& state = it->second;
  if (sharded_ && unsubscribe && state.unconfirmed == 0 && state.want_subscribed) {
    // Nothing of ours is pending: the server dropped the channel by itself.
    state.confirmed = false;
    return std::string(channel);
  }
  if (state.unconfirmed > 0) --state.unconfirmed;
  if (state.unconfirmed != 0) return std::nullopt;
  if (state.want_subscribed) {
    if (!state.confirmed) {
      state.confirmed = true;
      notify(channel, false, {});
    }
  } else if (state.waiters.empty()) {
    channels_.erase(it);
  }
  return std::nullopt;
}

std::vector<subscription_listener*> subscription_registry::take_waiters(std::string_view channel) {
  std::vector<subscription_listener*> listeners;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return listeners;
  for (const waiter& w : it->second.waiters) listeners.push_back(w.listener);
  channels_.erase(it);
  return listeners;
}

void subscription_registry::notify(std::string_view channel, bool message, std::string_view payload) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  // A listener may add or remove waiters while we call it: walk a copy, and skip any
  // waiter that has left in the meantime.
  const std::vector<waiter> snapshot = it->second.waiters;
  const std::string name(channel);
  for (const waiter& w : snapshot) {
    auto current = channels_.find(name);
    if (current == channels_.end()) return;
    const auto& now = current->second.waiters;
    if (std::none_of(now.begin(), now.end(), [&](const waiter& x) { return x.id == w.id; })) continue;
    if (message) {
      w.listener->on_message(payload);
    } else {
      w.listener->on_subscribed();
    }
  }
}

void subscription_registry::on_connected(std::string& commands) {
  connected_ = true;
  for (auto& [channel, state] : channels_) {
    if (state.waiters.empty()) continue;
    resp::append_command(commands, sharded_ ? "SSUBSCRIBE" : "SUBSCRIBE", channel);
    state.want_subscribed = true;
    state.confirmed = false;
    state.unconfirmed = 1;
  }
}

void subscription_registry::on_disconnected() {
  connected_ = false;
  std::erase_if(channels_, [](const auto& entry) { return entry.second.waiters.empty(); });
  for (auto& [channel, state] : channels_) {
    state.unconfirmed = 0;
    state.confirmed = false;
    state.want_subscribed = true;
  }
}

bool subscription_registry::subscribed(std::string_view channel) const {
  auto it = channels_.find(channel);
  return it != channels_.end() && it->second.confirmed;
}

std::size_t subscription_registry::waiters(std::string_view channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.waiters.size();
}

}  // namespace lockscope::lock
