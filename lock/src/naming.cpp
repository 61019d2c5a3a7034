#include "lockscope/lock/naming.hpp"

#include <array>
#include <charconv>

namespace lockscope::lock {

std::string prefixed_name(std::string_view prefix, std::string_view name) {
  std::string out;
  out.reserve(prefix.size() + name.size() + 3);
  out.append(prefix).push_back(':');
  if (name.find('{') != std::string_view::npos) {
    out.append(name);
  } else {
    out.push_back('{');
    out.append(name).push_back('}');
  }
  return out;
}

std::string channel_name(std::string_view lock_name) { return prefixed_name(lock_channel_prefix, lock_name); }

std::optional<std::string_view> lock_name_from_channel(std::string_view channel) {
  if (channel.size() <= lock_channel_prefix.size() + 1 || !channel.starts_with(lock_channel_prefix) ||
      channel[lock_channel_prefix.size()] != ':')
    return std::nullopt;
  std::string_view rest = channel.substr(lock_channel_prefix.size() + 1);
  if (rest.size() >= 2 && rest.front() == '{' && rest.back() == '}') return rest.substr(1, rest.size() - 2);
  return rest;
}

bool is_uuid(std::string_view s) noexcept {
  // A table of the hex digits, and the four dashes checked apart: the timeline asks this of
  // every contended attempt's owner (a branch per character cost 450 instructions a call).
  static constexpr auto hex = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = 'a'; c <= 'f'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = 'A'; c <= 'F'; ++c) t[static_cast<std::size_t>(c)] = true;
    return t;
  }();
  if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-') return false;
  bool all = true;
  for (std::size_t i = 0; i < 36; ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) continue;
    all &= hex[static_cast<unsigned char>(s[i])];
  }
  return all;
}

std::optional<owner_id_parts> parse_owner_id(std::string_view owner) {
  // The UUID is 36 characters and has no colon, the thread id none either: the colon
  // is at 36 or this is no owner id. Checked first, before any scan: the lock groups ask
  // this of every event's owner, and searching a 32-character random value for its last
  // colon cost 200 instructions.
  constexpr std::size_t colon = 36;
  if (owner.size() <= colon + 1 || owner[colon] != ':') return std::nullopt;
  owner_id_parts parts;
  parts.client_id = owner.substr(0, colon);
  parts.thread_id = owner.substr(colon + 1);  // a later colon: not digits, refused below
  if (!is_uuid(parts.client_id)) return std::nullopt;
  const char* end = parts.thread_id.data() + parts.thread_id.size();
  auto [ptr, ec] = std::from_chars(parts.thread_id.data(), end, parts.thread_number);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return parts;
}

std::string make_owner_id(std::string_view client_id, std::uint64_t thread_id) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, thread_id);
  (void)ec;
  std::string out;
  out.reserve(client_id.size() + 1 + static_cast<std::size_t>(end - digits));
  out.append(client_id).push_back(':');
  out.append(digits, end);
  return out;
}

std::string not_owner_message(std::string_view owner) {
  std::string_view node = owner;
  std::string_view thread;
  if (const std::size_t colon = owner.rfind(':'); colon != std::string_view::npos) {
    node = owner.substr(0, colon);
    thread = owner.substr(colon + 1);
  }
  std::string out = "attempt to unlock lock, not locked by current thread by node id: ";
  out.append(node).append(" thread-id: ").append(thread);
  return out;
}

}  // namespace lockscope::lock
