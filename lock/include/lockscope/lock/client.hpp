// A lean Redisson-compatible lock client: reentrant RLock semantics over Boost.Asio,
// interoperable with Redisson (and with anything that sends its scripts) on the same
// lock.
//
//   lockscope::lock::client redis(lockscope::lock::client_config::from_url("redis://127.0.0.1:6379"));
//   redis.connect();                               // optional: fail fast on a bad address
//   lockscope::lock::rlock lock = redis.get_lock("orders:42");
//   {
//     std::scoped_lock hold(lock);                 // waits via pub/sub; watchdog renews
//     ...
//   }                                              // released (never throws)
//   if (lock.try_lock(std::chrono::seconds(2), std::chrono::seconds(10))) { ...; lock.unlock(); }
//   co_await lock.async_lock(boost::asio::use_awaitable);   // or a callback, or use_future
//
// Threads: the client runs its I/O on its own thread (or on an io_context you run).
// The blocking calls may be made from any other thread; on the I/O thread they throw
// errc::would_deadlock. An async_* call completes on its handler's associated executor
// (by default the client's strand) with its associated allocator, keeps that executor's
// work count up meanwhile, and never runs the handler inside the call. The acquires
// honour the handler's cancellation slot: a cancelled one completes with
// boost::asio::error::operation_aborted once it left nothing behind (no waiter, no
// subscription, no hold).
//
// Owners (client_config::owners): by default each handle get_lock() returns is one
// owner, `<client uuid>:<n>`, whatever thread or coroutine uses it: give each task its
// own handle. owner_model::per_thread is Redisson's model, the calling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/connection.hpp"
#include "lockscope/lock/detail/unique_function.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::lock {

class rlock;
class fair_lock;
class fenced_lock;
class read_write_lock;
class semaphore;
class count_down_latch;
class permit_expirable_semaphore;
class subscription_listener;

namespace detail {

// Which of Redisson's scripts a handle sends.
enum class lock_kind : std::uint8_t { reentrant, fair, fenced, read, write };

class client_impl;
struct lock_state;

// The outcome of an internal operation: a code, plus Redis's or Redisson's full text.
struct status {
  std::error_code code;
  std::string text;
  explicit operator bool() const noexcept { return static_cast<bool>(code); }
  std::string message() const { return text.empty() ? code.message() : text; }
};

template <class T>
using completion = unique_function<void(status, T)>;

// Per-operation cancellation. An operation that can be cancelled (an acquire) sets
// `target` when it starts, on the client's strand; the handler's cancellation slot sets
// `requested` and posts to the strand, which cancels the target.
struct cancellable {
  virtual void cancel() = 0;

 protected:
  ~cancellable() = default;
};
struct cancel_link {
  std::weak_ptr<cancellable> target;  // the strand's only
  std::atomic<bool> requested{false};
};
// Cancels the operation behind `link`, on `strand` (from any thread).
void request_cancel(const std::shared_ptr<cancel_link>& link, const strand_type& strand);

// A link for `handler`'s cancellation slot, or nullptr when the handler has none. Every
// cancellation type cancels: a cancelled acquire leaves nothing behind (no waiter, no
// subscription, no hold), which meets the terminal, partial and total guarantees alike.
template <class Handler>
std::shared_ptr<cancel_link> link_cancellation(Handler& handler, const strand_type& strand) {
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  if (!slot.is_connected()) return nullptr;
  auto link = std::make_shared<cancel_link>();
  slot.assign([link, strand](boost::asio::cancellation_type type) {
    if ((type & (boost::asio::cancellation_type::terminal | boost::asio::cancellation_type::partial |
                 boost::asio::cancellation_type::total)) != boost::asio::cancellation_type::none)
      request_cancel(link, strand);
  });
  return link;
}

// boost::asio::error::operation_aborted as a std::error_code, and back: the system and
// generic codes go back to Boost's own categories, so that `ec ==
// boost::asio::error::operation_aborted` holds in the handler.
inline std::error_code operation_aborted() noexcept {
  return boost::system::error_code(boost::asio::error::operation_aborted);
}
inline boost::system::error_code to_boost(const std::error_code& code) noexcept {
  if (code.category() == std::system_category()) return {code.value(), boost::system::system_category()};
  if (code.category() == std::generic_category()) return {code.value(), boost::system::generic_category()};
  return boost::system::error_code(code);
}

// Gives back what an acquire took, then calls `then` (on any thread).
using undo_acquire = unique_function<void(unique_function<void()> then)>;

struct same_value {
  template <class T>
  T operator()(T&& v) const {
    return std::forward<T>(v);
  }
};

// Adapts an Asio completion handler to a completion of the client: keeps the handler's
// associated executor busy while the operation runs (the caller's io_context does not
// return early), then invokes the handler there, allocating with its associated
// allocator, after disconnecting its cancellation slot. The handler itself is adapted,
// never a wrapper around it: a wrapper would lose its associated executor, allocator
// and slot. `WithValue`: the handler takes (error_code, convert(value)), else
// (error_code) alone.
//
// An acquire passes its cancel link and an undo: a cancellation emitted after the
// acquisition but before its handler runs (an `||` whose other branch completed first
// would drop the result) gives the lock back and completes with operation_aborted.
template <class T, bool WithValue, class Handler, class Convert = same_value>
class adapted_handler {
 public:
  using executor_type = boost::asio::associated_executor_t<Handler, strand_type>;

  adapted_handler(Handler handler, const strand_type& fallback, Convert convert,
                  std::shared_ptr<cancel_link> link = nullptr, undo_acquire undo = nullptr)
      : handler_(std::move(handler)),
        work_(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler_, fallback))),
        convert_(std::move(convert)),
        link_(std::move(link)),
        undo_(std::move(undo)) {}

  void operator()(status s, T value) {
    auto executor = work_.get_executor();
    auto allocator = boost::asio::get_associated_allocator(handler_);
    // Counted until dispatch() returned: the handler may run (and its own work end) on
    // another thread at once, and that executor's io_context, out of work, could return
    // from run() and be destroyed while this thread is still inside its post.
    auto posting = boost::asio::make_work_guard(executor);
    auto run = [self = std::move(*this), code = s.code, value = std::move(value)]() mutable {
      self.deliver(code, std::move(value));
    };
    boost::asio::dispatch(executor, boost::asio::bind_allocator(allocator, std::move(run)));
  }

 private:
  // On the handler's executor.
  void deliver(std::error_code code, T value) {
    if constexpr (std::is_integral_v<T>) {
      if (undo_ && link_ && link_->requested.load() && !code && value != T{}) {
        auto undo = std::exchange(undo_, nullptr);
        return undo([self = std::move(*this)]() mutable { self(status{operation_aborted(), {}}, T{}); });
      }
    }
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    auto work = std::move(work_);
    if constexpr (WithValue) {
      std::move(handler_)(to_boost(code), convert_(std::move(value)));
    } else {
      (void)value;
      std::move(handler_)(to_boost(code));
    }
  }

  Handler handler_;
  boost::asio::executor_work_guard<executor_type> work_;
  Convert convert_;
  std::shared_ptr<cancel_link> link_;
  undo_acquire undo_;
};

template <class T, bool WithValue, class Handler, class Convert = same_value>
completion<T> adapt(Handler handler, const strand_type& fallback, Convert convert = {},
                    std::shared_ptr<cancel_link> link = nullptr, undo_acquire undo = nullptr) {
  return adapted_handler<T, WithValue, Handler, Convert>(std::move(handler), fallback, std::move(convert),
                                                         std::move(link), std::move(undo));
}

struct acquire_request {
  std::optional<std::chrono::milliseconds> wait;   // nullopt: forever; 0: try once
  std::optional<std::chrono::milliseconds> lease;  // nullopt: watchdog
};
enum class query_kind : std::uint8_t { is_locked, is_held, hold_count, remain_ttl, fence_token };

// Completes with 0 when not acquired; else with the fencing token (a fenced lock) or 1.
// `cancel`: cancels it (nullptr: not cancellable); a cancelled acquire completes with
// boost::asio::error::operation_aborted once its waiter, subscription and any hold the
// attempt in flight took are gone.
void start_acquire(const std::shared_ptr<lock_state>& lock, std::string owner, acquire_request request,
                   completion<std::int64_t> done, std::shared_ptr<cancel_link> cancel = nullptr);
// The same, for callers that only want to know whether the lock was acquired.
completion<std::int64_t> acquired_flag(completion<bool> done);
void start_unlock(const std::shared_ptr<lock_state>& lock, std::string owner, completion<bool> done);
void start_force_unlock(const std::shared_ptr<lock_state>& lock, completion<bool> done);
void start_query(const std::shared_ptr<lock_state>& lock, query_kind kind, std::string owner,
                 completion<std::int64_t> done);
void start_connect(const std::shared_ptr<client_impl>& impl, completion<bool> done);
void start_command(const std::shared_ptr<client_impl>& impl, std::vector<std::string> args,
                   completion<resp::value> done);
const strand_type& strand_of(const client_impl& impl) noexcept;
// The client's pub/sub, for the semaphores and latches (semaphore.cpp,
// count_down_latch.cpp); on the client's strand only. `confirmed`: the channel was
// already subscribed (no on_subscribed will follow).
std::uint64_t subscribe_channel(client_impl& impl, const std::string& channel, subscription_listener& listener,
                                bool& confirmed);
void unsubscribe_channel(client_impl& impl, const std::string& channel, std::uint64_t id);
// The semaphores' and latches' waits, which client::abandon_waits() ends with
// errc::shut_down as it ends the locks' (each once its attempt in flight answered, a
// permit that attempt took given back); registered on the strand only.
struct abandonable {
  virtual void abandon() = 0;

 protected:
  ~abandonable() = default;
};
void add_waiting(client_impl& impl, const std::shared_ptr<abandonable>& wait);
void remove_waiting(client_impl& impl, const abandonable* wait) noexcept;
// "SPUBLISH" on a cluster with sharded pub/sub, else "PUBLISH": the publish command
// Redisson passes to its semaphore and latch scripts.
const char* publish_command(const client_impl& impl) noexcept;
// EVALSHA `sha1` (EVAL `text` when the config says so, or after NOSCRIPT) with `keys`
// and `argv`, routed by keys[0]; completes on the strand.
void start_eval(const std::shared_ptr<client_impl>& impl, std::string_view text, std::string_view sha1,
                std::vector<std::string> keys, std::vector<std::string> argv, completion<resp::value> done);
// Throws lock_error(errc::shut_down) when the client was destroyed.
void ensure_usable(const client_impl& impl);
const strand_type& strand_of(const lock_state& lock) noexcept;
// The lock's client's watchdog timeout, and its unlock-error hook.
std::chrono::milliseconds watchdog_timeout_of(const lock_state& lock) noexcept;
void report_unlock_error(const lock_state& lock, const std::string& message) noexcept;
// Throws lock_error(errc::shut_down) when the lock's client has been destroyed: its
// I/O context no longer runs, so an operation started now could never complete.
void ensure_usable(const lock_state& lock);

}  // namespace detail

class client {
 public:
  // Runs the client on an I/O thread of its own. Both constructors throw
  // lock_error(errc::invalid_argument) for a config they cannot work with (a negative
  // sync_replicas, or sync on with a sync_timeout that is not positive).
  explicit client(client_config config);
  // Runs the client on `io`, which the caller runs (any number of threads: the client
  // serialises itself on a strand). The destructor then does not block: it closes in
  // the background while `io` keeps running.
  client(boost::asio::io_context& io, client_config config);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Waits for the first connection (TCP + handshake). Throws lock_error with a one-line
  // reason: refused, timed out, wrong password, bad database, ...
  void connect();
  // Completion: void(boost::system::error_code).
  template <class Token>
  auto async_connect(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [impl = impl_](auto handler) {
          detail::start_connect(impl, detail::adapt<bool, false>(std::move(handler), detail::strand_of(*impl)));
        },
        token);
  }

  // QUITs both connections and stops every watchdog (locks still held then expire
  // after their lease, as with Redisson). Pending operations fail with errc::shut_down.
  // Blocks until done when the client owns its I/O thread.
  void close() noexcept;

  // Ends every lock()/try_lock() still waiting, and every semaphore acquire and latch
  // await, with errc::shut_down, and leaves the connections open: no attempt goes out
  // after this. Each completes once it left
  // nothing behind: an attempt in flight answered (a hold it took given back, a fair
  // waiter it queued gone from the queue), its subscription dropped. For a caller
  // interrupted while waiting, which must not take the lock on its way out. Does not
  // block; runs on the strand. (One operation: its handler's cancellation slot.)
  void abandon_waits() noexcept;

  // A handle on lock `name`: an owner of its own (or the calling thread's, with
  // owner_model::per_thread).
  rlock get_lock(std::string name);
  // A handle on lock `name` owned by `owner`, whatever thread calls.
  rlock get_lock(std::string name, std::string owner);
  // Redisson's RFairLock on `name`: waiters acquire in the order they first asked,
  // across processes. Same API as rlock.
  fair_lock get_fair_lock(std::string name);
  fair_lock get_fair_lock(std::string name, std::string owner);
  // Redisson's RFencedLock on `name`: every acquisition (re-entries too) takes a new,
  // larger token from `redisson_lock_token:{name}`.
  fenced_lock get_fenced_lock(std::string name);
  fenced_lock get_fenced_lock(std::string name, std::string owner);
  // Redisson's RReadWriteLock on `name`: read_lock() and write_lock() share one hash.
  read_write_lock get_read_write_lock(std::string name);
  read_write_lock get_read_write_lock(std::string name, std::string owner);
  // Redisson's RSemaphore on `name` (lockscope/lock/semaphore.hpp).
  semaphore get_semaphore(std::string name);
  // Redisson's RCountDownLatch on `name` (lockscope/lock/count_down_latch.hpp).
  count_down_latch get_count_down_latch(std::string name);
  // Redisson's RPermitExpirableSemaphore on `name` (lockscope/lock/permit_expirable_semaphore.hpp).
  permit_expirable_semaphore get_permit_expirable_semaphore(std::string name);

  // This client's UUID: the node id part of its owner ids.
  const std::string& id() const noexcept;
  // `<id>:<calling thread's id>`.
  std::string thread_owner() const;
  // The calling thread's small id (1, 2, ... in order of first use).
  static std::uint64_t current_thread_id() noexcept;

  const client_config& config() const noexcept;
  const strand_type& get_executor() const noexcept { return detail::strand_of(*impl_); }

  // Any Redis command, for tools and tests. The blocking form throws lock_error with
  // Redis's own text when Redis replies with an error.
  resp::value command(std::vector<std::string> args);
  // Completion: void(boost::system::error_code, resp::value).
  template <class Token>
  auto async_command(std::vector<std::string> args, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, resp::value)>(
        [impl = impl_](auto handler, std::vector<std::string> a) {
          detail::start_command(impl, std::move(a),
                                detail::adapt<resp::value, true>(std::move(handler), detail::strand_of(*impl)));
        },
        token, std::move(args));
  }

 private:
  // Shared with the rlock handles, so that a handle used after the client is gone
  // fails cleanly (errc::shut_down) instead of touching a destroyed io_context.
  std::shared_ptr<boost::asio::io_context> own_io_;  // declared first: destroyed last
  std::shared_ptr<detail::client_impl> impl_;
  struct io_thread;
  std::unique_ptr<io_thread> thread_;
};

// Redisson's RLock. A cheap handle: copies share the same lock state. Meets the
// standard Lockable requirements (lock, try_lock, unlock), so std::scoped_lock and
// std::unique_lock work. Used after its client was destroyed, every call fails with
// errc::shut_down (unlock() reports it to the hook).
class rlock {
 public:
  using duration = std::chrono::milliseconds;

  const std::string& name() const noexcept;
  // `redisson_lock__channel:{name}`
  const std::string& channel() const noexcept;
  // The owner id of this call: the handle's (or, with owner_model::per_thread, the
  // calling thread's).
  std::string owner() const;

  // Blocking API; throws lock_error on failure. With replica sync on
  // (client_config::sync_replicas), an acquisition whose write reached too few replicas
  // is released and throws errc::replica_sync_failed; try_lock too (it does not return
  // false: false means another owner holds the lock). unlock_or_throw and force_unlock
  // throw it after a release that reached too few replicas (released on the master all
  // the same); unlock() passes it to on_unlock_error.
  void lock();                                  // wait forever; watchdog keeps the lock
  void lock(duration lease);                    // wait forever; expires after lease
  bool try_lock();                              // one attempt; watchdog
  bool try_lock(duration wait);                 // wait up to `wait`; watchdog
  bool try_lock(duration wait, duration lease); // wait up to `wait`; expires after lease
  // Releases one hold. Never throws (it runs in destructors): a failure, such as an
  // unlock by a non-owner, goes to client_config::on_unlock_error.
  void unlock() noexcept;
  // Releases one hold; throws lock_error, with Redisson's text for a non-owner:
  // "attempt to unlock lock, not locked by current thread by node id: <uuid> thread-id: <tid>".
  void unlock_or_throw();
  // Deletes the lock whoever holds it; true if there was one.
  bool force_unlock();
  bool is_locked();
  bool is_held_by_current_thread();
  std::int64_t hold_count();
  // PTTL: remaining milliseconds, -1 without expiry, -2 when not locked.
  duration remain_time_to_live();

  // Asynchronous API. Completion signatures:
  //   async_lock, async_unlock:                 void(boost::system::error_code)
  //   async_try_lock, async_force_unlock,
  //   async_is_locked, async_is_held_by_current_thread: void(boost::system::error_code, bool)
  //   async_hold_count:                         void(boost::system::error_code, std::int64_t)
  //   async_remain_time_to_live:                void(boost::system::error_code, duration)
  // An unlock by a non-owner completes with errc::not_owner; the full Redisson text
  // is not_owner_message(owner()).
  template <class Token>
  auto async_lock(Token&& token) {
    return initiate_acquire_void({std::nullopt, std::nullopt}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock(duration lease, Token&& token) {
    return initiate_acquire_void({std::nullopt, lease}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(Token&& token) {
    return initiate_acquire({duration(0), std::nullopt}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(duration wait, Token&& token) {
    return initiate_acquire({wait, std::nullopt}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock(duration wait, duration lease, Token&& token) {
    return initiate_acquire({wait, lease}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_unlock(Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [state = state_](auto handler, std::string owner) {
          detail::start_unlock(state, std::move(owner),
                               detail::adapt<bool, false>(std::move(handler), detail::strand_of(*state)));
        },
        token, owner());
  }
  template <class Token>
  auto async_force_unlock(Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code, bool)>(
        [state = state_](auto handler) {
          detail::start_force_unlock(state, detail::adapt<bool, true>(std::move(handler), detail::strand_of(*state)));
        },
        token);
  }
  template <class Token>
  auto async_is_locked(Token&& token) {
    return initiate_query<bool>(detail::query_kind::is_locked, std::forward<Token>(token));
  }
  template <class Token>
  auto async_is_held_by_current_thread(Token&& token) {
    return initiate_query<bool>(detail::query_kind::is_held, std::forward<Token>(token));
  }
  template <class Token>
  auto async_hold_count(Token&& token) {
    return initiate_query<std::int64_t>(detail::query_kind::hold_count, std::forward<Token>(token));
  }
  template <class Token>
  auto async_remain_time_to_live(Token&& token) {
    return initiate_query<duration>(detail::query_kind::remain_ttl, std::forward<Token>(token));
  }

 protected:
  explicit rlock(std::shared_ptr<detail::lock_state> state) : state_(std::move(state)) {}

  // Every acquire: the completion is void(error_code, bool) (WithValue, Flag: acquired),
  // void(error_code) (lock(): it completes when acquired) or void(error_code, int64_t)
  // (the fencing token, 0 when not acquired).
  template <class Signature, bool WithValue, bool Flag, class Token>
  auto initiate_acquire_as(detail::acquire_request request, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, Signature>(
        [state = state_](auto handler, std::string owner, detail::acquire_request r) {
          const strand_type& strand = detail::strand_of(*state);
          auto cancel = detail::link_cancellation(handler, strand);
          auto flag = [](std::int64_t v) {
            if constexpr (Flag) {
              return v != 0;
            } else {
              return v;
            }
          };
          detail::undo_acquire undo = [state, owner](detail::unique_function<void()> then) mutable {
            detail::start_unlock(state, owner, [t = std::move(then)](detail::status, bool) mutable { t(); });
          };
          auto done = detail::adapt<std::int64_t, WithValue>(std::move(handler), strand, flag, cancel, std::move(undo));
          detail::start_acquire(state, std::move(owner), r, std::move(done), std::move(cancel));
        },
        token, owner(), request);
  }
  template <class Token>
  auto initiate_acquire(detail::acquire_request request, Token&& token) {
    return initiate_acquire_as<void(boost::system::error_code, bool), true, true>(request, std::forward<Token>(token));
  }
  template <class Token>
  auto initiate_acquire_void(detail::acquire_request request, Token&& token) {
    return initiate_acquire_as<void(boost::system::error_code), false, true>(request, std::forward<Token>(token));
  }
  // Completion: void(boost::system::error_code, std::int64_t): 0 when not acquired.
  template <class Token>
  auto initiate_acquire_token(detail::acquire_request request, Token&& token) {
    return initiate_acquire_as<void(boost::system::error_code, std::int64_t), true, false>(
        request, std::forward<Token>(token));
  }
  std::int64_t acquire_token(detail::acquire_request request);

  template <class T, class Token>
  auto initiate_query(detail::query_kind kind, Token&& token) {
    detail::ensure_usable(*state_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code, T)>(
        [state = state_, kind](auto handler, std::string owner) {
          detail::start_query(state, kind, std::move(owner),
                              detail::adapt<std::int64_t, true>(std::move(handler), detail::strand_of(*state),
                                                                [](std::int64_t v) { return convert<T>(v); }));
        },
        token, owner());
  }
  template <class T>
  static T convert(std::int64_t v) {
    if constexpr (std::is_same_v<T, duration>) {
      return duration(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else {
      return v;
    }
  }

  friend class client;
  friend class multi_lock;
  std::shared_ptr<detail::lock_state> state_;
};

// Redisson's RFairLock: an rlock whose waiters queue in `redisson_lock_queue:{name}`
// (with their give-up times in `redisson_lock_timeout:{name}`) and are woken one at a
// time, the queue's head on `redisson_lock__channel:{name}:<owner>`. A waiter that
// vanishes keeps its place for client_config::fair_lock_thread_wait (5 minutes by
// default) before the next acquire attempt purges it; one that gives up (try_lock's
// wait ran out) leaves the queue at once.
class fair_lock : public rlock {
 private:
  friend class client;
  explicit fair_lock(std::shared_ptr<detail::lock_state> state) : rlock(std::move(state)) {}
};

// Redisson's RFencedLock: an rlock whose every acquisition (re-entries included) also
// INCRs `redisson_lock_token:{name}` and hands that fencing token back. A token only
// grows, across holders, client restarts and expiries, so storage that remembers the
// largest token it has seen can refuse a write from a holder whose lock expired in the
// meantime (see the README). The rlock calls (lock, try_lock, ...) work too; they
// take a token and drop it.
class fenced_lock : public rlock {
 public:
  // `redisson_lock_token:{name}`
  const std::string& token_name() const noexcept;

  // Blocking API; throws lock_error on failure.
  std::int64_t lock_and_get_token();                // wait forever; watchdog
  std::int64_t lock_and_get_token(duration lease);  // wait forever; expires after lease
  // nullopt when not acquired within the wait (0: one attempt).
  std::optional<std::int64_t> try_lock_and_get_token();
  std::optional<std::int64_t> try_lock_and_get_token(duration wait);
  std::optional<std::int64_t> try_lock_and_get_token(duration wait, duration lease);
  // The last token issued (GET redisson_lock_token:{name}); 0 when none ever was.
  std::int64_t get_token();

  // Completion signatures:
  //   async_lock_and_get_token:     void(boost::system::error_code, std::int64_t token)
  //   async_try_lock_and_get_token: void(boost::system::error_code, std::int64_t token),
  //                                 token 0 when not acquired in time
  //   async_get_token:              void(boost::system::error_code, std::int64_t)
  template <class Token>
  auto async_lock_and_get_token(Token&& token) {
    return initiate_acquire_token({std::nullopt, std::nullopt}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock_and_get_token(duration lease, Token&& token) {
    return initiate_acquire_token({std::nullopt, lease}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock_and_get_token(duration wait, Token&& token) {
    return initiate_acquire_token({wait, std::nullopt}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_try_lock_and_get_token(duration wait, duration lease, Token&& token) {
    return initiate_acquire_token({wait, lease}, std::forward<Token>(token));
  }
  template <class Token>
  auto async_get_token(Token&& token) {
    return initiate_query<std::int64_t>(detail::query_kind::fence_token, std::forward<Token>(token));
  }

 private:
  friend class client;
  explicit fenced_lock(std::shared_ptr<detail::lock_state> state) : rlock(std::move(state)) {}
};

// The two sides of Redisson's RReadWriteLock: rlocks on one hash `name` whose `mode` is
// `read` or `write`, waking waiters on `redisson_rwlock:{name}`. Readers share; a
// writer excludes readers and other writers and waits for the readers to leave. Both
// are reentrant; a writer may also take the read lock (then release the write lock:
// a downgrade), never the reverse (a reader asking for the write lock waits for
// itself). The watchdog renews a read hold's own timeout key
// `{name}:<owner>:rwlock_timeout:<n>` with the hash. is_locked() tells whether the
// lock is held in this side's mode.
class reader_lock : public rlock {
 private:
  friend class client;
  friend class read_write_lock;
  explicit reader_lock(std::shared_ptr<detail::lock_state> state) : rlock(std::move(state)) {}
};
class writer_lock : public rlock {
 private:
  friend class client;
  friend class read_write_lock;
  explicit writer_lock(std::shared_ptr<detail::lock_state> state) : rlock(std::move(state)) {}
};

class read_write_lock {
 public:
  const std::string& name() const noexcept { return read_.name(); }
  // Copies share state: take them once, or again, as convenient.
  reader_lock read_lock() const { return read_; }
  writer_lock write_lock() const { return write_; }

 private:
  friend class client;
  read_write_lock(reader_lock r, writer_lock w) : read_(std::move(r)), write_(std::move(w)) {}
  reader_lock read_;
  writer_lock write_;
};

}  // namespace lockscope::lock
