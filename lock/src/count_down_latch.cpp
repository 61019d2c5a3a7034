#include "lockscope/lock/count_down_latch.hpp"

#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "lockscope/lock/scripts.hpp"
#include "primitive_wait.hpp"

namespace lockscope::lock {

std::string latch_channel_name(std::string_view name) {
  // RedissonCountDownLatch.getChannelName: braces whatever the name holds.
  return "redisson_countdownlatch__channel__{" + std::string(name) + "}";
}

namespace detail {
namespace {

// CountDownLatchPubSub.ZERO_COUNT_MESSAGE and NEW_COUNT_MESSAGE.
constexpr std::string_view zero_count_message = "0";
constexpr std::string_view new_count_message = "1";

void eval(const latch_state& l, primitive_script kind, std::vector<std::string> argv, completion<std::int64_t> done) {
  const primitive_script_info& info = script(kind);
  start_eval(l.impl, info.text, info.sha1, {l.name, l.channel}, std::move(argv), integer_reply(std::move(done)));
}

}  // namespace

void ensure_usable(const latch_state& l) { ensure_usable(*l.impl); }
const strand_type& strand_of(const latch_state& l) noexcept { return strand_of(*l.impl); }

void start_latch_await(const std::shared_ptr<latch_state>& l, std::optional<std::chrono::milliseconds> wait,
                       completion<std::int64_t> done, std::shared_ptr<cancel_link> cancel) {
  if (wait && wait->count() < 0) {
    return boost::asio::post(strand_of(*l), [d = std::move(done)]() mutable {
      d({errc::invalid_argument, "the wait must not be negative"}, 0);
    });
  }
  primitive_wait::spec spec;
  spec.impl = l->impl;
  spec.channel = l->channel;
  spec.wait = wait;
  // Every message (zero reached, or a new count) leads to a look at the count: a
  // waiter subscribed after a "0" was published still sees the latch gone.
  spec.attempt = [l](completion<std::int64_t> d) {
    start_command(l->impl, {"GET", l->name},
                  integer_reply([d = std::move(d)](status s, std::int64_t count) mutable {
                    d(std::move(s), !s && count <= 0 ? 1 : 0);
                  }));
  };
  primitive_wait::start(std::move(spec), std::move(done), std::move(cancel));
}

void start_latch_call(const std::shared_ptr<latch_state>& l, latch_call call, std::int64_t count,
                      completion<std::int64_t> done) {
  switch (call) {
    case latch_call::try_set_count:
      if (count < 1) {
        return boost::asio::post(strand_of(*l), [d = std::move(done), count]() mutable {
          d({errc::invalid_argument, "the count must be at least 1, got " + std::to_string(count)}, 0);
        });
      }
      return eval(*l, primitive_script::latch_try_set_count,
                  {std::string(new_count_message), std::to_string(count), publish_command(*l->impl)}, std::move(done));
    case latch_call::count_down:
      return eval(*l, primitive_script::latch_count_down, {std::string(zero_count_message), publish_command(*l->impl)},
                  std::move(done));
    case latch_call::get_count:
      return start_command(l->impl, {"GET", l->name}, integer_reply(std::move(done)));
    case latch_call::remove:
      return eval(*l, primitive_script::latch_delete, {std::string(new_count_message), publish_command(*l->impl)},
                  std::move(done));
  }
}

}  // namespace detail

count_down_latch client::get_count_down_latch(std::string name) {
  auto state = std::make_shared<detail::latch_state>();
  state->io_keepalive = own_io_;
  state->impl = impl_;
  state->channel = latch_channel_name(name);
  state->name = std::move(name);
  return count_down_latch(std::move(state));
}

namespace {
template <class Start>
std::int64_t run(detail::latch_state& l, Start&& start) {
  return detail::block_on(*l.impl, std::forward<Start>(start));
}
}  // namespace

bool count_down_latch::try_set_count(std::int64_t count) {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_latch_call(state_, detail::latch_call::try_set_count, count, std::move(d));
         }) != 0;
}
void count_down_latch::count_down() {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_latch_call(state_, detail::latch_call::count_down, 0, std::move(d));
  });
}
std::int64_t count_down_latch::get_count() {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_latch_call(state_, detail::latch_call::get_count, 0, std::move(d));
  });
}
bool count_down_latch::remove() {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_latch_call(state_, detail::latch_call::remove, 0, std::move(d));
         }) != 0;
}
void count_down_latch::await() {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_latch_await(state_, std::nullopt, std::move(d), nullptr);
  });
}
bool count_down_latch::await(duration wait) {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_latch_await(state_, wait, std::move(d), nullptr);
         }) != 0;
}

}  // namespace lockscope::lock
