// Values that read as a clock: an owner value that names a moment, not a client.
#pragma once

#include <cstdint>
#include <string_view>

namespace lockscope::locks {

// A whole number that reads as the time it was sent at, in seconds, milliseconds or
// microseconds, within two days either way (a deadline "now + timeout" included). The
// SETNX pattern of Redis's own documentation stores `<unix time + timeout + 1>`, and
// clients that took it up (node-resque's JobLock: seconds) send the same value from
// every process that tries within the same second: it tells no client apart.
[[nodiscard]] inline bool is_clock_reading(std::string_view value, std::int64_t at_us) noexcept {
  if (value.empty() || value.size() > 18 || at_us <= 0) return false;
  std::int64_t n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  constexpr std::int64_t two_days_s = 2 * 86'400;
  const std::int64_t now_s = at_us / 1'000'000;
  for (const std::int64_t per_second : {std::int64_t{1}, std::int64_t{1'000}, std::int64_t{1'000'000}}) {
    const std::int64_t as_s = n / per_second;
    if (as_s >= now_s - two_days_s && as_s <= now_s + two_days_s) return true;
  }
  return false;
}

}  // namespace lockscope::locks
