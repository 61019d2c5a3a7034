// Redisson's naming for a lock's auxiliary keys and channels, its owner ids and its
// error text. Shared by the lock client and the analyzer; no Asio, no sockets.
//
//   channel_name("myLock")                    -> "redisson_lock__channel:{myLock}"
//   channel_name("a{b}")                      -> "redisson_lock__channel:a{b}"
//   parse_owner_id("80e6bb0b-...-9c7ce917b767:12") -> {client_id "80e6...", thread_id 12}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockscope::lock {

// The pub/sub channel prefix of RedissonLock and the message its unlock publishes.
inline constexpr std::string_view lock_channel_prefix = "redisson_lock__channel";
inline constexpr std::string_view unlock_message = "0";
// What a write-lock unlock publishes on `redisson_rwlock:{name}` (Redisson's
// READ_UNLOCK_MESSAGE): every waiter may proceed, readers together.
inline constexpr std::string_view read_unlock_message = "1";

// `prefix:{name}`, or `prefix:name` when the name already holds '{' (the braces keep
// the auxiliary key in the lock's cluster slot; Redisson never nests them).
std::string prefixed_name(std::string_view prefix, std::string_view name);

// The channel a lock's waiters subscribe to and its unlock publishes on.
std::string channel_name(std::string_view lock_name);

// The lock name a channel belongs to, or nullopt when `channel` is not a lock channel.
// `prefix:{x}` gives x, `prefix:x` gives x. (A name that itself starts with '{' and
// ends with '}' cannot be told apart from its braced form; the braced reading wins.)
std::optional<std::string_view> lock_name_from_channel(std::string_view channel);

// An owner id `<client uuid>:<thread id>` split in two. Views into the parsed text.
struct owner_id_parts {
  std::string_view client_id;  // the UUID, 36 characters
  std::string_view thread_id;  // decimal digits
  std::uint64_t thread_number = 0;
};

// Accepts exactly `<8-4-4-4-12 hex uuid>:<decimal thread id>`; nullopt otherwise.
std::optional<owner_id_parts> parse_owner_id(std::string_view owner);

// `<client_id>:<thread_id>`.
std::string make_owner_id(std::string_view client_id, std::uint64_t thread_id);

// True for a canonical 8-4-4-4-12 hex UUID (either case).
bool is_uuid(std::string_view s) noexcept;

// Redisson's IllegalMonitorStateException text for an unlock by a non-owner:
//   attempt to unlock lock, not locked by current thread by node id: <uuid> thread-id: <tid>
// For an explicit owner id that is not `<uuid>:<tid>`, the text after its last ':' is
// the thread id (empty when there is no ':').
std::string not_owner_message(std::string_view owner);

}  // namespace lockscope::lock
