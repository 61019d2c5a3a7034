#include "lockscope/lock/semaphore.hpp"

#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "lockscope/lock/scripts.hpp"
#include "primitive_wait.hpp"

namespace lockscope::lock {

std::string semaphore_channel_name(std::string_view name) {
  // RedissonObject.prefixName("redisson_sc", name).
  if (name.find('{') != std::string_view::npos) return "redisson_sc:" + std::string(name);
  return "redisson_sc:{" + std::string(name) + "}";
}

namespace detail {
namespace {

void eval(const semaphore_state& s, primitive_script kind, std::vector<std::string> keys,
          std::vector<std::string> argv, completion<std::int64_t> done) {
  const primitive_script_info& info = script(kind);
  start_eval(s.impl, info.text, info.sha1, std::move(keys), std::move(argv), integer_reply(std::move(done)));
}

template <class T>
void fail_on_strand(const semaphore_state& s, completion<T>& done, std::string why) {
  boost::asio::post(strand_of(s), [d = std::move(done), why = std::move(why)]() mutable {
    d({errc::invalid_argument, std::move(why)}, T{});
  });
}

}  // namespace

void ensure_usable(const semaphore_state& s) { ensure_usable(*s.impl); }
const strand_type& strand_of(const semaphore_state& s) noexcept { return strand_of(*s.impl); }

void start_semaphore_acquire(const std::shared_ptr<semaphore_state>& s, std::int64_t permits,
                             std::optional<std::chrono::milliseconds> wait, completion<std::int64_t> done,
                             std::shared_ptr<cancel_link> cancel) {
  if (permits < 1) return fail_on_strand(*s, done, "permits must be at least 1, got " + std::to_string(permits));
  if (wait && wait->count() < 0) return fail_on_strand(*s, done, "the wait must not be negative");
  primitive_wait::spec spec;
  spec.impl = s->impl;
  spec.channel = s->channel;
  spec.wait = wait;
  const std::string count = std::to_string(permits);
  spec.attempt = [s, count](completion<std::int64_t> d) {
    eval(*s, primitive_script::semaphore_try_acquire, {s->name}, {count}, std::move(d));
  };
  spec.undo = [s, count](std::int64_t, unique_function<void()> then) {
    eval(*s, primitive_script::semaphore_release, {s->name, s->channel}, {count, publish_command(*s->impl)},
         [t = std::move(then)](status, std::int64_t) mutable { t(); });
  };
  primitive_wait::start(std::move(spec), std::move(done), std::move(cancel));
}

void start_semaphore_call(const std::shared_ptr<semaphore_state>& s, semaphore_call call, std::int64_t permits,
                          completion<std::int64_t> done) {
  const std::string count = std::to_string(permits);
  switch (call) {
    case semaphore_call::release:
      if (permits < 1) return fail_on_strand(*s, done, "permits must be at least 1, got " + count);
      return eval(*s, primitive_script::semaphore_release, {s->name, s->channel}, {count, publish_command(*s->impl)},
                  std::move(done));
    case semaphore_call::try_set_permits:
      if (permits < 0) return fail_on_strand(*s, done, "permits must not be negative, got " + count);
      return eval(*s, primitive_script::semaphore_try_set_permits, {s->name, s->channel},
                  {count, publish_command(*s->impl)}, std::move(done));
    case semaphore_call::add_permits:
      return eval(*s, primitive_script::semaphore_add_permits, {s->name, s->channel},
                  {count, publish_command(*s->impl)}, std::move(done));
    case semaphore_call::drain_permits:
      return eval(*s, primitive_script::semaphore_drain_permits, {s->name}, {}, std::move(done));
    case semaphore_call::available_permits:
      return start_command(s->impl, {"GET", s->name}, integer_reply(std::move(done)));
  }
}

}  // namespace detail

semaphore client::get_semaphore(std::string name) {
  auto state = std::make_shared<detail::semaphore_state>();
  state->io_keepalive = own_io_;
  state->impl = impl_;
  state->channel = semaphore_channel_name(name);
  state->name = std::move(name);
  return semaphore(std::move(state));
}

namespace {
template <class Start>
std::int64_t run(detail::semaphore_state& s, Start&& start) {
  return detail::block_on(*s.impl, std::forward<Start>(start));
}
}  // namespace

bool semaphore::try_set_permits(std::int64_t permits) {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_semaphore_call(state_, detail::semaphore_call::try_set_permits, permits, std::move(d));
         }) != 0;
}
void semaphore::add_permits(std::int64_t permits) {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_semaphore_call(state_, detail::semaphore_call::add_permits, permits, std::move(d));
  });
}
std::int64_t semaphore::available_permits() {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_semaphore_call(state_, detail::semaphore_call::available_permits, 0, std::move(d));
  });
}
std::int64_t semaphore::drain_permits() {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_semaphore_call(state_, detail::semaphore_call::drain_permits, 0, std::move(d));
  });
}
void semaphore::acquire(std::int64_t permits) {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_semaphore_acquire(state_, permits, std::nullopt, std::move(d), nullptr);
  });
}
bool semaphore::try_acquire(std::int64_t permits) { return try_acquire(permits, duration(0)); }
bool semaphore::try_acquire(std::int64_t permits, duration wait) {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_semaphore_acquire(state_, permits, wait, std::move(d), nullptr);
         }) != 0;
}
void semaphore::release(std::int64_t permits) {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_semaphore_call(state_, detail::semaphore_call::release, permits, std::move(d));
  });
}

}  // namespace lockscope::lock
