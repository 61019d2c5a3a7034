// The waiting part the semaphore and the latch share: attempt, subscribe to the
// object's channel, attempt again once the subscription is confirmed (a release sent
// before it would otherwise be missed) and on every message, until the attempt succeeds,
// the wait runs out, or the operation is cancelled. A slow poll backs the messages up
// (permits changed by a plain SET, a message lost with a connection).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/subscriptions.hpp"

namespace lockscope::lock::detail {

// The attempt: sends one command and completes with a value: > 0 the wait is over
// (the operation's result), 0 not yet, < 0 not yet, and try again in -value ms at the
// latest (a permit-expirable semaphore's nearest permit expiry, which publishes nothing).
using attempt_fn = unique_function<void(completion<std::int64_t> done)>;

class primitive_wait final : public subscription_listener,
                             public cancellable,
                             public abandonable,
                             public std::enable_shared_from_this<primitive_wait> {
 public:
  using clock = std::chrono::steady_clock;
  // Between two attempts when no message came: a backstop, not the wake-up path.
  static constexpr std::chrono::milliseconds poll_interval{1000};

  struct spec {
    std::shared_ptr<client_impl> impl;
    std::string channel;
    std::optional<std::chrono::milliseconds> wait;  // nullopt: forever; 0: one attempt
    unique_function<void(completion<std::int64_t>)> attempt;
    // Gives back what a successful attempt took (a cancelled acquire); may be null.
    unique_function<void(std::int64_t, unique_function<void()>)> undo;
  };

  static void start(spec s, completion<std::int64_t> done, std::shared_ptr<cancel_link> cancel) {
    const strand_type& strand = strand_of(*s.impl);
    auto op = std::shared_ptr<primitive_wait>(new primitive_wait(std::move(s), std::move(done), strand));
    boost::asio::post(strand, [op, cancel = std::move(cancel)] {
      if (cancel) {
        cancel->target = op;
        if (cancel->requested) return op->finish({operation_aborted(), {}}, 0);
      }
      op->self_ = op;
      add_waiting(*op->spec_.impl, op);
      if (op->spec_.wait) op->deadline_ = clock::now() + *op->spec_.wait;
      op->attempt();
    });
  }

  void on_subscribed() override { attempt(); }
  void on_message(std::string_view) override { attempt(); }
  void cancel() override { stop(operation_aborted()); }
  // client::abandon_waits(): as a cancellation, but ends with errc::shut_down.
  void abandon() override { stop(make_error_code(errc::shut_down)); }

 private:
  primitive_wait(spec s, completion<std::int64_t> done, const strand_type& strand)
      : spec_(std::move(s)), done_(std::move(done)), timer_(strand) {}

  // Ends the wait with `why` now, or once the attempt in flight answered (a permit it
  // took is given back first).
  void stop(std::error_code why) {
    if (finished_) return;
    cancelled_ = true;
    stop_code_ = why;
    if (!in_flight_) finish({stop_code_, {}}, 0);
  }

  void attempt() {
    if (finished_) return;
    if (in_flight_) {
      again_ = true;
      return;
    }
    in_flight_ = true;
    spec_.attempt([self = shared_from_this()](status s, std::int64_t value) { self->on_reply(std::move(s), value); });
  }

  void on_reply(status s, std::int64_t value) {
    in_flight_ = false;
    if (finished_) return;
    if (cancelled_) {
      if (!s && value > 0 && spec_.undo) {
        auto self = shared_from_this();
        return spec_.undo(value, [self] { self->finish({self->stop_code_, {}}, 0); });
      }
      return finish({stop_code_, {}}, 0);
    }
    if (s) return finish(std::move(s), 0);
    if (value > 0) return finish({}, value);
    if (deadline_ && clock::now() >= *deadline_) return finish({}, 0);
    if (!waiter_) {
      bool confirmed = false;
      waiter_ = subscribe_channel(*spec_.impl, spec_.channel, *this, confirmed);
      if (confirmed) again_ = true;
    }
    if (std::exchange(again_, false)) return attempt();
    arm_timer(value < 0 ? std::chrono::milliseconds(-value) : poll_interval);
  }

  void arm_timer(std::chrono::milliseconds after) {
    auto next = clock::now() + std::min(after, std::chrono::milliseconds(poll_interval));
    if (deadline_ && *deadline_ < next) next = *deadline_;
    timer_.expires_at(next);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->attempt();
    });
  }

  void finish(status s, std::int64_t value) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    remove_waiting(*spec_.impl, this);
    if (waiter_) unsubscribe_channel(*spec_.impl, spec_.channel, *std::exchange(waiter_, std::nullopt));
    auto keep = std::move(self_);
    std::exchange(done_, nullptr)(std::move(s), value);
  }

  spec spec_;
  completion<std::int64_t> done_;
  boost::asio::steady_timer timer_;
  std::optional<clock::time_point> deadline_;
  std::optional<std::uint64_t> waiter_;
  std::shared_ptr<primitive_wait> self_;  // alive while registered as a listener
  bool in_flight_ = false;
  bool again_ = false;
  bool cancelled_ = false;
  std::error_code stop_code_;
  bool finished_ = false;
};

// An integer reply (nil: 0), or an unexpected-reply error.
inline completion<resp::value> integer_reply(completion<std::int64_t> done) {
  return [d = std::move(done)](status s, resp::value reply) mutable {
    if (s) return d(std::move(s), 0);
    if (reply.is_null()) return d({}, 0);
    if (reply.type == resp::type::integer) return d({}, reply.integer);
    if (reply.is_string()) {
      try {
        return d({}, std::stoll(reply.text));
      } catch (const std::exception&) {
      }
    }
    d({errc::unexpected_reply, "unexpected reply: " + reply.text}, 0);
  };
}

// Runs an asynchronous operation and waits for it on the calling thread.
template <class Start>
std::int64_t block_on(client_impl& impl, Start&& start) {
  ensure_usable(impl);
  if (strand_of(impl).get_inner_executor().running_in_this_thread())
    throw lock_error(errc::would_deadlock,
                     "blocking lockscope call on the client's own I/O thread; use the async_ API there");
  struct waiter {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    status result;
    std::int64_t value = 0;
  };
  auto w = std::make_shared<waiter>();
  start([w](status s, std::int64_t v) {
    std::lock_guard guard(w->mutex);
    w->result = std::move(s);
    w->value = v;
    w->done = true;
    w->cv.notify_one();
  });
  std::unique_lock guard(w->mutex);
  w->cv.wait(guard, [&] { return w->done; });
  if (w->result) throw lock_error(w->result.code, w->result.message());
  return w->value;
}

}  // namespace lockscope::lock::detail
