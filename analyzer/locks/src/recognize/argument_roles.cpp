// An unseen script's owner value and lease found among its arguments wherever they are
// (see "argument roles" in recognizer_state.hpp): a capture joined after a client loaded
// its scripts shows only their SHA1s, and clients order their ARGV as they please
// (`[value, ttl]`, `[ttl, value]`, `[db, value, ttl]`, `[value, db, ttl, "PX"]`).
#include <algorithm>
#include <string_view>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

// The largest number still read as a database index rather than a lease: Redis's
// default `databases 16`. A lease of 15 ms or less is not one a lock client sets.
constexpr std::int64_t max_db_index = 15;

// A lease below this counts seconds: 30 is a 30 s lease, not a 30 ms one (a lock whose
// lease is shorter than a few round trips and a hold is none a client sets). From 100
// up, milliseconds (node-redlock's, redis-py's extend's): a client's lease in seconds is
// rarely 100 or more.
constexpr std::int64_t min_ms_lease = 100;

}  // namespace

bool lock_recognizer::state::lease_in_seconds(std::string_view lease) noexcept {
  std::int64_t v = 0;
  return parse_int(lease, v) && v > 0 && v < min_ms_lease;
}

// A decimal fraction (`1796010652.9674013`, `-0.5`): a timestamp, a score or a rate, which
// rate limiters and queues pass to their scripts; a value drawn to name a lock's holder is
// a token, never a measurement.
bool lock_recognizer::state::is_decimal_fraction(std::string_view s) noexcept {
  if (!s.empty() && s.front() == '-') s.remove_prefix(1);
  const std::size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == s.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != dot && (s[i] < '0' || s[i] > '9')) return false;
  }
  return true;
}

bool lock_recognizer::state::looks_like_value(std::string_view s) noexcept {
  if (s.size() < 4 || s.size() > 512) return false;
  if (std::int64_t v = 0; parse_int(s, v) || is_decimal_fraction(s)) return false;
  // A random token (hex, a UUID, base64, `host:pid:n`) has digits and varied bytes; a
  // constant word (`PX`, `NX`, a mode, a prefix) has none.
  bool digit = false, upper = false, lower = false;
  std::uint64_t seen[4] = {};
  std::size_t distinct = 0;
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    digit = digit || (b >= '0' && b <= '9');
    upper = upper || (b >= 'A' && b <= 'Z');
    lower = lower || (b >= 'a' && b <= 'z');
    std::uint64_t& word = seen[b >> 6];
    const std::uint64_t bit = 1ull << (b & 63);
    if ((word & bit) == 0) {
      word |= bit;
      ++distinct;
    }
  }
  // (A short base64 token may draw no digit: then mixed case and many distinct bytes.)
  return (digit && distinct >= 4) || (s.size() >= 12 && upper && lower && distinct >= 8);
}

// A control byte marks serialized data (msgpack, a protocol frame): a job's options or a
// list of tokens that the script decodes. Clients draw a holder's value printable (hex, a
// UUID, base64, `host:pid:n`), and a call that hands its script structured data does more
// than take, renew or free one lock (a job queue moving a job, a group's member update).
bool lock_recognizer::state::is_serialized_data(std::string_view s) noexcept {
  return std::any_of(s.begin(), s.end(), [](const char ch) {
    const auto b = static_cast<unsigned char>(ch);
    return b < 0x20 || b == 0x7f;
  });
}

argument_roles lock_recognizer::state::find_argument_roles(std::span<const std::string_view> argv) noexcept {
  argument_roles r;
  if (argv.empty() || argv.size() > 255) return r;
  if (std::any_of(argv.begin(), argv.end(), is_serialized_data)) return r;
  std::size_t values = 0, leases = 0, large = 0;
  std::uint8_t lease_at = 0, large_at = 0, small_at = 0;
  std::int64_t small = -1;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const auto at = static_cast<std::uint8_t>(i + 1);
    if (std::int64_t v = 0; parse_int(argv[i], v)) {
      ++r.numbers;
      if (v <= 0) continue;  // no lease (a database 0, a flag)
      ++leases;
      lease_at = at;
      if (v > max_db_index) {
        ++large;
        large_at = at;
      } else {
        small = v;
        small_at = at;
      }
    } else if (looks_like_value(argv[i])) {
      ++values;
      r.value = at;
    }
  }
  if (values != 1) {
    r.value = 0;
    return r;
  }
  if (leases == 1) {
    r.lease = lease_at;
    if (small_at != 0) r.small = small;  // a lone small number: a short lease or a database
  } else if (large == 1) {
    r.lease = large_at;                  // beside small numbers (a database index, a flag)
    if (leases == 2 && small_at != 0) r.db_index = small;
  } else if (large >= 2) {
    r.lease_unsure = true;
  }
  return r;
}

namespace {

// Whether `number` is a whole segment of `key`'s name (between the ends and `:`, `{`,
// `}`, `/`, `.`): an id the name carries, as `16` in `q:jobs:16:lock`.
bool names_segment_of(std::string_view key, std::string_view number) noexcept {
  const auto separator = [](char ch) { return ch == ':' || ch == '{' || ch == '}' || ch == '/' || ch == '.'; };
  for (std::size_t at = key.find(number); at != std::string_view::npos; at = key.find(number, at + 1)) {
    const std::size_t end = at + number.size();
    if ((at == 0 || separator(key[at - 1])) && (end == key.size() || separator(key[end]))) return true;
  }
  return false;
}

}  // namespace

// A job queue's extend names the job's lock and carries the worker's token, the lease
// and the job's id ([token, lease, id]): two lease-sized numbers, but the key's name
// carries one of them, and a lease is no part of a key's name.
argument_roles lock_recognizer::state::find_renewal_roles(std::string_view key,
                                                          std::span<const std::string_view> argv) noexcept {
  argument_roles r;
  if (argv.empty() || argv.size() > 255) return r;
  std::size_t values = 0, leases = 0;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const auto at = static_cast<std::uint8_t>(i + 1);
    if (is_serialized_data(argv[i])) return argument_roles{};
    if (std::int64_t v = 0; parse_int(argv[i], v)) {
      ++r.numbers;
      if (v > max_db_index && !names_segment_of(key, argv[i])) {
        ++leases;
        r.lease = at;
      }
    } else if (looks_like_value(argv[i])) {
      ++values;
      r.value = at;
    }
  }
  if (values != 1 || leases != 1) return argument_roles{};
  return r;
}

argument_roles lock_recognizer::state::roles_of(std::span<const std::string_view> argv) noexcept {
  argument_roles roles = find_argument_roles(argv);
  if (roles.value == 0) return roles;
  if (roles.db_index >= 0) db_indexes |= static_cast<std::uint16_t>(1u << roles.db_index);
  // A lone small number the traffic showed beside a lease as a database index is one
  // here too (a release's `[db, value]` beside its acquire's `[db, value, ttl]`).
  if (roles.small >= 0 && (db_indexes & (1u << roles.small)) != 0) roles.lease = 0;
  return roles;
}

script_class lock_recognizer::state::infer_by_argument_roles(command_call& c, sha_entry& entry,
                                                             std::span<const std::string_view> keys,
                                                             std::span<const std::string_view> argv) {
  script_class g;
  const reply_view& reply = c.reply;
  if (keys.empty()) return g;
  // Done or not, as 1 / 0 (or the number of keys it set), OK / nil, or -1 (a release
  // finding the key gone): a larger number is a TTL or a count, not this shape.
  const bool answered =
      reply.kind == reply_view::shape::ok || reply.kind == reply_view::shape::null ||
      (reply.kind == reply_view::shape::integer && reply.integer >= -1 &&
       reply.integer <= static_cast<std::int64_t>(keys.size()));
  if (!answered) return g;
  const argument_roles roles = roles_of(argv);
  if (roles.value == 0) return g;
  const bool multi = keys.size() > 1;
  // On several keys the shape is node-redlock's, whose scripts answer a count of keys:
  // nil or OK there is another script's (a job queue's step finding no job), and one
  // shown to answer part of its keys (keys_not_all_locks) names more than locks.
  if (multi && (reply.kind != reply_view::shape::integer || entry.keys_not_all_locks)) return g;
  g.lock_key = 1;
  g.family = multi ? lock_family::redlock_multi : lock_family::set_based;
  g.owner_argv = roles.value;
  if (roles.lease != 0 && reply.kind == reply_view::shape::integer && reply.integer < 0) return script_class{};
  if (roles.lease == 0) {
    // Numbers that could each be a lease (a lease beside a job id or a timestamp): not
    // sure which is, so not sure there is none either. Saying nothing beats a release.
    if (roles.lease_unsure) return script_class{};
    // The holder's value and nothing to set: a release (get == value → del), answered
    // by how many keys it removed.
    if (reply.kind == reply_view::shape::ok) return script_class{};
    g.op = multi ? script_op::multi_release : script_op::release;
    return g;
  }
  // A value and a lease: an acquire or an extend, told apart by how the value flows (the
  // first script a value meets is its acquire).
  const script_op role = value_role(entry, c.e.server_text, keys[0], argv[roles.value - 1], current_sha,
                                    reply.kind == reply_view::shape::ok ||
                                        (reply.kind == reply_view::shape::integer && reply.integer >= 1),
                                    c.op.at_us());
  g.op = role == script_op::acquire ? (multi ? script_op::multi_acquire : script_op::acquire)
                                    : (multi ? script_op::multi_extend : script_op::extend);
  g.lease_argv = roles.lease;
  g.lease_seconds = lease_in_seconds(argv[roles.lease - 1]);
  return g;
}

}  // namespace lockscope::locks
