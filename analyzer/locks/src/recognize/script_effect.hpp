// What an unknown script does to a lock, found by running it (lua_sandbox.hpp) on probe
// states of its keys rather than by reading its shape. Private to the recognizer.
//
//   script_effect e = analyse_script(text, keys, argv);   // the first call's arguments
//   if (e.op == script_op::unlock) ...                     // e.owner_argv, e.lock_key ...
//   reply_reading r = read_reply(e, observed, argv);       // each later call's outcome
//
// The probes, each on a fresh shadow (lock keys with a PTTL of probe_pttl_ms):
//   absent  every key absent;
//   mine    the lock key(s) holding the caller's value (a string equal to ARGV[o], or a
//           hash whose field ARGV[o] counts 1); when that changes nothing, again with
//           the lease about to run out (a renewal only done below a minimum TTL);
//   mine2   (hash) the caller's field counting 2 (a reentrant hold);
//   other   the lock key(s) holding another owner's value.
// The script acquires when `absent` creates a key holding an ARGV (the owner) and `other`
// leaves it untouched; it releases when `mine` deletes the key (or counts the owner's
// field down) and `other` does not; it extends when `mine` re-expires the key and
// `other` does not. Owner, lease (the TTL written, matched to an ARGV), channel (a
// PUBLISH to a KEYS entry) and lock keys (one, or every KEYS) are read from the writes,
// so locals, argument order, extra arguments and multi-key loops do not matter. Each
// probe's reply becomes a signature (nil, a constant, "the holder's TTL", the count of
// KEYS, an ARGV echoed, a list's first element) paired with the outcome of that path;
// a call's reply is read by the signatures it matches. When several outcomes match (a
// script that answers nil whatever it did, or a re-entrant acquire that answers 1 both
// when it creates the key and when the caller already held it) the reading is
// ambiguous and the caller decides from what it knows of the value.
//
// A sorted-set lock (a member per holder, scored by its expiry or its start) is read
// per member: the probes hold the caller's value (or another's) as a member scored a
// little ahead of the shadow's clock, with the flag members (literal members such as a
// writer's mark) the script itself wrote; an acquire that adds its member beside
// another holder's is shared, and is probed again with each flag member it read and
// with 2 to 8 other holders to find what refuses it (a read lock, or a semaphore's
// limit). The shadow's clock is taken from an ARGV that reads as Unix time (seconds or
// ms) when one does, so that a script taking `now` from its caller and one taking it
// from TIME judge expiries alike. A member the script builds from an argument (`id ..
// '_0'`, read from what it adds, asks about or removes) is held so in the probes, and
// names that argument as the owner; an acquire refused beside one other holder whose
// argument of 1, raised to 2, lets it in is a semaphore of that limit.
//
// A script that answers an error on every probe above (its own guards: a settings hash
// that must exist, a client that must have registered) is probed once more on a state
// that satisfies them (guard_state): each key it checks exists, each hash field, member
// or value it reads, is there (a field or value holding the shadow's clock, a member
// scored at it), found by running it again until it asks for nothing new. On that
// state, and on it with each such number set to 0 in turn, a counted semaphore shows:
// an acquire raises a count kept in one of its KEYS (a plain key, or a field not named
// by an argument) by an ARGV or by 1 and records an argument elsewhere (a field, a
// member) that the state did not need; set to the clock again the count refuses it, and
// a field beside it or an ARGV raised above it lets it in again: that is the limit. A
// release drops a record named by an argument that was there and lowers a count; with
// no such record it lowers nothing.
//
// ARGV values that repeat are made distinct for the probes (a number + 1, a text + "~")
// so that each write names one ARGV position.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_operation.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "recognize/lua_sandbox.hpp"

namespace lockscope::locks::effect {

inline constexpr std::uint8_t keys_position = 128;  // see script_effect::owner_argv
inline constexpr std::int64_t probe_pttl_ms = 4'321'987;
inline constexpr std::int64_t probe_low_pttl_ms = 17;  // a lease about to run out

// A reply as a probe path answered it.
struct reply_sig {
  enum class form : std::uint8_t {
    nil,
    integer,    // this constant
    ttl,        // the lock's remaining time (any integer)
    key_count,  // the number of KEYS of the call (a multi-key script's count)
    status,     // this status text
    error,
    argv,       // ARGV[argv] echoed
    key,        // KEYS[argv] named: the key the call offered that the script took (a slot)
    text,       // this bulk text
    any_text,   // a bulk string read from the state (another owner's value)
    array,      // a list: `first` describes its first element
  } kind = form::nil;
  std::int64_t integer = 0;
  bool seconds = false;  // ttl: in seconds
  std::uint8_t argv = 0;  // argv: the ARGV position echoed; key: the KEYS position named
  std::string text;
  // array: its first element (nil, integer, ttl, key_count, argv, key, text or any_text).
  form first = form::nil;
  std::int64_t first_integer = 0;
  bool first_seconds = false;
  std::uint8_t first_argv = 0;
  std::string first_text;
};

struct effect_path {
  reply_sig reply;
  op_outcome outcome = op_outcome::none;
  // Taken only when the lock key already holds the caller's own value (an acquire's
  // re-entry that writes nothing): a caller whose value does not hold the lock cannot
  // have taken it.
  bool own_hold_only = false;
};

struct script_effect {
  script_op op = script_op::none;  // acquire, unlock or extend (or multi_* when every KEYS is a lock)
  // set_based (a string value), redlock_multi (one value on every KEYS) or redisson (a
  // hash of owners).
  lock_family family = lock_family::unknown;
  std::uint8_t lock_key = 1;      // 1-based KEYS position of the lock (multi: every KEYS)
  // 1-based ARGV position of the owner's value; above keys_position, KEYS[n -
  // keys_position] (a client that passes its value as a key).
  std::uint8_t owner_argv = 0;
  std::uint8_t lease_argv = 0;    // of the TTL written, likewise; 0: none or computed
  // An acquire whose owner no argument names: the script draws it (a counter) and
  // answers it in its list reply, at this 1-based position (ioredfour: {1, index, ttl}).
  // owner_argv is then 0; a refused attempt has no owner.
  std::uint8_t owner_reply = 0;
  bool lease_seconds = false;     // the lease ARGV counts seconds (EX, EXPIRE, SETEX)
  bool lease_added = false;       // the lease is added to the remaining time
  std::uint8_t channel_key = 0;   // a PUBLISH's channel among KEYS; 0: none
  bool multi = false;
  // An acquire that, on a key already holding the caller's value, re-expires it (a
  // refresh that re-creates a lost key): a call by a value that holds the lock is a
  // renewal, by any other an acquire.
  bool renews_own = false;
  // The lock is a sorted set and a holder is a member named by its value (scored by an
  // expiry or a start time): acquisitions, releases and renewals are read per member.
  bool member_based = false;
  // Several holders at once: the acquire adds its member beside another holder's. A
  // read hold when a flag member (a writer's mark the script checks) refuses it (limit
  // 0); a semaphore when a count of holders does (`limit`, from ARGV[limit_argv] when
  // one carries it). A script that adds its member whatever else is there refuses no
  // one and is no lock.
  bool shared = false;
  std::uint8_t limit = 0;
  std::uint8_t limit_argv = 0;
  // A counted semaphore (a concurrency limiter): the lock key keeps a count of the
  // permits in use (a plain key, or the hash field `counter_field`) that the acquire
  // raises by ARGV[permits_argv] (1 when 0) only while it stays within a limit (an
  // ARGV's, or the hash field `limit_field` beside the count), recording its holder
  // (ARGV[owner_argv]) in other keys; the release drops that record and lowers the
  // count. A refused try's value names no one (a client may draw a new one each try).
  bool counted = false;
  std::uint8_t permits_argv = 0;
  // The KEYS position of the sorted set where the acquire scores its holder by expiry. A
  // release that only sets that expiry to the past (for a later call to drop the holder
  // and lower the count) names this and lock_key 0: its lock is the count the acquire
  // that scored the set named.
  std::uint8_t expiry_key = 0;
  std::string counter_field, limit_field;
  std::vector<effect_path> paths;
  std::string finding;  // one line: what the probes found (or why they found nothing)
  bool hit_limit = false;  // a probe ran out of its budget (see sandbox_limits)
  // Every probe ran to its end in the shadow (no command it does not model, no limit):
  // a script found to be no lock here is certainly none.
  bool ran = false;

  bool is_lock() const noexcept { return op != script_op::none; }
  // A release known only by the sorted set of expiries it moves its holder's to the past
  // in: a lock's only where an acquire seen earlier scored its holders there.
  bool by_expiry_set() const noexcept { return counted && lock_key == 0; }
};

// Runs the probes with a call's KEYS and ARGV (their values matter: a script may read
// a number or a flag from them). Bounded: a few dozen sandboxed runs at most.
script_effect analyse_script(std::string_view text, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const sandbox_limits& limits = {});

// A call's reply, reduced to what the signatures compare.
struct observed_reply {
  enum class form : std::uint8_t { none, nil, integer, status, error, text, array } kind = form::none;
  std::int64_t integer = 0;
  std::string_view text;  // status, text
  // array: its first element.
  form first = form::none;
  std::int64_t first_integer = 0;
  std::string_view first_text;
};

struct reply_reading {
  op_outcome outcome = op_outcome::none;
  bool ambiguous = false;   // several outcomes fit (or none did): the caller decides
  // Ambiguous between a success and paths taken only when the caller's value already
  // held the lock (own_hold_only): a success unless that value holds it.
  bool ok_unless_own_hold = false;
  std::int64_t ttl_ms = -1; // the holder's remaining time, when the reply told it
};

reply_reading read_reply(const script_effect& e, const observed_reply& reply, std::span<const std::string_view> keys,
                         std::span<const std::string_view> argv);

}  // namespace lockscope::locks::effect

namespace lockscope::locks::effect {
// The argument at an owner_argv / lease_argv position; empty when the call has none.
inline std::string_view argument_at(std::span<const std::string_view> keys, std::span<const std::string_view> argv,
                                    std::uint8_t position) noexcept {
  if (position > keys_position) {
    const std::size_t k = position - keys_position;
    return k <= keys.size() ? keys[k - 1] : std::string_view();
  }
  return position >= 1 && position <= argv.size() ? argv[position - 1u] : std::string_view();
}
}  // namespace lockscope::locks::effect
