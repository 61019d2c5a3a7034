#include "lockscope/lock/lock_fsm.hpp"

#include <algorithm>

namespace lockscope::lock {

namespace {

// now + wait, saturated: a wait of 3,000,000 h or INT64_MAX ms overflowed the clock's
// nanoseconds, and the deadline came before now (gave up at once).
fsm_clock::time_point deadline_after(std::chrono::milliseconds wait, fsm_clock::time_point now) noexcept {
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(fsm_clock::time_point::max() - now);
  return wait >= room ? fsm_clock::time_point::max() : now + wait;
}

}  // namespace

acquire_fsm::acquire_fsm(std::optional<std::chrono::milliseconds> wait, fsm_clock::time_point now) noexcept
    : deadline_(wait ? deadline_after(*wait, now) : fsm_clock::time_point::max()), forever_(!wait) {}

acquire_action acquire_fsm::on_busy(std::int64_t ttl_ms, fsm_clock::time_point now) noexcept {
  last_ttl_ = ttl_ms;
  if (!forever_ && now >= deadline_) return acquire_action::gave_up;
  if (!subscribed_) return acquire_action::subscribe;
  return after_busy(now);
}

acquire_action acquire_fsm::on_subscribe_started(bool confirmed, fsm_clock::time_point now) noexcept {
  subscribed_ = true;
  if (confirmed) signaled_ = true;
  return after_busy(now);
}

acquire_action acquire_fsm::after_busy(fsm_clock::time_point now) noexcept {
  if (signaled_) {
    signaled_ = false;
    return acquire_action::attempt;
  }
  fsm_clock::time_point until = last_ttl_ >= 0 ? now + std::chrono::milliseconds(last_ttl_) : now + unknown_ttl_sleep;
  if (!forever_) until = std::min(until, deadline_);
  sleep_until_ = until;
  sleeping_ = true;
  return acquire_action::sleep;
}

bool acquire_fsm::on_signal() noexcept {
  signaled_ = true;
  return sleeping_;
}

acquire_action acquire_fsm::on_timer() noexcept {
  sleeping_ = false;
  signaled_ = false;  // the attempt about to be sent answers it
  return acquire_action::attempt;
}

acquire_reply classify_acquire_reply(const resp::value& reply, bool fenced) noexcept {
  using k = acquire_reply::kind;
  if (!fenced) {
    if (reply.type == resp::type::null) return {k::acquired};
    if (reply.type == resp::type::integer) return {k::busy, reply.integer};
    return {k::unexpected};
  }
  if (reply.type != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != resp::type::integer || reply.elements[1].type != resp::type::integer)
    return {k::unexpected};
  const std::int64_t first = reply.elements[0].integer;
  const std::int64_t second = reply.elements[1].integer;
  // INCR never yields a token below 1; a -1 second element is the busy form. (Redisson
  // reads {-1, -1}, a holder without expiry, as acquired; here it is busy, TTL unknown.)
  if (first == -1 && second >= 1) return {k::acquired, -1, second};
  if (second == -1) return {k::busy, first};
  return {k::unexpected};
}

unlock_outcome classify_unlock_reply(const resp::value& reply) noexcept {
  if (reply.type == resp::type::null) return unlock_outcome::not_owner;
  if (reply.type == resp::type::integer) {
    if (reply.integer == 1) return unlock_outcome::released;
    if (reply.integer == 0) return unlock_outcome::still_held;
  }
  if (reply.type == resp::type::boolean) return reply.boolean() ? unlock_outcome::released : unlock_outcome::not_owner;
  return unlock_outcome::unexpected;
}

unlock_effects effects_of(unlock_outcome outcome, bool failed) noexcept {
  if (failed) return {false, false};  // no answer: the hold may still be there
  switch (outcome) {
    case unlock_outcome::released:
    case unlock_outcome::not_owner:
      return {true, true};
    case unlock_outcome::still_held:
    case unlock_outcome::unexpected:
      return {false, false};
  }
  return {false, false};
}

renew_outcome classify_renew(std::error_code ec, const resp::value& reply, fsm_clock::time_point now,
                             fsm_clock::time_point last_confirmed, std::chrono::milliseconds watchdog_timeout) noexcept {
  if (!ec && reply.type == resp::type::integer) return reply.integer == 1 ? renew_outcome::renewed : renew_outcome::lost;
  if (now - last_confirmed >= watchdog_timeout) return renew_outcome::lost;
  return renew_outcome::retry;
}

std::chrono::milliseconds renew_delay(renew_outcome outcome, std::chrono::milliseconds watchdog_timeout) noexcept {
  const std::chrono::milliseconds period = watchdog_timeout / 3;
  if (outcome == renew_outcome::retry) return std::min(period, std::chrono::milliseconds(500));
  return period;
}

}  // namespace lockscope::lock

namespace lockscope::lock {

multi_acquire_fsm::multi_acquire_fsm(std::size_t locks, std::optional<std::chrono::milliseconds> wait,
                                     fsm_clock::time_point now) noexcept
    : locks_(locks), remain_(wait), last_(now) {
  acquired_.reserve(locks);
}

multi_action multi_acquire_fsm::attempt(std::size_t index) const noexcept {
  // RedissonMultiLock.calcLockWaitTime: each lock may use the whole remaining wait.
  return {multi_action_kind::attempt, index, remain_ ? *remain_ : std::chrono::milliseconds(0)};
}

multi_action multi_acquire_fsm::on_result(bool acquired, fsm_clock::time_point now) {
  if (acquired) {
    acquired_.push_back(next_);
  } else if (!remain_) {
    return {multi_action_kind::release_and_fail};
  }
  if (remain_) {
    *remain_ -= std::chrono::duration_cast<std::chrono::milliseconds>(now - last_);
    last_ = now;
    if (remain_->count() <= 0) return {multi_action_kind::release_and_fail};
  }
  if (!acquired) return {multi_action_kind::release_and_retry};
  if (++next_ == locks_) return {multi_action_kind::acquired};
  return attempt(next_);
}

multi_action multi_acquire_fsm::restart() noexcept {
  acquired_.clear();
  next_ = 0;
  return attempt(0);
}

redlock_fsm::redlock_fsm(std::size_t servers, std::chrono::milliseconds lease,
                         std::optional<std::chrono::milliseconds> wait, fsm_clock::time_point now) noexcept
    : servers_(servers),
      lease_(lease),
      deadline_(wait ? std::optional(deadline_after(*wait, now)) : std::nullopt),
      one_round_(wait && wait->count() <= 0),
      round_start_(now) {}

redlock_action redlock_fsm::on_result(bool granted, fsm_clock::time_point now) noexcept {
  if (granted) ++granted_;
  if (++answered_ < servers_) return redlock_action::pending;
  if (granted_ >= required()) {
    validity_ = redlock_validity(lease_, round_start_, now);
    if (validity_.count() > 0) return redlock_action::acquired;
  }
  if (one_round_ || (deadline_ && now >= *deadline_)) return redlock_action::release_and_fail;
  retry_delay_ = max_retry_delay;
  if (deadline_) retry_delay_ = std::min(retry_delay_, std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - now));
  return redlock_action::release_and_retry;
}

redlock_action redlock_fsm::next_round(fsm_clock::time_point now) noexcept {
  if (deadline_ && now >= *deadline_) return redlock_action::failed;
  round_start_ = now;
  answered_ = 0;
  granted_ = 0;
  return redlock_action::attempt_all;
}

std::chrono::milliseconds multi_lock_round_wait(std::size_t locks, std::optional<std::chrono::milliseconds> lease,
                                                double random01) noexcept {
  const std::int64_t base = static_cast<std::int64_t>(locks) * 1500;
  if (!lease) return std::chrono::milliseconds(base);
  const std::int64_t w = lease->count();
  const std::int64_t low = w <= base ? w / 2 : base;
  return std::chrono::milliseconds(low + static_cast<std::int64_t>(random01 * static_cast<double>(w - low)));
}

std::chrono::milliseconds redlock_validity(std::chrono::milliseconds lease, fsm_clock::time_point round_start,
                                           fsm_clock::time_point now) noexcept {
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - round_start);
  const std::chrono::milliseconds drift = lease / 100 + std::chrono::milliseconds(2);
  return lease - elapsed - drift;
}

}  // namespace lockscope::lock
