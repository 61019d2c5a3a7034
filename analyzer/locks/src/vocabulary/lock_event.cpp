// The names of lock_event.hpp's vocabulary enums, as every output writes them.
#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

std::string_view to_string(lock_event_kind k) noexcept {
  static constexpr std::string_view names[] = {
      "acquired", "reentered",       "contended",      "renewed",    "renew_failed",
      "released", "partially_released", "unlock_rejected", "force_released", "expired",
      "subscribed", "notified",      "unsubscribed",   "anomaly",    "quorum",
      "multilock", "redirected",    "gave_up",   "permits_set", "counted_down"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(anomaly_kind k) noexcept {
  static constexpr std::string_view names[] = {
      "none",         "expired_while_held", "overlapping_holders", "unlock_by_non_owner", "idle_with_waiters",
      "woken_by_timeout", "late_renewal",   "long_hold",           "non_atomic_acquire",  "quorum_lost",
      "split_quorum", "released_other_owner", "unchecked_release", "subscription_lost",
      "holder_connection_closed"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(link_confidence c) noexcept {
  static constexpr std::string_view names[] = {"none", "certain", "high", "low"};
  return names[static_cast<std::size_t>(c)];
}

std::string_view to_string(wait_end w) noexcept {
  static constexpr std::string_view names[] = {"none", "last_attempt", "unsubscribed", "connection_closed", "new_wait", "left_queue", "group_decided", "forced", "next_attempt_missed", "withdrew"};
  return names[static_cast<std::size_t>(w)];
}

}  // namespace lockscope::locks
