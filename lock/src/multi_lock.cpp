#include "lockscope/lock/multi_lock.hpp"

#include <atomic>
#include <functional>
#include <future>
#include <random>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "lockscope/lock/lock_fsm.hpp"

namespace lockscope::lock {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace detail {

struct multi_state {
  std::vector<std::shared_ptr<lock_state>> locks;
  std::size_t required = 0;
  bool majority = false;
  // The first lock's client strand: every step of an operation runs there.
  strand_type strand;
  std::atomic<std::int64_t> validity_ms{0};
  multi_state(std::vector<std::shared_ptr<lock_state>> l, bool red)
      : locks(std::move(l)),
        required(red ? locks.size() / 2 + 1 : locks.size()),
        majority(red),
        strand(strand_of(*locks.front())) {}
};

const strand_type& strand_of(const multi_state& state) noexcept { return state.strand; }

namespace {

// A server that cannot answer: a RedLock lives without it.
bool unreachable(const std::error_code& ec) {
  return ec == errc::not_connected || ec == errc::timeout || ec == errc::connection_lost ||
         ec.category() == std::system_category() || ec.category() == boost::system::system_category();
}

// Releases `indexes` (fire and forget: each client's pipeline keeps its commands in
// order, so a retry's acquire on the same server comes after the release).
void release(const multi_state& state, const std::vector<std::string>& owners, const std::vector<std::size_t>& indexes) {
  for (std::size_t i : indexes) start_unlock(state.locks[i], owners[i], [](status, bool) {});
}

// Releases `indexes`, then calls `then` on the strand once every one of them has been
// answered (or has failed: the lease ends it anyway). A failed acquisition completes
// only then, as Redisson's unlockInner() joins its unlocks before tryLock returns
// false: a caller that goes on must not find its own leftovers on the servers.
void release_then(const std::shared_ptr<multi_state>& state, const std::vector<std::string>& owners,
                  const std::vector<std::size_t>& indexes, std::function<void()> then) {
  if (indexes.empty()) return then();
  struct gather {
    std::size_t pending;
    std::function<void()> then;
  };
  auto g = std::make_shared<gather>(gather{indexes.size(), std::move(then)});
  for (std::size_t i : indexes) {
    start_unlock(state->locks[i], owners[i], [state, g](status, bool) {
      asio::post(state->strand, [g] {
        if (--g->pending == 0) std::exchange(g->then, nullptr)();
      });
    });
  }
}

// Seeded once per thread: a random_device per operation costs more than a round trip.
double random01() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(random);
}

bool fatal(const status& s) { return s.code == errc::shut_down || s.code == errc::invalid_argument; }

// A MultiLock: Redisson's order, one lock after the other.
class multi_acquire_op final : public cancellable, public std::enable_shared_from_this<multi_acquire_op> {
 public:
  multi_acquire_op(std::shared_ptr<multi_state> state, std::vector<std::string> owners, multi_request request,
                   completion<bool> done)
      : state_(std::move(state)), owners_(std::move(owners)), request_(request), done_(std::move(done)) {}

  void start(const std::shared_ptr<cancel_link>& link) {
    if (link) {
      link->target = shared_from_this();
      if (link->requested) return finish({operation_aborted(), {}}, false);
    }
    start_round();
  }

  // Cancels the attempt in flight (it undoes what it did), then releases what the
  // earlier ones took and completes with operation_aborted.
  void cancel() override {
    if (cancelled_ || !done_) return;
    cancelled_ = true;
    if (attempt_) request_cancel(attempt_, strand_of(*state_->locks[attempt_index_]));
  }

  void start_round() {
    std::optional<milliseconds> wait = request_.wait;
    // lock(): Redisson's rounds of tryLock with a randomised wait.
    if (forever()) wait = multi_lock_round_wait(state_->locks.size(), request_.lease, random01());
    fsm_.emplace(state_->locks.size(), request_.once ? std::nullopt : wait, fsm_clock::now());
    act(fsm_->start());
  }

 private:
  bool forever() const noexcept { return !request_.once && !request_.wait; }

  void act(multi_action action) {
    if (cancelled_) {
      return release_then(state_, owners_, fsm_->acquired(),
                          [self = shared_from_this()] { self->finish({operation_aborted(), {}}, false); });
    }
    switch (action.kind) {
      case multi_action_kind::attempt: {
        const std::size_t i = action.index;
        acquire_request r{action.wait, request_.lease};
        attempt_ = std::make_shared<cancel_link>();
        attempt_index_ = i;
        start_acquire(
            state_->locks[i], owners_[i], r,
            [self = shared_from_this(), i](status s, std::int64_t v) {
              asio::post(self->state_->strand, [self, i, s = std::move(s), v]() mutable { self->on_result(i, s, v); });
            },
            attempt_);
        return;
      }
      case multi_action_kind::release_and_retry:
        release(*state_, owners_, fsm_->acquired());
        return act(fsm_->restart());
      case multi_action_kind::release_and_fail:
        if (forever()) {
          release(*state_, owners_, fsm_->acquired());
          return start_round();
        }
        return release_then(state_, owners_, fsm_->acquired(),
                            [self = shared_from_this()] { self->finish({}, false); });
      case multi_action_kind::acquired:
        return finish({}, true);
    }
  }

  void on_result(std::size_t i, const status& s, std::int64_t acquired) {
    attempt_.reset();
    if (cancelled_) {
      // A hold the attempt took before the cancellation reached it counts as acquired:
      // act() releases it with the others.
      return act(fsm_->on_result(!s && acquired != 0, fsm_clock::now()));
    }
    if (fatal(s)) {
      return release_then(state_, owners_, fsm_->acquired(),
                          [self = shared_from_this(), s] { self->finish(s, false); });
    }
    // An error after the script was sent may hide a success: that lock is released, and
    // the operation goes on once the release is answered (Redisson's tryLock joins its
    // unlockInner on a response timeout), so that a failure leaves nothing behind.
    if (s) {
      return release_then(state_, owners_, {i}, [self = shared_from_this()] {
        self->act(self->fsm_->on_result(false, fsm_clock::now()));
      });
    }
    act(fsm_->on_result(acquired != 0, fsm_clock::now()));
  }

  void finish(status s, bool acquired) {
    if (done_) std::exchange(done_, nullptr)(std::move(s), acquired);
  }

  std::shared_ptr<multi_state> state_;
  std::vector<std::string> owners_;
  multi_request request_;
  completion<bool> done_;
  std::optional<multi_acquire_fsm> fsm_;
  std::shared_ptr<cancel_link> attempt_;  // the acquire in flight
  std::size_t attempt_index_ = 0;
  bool cancelled_ = false;
};

// A RedLock: rounds sent to every server at once (redlock_fsm).
class redlock_acquire_op final : public cancellable, public std::enable_shared_from_this<redlock_acquire_op> {
 public:
  redlock_acquire_op(std::shared_ptr<multi_state> state, std::vector<std::string> owners, multi_request request,
                     completion<bool> done)
      : state_(std::move(state)),
        owners_(std::move(owners)),
        request_(request),
        done_(std::move(done)),
        retry_timer_(state_->strand),
        fsm_(state_->locks.size(), request_.lease ? *request_.lease : watchdog_timeout_of(*state_->locks.front()),
             request_.once ? std::optional(milliseconds(0)) : request_.wait, fsm_clock::now()) {
    maybe_held_.reserve(state_->locks.size());
  }

  void start(const std::shared_ptr<cancel_link>& link) {
    if (link) {
      link->target = shared_from_this();
      if (link->requested) return finish({operation_aborted(), {}}, false);
    }
    act(fsm_.start());
  }

  // Cancels the round in flight (each attempt undoes what it did), or the wait before the
  // next; what the round took is released, then it completes with operation_aborted.
  void cancel() override {
    if (cancelled_ || !done_) return;
    cancelled_ = true;
    retry_timer_.cancel();
    for (std::size_t i = 0; i < attempts_.size(); ++i)
      if (attempts_[i]) request_cancel(attempts_[i], strand_of(*state_->locks[i]));
  }

 private:
  void act(redlock_action action) {
    if (cancelled_ && action != redlock_action::pending) {
      return release_then(state_, owners_, maybe_held_,
                          [self = shared_from_this()] { self->finish({operation_aborted(), {}}, false); });
    }
    switch (action) {
      case redlock_action::attempt_all:
        maybe_held_.clear();
        attempts_.assign(state_->locks.size(), nullptr);
        for (std::size_t i = 0; i < state_->locks.size(); ++i) {
          attempts_[i] = std::make_shared<cancel_link>();
          start_acquire(
              state_->locks[i], owners_[i], acquire_request{milliseconds(0), request_.lease},
              [self = shared_from_this(), i](status s, std::int64_t v) {
                asio::post(self->state_->strand,
                           [self, i, s = std::move(s), v]() mutable { self->on_result(i, s, v); });
              },
              attempts_[i]);
        }
        return;
      case redlock_action::pending:
        return;
      case redlock_action::acquired:
        state_->validity_ms = fsm_.validity().count();
        return finish({}, true);
      case redlock_action::release_and_retry: {
        release(*state_, owners_, maybe_held_);
        maybe_held_.clear();
        const auto delay = std::chrono::duration_cast<fsm_clock::duration>(fsm_.retry_delay() * random01());
        retry_timer_.expires_after(delay);
        retry_timer_.async_wait(
            [self = shared_from_this()](boost::system::error_code) { self->act(self->fsm_.next_round(fsm_clock::now())); });
        return;
      }
      case redlock_action::release_and_fail:
        return release_then(state_, owners_, maybe_held_, [self = shared_from_this()] { self->finish({}, false); });
      case redlock_action::failed:
        return finish({}, false);
    }
  }

  void on_result(std::size_t i, const status& s, std::int64_t acquired) {
    attempts_[i].reset();
    if (fatal(s) && !fatal_) fatal_ = s;
    // The release goes to every server that may hold the lock: those that granted it
    // and those whose answer was lost (an error may hide a grant). One that answered
    // "busy" holds nothing of ours, and an unlock there would only be refused.
    if (s || acquired != 0) maybe_held_.push_back(i);
    const redlock_action next = fsm_.on_result(!s && acquired != 0, fsm_clock::now());
    if (fatal_ && next != redlock_action::pending && !cancelled_) {
      return release_then(state_, owners_, maybe_held_,
                          [self = shared_from_this()] { self->finish(std::move(*self->fatal_), false); });
    }
    act(next);
  }

  void finish(status s, bool acquired) {
    if (done_) std::exchange(done_, nullptr)(std::move(s), acquired);
  }

  std::shared_ptr<multi_state> state_;
  std::vector<std::string> owners_;
  multi_request request_;
  completion<bool> done_;
  std::vector<std::shared_ptr<cancel_link>> attempts_;  // this round's, in flight
  bool cancelled_ = false;
  asio::steady_timer retry_timer_;
  redlock_fsm fsm_;
  std::vector<std::size_t> maybe_held_;  // this round's
  std::optional<status> fatal_;
};

}  // namespace

void start_multi_acquire(const std::shared_ptr<multi_state>& state, std::vector<std::string> owners,
                         multi_request request, completion<bool> done, std::shared_ptr<cancel_link> cancel) {
  if ((request.lease && request.lease->count() <= 0) || (request.wait && request.wait->count() < 0)) {
    asio::post(state->strand, [d = std::move(done)]() mutable {
      d({errc::invalid_argument, "lease must be positive and wait not negative"}, false);
    });
    return;
  }
  if (state->majority) {
    auto op = std::make_shared<redlock_acquire_op>(state, std::move(owners), request, std::move(done));
    asio::post(state->strand, [op, cancel] { op->start(cancel); });
    return;
  }
  auto op = std::make_shared<multi_acquire_op>(state, std::move(owners), request, std::move(done));
  asio::post(state->strand, [op, cancel] { op->start(cancel); });
}

void start_multi_unlock(const std::shared_ptr<multi_state>& state, std::vector<std::string> owners,
                        completion<bool> done) {
  struct gather {
    std::size_t pending;
    status first_error;
    completion<bool> done;
  };
  auto g = std::make_shared<gather>(gather{state->locks.size(), {}, std::move(done)});
  for (std::size_t i = 0; i < state->locks.size(); ++i) {
    start_unlock(state->locks[i], owners[i], [state, g, i](status s, bool) {
      asio::post(state->strand, [state, g, i, s = std::move(s)]() mutable {
        // A RedLock held only a majority, and a server that is down holds at most a
        // lock that expires: neither is a failure of the release.
        const bool ignorable = state->majority && (s.code == errc::not_owner || unreachable(s.code));
        if (s && ignorable) report_unlock_error(*state->locks[i], s.message());
        if (s && !ignorable && !g->first_error) g->first_error = std::move(s);
        if (--g->pending == 0) std::exchange(g->done, nullptr)(std::move(g->first_error), true);
      });
    });
  }
}

}  // namespace detail

multi_lock::multi_lock(std::vector<rlock> locks, bool majority) {
  if (locks.empty()) throw lock_error(errc::invalid_argument, "a multi-lock needs at least one lock");
  std::vector<std::shared_ptr<detail::lock_state>> states;
  states.reserve(locks.size());
  for (rlock& l : locks) {
    detail::ensure_usable(*l.state_);
    states.push_back(l.state_);
  }
  state_ = std::make_shared<detail::multi_state>(std::move(states), majority);
  handles_ = std::move(locks);
}

std::vector<std::string> multi_lock::owners() const {
  std::vector<std::string> out;
  out.reserve(handles_.size());
  for (const rlock& l : handles_) out.push_back(l.owner());
  return out;
}

std::size_t multi_lock::size() const noexcept { return state_->locks.size(); }
std::size_t multi_lock::required() const noexcept { return state_->required; }

namespace {

template <class T>
T get_or_throw(std::future<T> f) {
  try {
    return f.get();
  } catch (const boost::system::system_error& e) {
    throw lock_error(std::error_code(e.code()), e.code().message());
  }
}

void get_or_throw(std::future<void> f) {
  try {
    f.get();
  } catch (const boost::system::system_error& e) {
    throw lock_error(std::error_code(e.code()), e.code().message());
  }
}

}  // namespace

void multi_lock::lock() { get_or_throw(async_lock(asio::use_future)); }
void multi_lock::lock(duration lease) { get_or_throw(async_lock(lease, asio::use_future)); }
bool multi_lock::try_lock() { return get_or_throw(async_try_lock(asio::use_future)); }
bool multi_lock::try_lock(duration wait) { return get_or_throw(async_try_lock(wait, asio::use_future)); }
bool multi_lock::try_lock(duration wait, duration lease) {
  return get_or_throw(async_try_lock(wait, lease, asio::use_future));
}
void multi_lock::unlock_or_throw() { get_or_throw(async_unlock(asio::use_future)); }
void multi_lock::unlock() noexcept {
  try {
    unlock_or_throw();
  } catch (const std::exception& e) {
    detail::report_unlock_error(*state_->locks.front(), e.what());
  } catch (...) {
  }
}

red_lock::duration red_lock::validity() const noexcept { return duration(state_->validity_ms.load()); }

multi_lock get_multi_lock(std::vector<rlock> locks) { return multi_lock(std::move(locks), false); }
red_lock get_red_lock(std::vector<rlock> locks) { return red_lock(std::move(locks)); }

}  // namespace lockscope::lock
