// The Lua scripts of Redisson's RLock, byte for byte as Redisson 3.16 sends them
// (seed 000, §2 and §4.2), with their SHA1s. This header is the one source of truth
// for the lock client (which sends them) and the analyzer (which recognises them in
// captured EVAL / EVALSHA / SCRIPT LOAD traffic). It needs neither Asio nor a socket.
//
//   const auto& s = lockscope::lock::script(lockscope::lock::script_kind::acquire);
//   // EVAL s.text 1 <name> <lease ms> <owner>   or   EVALSHA s.sha1 1 ...
//   if (auto* known = lockscope::lock::find_script_by_sha1(captured_sha)) ...
//
// Argument layout (all ARGV are decimal strings on the wire):
//   acquire       KEYS[1]=name                 ARGV[1]=lease ms  ARGV[2]=owner
//                 reply: nil = acquired (or re-entered), integer = PTTL of the holder's lock
//   unlock        KEYS[1]=name KEYS[2]=channel ARGV[1]="0" ARGV[2]=lease ms ARGV[3]=owner
//                 reply: nil = not held by owner, 0 = still held (count > 0, TTL reset),
//                        1 = released (key deleted, "0" published on the channel)
//   renew         KEYS[1]=name                 ARGV[1]=lease ms  ARGV[2]=owner
//                 reply: 1 = TTL reset, 0 = not held by owner
//   force_unlock  KEYS[1]=name KEYS[2]=channel ARGV[1]="0"
//                 reply: 1 = deleted and published, 0 = there was no lock
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lockscope::lock {

enum class script_kind : std::uint8_t { acquire, unlock, renew, force_unlock };

namespace scripts {
// §4.2.1: the two-branch acquire (339 bytes). Redisson later merged the branches; the
// analyzer should treat that form as an acquire too, but this client sends this one.
inline constexpr std::string_view acquire =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', "
    "KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', "
    "KEYS[1]);";
// §4.2.3: unlock one level and publish on the final release (305 bytes; note the
// missing space in "return nil;end;", as Redisson sends it).
inline constexpr std::string_view unlock =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = "
    "redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', "
    "KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', "
    "KEYS[2], ARGV[1]); return 1; end; return nil;";
// §4.2.2: the watchdog's renewal (120 bytes).
inline constexpr std::string_view renew =
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], "
    "ARGV[1]); return 1; end; return 0;";
// §2.2 and RedissonLock.forceUnlockAsync (109 bytes).
inline constexpr std::string_view force_unlock =
    "if (redis.call('del', KEYS[1]) == 1) then redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1 else return 0 end";
}  // namespace scripts

struct script_info {
  script_kind kind;
  std::string_view name;  // "acquire", "unlock", "renew", "force_unlock"
  std::string_view text;  // the exact bytes sent after EVAL
  std::string_view sha1;  // 40 lowercase hex digits: what SCRIPT LOAD returns
  std::uint8_t key_count;
  std::uint8_t arg_count;
};

// The four scripts, indexed by script_kind.
std::span<const script_info> all_scripts() noexcept;
const script_info& script(script_kind kind) noexcept;

// The script whose text is exactly `text`, or nullptr.
const script_info* find_script_by_text(std::string_view text) noexcept;
// The script with this SHA1 (40 hex digits, either case), or nullptr.
const script_info* find_script_by_sha1(std::string_view sha1_hex) noexcept;

// SHA1 of any bytes as 40 lowercase hex digits (OpenSSL), as Redis names scripts.
std::string sha1_hex(std::string_view bytes);

}  // namespace lockscope::lock
