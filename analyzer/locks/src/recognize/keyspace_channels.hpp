// Redis keyspace notification channels, read from their names: a waiter that waits on
// them instead of a channel its lock client publishes to subscribes to the key's own
// channel (`__keyspace@<db>__:<key>`, the payload the event) or to an event's channel
// for every key of a database (`__keyevent@<db>__:<event>`, the payload the key). The
// database is the channel's, not the subscriber connection's (pub/sub ignores SELECT).
// Private to the recognizer (pubsub.cpp, connection_state.cpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace lockscope::locks::recognizer_detail {

struct keyspace_channel {
  enum class form : std::uint8_t { none, keyspace, keyevent };
  form kind = form::none;
  std::int32_t db = -1;   // -1: not a database number (a pattern's `*`)
  std::string_view rest;  // keyspace: the key; keyevent: the event
};

// `__keyspace@<db>__:<key>` or `__keyevent@<db>__:<event>`; anything else is form::none.
inline keyspace_channel read_keyspace_channel(std::string_view ch) noexcept {
  keyspace_channel out;
  constexpr std::string_view space = "__keyspace@", event = "__keyevent@";
  const bool is_space = ch.starts_with(space);
  if (!is_space && !ch.starts_with(event)) return out;
  std::string_view tail = ch.substr(space.size());  // (both prefixes are as long)
  const std::size_t end = tail.find("__:");
  if (end == std::string_view::npos || end == 0) return out;
  const std::string_view number = tail.substr(0, end);
  std::int64_t db = 0;
  bool numeric = number.size() <= 9;
  for (const char c : number) {
    if (c < '0' || c > '9') {
      numeric = false;
      break;
    }
    db = db * 10 + (c - '0');
  }
  out.kind = is_space ? keyspace_channel::form::keyspace : keyspace_channel::form::keyevent;
  out.db = numeric ? static_cast<std::int32_t>(db) : -1;
  out.rest = tail.substr(end + 3);
  return out;
}

// The events that leave a key's waiters free to try again: it was deleted (DEL, UNLINK and
// a script's del all notify `del`), ran out its TTL, was evicted, or lost a hash field (a
// lock held as a field; the hash's last field also notifies `del`). The others (`set`,
// `expire`, `pexpire`, ...) are a holder taking or renewing the key: no wake-up.
inline bool frees_key(std::string_view event) noexcept {
  return event == "del" || event == "expired" || event == "evicted" || event == "hdel" || event == "hexpired";
}

}  // namespace lockscope::locks::recognizer_detail
