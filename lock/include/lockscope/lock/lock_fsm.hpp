// The decisions of the lock operations, without sockets or clocks of their own: the
// acquire loop (attempt, subscribe, sleep, wake), the reading of unlock and renew
// replies, and the watchdog's next step. The client's Asio layer feeds them replies
// and "now" and does what they return; the tests feed them by hand.
//
//   acquire_fsm fsm(wait, now);
//   send the acquire script;                         // every attempt
//   reply nil        -> fsm.on_acquired()            // acquired
//   reply integer    -> fsm.on_busy(ttl, now)        // gave_up | subscribe | attempt | sleep
//   subscribe        -> fsm.on_subscribe_started(confirmed, now)  // attempt | sleep
//   unlock message   -> if (fsm.on_signal()) cancel the sleep timer
//   timer fired/cancelled -> fsm.on_timer()          // attempt
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>
#include <vector>

#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

using fsm_clock = std::chrono::steady_clock;

enum class acquire_action : std::uint8_t {
  attempt,    // send the acquire script again now
  subscribe,  // subscribe to the lock's channel, then call on_subscribe_started
  sleep,      // wait for a signal or until sleep_until()
  acquired,
  gave_up,    // the wait ran out (a fair lock must leave its queue)
};

// One lock()/try_lock(). A wake-up that arrives while an attempt is in flight is
// remembered and answered with another attempt, so an unlock published between the
// script's reply and the sleep cannot be lost; the retry after the subscription is
// confirmed covers an unlock published before the SUBSCRIBE.
class acquire_fsm {
 public:
  // wait: nullopt waits forever; 0 tries once.
  acquire_fsm(std::optional<std::chrono::milliseconds> wait, fsm_clock::time_point now) noexcept;

  acquire_action on_acquired() noexcept { return acquire_action::acquired; }
  // The script answered "busy": `ttl_ms` is how long to wait at most (the holder's PTTL,
  // or a fair waiter's turn); negative: unknown (a lock without expiry).
  acquire_action on_busy(std::int64_t ttl_ms, fsm_clock::time_point now) noexcept;
  // After `subscribe`: whether the channel's subscription was already confirmed.
  acquire_action on_subscribe_started(bool confirmed, fsm_clock::time_point now) noexcept;
  // An unlock message or a subscription confirmation. True when the operation is
  // asleep: the caller cancels its timer, whose completion calls on_timer().
  bool on_signal() noexcept;
  // The sleep ended (timer fired or was cancelled by a signal).
  acquire_action on_timer() noexcept;

  fsm_clock::time_point sleep_until() const noexcept { return sleep_until_; }
  fsm_clock::time_point deadline() const noexcept { return deadline_; }
  bool subscribed() const noexcept { return subscribed_; }

  // How long a busy waiter sleeps when the holder's lock has no expiry and no message comes.
  static constexpr std::chrono::hours unknown_ttl_sleep{1};

 private:
  acquire_action after_busy(fsm_clock::time_point now) noexcept;

  fsm_clock::time_point deadline_;
  fsm_clock::time_point sleep_until_{};
  std::int64_t last_ttl_ = -1;
  bool forever_;
  bool subscribed_ = false;
  bool signaled_ = false;
  bool sleeping_ = false;
};

// An acquire script's reply. The RLock, fair and read/write scripts answer nil
// (acquired) or an integer (busy: the TTL to wait); the fenced lock's answers
// {-1, token} or {pttl, -1}.
struct acquire_reply {
  enum class kind : std::uint8_t { acquired, busy, unexpected } outcome;
  std::int64_t ttl_ms = -1;  // busy: how long to wait at most; negative: unknown
  std::int64_t token = 0;    // acquired by the fenced script: the fencing token
};
acquire_reply classify_acquire_reply(const resp::value& reply, bool fenced) noexcept;

// The unlock script's reply (rlock, fair lock, read and write locks alike).
enum class unlock_outcome : std::uint8_t {
  released,    // 1: the last hold went; the key is gone and waiters were told
  still_held,  // 0: one reentrant level went; the TTL was reset to the lease
  not_owner,   // nil: the caller held no level
  unexpected,  // any other reply
};
unlock_outcome classify_unlock_reply(const resp::value& reply) noexcept;

// What the watchdog does with its entry and the handle's remembered lease after an
// unlock: stop renewing (the owner's holds are gone) or count one hold down; and
// whether the lease goes back to the watchdog timeout (Redisson 3.20's fix: on a full
// release, a rejected unlock and force-unlock).
struct unlock_effects {
  bool stop_renewal;
  bool reset_lease;
};
unlock_effects effects_of(unlock_outcome outcome, bool failed) noexcept;

enum class renew_outcome : std::uint8_t {
  renewed,  // reschedule after a third of the timeout
  lost,     // the key is gone or has another owner, or no renewal worked for a whole lease
  retry,    // a transient failure: try again soon
};
// `ec` and `reply` as the request pipeline completes; `last_confirmed` is when the last
// successful renewal was sent.
renew_outcome classify_renew(std::error_code ec, const resp::value& reply, fsm_clock::time_point now,
                             fsm_clock::time_point last_confirmed, std::chrono::milliseconds watchdog_timeout) noexcept;
// When the next renewal is due after `outcome` (not meaningful for lost).
std::chrono::milliseconds renew_delay(renew_outcome outcome, std::chrono::milliseconds watchdog_timeout) noexcept;

}  // namespace lockscope::lock

namespace lockscope::lock {

// One round of Redisson's RedissonMultiLock.tryLock over n locks, all of which must be
// acquired. It tries the locks in order, each for the whole remaining wait. A failure
// releases what was taken and starts over from the first lock while the wait lasts; a
// wait that runs out releases what was taken and fails. (The RedLock does not use it:
// see redlock_fsm.)
//
//   multi_acquire_fsm fsm(n, wait, now);
//   for (auto a = fsm.start(); ; )
//     attempt          -> try lock a.index for a.wait (0: once); a = fsm.on_result(ok, now)
//     release_and_retry-> release fsm.acquired(), then a = fsm.restart()
//     release_and_fail -> release fsm.acquired(); not acquired
//     acquired         -> fsm.acquired() hold the lock
enum class multi_action_kind : std::uint8_t { attempt, release_and_retry, release_and_fail, acquired };
struct multi_action {
  multi_action_kind kind;
  std::size_t index = 0;                                // attempt: which lock
  std::chrono::milliseconds wait{0};                    // attempt: how long that lock may wait
};

class multi_acquire_fsm {
 public:
  // wait: nullopt tries each lock once (Redisson's tryLock()); else the total wait.
  multi_acquire_fsm(std::size_t locks, std::optional<std::chrono::milliseconds> wait,
                    fsm_clock::time_point now) noexcept;

  multi_action start() noexcept { return attempt(0); }
  // The attempt on the current lock ended: acquired or not (a failure or an error).
  multi_action on_result(bool acquired, fsm_clock::time_point now);
  // After release_and_retry: the acquired list is cleared and the first lock comes again.
  multi_action restart() noexcept;

  const std::vector<std::size_t>& acquired() const noexcept { return acquired_; }

 private:
  multi_action attempt(std::size_t index) const noexcept;

  std::size_t locks_;
  std::optional<std::chrono::milliseconds> remain_;  // nullopt: try once each
  fsm_clock::time_point last_;
  std::size_t next_ = 0;
  std::vector<std::size_t> acquired_;
};

// One RedLock acquisition, the Redlock algorithm as redis.io specifies it (not Redisson's
// one-server-after-another order): each round sends the acquire to every server at once,
// each server trying once, bounded by its client's command timeout (the per-server
// timeout). When every server has answered, the round succeeded if n/2+1 granted the lock
// and the validity, lease - elapsed - drift with elapsed measured from the round's start,
// is positive. Otherwise the lock is released on every server that may hold it (those that
// granted it, and those whose reply was lost to an error or timeout, which may hide a
// grant) and, while the wait lasts, a new round starts after a random delay of at most
// retry_delay(), so that competing clients do not retry in step.
//
//   redlock_fsm fsm(n, lease, wait, now);
//   for (auto a = fsm.start(); ; )
//     attempt_all       -> try every lock once; per reply a = fsm.on_result(granted, now)
//     pending           -> wait for the other replies
//     acquired          -> held for at most fsm.validity()
//     release_and_retry -> release the locks that may be held, sleep a random part of
//                          fsm.retry_delay(),
//                          then a = fsm.next_round(now)
//     release_and_fail  -> release the locks that may be held; not acquired
//     failed            -> not acquired (nothing was left held)
enum class redlock_action : std::uint8_t { attempt_all, pending, acquired, release_and_retry, release_and_fail, failed };

class redlock_fsm {
 public:
  // The longest pause between two rounds: many round trips on a LAN, short against a lease.
  static constexpr std::chrono::milliseconds max_retry_delay{50};

  // wait: nullopt: rounds until acquired (lock()); 0: one round (try_lock()); else rounds
  // while it lasts. lease: what the validity is computed from (the watchdog timeout without one).
  redlock_fsm(std::size_t servers, std::chrono::milliseconds lease, std::optional<std::chrono::milliseconds> wait,
              fsm_clock::time_point now) noexcept;

  redlock_action start() noexcept { return redlock_action::attempt_all; }
  // One server's attempt ended: granted, or not (busy, or an error).
  redlock_action on_result(bool granted, fsm_clock::time_point now) noexcept;
  // After release_and_retry's delay.
  redlock_action next_round(fsm_clock::time_point now) noexcept;

  std::size_t required() const noexcept { return servers_ / 2 + 1; }
  // After acquired: how long the majority is known to be held.
  std::chrono::milliseconds validity() const noexcept { return validity_; }
  // After release_and_retry: the upper bound of the random delay before the next round.
  std::chrono::milliseconds retry_delay() const noexcept { return retry_delay_; }

 private:
  std::size_t servers_;
  std::chrono::milliseconds lease_;
  std::optional<fsm_clock::time_point> deadline_;  // nullopt: forever
  bool one_round_;
  fsm_clock::time_point round_start_;
  std::size_t answered_ = 0;
  std::size_t granted_ = 0;
  std::chrono::milliseconds validity_{0};
  std::chrono::milliseconds retry_delay_{0};
};

// Redisson's RedissonMultiLock.lockInterruptibly: lock() is a loop of tryLock rounds,
// each waiting this long. `random01` in [0, 1) picks within Redisson's range (a random
// wait keeps competing multi-lockers from retrying in step).
std::chrono::milliseconds multi_lock_round_wait(std::size_t locks, std::optional<std::chrono::milliseconds> lease,
                                                double random01) noexcept;

// The RedLock validity (the Redlock algorithm, as redis.io describes it): how long the
// majority is known to be held, lease - elapsed - drift, with drift = lease / 100 + 2 ms
// for the servers' clocks running at different rates. Not positive: the round failed.
std::chrono::milliseconds redlock_validity(std::chrono::milliseconds lease, fsm_clock::time_point round_start,
                                           fsm_clock::time_point now) noexcept;

}  // namespace lockscope::lock
