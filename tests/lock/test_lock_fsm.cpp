// The lock operations' decisions (lock_fsm.hpp), fed by hand: no sockets, no sleeps.
#include <catch2/catch.hpp>

#include "lockscope/lock/lock_fsm.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lock::acquire_action;
using fsm_time = lock::fsm_clock::time_point;

namespace {
const fsm_time t0 = fsm_time{} + 1000h;
lockscope::resp::value integer(std::int64_t v) {
  lockscope::resp::value r;
  r.type = lockscope::resp::type::integer;
  r.integer = v;
  return r;
}
}  // namespace

TEST_CASE("acquire_fsm: one attempt gives up without subscribing", "[lock][fsm]") {
  lock::acquire_fsm fsm(0ms, t0);
  CHECK(fsm.on_busy(5000, t0) == acquire_action::gave_up);
  CHECK_FALSE(fsm.subscribed());
}

TEST_CASE("acquire_fsm: a wait too long for the clock waits, it does not give up at once", "[lock][fsm]") {
  // now + 3,000,000 h (or INT64_MAX ms) overflowed the clock's nanoseconds: the deadline
  // fell before now, and --wait 3000000h timed out after 10 ms.
  const fsm_time now = lock::fsm_clock::now();
  for (const std::chrono::milliseconds wait : {std::chrono::milliseconds(3'000'000h), std::chrono::milliseconds::max()}) {
    lock::acquire_fsm fsm(wait, now);
    CHECK(fsm.deadline() == fsm_time::max());
    CHECK(fsm.on_busy(5000, now) == acquire_action::subscribe);
    CHECK(fsm.on_subscribe_started(false, now) == acquire_action::sleep);
  }
  lock::acquire_fsm bounded(1'000'000h, now);  // still fits: unchanged
  CHECK(bounded.deadline() == now + 1'000'000h);
}

TEST_CASE("acquire_fsm: first busy subscribes: a confirmed subscription retries at once", "[lock][fsm]") {
  lock::acquire_fsm fsm(std::nullopt, t0);
  CHECK(fsm.on_busy(5000, t0) == acquire_action::subscribe);
  // Already confirmed for an earlier waiter: an unlock may have been published before
  // we listened, so try again before sleeping.
  CHECK(fsm.on_subscribe_started(true, t0) == acquire_action::attempt);
  CHECK(fsm.on_busy(4990, t0 + 10ms) == acquire_action::sleep);
  CHECK(fsm.sleep_until() == t0 + 10ms + 4990ms);
}

TEST_CASE("acquire_fsm: the confirmation arriving later wakes the sleeper", "[lock][fsm]") {
  lock::acquire_fsm fsm(std::nullopt, t0);
  CHECK(fsm.on_busy(5000, t0) == acquire_action::subscribe);
  CHECK(fsm.on_subscribe_started(false, t0) == acquire_action::sleep);
  CHECK(fsm.on_signal());  // confirmation: cancel the timer
  CHECK(fsm.on_timer() == acquire_action::attempt);
  CHECK(fsm.on_busy(4000, t0 + 1s) == acquire_action::sleep);
  CHECK(fsm.on_signal());  // the unlock message
  CHECK(fsm.on_timer() == acquire_action::attempt);
  CHECK(fsm.on_acquired() == acquire_action::acquired);
}

TEST_CASE("acquire_fsm: a message during an attempt in flight is not lost", "[lock][fsm]") {
  lock::acquire_fsm fsm(std::nullopt, t0);
  CHECK(fsm.on_busy(5000, t0) == acquire_action::subscribe);
  CHECK(fsm.on_subscribe_started(false, t0) == acquire_action::sleep);
  CHECK(fsm.on_timer() == acquire_action::attempt);  // the TTL ran out: attempt in flight
  CHECK_FALSE(fsm.on_signal());  // not asleep: nothing to cancel, but remembered
  // The script saw the lock still held (the unlock came after it ran): retry, don't sleep.
  CHECK(fsm.on_busy(3000, t0 + 5s) == acquire_action::attempt);
  // Nothing new: now it sleeps.
  CHECK(fsm.on_busy(2000, t0 + 5s) == acquire_action::sleep);
}

TEST_CASE("acquire_fsm: the wait bounds the sleep and ends the operation", "[lock][fsm]") {
  lock::acquire_fsm fsm(300ms, t0);
  CHECK(fsm.on_busy(5000, t0) == acquire_action::subscribe);
  CHECK(fsm.on_subscribe_started(false, t0) == acquire_action::sleep);
  CHECK(fsm.sleep_until() == t0 + 300ms);
  CHECK(fsm.on_timer() == acquire_action::attempt);
  CHECK(fsm.on_busy(4700, t0 + 300ms) == acquire_action::gave_up);
}

TEST_CASE("acquire_fsm: a holder without expiry: sleep until a message (bounded)", "[lock][fsm]") {
  lock::acquire_fsm fsm(std::nullopt, t0);
  CHECK(fsm.on_busy(-1, t0) == acquire_action::subscribe);
  CHECK(fsm.on_subscribe_started(false, t0) == acquire_action::sleep);
  CHECK(fsm.sleep_until() == t0 + lock::acquire_fsm::unknown_ttl_sleep);
}

TEST_CASE("unlock replies and their effects on the watchdog and the lease", "[lock][fsm]") {
  CHECK(lock::classify_unlock_reply(integer(1)) == lock::unlock_outcome::released);
  CHECK(lock::classify_unlock_reply(integer(0)) == lock::unlock_outcome::still_held);
  CHECK(lock::classify_unlock_reply(lockscope::resp::value::nil()) == lock::unlock_outcome::not_owner);
  CHECK(lock::classify_unlock_reply(integer(7)) == lock::unlock_outcome::unexpected);
  CHECK(lock::classify_unlock_reply(lockscope::resp::value::error("ERR x")) == lock::unlock_outcome::unexpected);

  // Issue 11's defect: the remembered lease must go back to the watchdog timeout on a
  // full release (and on a rejected unlock, as Redisson 3.20 does), never on a partial one.
  auto e = lock::effects_of(lock::unlock_outcome::released, false);
  CHECK(e.stop_renewal);
  CHECK(e.reset_lease);
  e = lock::effects_of(lock::unlock_outcome::not_owner, false);
  CHECK(e.stop_renewal);
  CHECK(e.reset_lease);
  e = lock::effects_of(lock::unlock_outcome::still_held, false);
  CHECK_FALSE(e.stop_renewal);
  CHECK_FALSE(e.reset_lease);
  e = lock::effects_of(lock::unlock_outcome::released, true);  // no answer: unknown
  CHECK_FALSE(e.stop_renewal);
  CHECK_FALSE(e.reset_lease);
}

TEST_CASE("watchdog: renewed, lost, or retried until a whole lease went by", "[lock][fsm]") {
  const auto timeout = 30s;
  CHECK(lock::classify_renew({}, integer(1), t0, t0, timeout) == lock::renew_outcome::renewed);
  CHECK(lock::renew_delay(lock::renew_outcome::renewed, timeout) == 10s);
  CHECK(lock::classify_renew({}, integer(0), t0, t0, timeout) == lock::renew_outcome::lost);
  const std::error_code down = std::make_error_code(std::errc::connection_reset);
  CHECK(lock::classify_renew(down, lockscope::resp::value::nil(), t0 + 29s, t0, timeout) ==
        lock::renew_outcome::retry);
  CHECK(lock::renew_delay(lock::renew_outcome::retry, timeout) == 500ms);
  CHECK(lock::renew_delay(lock::renew_outcome::retry, 900ms) == 300ms);
  CHECK(lock::classify_renew(down, lockscope::resp::value::nil(), t0 + 30s, t0, timeout) == lock::renew_outcome::lost);
}

TEST_CASE("classify_acquire_reply: nil/integer, and the fenced {-1, token} / {pttl, -1}", "[lock][fsm]") {
  using kind = lock::acquire_reply::kind;
  using lockscope::resp::value;
  value nil;
  nil.type = lockscope::resp::type::null;
  CHECK(lock::classify_acquire_reply(nil, false).outcome == kind::acquired);
  const auto busy = lock::classify_acquire_reply(integer(1234), false);
  CHECK(busy.outcome == kind::busy);
  CHECK(busy.ttl_ms == 1234);
  CHECK(lock::classify_acquire_reply(value::aggregate(lockscope::resp::type::array, {integer(-1), integer(7)}), false)
            .outcome == kind::unexpected);

  auto pair = [](std::int64_t a, std::int64_t b) {
    return value::aggregate(lockscope::resp::type::array, {integer(a), integer(b)});
  };
  const auto got = lock::classify_acquire_reply(pair(-1, 42), true);
  CHECK(got.outcome == kind::acquired);
  CHECK(got.token == 42);
  const auto held = lock::classify_acquire_reply(pair(2900, -1), true);
  CHECK(held.outcome == kind::busy);
  CHECK(held.ttl_ms == 2900);
  // A holder without expiry: PTTL -1, so {-1, -1}. Busy with an unknown TTL, not a token.
  const auto forever = lock::classify_acquire_reply(pair(-1, -1), true);
  CHECK(forever.outcome == kind::busy);
  CHECK(forever.ttl_ms == -1);
  CHECK(lock::classify_acquire_reply(nil, true).outcome == kind::unexpected);
  CHECK(lock::classify_acquire_reply(integer(5), true).outcome == kind::unexpected);
  CHECK(lock::classify_acquire_reply(pair(10, 3), true).outcome == kind::unexpected);
}

using lock::multi_action_kind;

TEST_CASE("multi_acquire_fsm: MultiLock, all or nothing, the whole remaining wait per lock", "[lock][fsm][multi]") {
  lock::multi_acquire_fsm fsm(3, 1000ms, t0);
  auto a = fsm.start();
  CHECK(a.kind == multi_action_kind::attempt);
  CHECK(a.index == 0);
  CHECK(a.wait == 1000ms);
  a = fsm.on_result(true, t0 + 100ms);
  CHECK(a.index == 1);
  CHECK(a.wait == 900ms);
  // A failure with time left: release what was taken, start over from the first lock.
  a = fsm.on_result(false, t0 + 300ms);
  CHECK(a.kind == multi_action_kind::release_and_retry);
  CHECK(fsm.acquired() == std::vector<std::size_t>{0});
  a = fsm.restart();
  CHECK(fsm.acquired().empty());
  CHECK(a.index == 0);
  CHECK(a.wait == 700ms);
  CHECK(fsm.on_result(true, t0 + 310ms).index == 1);
  CHECK(fsm.on_result(true, t0 + 320ms).index == 2);
  CHECK(fsm.on_result(true, t0 + 330ms).kind == multi_action_kind::acquired);
  CHECK(fsm.acquired() == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("multi_acquire_fsm: MultiLock try once fails on the first miss, and so does a wait running out",
          "[lock][fsm][multi]") {
  lock::multi_acquire_fsm once(2, std::nullopt, t0);
  auto a = once.start();
  CHECK(a.wait == 0ms);
  CHECK(once.on_result(true, t0).index == 1);
  CHECK(once.on_result(false, t0).kind == multi_action_kind::release_and_fail);
  CHECK(once.acquired() == std::vector<std::size_t>{0});

  lock::multi_acquire_fsm timed(2, 500ms, t0);
  timed.start();
  // Acquired, but the wait is used up: release and fail (Redisson's remainTime <= 0).
  CHECK(timed.on_result(true, t0 + 500ms).kind == multi_action_kind::release_and_fail);
  CHECK(timed.acquired() == std::vector<std::size_t>{0});
}

using lock::redlock_action;

TEST_CASE("redlock_fsm: every server at once, a majority with a positive validity acquires", "[lock][fsm][redlock]") {
  lock::redlock_fsm fsm(3, 10000ms, 900ms, t0);
  CHECK(fsm.required() == 2);
  CHECK(fsm.start() == redlock_action::attempt_all);
  // The round is decided only when every server has answered: a lock granted late
  // must be known, to be released or held.
  CHECK(fsm.on_result(true, t0 + 1ms) == redlock_action::pending);
  CHECK(fsm.on_result(true, t0 + 2ms) == redlock_action::pending);
  CHECK(fsm.on_result(false, t0 + 30ms) == redlock_action::acquired);
  // Elapsed from the round's start to the last answer, and the drift (lease/100 + 2 ms).
  CHECK(fsm.validity() == 10000ms - 30ms - 102ms);

  // The order of the answers does not matter; one server down (an error) is tolerated.
  lock::redlock_fsm down(3, 10000ms, 900ms, t0);
  down.start();
  CHECK(down.on_result(false, t0 + 400ms) == redlock_action::pending);
  CHECK(down.on_result(true, t0 + 400ms) == redlock_action::pending);
  CHECK(down.on_result(true, t0 + 400ms) == redlock_action::acquired);

  lock::redlock_fsm five(5, 1000ms, std::nullopt, t0);
  CHECK(five.required() == 3);
  five.start();
  for (bool granted : {true, false, true, false}) CHECK(five.on_result(granted, t0) == redlock_action::pending);
  CHECK(five.on_result(true, t0) == redlock_action::acquired);
}

TEST_CASE("redlock_fsm: no majority releases everywhere and retries after a delay within the wait",
          "[lock][fsm][redlock]") {
  lock::redlock_fsm fsm(3, 10000ms, 900ms, t0);
  fsm.start();
  fsm.on_result(true, t0);
  fsm.on_result(false, t0);
  CHECK(fsm.on_result(false, t0 + 10ms) == redlock_action::release_and_retry);
  CHECK(fsm.retry_delay() == lock::redlock_fsm::max_retry_delay);
  // A new round: the counts start over and elapsed is measured from its start.
  CHECK(fsm.next_round(t0 + 40ms) == redlock_action::attempt_all);
  fsm.on_result(true, t0 + 41ms);
  CHECK(fsm.on_result(false, t0 + 41ms) == redlock_action::pending);
  CHECK(fsm.on_result(true, t0 + 45ms) == redlock_action::acquired);
  CHECK(fsm.validity() == 10000ms - 5ms - 102ms);

  // Near the end of the wait the delay shrinks to what is left; past it, no new round.
  lock::redlock_fsm late(3, 10000ms, 900ms, t0);
  late.start();
  for (int i = 0; i < 2; ++i) late.on_result(false, t0 + 880ms);
  CHECK(late.on_result(false, t0 + 880ms) == redlock_action::release_and_retry);
  CHECK(late.retry_delay() == 20ms);
  CHECK(late.next_round(t0 + 900ms) == redlock_action::failed);

  // A round that ends after the wait releases and fails at once.
  lock::redlock_fsm over(3, 10000ms, 900ms, t0);
  over.start();
  over.on_result(false, t0 + 950ms);
  over.on_result(false, t0 + 950ms);
  CHECK(over.on_result(true, t0 + 950ms) == redlock_action::release_and_fail);
}

TEST_CASE("redlock_fsm: try once is one round, lock() retries forever, an expired validity fails the round",
          "[lock][fsm][redlock]") {
  lock::redlock_fsm once(3, 10000ms, 0ms, t0);
  once.start();
  once.on_result(false, t0);
  once.on_result(false, t0);
  CHECK(once.on_result(true, t0) == redlock_action::release_and_fail);

  lock::redlock_fsm forever(3, 10000ms, std::nullopt, t0);
  forever.start();
  forever.on_result(false, t0 + 1h);
  forever.on_result(false, t0 + 1h);
  CHECK(forever.on_result(false, t0 + 1h) == redlock_action::release_and_retry);
  CHECK(forever.retry_delay() == lock::redlock_fsm::max_retry_delay);
  CHECK(forever.next_round(t0 + 2h) == redlock_action::attempt_all);

  // A majority, but the round took longer than the lease allows: released, retried.
  lock::redlock_fsm slow(3, 100ms, 900ms, t0);
  slow.start();
  slow.on_result(true, t0 + 99ms);
  slow.on_result(true, t0 + 99ms);
  CHECK(slow.on_result(true, t0 + 99ms) == redlock_action::release_and_retry);
  CHECK(slow.validity().count() <= 0);
}

TEST_CASE("multi lock rounds and RedLock validity", "[lock][fsm][multi]") {
  CHECK(lock::multi_lock_round_wait(3, std::nullopt, 0.7) == 4500ms);
  CHECK(lock::multi_lock_round_wait(3, 2000ms, 0.0) == 1000ms);  // lease <= base: [lease/2, lease)
  CHECK(lock::multi_lock_round_wait(3, 2000ms, 0.5) == 1500ms);
  CHECK(lock::multi_lock_round_wait(2, 10000ms, 0.0) == 3000ms);  // else [base, lease)
  CHECK(lock::redlock_validity(10000ms, t0, t0 + 30ms) == 10000ms - 30ms - 102ms);
  CHECK(lock::redlock_validity(100ms, t0, t0 + 99ms).count() <= 0);
}
