// Redisson's RPermitExpirableSemaphore, wire-compatible: each acquired permit has an id
// (16 random bytes, 32 hex digits in the API) and an expiry of its own; a permit whose
// lease ran out comes back by itself at the next call on the semaphore, whoever makes
// it. The free permits are the string key `name`, the acquired ids the sorted set
// `{name}:timeout` scored by expiry (Unix ms), the channel `redisson_sc:{name}`.
//
//   lockscope::lock::permit_expirable_semaphore jobs = redis.get_permit_expirable_semaphore("jobs");
//   jobs.try_set_permits(2);
//   if (auto id = jobs.try_acquire(std::chrono::seconds(5), std::chrono::seconds(30))) {
//     ...;                        // at most 30 s: then the permit is free again
//     jobs.release(*id);          // throws if it expired meanwhile (and was taken back)
//   }
//
// Clocks: the expiry is the caller's wall clock plus the lease, compared with other
// callers' wall clocks (as Redisson's), so the clients' clocks should agree within a
// small part of the leases. The async calls follow the client's rules (client.hpp); a
// cancelled acquire completes with operation_aborted and holds no permit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lockscope/lock/client.hpp"

namespace lockscope::lock {

namespace detail {
struct expirable_state {
  std::shared_ptr<void> io_keepalive;
  std::shared_ptr<client_impl> impl;
  std::string name;
  std::string timeout_name;
  std::string channel;
};
// The id the acquire took (hex), shared between the operation and its completion.
struct acquired_permit {
  std::string id;
};
// Completes with 1 once a permit was taken (its id in `permit`), 0 when not within
// `wait`. `lease`: nullopt = no expiry.
void start_expirable_acquire(const std::shared_ptr<expirable_state>& s, std::shared_ptr<acquired_permit> permit,
                             std::optional<std::chrono::milliseconds> wait,
                             std::optional<std::chrono::milliseconds> lease, completion<std::int64_t> done,
                             std::shared_ptr<cancel_link> cancel);
// 1 when `id` was held and unexpired, and is now released.
void start_expirable_release(const std::shared_ptr<expirable_state>& s, std::string id,
                             completion<std::int64_t> done);
void ensure_usable(const expirable_state& s);
const strand_type& strand_of(const expirable_state& s) noexcept;
// The wall clock as Unix ms: Redisson's System.currentTimeMillis() in the scripts.
std::int64_t unix_ms();
}  // namespace detail

class permit_expirable_semaphore {
 public:
  using duration = std::chrono::milliseconds;

  const std::string& name() const noexcept { return state_->name; }
  const std::string& channel() const noexcept { return state_->channel; }
  // `{name}:timeout`: the acquired permits' ids and expiries.
  const std::string& timeout_name() const noexcept { return state_->timeout_name; }

  // Blocking API; throws lock_error on failure.
  bool try_set_permits(std::int64_t permits);
  // Adds (negative: removes) free permits.
  void add_permits(std::int64_t permits);
  // Free permits now, expired ones returned first.
  std::int64_t available_permits();
  // Waits for a permit; its id. `lease`: nullopt = it never expires.
  std::string acquire(std::optional<duration> lease = std::nullopt);
  // Waits up to `wait` (0: one attempt); the id, or nullopt.
  std::optional<std::string> try_acquire(duration wait, std::optional<duration> lease = std::nullopt);
  // Releases permit `id`; false when it is unknown or had expired.
  bool try_release(const std::string& id);
  // As try_release, but throws lock_error(errc::not_owner) for an unknown or expired id
  // (Redisson's release throws likewise).
  void release(const std::string& id);

  // Completion signatures:
  //   async_acquire:     void(boost::system::error_code, std::string id)
  //   async_try_acquire: void(boost::system::error_code, std::string id), "" when not in time
  //   async_try_release: void(boost::system::error_code, bool)
  template <class Token>
  auto async_acquire(std::optional<duration> lease, Token&& token) {
    return initiate_acquire(std::nullopt, lease, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_acquire(duration wait, std::optional<duration> lease, Token&& token) {
    return initiate_acquire(wait, lease, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_release(std::string id, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code, bool)>(
        [state = state_](auto handler, std::string permit) {
          detail::start_expirable_release(
              state, std::move(permit),
              detail::adapt<std::int64_t, true>(std::move(handler), detail::strand_of(*state),
                                                [](std::int64_t v) { return v != 0; }));
        },
        token, std::move(id));
  }

 private:
  friend class client;
  explicit permit_expirable_semaphore(std::shared_ptr<detail::expirable_state> state) : state_(std::move(state)) {}

  template <class Token>
  auto initiate_acquire(std::optional<duration> wait, std::optional<duration> lease, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::string)>(
        [state = state_](auto handler, std::optional<duration> w, std::optional<duration> l) {
          const strand_type& strand = detail::strand_of(*state);
          auto cancel = detail::link_cancellation(handler, strand);
          auto permit = std::make_shared<detail::acquired_permit>();
          detail::undo_acquire undo = [state, permit](detail::unique_function<void()> then) mutable {
            detail::start_expirable_release(state, permit->id,
                                            [t = std::move(then)](detail::status, std::int64_t) mutable { t(); });
          };
          auto done = detail::adapt<std::int64_t, true>(
              std::move(handler), strand, [permit](std::int64_t v) { return v != 0 ? permit->id : std::string(); },
              cancel, std::move(undo));
          detail::start_expirable_acquire(state, permit, w, l, std::move(done), std::move(cancel));
        },
        token, wait, lease);
  }

  std::shared_ptr<detail::expirable_state> state_;
};

}  // namespace lockscope::lock
