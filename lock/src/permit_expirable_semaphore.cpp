#include "lockscope/lock/permit_expirable_semaphore.hpp"

#include <chrono>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "lockscope/lock/scripts.hpp"
#include "lockscope/lock/semaphore.hpp"
#include "primitive_wait.hpp"

namespace lockscope::lock {

namespace detail {

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// RedissonPermitExpirableSemaphore.nonExpirableTimeout: the expiry of a permit without lease.
constexpr std::string_view no_expiry = "922337203685477";

// ServiceManager.generateId: 16 random bytes.
std::string new_permit_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string bytes(16, '\0');
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    std::uint64_t r = random();
    for (std::size_t k = 0; k < 8; ++k, r >>= 8) bytes[i + k] = static_cast<char>(r & 0xff);
  }
  return bytes;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0x0f]);
  }
  return out;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

void eval(const expirable_state& s, primitive_script kind, std::vector<std::string> keys, std::vector<std::string> argv,
          completion<resp::value> done) {
  const primitive_script_info& info = script(kind);
  start_eval(s.impl, info.text, info.sha1, std::move(keys), std::move(argv), std::move(done));
}

}  // namespace

void ensure_usable(const expirable_state& s) { ensure_usable(*s.impl); }
const strand_type& strand_of(const expirable_state& s) noexcept { return strand_of(*s.impl); }

void start_expirable_acquire(const std::shared_ptr<expirable_state>& s, std::shared_ptr<acquired_permit> permit,
                             std::optional<std::chrono::milliseconds> wait,
                             std::optional<std::chrono::milliseconds> lease, completion<std::int64_t> done,
                             std::shared_ptr<cancel_link> cancel) {
  if ((wait && wait->count() < 0) || (lease && lease->count() <= 0)) {
    return boost::asio::post(strand_of(*s), [d = std::move(done)]() mutable {
      d({errc::invalid_argument, "the wait must not be negative, and a lease must be positive"}, 0);
    });
  }
  // One id for the whole call, as Redisson's tryAcquire.
  const std::string id = new_permit_id();
  permit->id = to_hex(id);
  primitive_wait::spec spec;
  spec.impl = s->impl;
  spec.channel = s->channel;
  spec.wait = wait;
  spec.attempt = [s, id, lease](completion<std::int64_t> d) {
    const std::int64_t now = unix_ms();
    eval(*s, primitive_script::expirable_try_acquire, {s->name, s->timeout_name, s->channel},
         {"1", lease ? std::to_string(now + lease->count()) : std::string(no_expiry), std::to_string(now),
          std::string(no_expiry), publish_command(*s->impl), id},
         [d = std::move(d), now](status st, resp::value reply) mutable {
           if (st) return d(std::move(st), 0);
           if (reply.is_null()) return d({}, 0);
           if (reply.is_string() && reply.text == "OK") return d({}, 1);
           if (reply.is_string() && reply.text.starts_with(":")) {
             // The nearest expiry: try again then (no message announces it).
             try {
               const auto expiry = static_cast<std::int64_t>(std::stod(reply.text.substr(1)));
               return d({}, -std::max<std::int64_t>(1, expiry - now));
             } catch (const std::exception&) {
             }
           }
           d({errc::unexpected_reply, "unexpected reply to the permit acquire: " + reply.text}, 0);
         });
  };
  spec.undo = [s, permit](std::int64_t, unique_function<void()> then) {
    start_expirable_release(s, permit->id, [t = std::move(then)](status, std::int64_t) mutable { t(); });
  };
  primitive_wait::start(std::move(spec), std::move(done), std::move(cancel));
}

void start_expirable_release(const std::shared_ptr<expirable_state>& s, std::string id,
                             completion<std::int64_t> done) {
  const auto bytes = from_hex(id);
  if (!bytes) {
    return boost::asio::post(strand_of(*s), [d = std::move(done), id]() mutable {
      d({errc::invalid_argument, "'" + id + "' is not a permit id (hex digits)"}, 0);
    });
  }
  eval(*s, primitive_script::expirable_try_release, {s->name, s->channel, s->timeout_name},
       {*bytes, "1", std::to_string(unix_ms()), publish_command(*s->impl)}, integer_reply(std::move(done)));
}

}  // namespace detail

permit_expirable_semaphore client::get_permit_expirable_semaphore(std::string name) {
  auto state = std::make_shared<detail::expirable_state>();
  state->io_keepalive = own_io_;
  state->impl = impl_;
  state->channel = semaphore_channel_name(name);
  // RedissonObject.suffixName(name, "timeout").
  state->timeout_name = name.find('{') != std::string::npos ? name + ":timeout" : "{" + name + "}:timeout";
  state->name = std::move(name);
  return permit_expirable_semaphore(std::move(state));
}

namespace {
template <class Start>
std::int64_t run(detail::expirable_state& s, Start&& start) {
  return detail::block_on(*s.impl, std::forward<Start>(start));
}
}  // namespace

bool permit_expirable_semaphore::try_set_permits(std::int64_t permits) {
  if (permits < 0) throw lock_error(errc::invalid_argument, "permits must not be negative");
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           const auto& info = script(primitive_script::semaphore_try_set_permits);
           detail::start_eval(state_->impl, info.text, info.sha1, {state_->name, state_->channel},
                              {std::to_string(permits), detail::publish_command(*state_->impl)},
                              detail::integer_reply(std::move(d)));
         }) != 0;
}
void permit_expirable_semaphore::add_permits(std::int64_t permits) {
  run(*state_, [&](detail::completion<std::int64_t> d) {
    const auto& info = script(primitive_script::expirable_add_permits);
    detail::start_eval(state_->impl, info.text, info.sha1, {state_->name, state_->channel},
                       {std::to_string(permits), detail::publish_command(*state_->impl)},
                       detail::integer_reply(std::move(d)));
  });
}
std::int64_t permit_expirable_semaphore::available_permits() {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
    const auto& info = script(primitive_script::expirable_available_permits);
    detail::start_eval(state_->impl, info.text, info.sha1, {state_->name, state_->timeout_name, state_->channel},
                       {std::to_string(detail::unix_ms()), detail::publish_command(*state_->impl)},
                       detail::integer_reply(std::move(d)));
  });
}
std::string permit_expirable_semaphore::acquire(std::optional<duration> lease) {
  auto permit = std::make_shared<detail::acquired_permit>();
  run(*state_, [&](detail::completion<std::int64_t> d) {
    detail::start_expirable_acquire(state_, permit, std::nullopt, lease, std::move(d), nullptr);
  });
  return permit->id;
}
std::optional<std::string> permit_expirable_semaphore::try_acquire(duration wait, std::optional<duration> lease) {
  auto permit = std::make_shared<detail::acquired_permit>();
  const bool got = run(*state_, [&](detail::completion<std::int64_t> d) {
                     detail::start_expirable_acquire(state_, permit, wait, lease, std::move(d), nullptr);
                   }) != 0;
  if (!got) return std::nullopt;
  return permit->id;
}
bool permit_expirable_semaphore::try_release(const std::string& id) {
  return run(*state_, [&](detail::completion<std::int64_t> d) {
           detail::start_expirable_release(state_, id, std::move(d));
         }) != 0;
}
void permit_expirable_semaphore::release(const std::string& id) {
  if (!try_release(id))
    throw lock_error(errc::not_owner, "permit " + id + " of '" + state_->name +
                                          "' has already been released, has expired, or does not exist");
}

}  // namespace lockscope::lock
