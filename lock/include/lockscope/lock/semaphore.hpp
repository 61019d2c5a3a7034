// Redisson's RSemaphore, wire-compatible: the free permits are a string key `name`,
// and a release publishes the new count on `redisson_sc:{name}`, which wakes waiters
// (Java Redisson's and this client's alike).
//
//   lockscope::lock::semaphore slots = redis.get_semaphore("workers");
//   slots.try_set_permits(3);                       // only the first caller sets it
//   if (slots.try_acquire(1, std::chrono::seconds(5))) { ...; slots.release(1); }
//   co_await slots.async_acquire(2, boost::asio::use_awaitable);
//
// Permits are not owned (as in Redisson): any handle may release any number, and a
// process that dies holding permits does not give them back. The async calls follow
// the client's rules (client.hpp): completion on the handler's associated executor, its
// work counted meanwhile; a cancelled acquire (the handler's cancellation slot)
// completes with boost::asio::error::operation_aborted once it took no permit: an
// attempt in flight that took some gives them back first.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lockscope/lock/client.hpp"

namespace lockscope::lock {

namespace detail {
struct semaphore_state {
  std::shared_ptr<void> io_keepalive;  // the client's own io_context
  std::shared_ptr<client_impl> impl;
  std::string name;
  std::string channel;
};
enum class semaphore_call : std::uint8_t { release, try_set_permits, add_permits, drain_permits, available_permits };
// Completes with 1 when `permits` were taken, 0 when not within `wait` (nullopt: wait
// forever; 0: one attempt).
void start_semaphore_acquire(const std::shared_ptr<semaphore_state>& s, std::int64_t permits,
                             std::optional<std::chrono::milliseconds> wait, completion<std::int64_t> done,
                             std::shared_ptr<cancel_link> cancel);
// The other calls: release (0), try_set_permits (1 = set), add_permits (0),
// drain_permits (the permits taken), available_permits (the count).
void start_semaphore_call(const std::shared_ptr<semaphore_state>& s, semaphore_call call, std::int64_t permits,
                          completion<std::int64_t> done);
void ensure_usable(const semaphore_state& s);
const strand_type& strand_of(const semaphore_state& s) noexcept;
}  // namespace detail

// `redisson_sc:{name}` (`redisson_sc:name` when the name holds '{'): Redisson's channel.
std::string semaphore_channel_name(std::string_view name);

class semaphore {
 public:
  using duration = std::chrono::milliseconds;

  const std::string& name() const noexcept { return state_->name; }
  const std::string& channel() const noexcept { return state_->channel; }

  // Blocking API; throws lock_error on failure (errc::invalid_argument for permits < 1
  // where permits are taken or given, or a negative wait).
  // Sets the permits when the semaphore does not exist yet; true if this call set them.
  bool try_set_permits(std::int64_t permits);
  // Adds (or, negative, removes) permits, creating the semaphore if needed.
  void add_permits(std::int64_t permits);
  // Free permits now (0 when the semaphore does not exist).
  std::int64_t available_permits();
  // Takes every free permit; returns how many.
  std::int64_t drain_permits();
  // Waits until `permits` are free and takes them all at once.
  void acquire(std::int64_t permits = 1);
  // One attempt.
  bool try_acquire(std::int64_t permits = 1);
  // Waits up to `wait` (0: one attempt).
  bool try_acquire(std::int64_t permits, duration wait);
  // Gives `permits` back and wakes the waiters.
  void release(std::int64_t permits = 1);

  // Completion signatures:
  //   async_acquire, async_release, async_add_permits: void(boost::system::error_code)
  //   async_try_acquire, async_try_set_permits:        void(boost::system::error_code, bool)
  //   async_available_permits, async_drain_permits:    void(boost::system::error_code, std::int64_t)
  template <class Token>
  auto async_acquire(std::int64_t permits, Token&& token) {
    return initiate_acquire<void(boost::system::error_code), false>(permits, std::nullopt, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_acquire(std::int64_t permits, duration wait, Token&& token) {
    return initiate_acquire<void(boost::system::error_code, bool), true>(permits, wait, std::forward<Token>(token));
  }
  template <class Token>
  auto async_release(std::int64_t permits, Token&& token) {
    return initiate_call<void(boost::system::error_code), false>(detail::semaphore_call::release, permits,
                                                                 std::forward<Token>(token));
  }
  template <class Token>
  auto async_add_permits(std::int64_t permits, Token&& token) {
    return initiate_call<void(boost::system::error_code), false>(detail::semaphore_call::add_permits, permits,
                                                                 std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_set_permits(std::int64_t permits, Token&& token) {
    return initiate_call<void(boost::system::error_code, bool), true, bool>(detail::semaphore_call::try_set_permits,
                                                                            permits, std::forward<Token>(token));
  }
  template <class Token>
  auto async_available_permits(Token&& token) {
    return initiate_call<void(boost::system::error_code, std::int64_t), true>(
        detail::semaphore_call::available_permits, 0, std::forward<Token>(token));
  }
  template <class Token>
  auto async_drain_permits(Token&& token) {
    return initiate_call<void(boost::system::error_code, std::int64_t), true>(detail::semaphore_call::drain_permits,
                                                                              0, std::forward<Token>(token));
  }

 private:
  friend class client;
  explicit semaphore(std::shared_ptr<detail::semaphore_state> state) : state_(std::move(state)) {}

  template <class Signature, bool WithValue, class Token>
  auto initiate_acquire(std::int64_t permits, std::optional<duration> wait, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_](auto handler, std::int64_t n, std::optional<duration> w) {
          const strand_type& strand = detail::strand_of(*state);
          auto cancel = detail::link_cancellation(handler, strand);
          detail::undo_acquire undo = [state, n](detail::unique_function<void()> then) mutable {
            detail::start_semaphore_call(state, detail::semaphore_call::release, n,
                                         [t = std::move(then)](detail::status, std::int64_t) mutable { t(); });
          };
          auto done = detail::adapt<std::int64_t, WithValue>(
              std::move(handler), strand, [](std::int64_t v) { return v != 0; }, cancel, std::move(undo));
          detail::start_semaphore_acquire(state, n, w, std::move(done), std::move(cancel));
        },
        token, permits, wait);
  }
  template <class Signature, bool WithValue, class T = std::int64_t, class Token>
  auto initiate_call(detail::semaphore_call call, std::int64_t permits, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_, call](auto handler, std::int64_t n) {
          detail::start_semaphore_call(
              state, call, n,
              detail::adapt<std::int64_t, WithValue>(std::move(handler), detail::strand_of(*state),
                                                     [](std::int64_t v) { return static_cast<T>(v); }));
        },
        token, permits);
  }

  std::shared_ptr<detail::semaphore_state> state_;
};

}  // namespace lockscope::lock
