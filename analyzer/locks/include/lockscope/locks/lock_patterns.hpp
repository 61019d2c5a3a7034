// What a Lua lock script does, found from its text (used by lock_recognizer).
//
//   script_class c = classify_script(text);   // c.op == script_op::unlock, c.owner_argv == 3 ...
//
// The text is normalised (lower case, Lua comments and all whitespace removed, double
// quotes read as single quotes), then every `redis.call(...)` / `redis.pcall(...)` is
// read as a command with operands (`keys[1]`, `argv[2]`, literals, expressions). The
// rules, first match wins:
//   hash lock (hincrby/hset/hexists of KEYS[1] with an ARGV field = the owner):
//     queue/timeout commands (lindex, zscore, rpush, zadd) → fair lock;
//     a 'mode' field → read/write lock ('write' → write lock, else read lock);
//     an INCR → fenced lock;
//     field incremented by 1 (or set to 1) and a PTTL → acquire;
//     field incremented by -1 → unlock (no publish: spin lock);
//     hexists + pexpire only → renew (a loop over KEYS: batched renew);
//   del KEYS[1] + publish, no get → forceUnlock;
//   a loop over KEYS (ipairs/#KEYS) with set … px → node-redlock acquire (exists),
//     extend (get) — with del → node-redlock release;
//   get KEYS[1] compared with an ARGV (the token): del → release, pexpire/expire/set px
//     → extend;
//   set … nx … px → SET-based acquire.
// A publish whose command is an ARGV (`redis.call(ARGV[4], KEYS[2], ARGV[1])`, how
// Redisson passes PUBLISH/SPUBLISH) counts as a publish on that KEYS operand.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::locks {

enum class script_op : std::uint8_t {
  none,
  acquire,
  unlock,
  renew,
  renew_batch,   // KEYS[i] renewed for ARGV[i+1]; reply: list of 0/1
  force_unlock,
  release,       // get == token → del
  extend,        // get == token → pexpire
  multi_acquire, // node-redlock: every KEYS set to ARGV[1] PX ARGV[2]
  multi_extend,
  multi_release,
};

struct script_class {
  script_op op = script_op::none;
  lock_family family = lock_family::unknown;
  // 1-based positions in KEYS / ARGV; 0 = absent.
  std::uint8_t lock_key = 1;
  std::uint8_t channel_key = 0;
  std::uint8_t owner_argv = 0;
  std::uint8_t lease_argv = 0;
  bool latch = false;  // Redisson ≥ 3.24 unlock latch (KEYS[3])
  // extend: the lease ARGV is added to the remaining TTL (redis-py's `expiration +
  // ARGV[2]`), always, or only unless ARGV[replace_argv] is "1" (redis-py ≥ 4's flag).
  bool lease_added = false;
  std::uint8_t replace_argv = 0;

  bool is_lock_script() const noexcept { return op != script_op::none; }
};

script_class classify_script(std::string_view text);

// The normalised form classify_script works on (exposed for tests).
std::string normalize_script(std::string_view text);

// Scripts beyond lock/scripts.hpp whose SHA1s are recognised without having been seen
// in the capture: later Redisson forms written the way Redisson writes them. A SHA1
// matches only byte-identical text, so other spellings are still resolved by a prior
// EVAL or SCRIPT LOAD, or inferred.
struct known_script {
  std::string_view name;
  std::string_view text;
  std::string_view origin = {};  // where the bytes were taken from (client, version, file)
};
std::span<const known_script> known_scripts() noexcept;
// Other clients' scripts, byte for byte as they send them: Redisson 3.22-3.23's unlock,
// node-redlock 5, redis-py 4.3's Lock, redsync v4, redis-plus-plus's RedMutex and
// node-redisson 1.0 (each entry's `origin` names the source).
std::span<const known_script> client_scripts() noexcept;

}  // namespace lockscope::locks
