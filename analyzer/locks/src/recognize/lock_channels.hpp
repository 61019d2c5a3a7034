// Redisson's lock channels, read from their names: which lock a channel wakes the
// waiters of, and which family it belongs to. Private to the recognizer (pub/sub,
// RESET, and the inference of unknown scripts, whose KEYS[2] may be a channel).
#pragma once

#include <cstddef>
#include <string_view>

#include "lockscope/locks/lock_operation.hpp"

namespace lockscope::locks::recognizer_detail {

inline bool starts_with(std::string_view s, std::string_view p) noexcept { return s.substr(0, p.size()) == p; }

// The lock a channel belongs to: `redisson_lock__channel:{x}`, `…:{x}:<owner>` (fair
// lock), `redisson_rwlock:{x}`, the very old `redisson_lock__channel__{x}`; and the
// semaphores' `redisson_sc:{x}` and latches' `redisson_countdownlatch__channel__{x}`
// (their waiters' channels: permit_channel says which these are).
inline std::string_view lock_of_channel(std::string_view ch) {
  std::string_view rest;
  if (starts_with(ch, "redisson_lock__channel:")) rest = ch.substr(23);
  else if (starts_with(ch, "redisson_rwlock:")) rest = ch.substr(16);
  else if (starts_with(ch, "redisson_lock__channel__")) rest = ch.substr(24);
  else if (starts_with(ch, "redisson_sc:")) rest = ch.substr(12);
  else if (starts_with(ch, "redisson_countdownlatch__channel__")) rest = ch.substr(34);
  else return {};
  if (!rest.empty() && rest.front() == '{') {
    const std::size_t close = rest.find('}');
    if (close != std::string_view::npos) return rest.substr(1, close - 1);
  }
  return rest;
}

inline bool permit_channel(std::string_view ch) noexcept {
  return starts_with(ch, "redisson_sc:") || starts_with(ch, "redisson_countdownlatch__channel__");
}

inline bool is_lock_channel(std::string_view ch) { return !lock_of_channel(ch).empty(); }

// The family an operation on a lock channel is reported with.
inline lock_family channel_family(std::string_view ch) noexcept {
  if (starts_with(ch, "redisson_sc:")) return lock_family::redisson_semaphore;
  if (starts_with(ch, "redisson_countdownlatch__channel__")) return lock_family::redisson_latch;
  return starts_with(ch, "redisson_rwlock") ? lock_family::redisson_read : lock_family::redisson;
}

}  // namespace lockscope::locks::recognizer_detail
