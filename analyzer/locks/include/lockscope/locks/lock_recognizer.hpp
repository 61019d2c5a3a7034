// Stage 1 of `lockscope analyze`: Redis exchanges in, lock operations out.
//
//   lock_recognizer r(operation_sink);       // is an exchange_sink
//   ingest_pipeline a(options, r);                  // packets → exchanges → operations
//
// Scripts are classified by what they DO, not by their bytes (see classify_script in
// lock_patterns.hpp): the script is lower-cased, stripped of whitespace and comments,
// its `redis.call(...)`/`redis.pcall(...)` calls are listed with their KEYS/ARGV
// operands, and the family (Redisson lock, fair lock, read/write lock, spin lock,
// fenced lock, SET-based lock, node-redlock multi-key) and the operation (acquire,
// unlock, renew, ...) follow from which commands touch which operands. The operand
// positions found in the script say where the lock name, owner, lease and channel sit
// in KEYS/ARGV, so reordered or renamed variants are read correctly.
//
// EVALSHA: a SHA1 resolves to a classification when the script was seen earlier in
// the capture (and is still in the LRU caches: see script_cache_entries) (EVAL: its SHA1 is computed once per distinct script text; SCRIPT LOAD:
// the script and the SHA1 in the reply), or when it is one of the built-in known
// scripts (lock/scripts.hpp plus the other forms in lock_patterns.cpp). An unknown
// SHA1 is inferred from the argument shape, the reply and the value's flow, and the operation is marked
// `inferred` (heuristics, in order):
//   - KEYS[2] is a `redisson_lock_queue:` key: fair acquire (3 keys) / fair unlock (4+);
//   - KEYS[2] is a lock channel (`redisson_lock__channel…`, `redisson_rwlock…`):
//     unlock when an owner-like ARGV exists (3+ ARGV), else forceUnlock;
//   - KEYS[2] is a `redisson_lock_token:` key: fenced acquire;
//   - N keys, N+1 ARGV whose first is a number and the rest owner ids, list reply:
//     batched renew;
//   - 1 key, ARGV = [number, owner id]: acquire when the reply is nil or an integer
//     >= 2 (a PTTL) — from then on the SHA1 is known to be an acquire; 0/1 otherwise:
//     renew (the acquire's PTTL can be 0/1 only in the last 2 ms of a lease);
//   - N keys, ARGV = [value] with integer reply: release (get==value → del; N > 1:
//     node-redlock's multi-key release);
//   - N keys, ARGV = [value, number, ...] with integer reply: acquire or extend, told
//     apart by value flow (node-redlock sends both with this shape): a fresh value's
//     first script is its acquire, a value already seen (in another script, or in a
//     SET NX) makes this script an extend, and a value's release marks its first script
//     an acquire. Each unknown SHA1 collects these votes and keeps the role once they
//     agree (>= 2, and 4 to 1); before that, each call follows its own value. N > 1:
//     node-redlock's all-or-nothing multi-key form. redis-py's [token, ms, "0"|"1"]
//     extend adds the time to the TTL unless "1";
//   - N keys, ARGV in any order with one random-looking token and numbers (or constant
//     words), reply 1/0 (or N), OK or nil: the token is the value, the one positive
//     number the lease (a number <= 15 beside a larger: a database index); with a
//     lease acquire or extend by value flow, without one release ([db, value, ttl]);
//     a lease below 100 counts seconds (recognize/argument_roles.cpp);
//   - anything else is not reported.
// Databases: each connection's SELECT (once answered +OK) and RESET (back to 0; HELLO
// leaves it, as redis-server does) set `db` on its operations. A connection seen from its
// SYN starts in db 0; one joined mid-stream, or whose commands had a gap before any
// SELECT, has an unknown db (-1) until it SELECTs.
// Value flow: values (SET tokens, script values) are followed per (server, key, value)
// in a fixed LRU table (value_flow_entries), dropped when released. A release answered
// 0 for a value that never held the lock there (a failed quorum's clean-up), a retry of
// a refused release, and a quorum retry on a server the value holds get outcome `none`;
// so does a retried Redisson 3.24+ unlock (same latch key: the script replays its reply).
// Other clients' scripts are built in byte for byte (client_scripts()): Redisson
// 3.22-3.23, node-redlock 5, redis-py 4.3, redsync v4, redis-plus-plus, node-redisson.
// Plain commands: SET key val NX PX|EX (acquire), SETNX, EXPIRE/PEXPIRE, DEL (the DEL
// of an unlock latch key is skipped), SUBSCRIBE/SSUBSCRIBE/UNSUBSCRIBE/SUNSUBSCRIBE,
// and `message`/`smessage` pushes on lock channels (a `sunsubscribe` push that answers
// no command is the server dropping a shard channel whose slot moved: an unsubscribe).
// Redis Cluster: a lock call answered -MOVED/-ASK/-TRYAGAIN/-CLUSTERDOWN gets outcome
// `redirected` with the reply's slot and target; an answered ASKING marks the
// connection's next call `asking`. MOVED/ASK targets and the nodes of a CLUSTER SLOTS
// or CLUSTER SHARDS reply are reported as `cluster_link` operations (the timeline
// keys a cluster's locks by the cluster, not the node).
//
// Hot path: one lookup per EVAL (script text → cached classification, no allocation
// after the first sighting) or EVALSHA (SHA1 → classification); operations carry views
// into the exchange, valid during the sink call only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/resp_session.hpp"
#include "lockscope/locks/lock_operation.hpp"

namespace lockscope::locks {


struct recognizer_stats {
  std::uint64_t exchanges = 0;
  std::uint64_t operations = 0;
  std::uint64_t scripts_seen = 0;       // distinct script texts classified
  std::uint64_t unknown_scripts = 0;    // EVAL of scripts that are not lock scripts
  std::uint64_t unknown_shas = 0;       // EVALSHA calls with an unresolved SHA1
  // EVALSHA calls of scripts whose text the capture never showed that answered (no
  // error) and were read as no lock operation, and how many such scripts: a lock taken
  // inside them is not seen (a job queue's, joined after its clients loaded them).
  std::uint64_t unread_sha_calls = 0;
  std::uint64_t unread_shas = 0;
  std::uint64_t inferred = 0;           // operations whose kind was guessed
  std::uint64_t scripts_evicted = 0;    // script texts forgotten (script_cache_entries/bytes)
  std::uint64_t shas_evicted = 0;       // SHA1s forgotten (sha_cache_entries)
  std::uint64_t values_tracked = 0;     // lock values followed right now (value_flow_entries)
  std::uint64_t values_evicted = 0;     // values forgotten unreleased
  std::uint64_t redirects = 0;          // MOVED/ASK/TRYAGAIN/CLUSTERDOWN replies to lock calls
  std::uint64_t malformed_redirects = 0;  // MOVED/ASK replies that did not parse (kept as errors)
  std::uint64_t skipped = 0;            // (S)SUBSCRIBEs naming no channel, skipped (warnings)
};

// The caches of scripts and SHA1s learnt from the capture (EVAL, SCRIPT LOAD, unknown
// EVALSHA) are LRU: beyond these caps the least recently used entry is forgotten, so a
// client that generates a new script per call cannot grow them. A forgotten SHA1 is
// unknown again: its next EVALSHA is inferred from the arguments. The built-in scripts
// are always known. At most ~9 MiB together: the script texts themselves, plus about
// 150 bytes an entry.
inline constexpr std::size_t script_cache_entries = 1024;
inline constexpr std::size_t script_cache_bytes = 8u << 20;   // of script text
inline constexpr std::size_t sha_cache_entries = 4096;
// Lock values (SET tokens, node-redlock values) followed per (server, key, value): a
// fixed table (about 260 KiB) allocated once, least recently used forgotten first, a
// value's record dropped when it is released.
inline constexpr std::size_t value_flow_entries = 4096;

class lock_recognizer final : public exchange_sink, public ingest::connection_end_sink {
 public:
  explicit lock_recognizer(lock_operation_sink& sink);
  ~lock_recognizer() override;
  lock_recognizer(const lock_recognizer&) = delete;
  lock_recognizer& operator=(const lock_recognizer&) = delete;

  void on_exchange(const exchange& e) override;
  void on_session_event(const session_event& ev) override;
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override;

  const recognizer_stats& stats() const noexcept;
  // Input the recognizer skipped or kept as a plain error (a MOVED/ASK reply that does
  // not parse, an (S)SUBSCRIBE naming no channel), one line naming the flow; at most
  // warning_limit lines, then only counted. Called on the recognizer's thread.
  using warning_handler = std::function<void(const std::string&)>;
  static constexpr std::uint64_t warning_limit = 20;
  void set_warning_handler(warning_handler h);
  // Entries in the script and SHA1 caches now (at most script_cache_entries, sha_cache_entries).
  std::size_t cached_scripts() const noexcept;
  std::size_t cached_shas() const noexcept;

 private:
  // Everything the recognizer keeps, and its handlers (src/recognize/recognizer_state.hpp).
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace lockscope::locks
