// The Lua scripts of Redisson's RLock (and of the other lock types below), byte for byte as Redisson 3.16 sends them
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
//
// The fair lock (RedissonFairLock). KEYS: name, queue `redisson_lock_queue:{name}`,
// timeout set `redisson_lock_timeout:{name}`, and for the releases the channel prefix
// `redisson_lock__channel:{name}` (each waiter listens on `<prefix>:<owner>`). Times are
// Unix milliseconds of the caller's clock, as Redisson sends System.currentTimeMillis().
//   fair_acquire         KEYS[1..3]   ARGV[1]=lease ms ARGV[2]=owner ARGV[3]=thread wait ms ARGV[4]=now
//                        reply: nil = acquired or re-entered; integer = ms to wait (queued)
//   fair_unlock          KEYS[1..4]   ARGV[1]="0" ARGV[2]=lease ms ARGV[3]=owner ARGV[4]=now
//                        reply: as unlock, but 1 also when there is no lock (the queue's
//                        head is woken either way)
//   fair_force_unlock    KEYS[1..4]   ARGV[1]="0" ARGV[2]=now      reply: as force_unlock
//   fair_acquire_failed  KEYS[1]=queue KEYS[2]=timeout set ARGV[1]=owner ARGV[2]=thread wait ms
//                        a waiter that gives up leaves the queue; later waiters' timeouts
//                        move up by one thread wait. Reply nil.
//
// Versions: fair_acquire is seed 001's RedissonFairLock.tryLockInnerAsync (EVAL_LONG),
// byte for byte once the Java string concatenation is resolved: the form of Redisson
// 3.12-3.16 (ARGV[3] = threadWaitTime, ARGV[4] = currentTime; the stale-waiter purge
// before Redisson added its `timeout ~= false` guard). fair_unlock, fair_force_unlock
// and fair_acquire_failed are RedissonFairLock.unlockInnerAsync, forceUnlockAsync and
// acquireFailedAsync of that same release line (3.16.x), written from Redisson's
// source: their structure, keys, arguments and replies are Redisson's; their bytes
// are not attested by a seed, so a capture of Java Redisson may show other SHA1s.
//
// The fenced lock (RedissonFencedLock, Redisson 3.24 and later). KEYS: name, token
// counter `redisson_lock_token:{name}`. Its unlock, renew and force-unlock are the
// RLock scripts above (a fenced lock is an RLock whose acquire also INCRs the counter).
//   fenced_acquire       KEYS[1]=name KEYS[2]=token ARGV[1]=lease ms ARGV[2]=owner
//                        reply: {-1, token} = acquired or re-entered (every hold takes a
//                        new token); {pttl, -1} = busy
// Version: copied from RedissonFencedLock.java of redisson/redisson (the 2024 source,
// commit 0482efe), Java concatenation resolved. Redisson 3.24+ pairs it with the
// latched unlock; this client pairs it with the seed's unlock above, which the lock's
// hash layout makes equivalent (only the unlock-latch dedup of retried unlocks is missing).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lockscope::lock {

enum class script_kind : std::uint8_t {
  acquire,
  unlock,
  renew,
  force_unlock,
  fair_acquire,
  fair_unlock,
  fair_force_unlock,
  fair_acquire_failed,
  fenced_acquire,
};

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
// Seed 001: RedissonFairLock.tryLockInnerAsync (1453 bytes).
inline constexpr std::string_view fair_acquire =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false "
    "then break;end;local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout "
    "<= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else "
    "break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', "
    "KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', "
    "KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', "
    "KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', "
    "KEYS[1], ARGV[2],1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;local timeout = redis.call('zscore', "
    "KEYS[3], ARGV[2]);if timeout ~= false then return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);end;local "
    "lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;if lastThreadId ~= false and lastThreadId "
    "~= ARGV[2] then ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);else "
    "ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);if "
    "redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;return "
    "ttl;";
// RedissonFairLock.unlockInnerAsync (931 bytes).
inline constexpr std::string_view fair_unlock =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false "
    "then break;end; local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout "
    "<= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); "
    "else break;end; end;if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', "
    "KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, "
    "ARGV[1]); end; return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', "
    "KEYS[1], ARGV[2]); return 0; end; redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', "
    "KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, "
    "ARGV[1]); end; return 1; ";
// RedissonFairLock.forceUnlockAsync (536 bytes).
inline constexpr std::string_view fair_force_unlock =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false "
    "then break;end; local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout "
    "<= tonumber(ARGV[2]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); "
    "else break;end; end;if (redis.call('del', KEYS[1]) == 1) then local nextThreadId = redis.call('lindex', "
    "KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, "
    "ARGV[1]); end; return 1; end; return 0;";
// RedissonFairLock.acquireFailedAsync (305 bytes).
inline constexpr std::string_view fair_acquire_failed =
    "local queue = redis.call('lrange', KEYS[1], 0, -1);local i = 1;while i <= #queue and queue[i] ~= "
    "ARGV[1] do i = i + 1;end;i = i + 1;while i <= #queue do redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), "
    "queue[i]);i = i + 1;end;redis.call('zrem', KEYS[2], ARGV[1]);redis.call('lrem', KEYS[1], 0, ARGV[1]);";
// RedissonFencedLock.tryLockInnerAsync(leaseTime, unit, threadId), the EVAL_LONG_LIST
// form behind lockAndGetToken / tryLockAndGetToken (288 bytes).
inline constexpr std::string_view fenced_acquire =
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};";
}  // namespace scripts

struct script_info {
  script_kind kind;
  std::string_view name;  // "acquire", "unlock", ..., "fair_acquire_failed"
  std::string_view text;  // the exact bytes sent after EVAL
  std::string_view sha1;  // 40 lowercase hex digits: what SCRIPT LOAD returns
  std::uint8_t key_count;
  std::uint8_t arg_count;
};

// Every script, indexed by script_kind.
std::span<const script_info> all_scripts() noexcept;
const script_info& script(script_kind kind) noexcept;

// The script whose text is exactly `text`, or nullptr.
const script_info* find_script_by_text(std::string_view text) noexcept;
// The script with this SHA1 (40 hex digits, either case), or nullptr.
const script_info* find_script_by_sha1(std::string_view sha1_hex) noexcept;

// SHA1 of any bytes as 40 lowercase hex digits (OpenSSL), as Redis names scripts.
std::string sha1_hex(std::string_view bytes);

}  // namespace lockscope::lock
