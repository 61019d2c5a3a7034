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
//     hexists (or a read lock's hget of the owner's count) + pexpire only → renew (a
//     loop over KEYS: batched renew; `rwlock_timeout` keys: a read lock's, batched in
//     (lock, timeout prefix) KEYS pairs);
//   del KEYS[1] + publish, no get → forceUnlock, of a fair lock with queue commands, of
//     a read or write lock with a `mode` check; a bare `del KEYS[1]` with no ARGV → the
//     spin lock's forceUnlock;
//   a loop over KEYS (ipairs/#KEYS) with set … px → node-redlock acquire (exists),
//     extend (get) — with del → node-redlock release;
//   get KEYS[1] compared with an ARGV (the token): del → release, pexpire/expire/set px
//     → extend;
//   set … nx … px → SET-based acquire.
// A loop over KEYS is read from the text as sent (`#KEYS`, `ipairs(KEYS)`, `KEYS[i]`):
// Lua is case-sensitive and Redisson's read lock has a local named `keys`. An unlock
// latch (`local val = redis.call('get', KEYS[n]); if val ~= false then return
// tonumber(val)`) is found at any KEYS position, and its `set … px` is no lease.
// A publish whose command is an ARGV (`redis.call(ARGV[4], KEYS[2], ARGV[1])`, how
// Redisson passes PUBLISH/SPUBLISH) counts as a publish on that KEYS operand.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::locks {

enum class script_op : std::uint8_t {
  none,
  acquire,
  unlock,
  renew,
  renew_batch,   // several locks renewed at once (see batch_layout); reply: list of 0/1
  force_unlock,
  release,       // get == token → del
  extend,        // get == token → pexpire
  multi_acquire, // node-redlock: every KEYS set to ARGV[1] PX ARGV[2]
  multi_extend,
  multi_release,
  abandon,       // a waiter's clean-up after its wait ran out (Redisson's fair acquireFailed:
                 // KEYS[1] its lock's queue, `redisson_lock_queue:{name}`)
};

// What an acquire's reply says.
enum class acquire_reply : std::uint8_t {
  ttl,         // nil = acquired; integer = the holder's PTTL (or the fair lock's ms to wait)
  busy_one,    // nil = acquired; 1 = busy (Redisson's fair tryLock() without arguments)
  one_zero,    // 1 = acquired; 0 = busy (FasterMultiLock's tryLockOnce)
  token_list,  // {-1, token} = acquired; {pttl, -1} = busy (fenced lock)
};

// Where a renew_batch finds its locks and owners (ARGV[1] is the lease in all three).
enum class batch_layout : std::uint8_t {
  owner_per_key,      // KEYS[i] held by ARGV[i + 1] (Redisson 3.44+ LockTask)
  key_pairs,          // KEYS[2n-1] a read lock, KEYS[2n] its timeout prefix, owner ARGV[n + 1]
                      // (ReadLockTask 3.44-4.3)
  key_pairs_counted,  // key pairs as above; ARGV after the lease: per lock a count, then
                      // that many owners (ReadLockTask 4.4+)
};

struct script_class {
  script_op op = script_op::none;
  lock_family family = lock_family::unknown;
  // 1-based positions in KEYS / ARGV; 0 = absent.
  std::uint8_t lock_key = 1;
  std::uint8_t channel_key = 0;
  std::uint8_t owner_argv = 0;
  std::uint8_t lease_argv = 0;
  // Redisson ≥ 3.24's unlock latch: its KEYS position (3 for RLock and write, 5 for
  // fair and read, 2 for spin); 0 = none. Its PX argument is the latch's life, no lease.
  std::uint8_t latch_key = 0;
  bool shared = false;  // several holders are legal (read lock, FasterMultiLock's group)
  acquire_reply reply = acquire_reply::ttl;
  batch_layout batch = batch_layout::owner_per_key;
  // extend: the lease ARGV is added to the remaining TTL (redis-py's `expiration +
  // ARGV[2]`), always, or only unless ARGV[replace_argv] is "1" (redis-py ≥ 4's flag).
  bool lease_added = false;
  std::uint8_t replace_argv = 0;
  // The lease ARGV counts seconds (an unseen script's lease below 100, which no client
  // sets in milliseconds: recognize/argument_roles.cpp).
  bool lease_seconds = false;

  // A script learnt from the capture whose effect the recognizer reads by running it
  // (its 1-based index among the recognizer's learnt effects); 0: classified here.
  std::uint16_t effect = 0;

  // A semaphore or latch script (recognize/permit_scripts.cpp): 1 + its
  // lock::primitive_script role; 0: none. Positions read from its text: now_argv, the
  // caller's clock (Unix ms; a permit-expirable semaphore's expiry is lease_argv, its
  // permit id owner_argv, the first of ids from there on when ids_from_owner_argv).
  // Beyond the catalogue's roles: permit_zset_acquire / permit_zset_refresh, a sorted-set
  // semaphore's (a member per holder; limit_argv: the ZCARD comparison's ARGV).
  std::uint8_t permit_role = 0;
  std::uint8_t now_argv = 0;
  std::uint8_t permits_argv = 1;
  std::uint8_t limit_argv = 0;
  bool ids_from_owner_argv = false;

  bool is_lock_script() const noexcept { return op != script_op::none || effect != 0 || permit_role != 0; }
};

script_class classify_script(std::string_view text);

// The class of a semaphore or latch script: a text of lock::all_primitive_scripts() by
// its catalogue role, any other by what its text does (Redisson's other releases spell
// them with a literal 'publish', other ARGV orders...; see permit_scripts.cpp);
// permit_role 0 when it is neither.
script_class permit_script_class(std::string_view text);
inline constexpr std::uint8_t permit_zset_acquire = 200;  // ZCARD < limit → ZADD member
inline constexpr std::uint8_t permit_zset_refresh = 201;  // ZSCORE member → ZADD member

// The class of a script of lockscope::lock::redisson_catalogue() (every Redisson release's
// lock scripts, by their role as the Java source names it); op none for the roles that
// are no lock operation (a fair waiter's give-up, the fair lock's expire, queries).
script_class redisson_script_class(const lock::redisson_script& s);

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
