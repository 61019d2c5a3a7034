// A Lua 5.1 sandbox that runs a Redis script against a shadow of the keys it touches,
// so that what an unknown script does to a lock can be read from what it does (see
// script_effect.hpp). Private to the recognizer.
//
//   shadow_store store;                      // the keys' state before the run
//   store.keys["lock"] = {shadow_key::type::string, "v1", {}, 30000};
//   run_result r = run_script(text, keys, argv, store);
//   // r.writes: what the script wrote; store: the state after; r.reply: what it returned
//
// Sorted sets are modelled (ZADD with NX/XX/GT/LT/CH/INCR, ZSCORE, ZMSCORE, ZCARD,
// ZCOUNT, ZRANGE (by rank, BYSCORE, REV, LIMIT), ZREVRANGE, ZRANGEBYSCORE,
// ZREVRANGEBYSCORE, ZRANK, ZREVRANK, ZINCRBY, ZREM, ZREMRANGEBYSCORE, ZREMRANGEBYRANK,
// ZPOPMIN, ZPOPMAX) with PEXPIREAT / EXPIREAT / PEXPIRETIME / EXPIRETIME against the
// store's clock (now_ms, which TIME answers); each command's work on the set is
// charged to the instruction budget.
//
// The script is untrusted: it runs in a fresh interpreter (a copy of one whose libraries
// each thread opened once, byte for byte what opening them gives) with only the base (without
// dofile, loadfile, load, loadstring, require, module, print, collectgarbage, getfenv,
// setfenv, newproxy, coroutine), table, string (without dump) and math libraries, a
// budget of Lua instructions (bytes allocated count too, a 64th each: a loop that only
// copies long strings is stopped like one that computes), a budget of bytes (a custom
// allocator), a backstop on the thread's CPU time, bounded C loops (string.rep and the pattern
// functions are replaced by checked versions), bounded shadow writes, and no
// precompiled chunks. Whatever the text, run_script returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockscope::locks::effect {

// A Redis reply as a script returns it (Redis's Lua-to-RESP conversion).
struct lua_reply {
  enum class kind : std::uint8_t { nil, integer, status, error, bulk, array } type = kind::nil;
  std::int64_t integer = 0;
  std::string text;              // status, error, bulk
  std::vector<lua_reply> items;  // array (at most max_reply_items, nested at most 4 deep)
};
inline constexpr std::size_t max_reply_items = 64;

// One key of the shadow.
struct shadow_key {
  enum class type : std::uint8_t { string, hash, list, zset, set } kind = type::string;
  std::string value;                                        // string
  std::vector<std::pair<std::string, std::string>> fields;  // hash, in insertion order
  std::vector<std::string> items;                           // list, head first; set, its members
  std::vector<std::pair<std::string, double>> members;      // sorted set (member, score), unordered
  std::int64_t pttl_ms = -1;                                // -1: no expiry
};

// The shadow's clock when nothing better is known (TIME answers it; PEXPIREAT and
// EXPIREAT are read against it).
inline constexpr std::int64_t default_shadow_now_ms = 1'700'000'000'000;

struct shadow_store {
  std::map<std::string, shadow_key, std::less<>> keys;
  std::int64_t now_ms = default_shadow_now_ms;  // the server's clock, Unix ms
};

// A sorted-set score as Redis prints it (the shortest text that reads back the same;
// "inf" / "-inf").
std::string score_text(double score);

// One write the script made, with its arguments as sent.
struct shadow_write {
  enum class what : std::uint8_t {
    set, del, expire, hash_set, hash_incr, hash_del, incr, publish, push, pop,
    member_add,  // ZADD / ZINCRBY of one member (added or re-scored): value the member, ttl its score
    member_del,  // ZREM / ZREMRANGEBY* / ZPOP* of one member: value the member
    set_add,     // SADD of one member (new): value the member
    set_del,     // SREM of one member (there): value the member
  } kind;
  std::string key;    // the key (publish: the channel)
  std::string value;  // set: the value; hash_*: the field; member_*: the member; publish: the message
  // set, expire: the TTL argument as sent (PEXPIREAT / EXPIREAT: the time left until
  // the deadline, in the same unit); member_add: the score; empty when none.
  std::string ttl;
  bool ttl_seconds = false;  // EX / EXPIRE / SETEX rather than PX / PEXPIRE / PSETEX
};

struct sandbox_limits {
  std::size_t memory_bytes = 8u << 20;         // the interpreter's heap
  std::uint64_t instructions = 1'000'000;      // Lua VM instructions (and bytes made in C, / 64)
  // A backstop for work inside C functions, in the running thread's CPU time: unlike the
  // wall clock, the other processes of a busy host do not move it, so a capture is read
  // the same whatever the load. A host many times slower per instruction can still reach
  // it, and then reads a capture differently: the bundled captures' runs and probes stay
  // more than 16 times within it (docs/design/pipeline.md, Sandbox).
  std::uint32_t cpu_ms = 50;
  std::size_t writes = 4096;                   // shadow writes recorded
  std::size_t store_bytes = 4u << 20;          // bytes of keys, values and fields in the shadow
  // Build the interpreter's libraries anew instead of copying the thread's kept image of
  // them (lua_sandbox.cpp, interpreter_image): the same run either way, slower.
  bool fresh_interpreter = false;
};

struct run_result {
  enum class status : std::uint8_t {
    ok,            // the script returned (reply)
    script_error,  // it raised an error (reply: the error), as Redis would answer
    unsupported,   // it ran a command the shadow does not model: its effect is unknown
    limit,         // it ran out of instructions, memory or shadow space
    not_lua,       // it does not compile (or is a precompiled chunk)
  } outcome = status::ok;
  lua_reply reply;
  std::vector<shadow_write> writes;
  // The hash fields the script read by HGET (key, field), the first 64: where a lock
  // that keeps its owner in a named field looks for it.
  std::vector<std::pair<std::string, std::string>> hash_reads;
  // Likewise the sorted-set members it asked about by ZSCORE / ZMSCORE / ZRANK or removed
  // by ZREM, there or not (key, member): a flag member (a writer's mark) a shared lock
  // checks for, or a holder's member built from its argument (`id .. '_0'`).
  std::vector<std::pair<std::string, std::string>> member_reads;
  // What the script asked of the state before it acted, the first 128: the keys it
  // checked exist, the values it read by GET, the hash fields by HGET / HMGET / HEXISTS,
  // the members by ZSCORE / ZMSCORE / ZRANK / SISMEMBER (name empty for a key or a
  // value). A script's guards are among them: a probe state that has each of them lets
  // its main path run (script_effect.cpp, guard_state).
  struct state_read {
    enum class what : std::uint8_t { key, value, field, member, set_member } kind;
    std::string key, name;
  };
  std::vector<state_read> state_reads;
  std::string message;  // why, for script_error / unsupported / limit / not_lua
  // The work the run was charged, in instructions: the VM's, and the equivalent of what
  // C did for it (bytes allocated, sorted-set scans, pattern matching, codecs).
  std::uint64_t executed = 0;
};

// The keys a run may have changed, as they were before it (nullopt: absent), each once,
// in the order first touched: enough to put the store back, or to read what a key held
// before the run, without copying the whole store.
struct shadow_journal {
  std::vector<std::pair<std::string, std::optional<shadow_key>>> before;
  const shadow_key* held_before(std::string_view key) const noexcept;  // nullptr: absent or not touched
  void restore(shadow_store& store) const;
};

// Runs `text` with KEYS and ARGV against `store`, which it changes as Redis would (and
// notes in `journal` what it changes, when given one). `compiled`, when given, keeps the
// text's compiled chunk between runs of one text: empty, the text is compiled and the
// chunk kept there; else the chunk is loaded instead of compiling the text again (never
// a chunk from the capture: only one this function made from text).
// The calling thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID): the clock of the limits'
// backstop, and of the probes' shared budget.
std::chrono::nanoseconds thread_cpu_time() noexcept;

run_result run_script(std::string_view text, std::span<const std::string_view> keys,
                      std::span<const std::string_view> argv, shadow_store& store,
                      const sandbox_limits& limits = {}, shadow_journal* journal = nullptr,
                      std::string* compiled = nullptr);

}  // namespace lockscope::locks::effect
