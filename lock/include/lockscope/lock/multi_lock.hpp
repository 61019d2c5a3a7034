// Redisson's RedissonMultiLock and RedissonRedLock: one lock made of several rlocks,
// possibly of different clients on different servers.
//
//   lockscope::lock::client a(cfg_a), b(cfg_b), c(cfg_c);
//   auto all = lockscope::lock::get_multi_lock({a.get_lock("x"), b.get_lock("y")});  // all or nothing
//   auto red = lockscope::lock::get_red_lock({a.get_lock("job"), b.get_lock("job"), c.get_lock("job")});
//   if (red.try_lock(std::chrono::seconds(1), std::chrono::seconds(10))) {   // a majority: 2 of 3
//     ... // safe for at most red.validity()
//     red.unlock();                               // released on every server
//   }
//
// The owners are the handles' (see client_config::owners), fixed when the call starts.
// The async acquires honour the handler's cancellation slot: a cancelled one releases
// whatever it took before it completes with operation_aborted.
//
// Safety (RedLock): it assumes bounded clock drift and pauses shorter than the validity;
// it gives no fencing token, so a holder paused past its validity can still write after
// another took over. Where that matters, use fenced_lock and have the storage check the token.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/async_result.hpp>

#include "lockscope/lock/client.hpp"

namespace lockscope::lock {

namespace detail {

struct multi_state;

struct multi_request {
  std::optional<std::chrono::milliseconds> wait;   // nullopt: Redisson's lock(): rounds until acquired
  std::optional<std::chrono::milliseconds> lease;  // nullopt: each lock's watchdog
  bool once = false;                               // try_lock(): one attempt on each lock
};

// `cancel`: as start_acquire's; a cancelled multi-lock acquire releases whatever it
// took before it completes with operation_aborted.
void start_multi_acquire(const std::shared_ptr<multi_state>& state, std::vector<std::string> owners,
                         multi_request request, completion<bool> done, std::shared_ptr<cancel_link> cancel = nullptr);
void start_multi_unlock(const std::shared_ptr<multi_state>& state, std::vector<std::string> owners,
                        completion<bool> done);
const strand_type& strand_of(const multi_state& state) noexcept;

}  // namespace detail

class multi_lock {
 public:
  using duration = std::chrono::milliseconds;

  std::size_t size() const noexcept;
  // How many locks must be acquired: all of them, or a majority for a RedLock.
  std::size_t required() const noexcept;

  // Blocking API (Lockable); throws lock_error on a failure other than "not acquired".
  void lock();                                   // rounds of try_lock until acquired; watchdogs
  void lock(duration lease);
  bool try_lock();                               // one attempt on each lock
  bool try_lock(duration wait);                  // within `wait` in total
  bool try_lock(duration wait, duration lease);
  // Releases the locks on every server. Never throws; failures go to the first client's
  // on_unlock_error. A RedLock ignores the servers where it held nothing.
  void unlock() noexcept;
  void unlock_or_throw();

  // Completion signatures: async_lock, async_unlock: void(boost::system::error_code);
  // async_try_lock: void(boost::system::error_code, bool).
  template <class Token>
  auto async_lock(Token&& token) {
    return initiate_void({std::nullopt, std::nullopt, false}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock(duration lease, Token&& token) {
    return initiate_void({std::nullopt, lease, false}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(Token&& token) {
    return initiate_bool({std::nullopt, std::nullopt, true}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(duration wait, Token&& token) {
    return initiate_bool({wait, std::nullopt, false}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(duration wait, duration lease, Token&& token) {
    return initiate_bool({wait, lease, false}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_unlock(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [state = state_](auto handler, std::vector<std::string> owners) {
          detail::start_multi_unlock(state, std::move(owners),
                                     detail::adapt<bool, false>(std::move(handler), detail::strand_of(*state)));
        },
        token, owners());
  }

 protected:
  multi_lock(std::vector<rlock> locks, bool majority);
  std::shared_ptr<detail::multi_state> state_;
  std::vector<rlock> handles_;  // for their owner()

 private:
  friend multi_lock get_multi_lock(std::vector<rlock> locks);

  std::vector<std::string> owners() const;
  template <class Signature, bool WithValue, class Token>
  auto initiate_acquire(detail::multi_request request, Token&& token) {
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_](auto handler, std::vector<std::string> owners, detail::multi_request r) {
          const strand_type& strand = detail::strand_of(*state);
          auto cancel = detail::link_cancellation(handler, strand);
          detail::undo_acquire undo = [state, owners](detail::unique_function<void()> then) mutable {
            detail::start_multi_unlock(state, owners, [t = std::move(then)](detail::status, bool) mutable { t(); });
          };
          auto done = detail::adapt<bool, WithValue>(std::move(handler), strand, detail::same_value{}, cancel,
                                                     std::move(undo));
          detail::start_multi_acquire(state, std::move(owners), r, std::move(done), std::move(cancel));
        },
        token, owners(), request);
  }
  template <class Token>
  auto initiate_void(detail::multi_request request, Token&& token) {
    return initiate_acquire<void(boost::system::error_code), false>(request, std::forward<Token>(token));
  }
  template <class Token>
  auto initiate_bool(detail::multi_request request, Token&& token) {
    return initiate_acquire<void(boost::system::error_code, bool), true>(request, std::forward<Token>(token));
  }
};

// A RedLock: a majority (n/2+1) of locks on independent servers, by the Redlock algorithm
// as redis.io specifies it rather than Redisson's one-after-another order: each round
// tries every server once, all at once, each attempt bounded by its client's
// command_timeout (the per-server timeout), so a server that is down costs at most that.
// With a majority, validity() = lease - elapsed - drift (drift = lease/100 + 2 ms, the
// lease the watchdog timeout without one); without one, or not positive, the lock is
// released wherever it may be held and a new round follows a random delay (<= 50 ms) while the
// wait lasts (see redlock_fsm).
class red_lock : public multi_lock {
 public:
  // The validity of the last successful acquisition by this handle (0 before any).
  duration validity() const noexcept;

 private:
  friend red_lock get_red_lock(std::vector<rlock> locks);
  explicit red_lock(std::vector<rlock> locks) : multi_lock(std::move(locks), true) {}
};

// Throws lock_error(errc::invalid_argument) for an empty list.
multi_lock get_multi_lock(std::vector<rlock> locks);
red_lock get_red_lock(std::vector<rlock> locks);

}  // namespace lockscope::lock
