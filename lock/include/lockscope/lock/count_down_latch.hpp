// Redisson's RCountDownLatch, wire-compatible: the count is a string key `name`, deleted
// when it reaches zero; `redisson_countdownlatch__channel__{name}` carries "0" (zero
// reached: waiters go) and "1" (a new count was set).
//
//   lockscope::lock::count_down_latch ready = redis.get_count_down_latch("batch:7");
//   ready.try_set_count(3);                        // only when no count is set
//   ready.count_down();                            // each worker, once
//   if (ready.await(std::chrono::seconds(30))) ... // true once the count is 0
//   co_await ready.async_await(boost::asio::use_awaitable);
//
// A latch that does not exist counts 0: await() returns at once (as Redisson's). The
// async calls follow the client's rules (client.hpp); a cancelled await completes with
// boost::asio::error::operation_aborted and leaves no subscription behind.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lockscope/lock/client.hpp"

namespace lockscope::lock {

namespace detail {
struct latch_state {
  std::shared_ptr<void> io_keepalive;
  std::shared_ptr<client_impl> impl;
  std::string name;
  std::string channel;
};
enum class latch_call : std::uint8_t { try_set_count, count_down, get_count, remove };
// Completes with 1 once the count is zero, 0 when `wait` ran out first.
void start_latch_await(const std::shared_ptr<latch_state>& l, std::optional<std::chrono::milliseconds> wait,
                       completion<std::int64_t> done, std::shared_ptr<cancel_link> cancel);
// try_set_count (1 = set), count_down (0), get_count (the count), remove (1 = deleted).
void start_latch_call(const std::shared_ptr<latch_state>& l, latch_call call, std::int64_t count,
                      completion<std::int64_t> done);
void ensure_usable(const latch_state& l);
const strand_type& strand_of(const latch_state& l) noexcept;
}  // namespace detail

// `redisson_countdownlatch__channel__{name}`: Redisson's channel (always with braces).
std::string latch_channel_name(std::string_view name);

class count_down_latch {
 public:
  using duration = std::chrono::milliseconds;

  const std::string& name() const noexcept { return state_->name; }
  const std::string& channel() const noexcept { return state_->channel; }

  // Blocking API; throws lock_error on failure.
  // Sets the count when none is set; true if this call set it (count ≥ 1).
  bool try_set_count(std::int64_t count);
  // Decrements; at zero deletes the latch and releases every waiter.
  void count_down();
  // The count now (0 when the latch does not exist).
  std::int64_t get_count();
  // Deletes the latch (waking nobody: Redisson's delete publishes "1"); true if it existed.
  bool remove();
  // Waits until the count is zero.
  void await();
  // Waits up to `wait` (0: look once); true when the count is zero.
  bool await(duration wait);

  // Completion signatures:
  //   async_await():                           void(boost::system::error_code)
  //   async_await(wait), async_try_set_count:  void(boost::system::error_code, bool)
  //   async_count_down:                        void(boost::system::error_code)
  //   async_get_count:                         void(boost::system::error_code, std::int64_t)
  template <class Token>
  auto async_await(Token&& token) {
    return initiate_await<void(boost::system::error_code), false>(std::nullopt, std::forward<Token>(token));
  }
  template <class Token>
  auto async_await(duration wait, Token&& token) {
    return initiate_await<void(boost::system::error_code, bool), true>(wait, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_set_count(std::int64_t count, Token&& token) {
    return initiate_call<void(boost::system::error_code, bool), true, bool>(detail::latch_call::try_set_count, count,
                                                                            std::forward<Token>(token));
  }
  template <class Token>
  auto async_count_down(Token&& token) {
    return initiate_call<void(boost::system::error_code), false>(detail::latch_call::count_down, 0,
                                                                 std::forward<Token>(token));
  }
  template <class Token>
  auto async_get_count(Token&& token) {
    return initiate_call<void(boost::system::error_code, std::int64_t), true>(detail::latch_call::get_count, 0,
                                                                              std::forward<Token>(token));
  }

 private:
  friend class client;
  explicit count_down_latch(std::shared_ptr<detail::latch_state> state) : state_(std::move(state)) {}

  template <class Signature, bool WithValue, class Token>
  auto initiate_await(std::optional<duration> wait, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_](auto handler, std::optional<duration> w) {
          const strand_type& strand = detail::strand_of(*state);
          auto cancel = detail::link_cancellation(handler, strand);
          auto done = detail::adapt<std::int64_t, WithValue>(std::move(handler), strand,
                                                             [](std::int64_t v) { return v != 0; });
          detail::start_latch_await(state, w, std::move(done), std::move(cancel));
        },
        token, wait);
  }
  template <class Signature, bool WithValue, class T = std::int64_t, class Token>
  auto initiate_call(detail::latch_call call, std::int64_t count, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_, call](auto handler, std::int64_t n) {
          detail::start_latch_call(state, call, n,
                                   detail::adapt<std::int64_t, WithValue>(
                                       std::move(handler), detail::strand_of(*state),
                                       [](std::int64_t v) { return static_cast<T>(v); }));
        },
        token, count);
  }

  std::shared_ptr<detail::latch_state> state_;
};

}  // namespace lockscope::lock
