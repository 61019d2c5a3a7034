// The Lua scripts of Redisson's RLock (and of the other lock types below), byte for byte as Redisson 3.16 sends them
// (seed 000, §2 and §4.2), with their SHA1s, and every release's forms from 3.10 to 4.7
// (redisson_catalogue()). This header is the one source of truth for the lock client
// (which sends its dialect's forms) and the analyzer (which recognises them in captured
// EVAL / EVALSHA / SCRIPT LOAD traffic). It needs neither Asio nor a socket.
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
//
// The read/write lock (RedissonReadLock / RedissonWriteLock). One hash `name` holds
// `mode` (`read` or `write`), each reader's owner -> count, and the writer's
// `<owner>:write` -> count. Each read hold n of an owner has its own timeout key
// `{name}:<owner>:rwlock_timeout:<n>` (KEYS[2]/KEYS[3] below are `{name}:<owner>:rwlock_timeout`,
// the timeout prefix; KEYS[4]/renew's KEYS[2] are `{name}`, the key prefix; with a name
// that holds '{', `name` instead of `{name}`), so the hash lives as long as its longest
// read hold. Channel `redisson_rwlock:{name}`; a read unlock publishes `0`, a write
// unlock `1`. The writer renews with `renew` above, its field being `<owner>:write`.
//   read_acquire        KEYS[1]=name KEYS[2]=timeout prefix ARGV[1]=lease ARGV[2]=owner
//                       ARGV[3]=<owner>:write      reply: nil = acquired; integer = PTTL
//                       (a reader joins readers, and the writer's own owner may read:
//                       a downgrade)
//   read_unlock         KEYS[1]=name KEYS[2]=channel KEYS[3]=timeout prefix KEYS[4]=key
//                       prefix ARGV[1]="0" ARGV[2]=owner
//                       reply: nil = not held; 0 = others still hold (the hash's TTL is
//                       the longest remaining read hold); 1 = released (published)
//   read_renew          KEYS[1]=name KEYS[2]=key prefix ARGV[1]=lease ARGV[2]=owner
//                       reply: 1 = the hash and every read hold's timeout key renewed; 0 = not held
//   read_force_unlock   KEYS[1]=name KEYS[2]=channel ARGV[1]="0"   reply: 1 if mode was read
//   write_acquire       KEYS[1]=name ARGV[1]=lease ARGV[2]=<owner>:write
//                       reply: nil = acquired or re-entered (the TTL grows by the lease);
//                       integer = PTTL
//   write_unlock        KEYS[1]=name KEYS[2]=channel ARGV[1]="1" ARGV[2]=lease ARGV[3]=<owner>:write
//                       reply: nil = not the writer; 0 = re-entered level released;
//                       1 = released (the key deleted and "1" published, or, with the
//                       owner's read holds left, mode set to read: the downgrade)
//   write_force_unlock  KEYS[1]=name KEYS[2]=channel ARGV[1]="1"   reply: 1 if mode was write
// Version: copied from RedissonReadLock.java and RedissonWriteLock.java of
// redisson/redisson at commit 4339c99 (2019, Redisson 3.11), Java concatenation resolved:
// the form before Redisson moved the publish command into ARGV and added the unlock
// latch (3.2x). To my knowledge 3.12-3.16 send the same bytes, but only the 3.11 source
// was read, so a capture of a later Java Redisson may show other SHA1s.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
  read_acquire,
  read_unlock,
  read_renew,
  read_force_unlock,
  write_acquire,
  write_unlock,
  write_force_unlock,
  unlock_publish_argv,
  force_unlock_publish_argv,
};

namespace scripts {
// §4.2.1: the two-branch acquire (339 bytes). Redisson later merged the branches; the
// client sends the form of its dialect's release (redisson_catalogue() below), this
// one in the 3.16.8 dialect.
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
// RedissonReadLock.tryLockInnerAsync (717 bytes).
inline constexpr std::string_view read_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind;"
    "redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); "
    "local remainTime = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end;"
    "return redis.call('pttl', KEYS[1]);";
// RedissonReadLock.unlockInnerAsync (1026 bytes).
inline constexpr std::string_view read_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;"
    "end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then "
    "redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; "
    "local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do "
    "counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then "
    "for i=counter, 1, -1 do "
    "local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); "
    "maxRemainTime = math.max(remainTime, maxRemainTime);end; end; end; if maxRemainTime > 0 then "
    "redis.call('pexpire', KEYS[1], maxRemainTime); return 0; end;if mode == 'write' then return 0;end; "
    "end; redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; ";
// RedissonReadLock.renewExpirationAsync (475 bytes).
inline constexpr std::string_view read_renew =
    "local counter = redis.call('hget', KEYS[1], ARGV[2]); if (counter ~= false) then "
    "redis.call('pexpire', KEYS[1], ARGV[1]); if (redis.call('hlen', KEYS[1]) > 1) then "
    "local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do "
    "counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then "
    "for i=counter, 1, -1 do "
    "redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]); end; end; end; "
    "end; return 1; end; return 0;";
// RedissonReadLock.forceUnlockAsync (150 bytes).
inline constexpr std::string_view read_force_unlock =
    "if (redis.call('hget', KEYS[1], 'mode') == 'read') then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return 0; ";
// RedissonWriteLock.tryLockInnerAsync (508 bytes).
inline constexpr std::string_view write_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local currentExpire = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end;"
    "return redis.call('pttl', KEYS[1]);";
// RedissonWriteLock.unlockInnerAsync (637 bytes).
inline constexpr std::string_view write_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end;if (mode == 'write') then "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;"
    "else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); else redis.call('hset', KEYS[1], 'mode', 'read'); end; "
    "return 1; end; end; end; return nil;";
// RedissonWriteLock.forceUnlockAsync (151 bytes).
inline constexpr std::string_view write_force_unlock =
    "if (redis.call('hget', KEYS[1], 'mode') == 'write') then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return 0; ";
// Redis Cluster with sharded pub/sub: the unlock and force-unlock of Redisson 3.22-3.23,
// which take the publish command as their last ARGV ("SPUBLISH" there, so that the
// message reaches the waiters' SSUBSCRIBE on the channel's shard; "PUBLISH" works too).
// The lock client sends these for reentrant and fenced locks on a cluster whose
// masters answer CLUSTER SHARDS (Redis 7); the analyzer recognises them in captures.
//   unlock_publish_argv        KEYS[1]=name KEYS[2]=channel ARGV[1]="0" ARGV[2]=lease ms
//                              ARGV[3]=owner ARGV[4]=publish command   reply: as unlock
//   force_unlock_publish_argv  KEYS[1]=name KEYS[2]=channel ARGV[1]="0" ARGV[2]=publish
//                              command                                 reply: as force_unlock
// Version: RedissonLock.unlockInnerAsync and forceUnlockAsync of Redisson 3.22.0-3.23.5,
// Java concatenation resolved (the same bytes as the analyzer's client_scripts.cpp).
inline constexpr std::string_view unlock_publish_argv =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = "
    "redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', "
    "KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], "
    "KEYS[2], ARGV[1]); return 1; end; return nil;";
inline constexpr std::string_view force_unlock_publish_argv =
    "if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1 else return 0 end";
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

// ---- Every Redisson release's lock scripts (3.10.0 to 4.7.0) ----
//
// The scripts above are what this client sends. Below is what every Redisson release
// from 3.10.0 to 4.7.0 sends, extracted from each release tag's lock classes by
// tests/redisson/extract_scripts.py (Java string concatenation resolved as javac
// does; nothing else changed), one row per (text, lock type, role) and unbroken range of
// releases. The analyzer recognises every row by text and by SHA1; a client that
// speaks a given release's dialect picks its rows by release (redisson_scripts_of).
// A text can have several rows: RedissonSpinLock's acquire is RLock's 3.12.3-3.18.1
// acquire, byte for byte, so the text alone cannot tell the two lock types apart.
// Every script above is a row, which dates the "Version" notes above: acquire 3.12.3-3.18.1,
// unlock and force_unlock 3.10.6/3.10.0-3.21.3, renew 3.10.0-3.43.0, fair_acquire
// 3.11.1-3.30.0, fair_unlock and fair_force_unlock 3.10.0-3.21.3, fair_acquire_failed
// 3.11.1-4.7.0, fenced_acquire 3.19.0-4.7.0, read_acquire 3.11.1-4.7.0, write_acquire
// 3.10.0-4.7.0, read_renew 3.10.0-3.43.0, the other read/write scripts 3.10.0-3.21.3,
// unlock_publish_argv 3.22.0-3.23.5, force_unlock_publish_argv 3.22.0-4.7.0.

enum class redisson_lock_type : std::uint8_t {
  lock,                // RedissonLock (and the watchdog renewals every RLock shares)
  fair,                // RedissonFairLock
  read,                // RedissonReadLock
  write,               // RedissonWriteLock
  spin,                // RedissonSpinLock (3.15+)
  fenced,              // RedissonFencedLock (3.19+)
  faster_multi,        // RedissonFasterMultiLock (3.38+): one hash per group, a field per lock
  non_reentrant,       // RedissonNonReentrantLock (4.4+)
  non_reentrant_fair,  // RedissonNonReentrantFairLock (4.4+)
};

// What a script does to its lock, and what its reply means.
enum class redisson_role : std::uint8_t {
  acquire,         // nil = acquired (or re-entered); integer = holder's PTTL or ms to wait
                   // (non-reentrant: an error reply on re-entry)
  try_acquire,     // fair tryLock() without arguments: nil = acquired; 1 = busy
  acquire_once,    // FasterMultiLock tryLockOnce: 1 = acquired; 0 = busy
  acquire_token,   // fenced lockAndGetToken: {-1, token} = acquired; {pttl, -1} = busy
  unlock,          // nil = not held; 0 = one level released (or, with a latch, a retried
                   // call's replayed answer); 1 = released
  force_unlock,    // 1 = deleted (FasterMultiLock: the number of fields removed); 0 = none
  renew,           // 1 = renewed; 0 = not held
  renew_batch,     // several locks at once (3.44+); reply: a 0/1 per lock
  acquire_failed,  // fair lock: a waiter that gave up leaves the queue (reply nil)
  expire,          // fair lock's expire/expireAt/clearExpire (3.10-3.13): the user's TTL
                   // on the lock and its queue keys; not a lock operation
  query,           // isLocked / isHeldByThread: reads only
};

struct redisson_script {
  std::string_view first_release;  // "3.10.0"
  std::string_view last_release;   // "4.7.0": every release between sends these bytes
  redisson_lock_type type;
  redisson_role role;
  std::string_view source;  // the Java methods that send it ("RedissonLock.unlockInnerAsync")
  std::string_view text;    // the exact bytes after EVAL
  std::string_view sha1;    // 40 lowercase hex digits
  // 1-based KEYS / ARGV positions as the Java call passes them; 0 = none.
  //   lock_key: the lock's hash (0: acquire_failed names only the queue and timeout set;
  //     renew_batch: every KEYS, every other one for read locks, is a lock)
  //   channel_key: the wake-up channel (the fair lock's is a prefix: `<prefix>:<owner>`)
  //   latch_key: the unlock latch (3.24+), KEYS[3] for RLock and write, KEYS[5] for fair
  //     and read, KEYS[2] for spin; its PX argument is the latch's life, not a lease
  //   owner_argv: `<uuid>:<thread>` (write: `...:write`; renew_batch: the first owner)
  //   lease_argv: the lease in ms
  std::uint8_t lock_key, channel_key, latch_key, owner_argv, lease_argv;
};

std::span<const redisson_script> redisson_catalogue() noexcept;
// "3.27.2" → the rows that release sends (empty for a release outside 3.10.0-4.7.0 or
// not tagged).
std::vector<const redisson_script*> redisson_scripts_of(std::string_view release);
// Release strings compared as dotted numbers: <0, 0, >0.
int compare_releases(std::string_view a, std::string_view b) noexcept;
std::string_view to_string(redisson_lock_type t) noexcept;
std::string_view to_string(redisson_role r) noexcept;

// ---- Redisson's semaphore and count-down latch (RSemaphore, RCountDownLatch) ----
//
// Kept apart from script_kind: these are not lock scripts, and the analyzer's lock
// recognition (all_scripts) must not count them as lock operations. Byte for byte as
// Redisson 4.7.0 sends them (RedissonSemaphore.java, RedissonCountDownLatch.java at tag
// redisson-4.7.0, Java concatenation resolved); every one takes the publish command as
// an ARGV ("PUBLISH", or "SPUBLISH" on a cluster with sharded pub/sub).
// Semaphore: KEYS[1]=name (a string holding the free permits), KEYS[2]=channel
// `redisson_sc:{name}`; a release publishes the new permit count.
//   semaphore_try_acquire    KEYS[1]          ARGV[1]=permits    reply: 1 = taken, 0 = too few free
//   semaphore_release        KEYS[1..2]       ARGV[1]=permits ARGV[2]=publish command   reply: nil
//   semaphore_try_set_permits KEYS[1..2]      ARGV[1]=permits ARGV[2]=publish command
//                            reply: 1 = set (it did not exist), 0 = already set
//   semaphore_add_permits    KEYS[1..2]       ARGV[1]=permits (may be negative) ARGV[2]=publish
//   semaphore_drain_permits  KEYS[1]          reply: the permits taken (all that were free)
// Latch: KEYS[1]=name (a string holding the count), KEYS[2]=channel
// `redisson_countdownlatch__channel__{name}`; messages "0" (the count reached zero:
// waiters go) and "1" (a new count was set).
//   latch_count_down         KEYS[1..2]  ARGV[1]="0" ARGV[2]=publish   reply: nil (the key is
//                            deleted at zero and "0" published)
//   latch_try_set_count      KEYS[1..2]  ARGV[1]="1" ARGV[2]=count ARGV[3]=publish
//                            reply: 1 = set, 0 = a count is already set
//   latch_delete             KEYS[1..2]  ARGV[1]="1" ARGV[2]=publish   reply: 1 = deleted
// Permit-expirable semaphore (RedissonPermitExpirableSemaphore): KEYS name, the sorted
// set `{name}:timeout` (`name:timeout` when the name holds '{') of acquired permit ids
// (16 raw bytes each) scored by their expiry (Unix ms; 922337203685477 = no lease), and
// the channel `redisson_sc:{name}`. Every call first returns expired permits (and
// publishes the new count). Its try_set_permits is semaphore_try_set_permits.
//   expirable_try_acquire    KEYS name, timeout set, channel  ARGV[1]=permits ARGV[2]=expiry
//                            ARGV[3]=now ARGV[4]=922337203685477 ARGV[5]=publish ARGV[6..]=ids
//                            reply: "OK" = taken; ":<expiry>" = the nearest permit's expiry
//                            (retry then); nil = wait for a release
//   expirable_try_release    KEYS name, channel, timeout set  ARGV[1]=id ARGV[2]=1 ARGV[3]=now
//                            ARGV[4]=publish   reply: 1 = released; 0 = unknown or expired
//   expirable_available_permits KEYS name, timeout set, channel  ARGV[1]=now ARGV[2]=publish
//   expirable_add_permits    KEYS name, channel  ARGV[1]=permits ARGV[2]=publish
enum class primitive_script : std::uint8_t {
  semaphore_try_acquire,
  semaphore_release,
  semaphore_try_set_permits,
  semaphore_add_permits,
  semaphore_drain_permits,
  latch_count_down,
  latch_try_set_count,
  latch_delete,
  expirable_try_acquire,
  expirable_try_release,
  expirable_available_permits,
  expirable_add_permits,
};

namespace scripts {
// RedissonSemaphore.tryAcquireAsync0.
inline constexpr std::string_view semaphore_try_acquire =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "local val = redis.call('decrby', KEYS[1], ARGV[1]); "
    "return 1; "
    "end; "
    "return 0;";
// RedissonSemaphore.releaseAsync.
inline constexpr std::string_view semaphore_release =
    "local value = redis.call('incrby', KEYS[1], ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], value); ";
// RedissonSemaphore.trySetPermitsAsync(int).
inline constexpr std::string_view semaphore_try_set_permits =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "redis.call('set', KEYS[1], ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1;"
    "end;"
    "return 0;";
// RedissonSemaphore.addPermitsAsync.
inline constexpr std::string_view semaphore_add_permits =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "value = 0;"
    "end;"
    "redis.call('set', KEYS[1], value + ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], value + ARGV[1]); ";
// RedissonSemaphore.drainPermitsAsync.
inline constexpr std::string_view semaphore_drain_permits =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "return 0; "
    "end; "
    "redis.call('set', KEYS[1], 0); "
    "return value;";
// RedissonCountDownLatch.countDownAsync.
inline constexpr std::string_view latch_count_down =
    "local v = redis.call('decr', KEYS[1]);"
    "if v <= 0 then redis.call('del', KEYS[1]) end;"
    "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";
// RedissonCountDownLatch.trySetCountAsync.
inline constexpr std::string_view latch_try_set_count =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "redis.call('set', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "return 1 "
    "else "
    "return 0 "
    "end";
// RedissonCountDownLatch.deleteAsync.
inline constexpr std::string_view latch_delete =
    "if redis.call('del', KEYS[1]) == 1 then "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1 "
    "else "
    "return 0 "
    "end";
// RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String>, long).
inline constexpr std::string_view expirable_try_acquire =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[5], KEYS[3], value); "
    "end;"
    "end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do "
    "redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); "
    "end; "
    "local ttl = redis.call('pttl', KEYS[1]); "
    "if ttl > 0 then "
    "redis.call('pexpire', KEYS[2], ttl); "
    "end; "
    "return 'OK'; "
    "end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then "
    "return ':' .. tostring(v[2]); "
    "end "
    "return nil;";
// RedissonPermitExpirableSemaphore.tryReleaseAsync(String).
inline constexpr std::string_view expirable_try_release =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
    "if tonumber(removed) ~= 1 then "
    "return 0;"
    "end;"
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then "
    "return 0;"
    "end;"
    "return 1;";
// RedissonPermitExpirableSemaphore.availablePermitsAsync.
inline constexpr std::string_view expirable_available_permits =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[2], KEYS[3], value); "
    "end;"
    "return value; "
    "end; "
    "local ret = redis.call('get', KEYS[1]); "
    "return ret == false and 0 or ret;";
// RedissonPermitExpirableSemaphore.addPermitsAsync.
inline constexpr std::string_view expirable_add_permits =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "value = 0;"
    "end;"
    "redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1])); "
    "if tonumber(ARGV[1]) > 0 then "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "end;";
}  // namespace scripts

struct primitive_script_info {
  primitive_script kind;
  std::string_view name;  // "semaphore_try_acquire", ...
  std::string_view text;
  std::string_view sha1;
  std::uint8_t key_count;
  std::uint8_t arg_count;
};
std::span<const primitive_script_info> all_primitive_scripts() noexcept;
const primitive_script_info& script(primitive_script kind) noexcept;

}  // namespace lockscope::lock
