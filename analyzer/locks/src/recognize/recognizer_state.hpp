// What lock_recognizer keeps between exchanges, all its data members in one place, and
// the handlers that read an exchange, each defined in the file of its job:
//   lock_recognizer.cpp   the public class, an exchange's common reading (database,
//                         reply shape, redirects) and the command dispatch table
//   script_calls.cpp      EVAL/EVALSHA/SCRIPT LOAD: the script and SHA1 caches, the
//                         classification, the inference of unknown SHA1s, the outcomes
//   function_calls.cpp    Redis Functions: FUNCTION LOAD/DELETE/FLUSH, FCALL/FCALL_RO read
//                         as the calls of a script learnt per function
//   nil_releases.cpp      an unseen release answered nil: undecided until the lock's
//                         next operation (another owner's acquisition: a release)
//   value_tracking.cpp    lock values followed through SET-based and node-redlock calls,
//                         and Redisson's unlock latches
//   plain_commands.cpp    SET NX, SETNX, EXPIRE/PEXPIRE, DEL/UNLINK
//   conditional_commands.cpp  SET IFEQ/IFNE/IFDEQ/IFDNE, DELEX, DELIFEQ
//   pubsub.cpp            (S|P)SUBSCRIBE, (S|P)UNSUBSCRIBE, message/smessage/pmessage/sunsubscribe pushes
//   keyspace_notifications.cpp  waiters woken by keyspace notifications (`__keyspace@…`)
//   subscription_locks.cpp  locks held by a subscription (PUBSUB NUMSUB, SUBSCRIBE)
//   connection_state.cpp  SELECT, RESET
//   redis_cluster.cpp     MOVED/ASK/TRYAGAIN/CLUSTERDOWN replies, ASKING, CLUSTER SLOTS/SHARDS
// Private to the recognizer.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockscope/locks/command_words.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "recognize/lru_cache.hpp"
#include "recognize/script_effect.hpp"
#include "recognize/value_flow.hpp"

namespace lockscope::locks {

namespace recognizer_detail {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using string_map = std::unordered_map<std::string, V, string_hash, std::equal_to<>>;

inline bool parse_int(std::string_view s, std::int64_t& out) noexcept { return parse_wire_int(s, out); }

// `WORD script|sha|function numkeys key... arg...` (EVAL, EVALSHA, FCALL and their _RO
// forms): its KEYS and ARGV; false when numkeys does not count keys that are there.
inline bool split_keys_and_argv(std::span<const std::string_view> args, std::span<const std::string_view>& keys,
                                std::span<const std::string_view>& argv) noexcept {
  std::int64_t numkeys = 0;
  if (args.size() < 3 || !parse_int(args[2], numkeys) || numkeys < 0 ||
      static_cast<std::size_t>(numkeys) > args.size() - 3) {
    return false;
  }
  keys = args.subspan(3, static_cast<std::size_t>(numkeys));
  argv = args.subspan(3 + static_cast<std::size_t>(numkeys));
  return true;
}

// The reply, reduced to what lock outcomes need.
struct reply_view {
  enum class shape : std::uint8_t { none, null, integer, ok, error, array, other } kind = shape::none;
  std::int64_t integer = 0;
  const message* m = nullptr;
  std::size_t root = message::npos;
};

// One command exchange as the handlers read it: the operation comes filled with the
// exchange's connection, database, endpoints and times (and `asking`); a handler sets
// the rest and emits it.
struct command_call {
  const exchange& e;
  std::span<const std::string_view> args;  // args[0]: the command's name
  command_word word;
  reply_view reply;
  lock_operation op;
};

// Where an unseen script's arguments put a holder's value and its lease (1-based ARGV;
// 0: none), found by what they look like (argument_roles.cpp): the one random-looking
// token among them, and the lease among the positive numbers, a small one (a database
// index, a flag) not taken when a larger one is there.
struct argument_roles {
  std::uint8_t value = 0;
  std::uint8_t lease = 0;
  std::uint8_t numbers = 0;     // how many arguments are integers
  std::int64_t small = -1;      // the lease, when it is a lone number <= 15 (or a database)
  std::int64_t db_index = -1;   // a lone number <= 15 beside the lease
  // Several numbers larger than a database index (a lease, a job id, a timestamp): which
  // is the lease is not sure, and the call is not one without a lease either.
  bool lease_unsure = false;
};

// The reply `m`'s node `index` (its root, or an element of EXEC's array) as a handler
// reads it (lock_recognizer.cpp).
reply_view read_reply_at(const message* m, std::size_t index);

}  // namespace recognizer_detail

struct lock_recognizer::state {
  using command_call = recognizer_detail::command_call;
  using reply_view = recognizer_detail::reply_view;

  explicit state(lock_operation_sink& operation_sink);  // script_calls.cpp (it loads the built-in scripts)

  // ---- Data ----

  lock_operation_sink& sink;
  recognizer_stats stats;
  warning_handler warn_handler;
  std::uint64_t warnings = 0;

  // Classification by exact script text (EVAL) and by SHA1 (EVALSHA).
  struct sha_entry {
    script_class cls;
    bool inferred = false;       // learnt from the argument shape, not from the text
    bool acquire_proven = false; // an inferred SHA that answered nil or a PTTL >= 2
    // Value flow (an inferred [value, ttl] script): calls that showed it to be the
    // first script of a value (an acquire) or a later one (an extend).
    std::uint32_t acquire_votes = 0;
    std::uint32_t extend_votes = 0;
    // Values it met first (fresh) and was refused with: a waiter's attempts. An acquire's
    // are many; an extend's are the holds begun before a mid-run capture that it lost.
    std::uint16_t refused_fresh = 0;
    // Learnt from where a list reply's item came back (value_tracking.cpp). An acquire
    // drawing its holder's value: the reply item that is the value (1-based; 0: not
    // learnt), the first item a success answered (reply_first_unknown: not told), the
    // lone number argument that is the lease (1-based over KEYS[2..] then ARGV; 0: none).
    std::uint8_t owner_reply = 0;
    std::int8_t ok_first = recognizer_detail::reply_first_unknown;
    std::uint8_t lease_arg = 0;
    // A script seen acting for such a value (script_op::release or extend) and where
    // the value is among its arguments (as lease_arg).
    script_op holder_role = script_op::none;
    std::uint8_t holder_arg = 0;
    // List replies whose items were kept as candidates while nothing was learnt: a
    // script answering lists that no later call ever matches (a rate limiter, a queue)
    // stops filling the value table after max_candidate_replies.
    std::uint16_t candidate_replies = 0;
    // Answered a count between none and all of its keys for a value and a lease: its
    // calls on several keys are not node-redlock's (see infer_script).
    bool keys_not_all_locks = false;
    bool unread = false;  // counted in recognizer_stats::unread_shas
    // Shown to renew holds the capture never shows taken or freed (renew_unseen_hold):
    // where its value and its lease are in ARGV (1-based; 0: not shown).
    std::uint8_t unseen_hold_value = 0;
    std::uint8_t unseen_hold_lease = 0;
  };
  static constexpr std::uint16_t max_candidate_replies = 512;
  // The built-in scripts: always known, never evicted.
  recognizer_detail::string_map<script_class> builtin_text;
  // By SHA1: built at the first lookup by SHA1 (EVALSHA, SCRIPT LOAD, a new EVAL), as
  // hashing the scripts costs more than a short capture's whole analysis.
  recognizer_detail::string_map<sha_entry> builtin_sha_table;
  bool builtin_sha_ready = false;
  // Scripts and SHA1s learnt from the capture, least recently used forgotten first.
  recognizer_detail::lru_cache<script_class> by_text{script_cache_entries, script_cache_bytes};
  recognizer_detail::lru_cache<sha_entry> by_sha{sha_cache_entries, sha_cache_entries * 40};
  // Scripts learnt from the capture, read by their effect at their first call (see
  // effect_calls.cpp): at most max_learnt_effects, then classified by shape alone.
  struct learnt_effect {
    std::string text;  // run by each call (traced_calls.cpp); empty: not run
    std::string compiled;  // the text compiled, kept by its first traced run
    bool analysed = false;
    effect::script_effect found;
    script_class by_shape;  // when the probes found no lock effect
    sha_entry inference{{}, true, false};  // neither: inferred from the traffic
  };
  static constexpr std::size_t max_learnt_effects = 4096;
  std::vector<learnt_effect> effects;
  // Scripts whose probes ran out of budget: after max_effect_strikes, new scripts are
  // classified by shape alone (a capture of hostile scripts costs a bounded time).
  static constexpr std::size_t max_effect_strikes = 16;
  std::size_t effect_strikes = 0;
  // The last EVAL's script (clients repeat one, and comparing its text is cheaper than
  // hashing it): a built-in's, or a by_text entry's, forgotten whenever by_text changes
  // (an insert may evict it).
  const std::string* last_eval_text = nullptr;
  const script_class* last_eval_class = nullptr;
  // The ingest interner's identity of last_eval_text's bytes (exchange::interned_identity),
  // when the last EVAL carried one; 0: none. Valid only with last_eval_text: an EVAL
  // with this identity has that script, known with no compare of its (by then cold)
  // bytes. Forgotten with last_eval_text.
  std::uint64_t last_eval_identity = 0;
  std::array<char, 40> sha_scratch{};
  std::array<char, 40> vote_scratch{};

  // The database of each connection not simply in db 0 since its SYN: SELECTed (or
  // RESET) ones, and -1 for those whose earlier commands may be missing. One entry a
  // connection, dropped when it ends; the last one looked up is cached.
  std::unordered_map<std::uint64_t, std::int32_t> databases;
  std::uint64_t last_db_connection = 0;
  std::int32_t last_db = 0;

  // Lock values seen recently (see value_flow.hpp), and the script of the current call
  // (binary SHA1; zero for an EVAL, whose script is known by its text).
  recognizer_detail::value_flow flow{value_flow_entries};
  std::array<std::uint8_t, 20> current_sha{};
  bool current_is_script = false;

  // Redis Cluster: connections whose last command was an answered ASKING (the next
  // call is the asked one), the current redirect's target text, and the node pairs
  // already reported as cluster_link (a hash each; capped, then forgotten and
  // reported again, which the timeline takes as no change).
  std::unordered_set<std::uint64_t> asking;
  // The name each connection gave itself (CLIENT SETNAME, HELLO ... SETNAME), carried on
  // its operations (lock_operation::client_name): it tells whose a subscriber is.
  std::unordered_map<std::uint64_t, std::string> client_names;
  std::string redirect_text;
  std::unordered_set<std::uint64_t> links_reported;

  // The lock channels each connection is subscribed to, as its confirmed (S)SUBSCRIBEs,
  // (S)UNSUBSCRIBEs and messages show: an UNSUBSCRIBE naming no channel (redis-py's
  // unsubscribe(), go-redis) or a RESET leaves them all without naming them. At most
  // max_tracked_channels a connection (the oldest forgotten); dropped when it ends.
  // A key's notifications (keyspace_notifications.cpp) are kept as their key and database,
  // with the channel or pattern that delivers them: a keyevent channel or a pattern
  // delivers many keys', and leaving it leaves each.
  struct tracked_channel {
    std::string name;          // the channel; a key notification's: the key
    bool sharded = false;
    bool by_pattern = false;   // a key notification's: delivered by the PSUBSCRIBE pattern `source`
    std::int32_t key_db = -1;  // a key notification's: the key's database; -1: a lock channel
    std::string source;        // a key notification's: the channel or pattern delivering it
    std::int64_t woken_us = -1;  // a key notification's: its latest wake-up
  };
  // Which tracked channels a leave takes: a bare (S)UNSUBSCRIBE's, a bare PUNSUBSCRIBE's,
  // a RESET's (all).
  enum class left_channels : std::uint8_t { channels, sharded, patterns, all };
  static constexpr std::size_t max_tracked_channels = 256;
  // Each key a keyspace notification named, with its database (-1: several): a connection
  // joined mid-stream, its database unseen, that names the key is in that database. At
  // most max_key_databases (then forgotten all at once).
  static constexpr std::size_t max_key_databases = 4096;
  recognizer_detail::string_map<std::int32_t> key_databases;
  // The keys some attempt was refused on (a waiter's, which a notification may wake): an
  // event channel delivers every key of its database (a cache's too), and only these are
  // read, with no allocation for the others. At most max_lock_keys (then forgotten all at
  // once).
  static constexpr std::size_t max_lock_keys = 65536;
  recognizer_detail::string_map<char> lock_keys;
  std::unordered_map<std::uint64_t, std::vector<tracked_channel>> channels;

  // Locks held by a subscription (subscription_locks.cpp): the channels asked about with
  // PUBSUB NUMSUB (candidates until a SUBSCRIBE takes one just found free), each with its
  // holder; at most max_subscription_locks (a holderless one least recently seen is
  // forgotten first). holders_by_connection: what each holding connection holds.
  struct subscription_lock {
    std::uint64_t holder = 0;      // the subscribed connection holding it; 0: none known
    bool is_lock = false;          // a SUBSCRIBE took it once: it behaves as a lock
    bool holder_checked = false;   // the holder's own count check came
    bool has_client_ep = false;
    bool has_server_ep = false;
    std::int32_t holder_db = 0;
    std::int64_t seen_us = 0;
    // The client hosts that found it free (a NUMSUB answered 0), the latest last: a
    // SUBSCRIBE from one of them soon after takes it. Several may race.
    struct found_free {
      std::string host;
      std::int64_t at_us = 0;
    };
    std::vector<found_free> found_free_by;
    std::string holder_client;     // the holder's endpoints, for the release at its close
    std::string holder_server;
    endpoint holder_client_ep{};
    endpoint holder_server_ep{};
  };
  static constexpr std::size_t max_subscription_locks = 4096;
  // A SUBSCRIBE takes a channel found free by its host at most this long before (the
  // client names its connection or opens a new one in between).
  static constexpr std::int64_t subscribe_after_free_us = 1'000'000;
  recognizer_detail::string_map<subscription_lock> subscription_locks;
  std::unordered_map<std::uint64_t, std::vector<std::string>> holders_by_connection;

  // ---- lock_recognizer.cpp: the exchange, its dispatch, what every handler uses ----

  void on_exchange(const exchange& e);
  void dispatch(command_call& c);
  // One line naming the flow, to the warning handler (see lock_recognizer::warn_handler).
  void warn(const exchange& e, std::string_view what);

  std::int32_t database(const exchange& e) {
    if (e.connection == last_db_connection && (e.client_from_start || last_db != 0)) return last_db;
    std::int32_t db = 0;
    if (const auto it = databases.find(e.connection); it != databases.end()) db = it->second;
    else if (!e.client_from_start) databases.emplace(e.connection, db = -1);
    last_db_connection = e.connection;
    last_db = db;
    return db;
  }
  void set_database(std::uint64_t connection, std::int32_t db) {
    databases[connection] = db;
    last_db_connection = connection;
    last_db = db;
  }

  // Hands an operation to the sink. `in` is left as it is (a caller may emit it again
  // with other fields changed): an operation whose outcome emit changes (a redirect, a
  // value-checked call) is copied.
  void emit(const lock_operation& in) {
    if (in.kind == lock_op_kind::acquire && in.outcome == op_outcome::contended && !in.lock.empty()) note_lock_key(in.lock);
    if (in.db < 0 && !key_databases.empty() && !in.lock.empty()) [[unlikely]] {
      if (const std::int32_t db = database_of_key(in.lock); db >= 0) {
        // Joined mid-stream: the key's notifications name its database, so this
        // connection's (keyspace_notifications.cpp).
        set_database(in.connection, db);
        lock_operation o = in;
        o.db = db;
        emit(o);
        return;
      }
    }
    if (!undecided_nils.empty()) [[unlikely]] decide_nil_releases(in);
    const bool redirect = in.redirect != cluster_reply::none && in.outcome == op_outcome::error;
    const bool value_checked =
        in.family == lock_family::set_based || in.family == lock_family::redlock_multi || in.family == lock_family::setnx;
    ++stats.operations;
    if (in.inferred) ++stats.inferred;
    if (!redirect && !value_checked) {
      sink.on_operation(in);
      return;
    }
    lock_operation o = in;
    if (redirect) {
      o.outcome = op_outcome::redirected;  // not run on this node: retried elsewhere or later
      ++stats.redirects;
    }
    // An inferred SET-based call whose lease counts seconds (only those set it).
    if (inferred_lease_seconds && o.lease_ms > 0) o.lease_ms *= 1000;
    if (o.outcome != op_outcome::redirected && value_checked) {
      track_value(o);
      stats.values_tracked = flow.size();
      stats.values_evicted = flow.evictions();
    }
    sink.on_operation(o);
  }

  // ---- script_calls.cpp ----

  void on_script_load(command_call& c);
  void on_script_call(command_call& c);  // EVAL, EVALSHA and their _RO forms
  // The entry of an EVALSHA's (or a function's) SHA1, made current_sha; an unknown SHA1
  // gets a new entry to infer from the traffic. nullptr when `sha` is no SHA1.
  sha_entry* entry_of_sha(std::string_view sha);
  // A script call's operations once its class (and, for a call by SHA1, its entry) is known.
  void read_script_call(command_call& c, const script_class& cls, sha_entry* entry,
                        std::span<const std::string_view> keys, std::span<const std::string_view> argv);
  // (Defined and used in script_calls.cpp only: read_script_call inlined into EVAL's path.)
  inline void read_script_call_here(command_call& c, const script_class& cls, sha_entry* entry,
                                    std::span<const std::string_view> keys, std::span<const std::string_view> argv);
  // How a script call's operations come out of its class and reply.
  void emit_script_operations(command_call& c, const script_class& cls, std::span<const std::string_view> keys,
                              std::span<const std::string_view> argv);
  void emit_multi_key_operations(command_call& c, const script_class& cls, std::span<const std::string_view> keys,
                                 std::span<const std::string_view> argv);
  // The class an unknown SHA1's call is guessed to have from its argument shape and
  // reply (see lock_recognizer.hpp); op none when no guess fits.
  // ---- value_tracking.cpp: values drawn by a script and answered in a list ----
  // An unseen script answering a list: an acquire whose drawn value was learnt, or its
  // items remembered as candidate values. True when it emitted the call's operation.
  bool on_list_reply(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                     std::span<const std::string_view> argv);
  // Called for an argument of an unseen script that matches a candidate value: the
  // script that drew it is learnt as an acquire, and the value taken as holding.
  void learn_drawn_value(recognizer_detail::value_record& rec);

  bool read_textless_call(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                          std::span<const std::string_view> argv);
  // An unseen script's integer answer on a lock whose calls answer 0 / -errno, read as
  // 1 / 0 (script_calls.cpp); the locks shown to, by a hash each (at most max_errno_locks).
  void read_errno_convention(command_call& c, std::string_view key);
  static constexpr std::size_t max_errno_locks = 4096;
  std::unordered_set<std::uint64_t> errno_locks;
  void infer_by_held_value(command_call& c, sha_entry* entry, std::span<const std::string_view> keys,
                           std::span<const std::string_view> argv);
  // An unseen script renewing KEYS[1] for a hold whose taking and freeing no call shows
  // (value_tracking.cpp): true when it emitted the call's operation or kept the call.
  bool renew_unseen_hold(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                         std::span<const std::string_view> argv);
  // How many of an unseen script's KEYS name keys: in a call with no ARGV, the rest (from
  // the first number or random-looking token after KEYS[1]) are its arguments, passed as
  // KEYS (node-redis-lock).
  static std::size_t keys_named(std::span<const std::string_view> keys,
                                std::span<const std::string_view> argv) noexcept;
  script_class infer_script(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                            std::span<const std::string_view> argv);
  // ---- argument_roles.cpp: an unseen script's value and lease wherever they are ----
  // A random-looking token (digits, varied bytes; not a number, not a word like PX).
  static bool looks_like_value(std::string_view s) noexcept;
  // Serialized data (a control byte: msgpack, a frame): a call carrying it is no lock's.
  static bool is_serialized_data(std::string_view s) noexcept;
  // A decimal fraction (a timestamp, a score, a rate): never a holder's value.
  static bool is_decimal_fraction(std::string_view s) noexcept;
  // An unseen script's lease argument counts seconds (below 100), else milliseconds.
  static bool lease_in_seconds(std::string_view lease) noexcept;
  static recognizer_detail::argument_roles find_argument_roles(std::span<const std::string_view> argv) noexcept;
  // One token and one lease among ARGV for a renewal of `key`, a number that is one of
  // the key's name's segments (a job id in `q:jobs:16:lock`) naming the key, not a
  // lease; value 0 when that is not the call's shape.
  static recognizer_detail::argument_roles find_renewal_roles(std::string_view key,
                                                              std::span<const std::string_view> argv) noexcept;
  // find_argument_roles, learning the database indexes it finds and taking a lone small
  // number known as one for no lease.
  recognizer_detail::argument_roles roles_of(std::span<const std::string_view> argv) noexcept;
  // An unseen script no fixed shape explains whose ARGV carry one token and numbers, in
  // any order, answered 1/0, OK or nil: with a lease an acquire or an extend (told apart
  // by value flow), without one a release; op none when it is not that.
  script_class infer_by_argument_roles(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                                       std::span<const std::string_view> argv);
  // Database indexes (0..15, a bit each) seen beside a lease in unseen scripts' calls:
  // the same lone number beside a value in another call is that database, not a lease.
  std::uint16_t db_indexes = 0;
  // The inferred call being emitted has a lease in seconds (script_class::lease_seconds):
  // emit scales its SET-based operations' leases (the only families that set it).
  bool inferred_lease_seconds = false;
  recognizer_detail::string_map<sha_entry>& builtin_sha();
  // ---- permit_scripts.cpp: semaphores and latches ----
  void emit_permit_operations(command_call& c, const script_class& cls, std::span<const std::string_view> keys,
                              std::span<const std::string_view> argv);
  // ZREM of a sorted-set semaphore's key (one a recognised acquire script named): a release.
  void on_zrem(command_call& c);
  // The sorted-set semaphores' keys seen in acquire scripts, by server (at most
  // max_zset_semaphores; none forgotten: a new one beyond is not followed).
  static constexpr std::size_t max_zset_semaphores = 4096;
  std::unordered_set<std::string> zset_semaphores;
  // ---- function_calls.cpp: Redis Functions ----
  // A library's functions (FUNCTION LOAD) are learnt as scripts: each a text made of the
  // library and a call of its callback with KEYS and ARGV, known by that text's SHA1. A
  // function's name maps to that SHA1 per server (functions are server-wide); a name met
  // in FCALL before any load of it maps to a SHA1 of the server and the name, inferred
  // from the traffic like an unseen EVALSHA. At most max_functions names, the least
  // recently used forgotten first.
  struct loaded_function {
    std::string sha;      // 40 hex digits
    std::string library;  // empty: never seen loaded (inferred)
  };
  static constexpr std::size_t max_functions = 4096;
  static constexpr std::size_t max_functions_per_library = 64;
  recognizer_detail::lru_cache<loaded_function> functions{max_functions, max_functions * 96};
  std::string function_key_scratch;  // "server\0name", reused by each FCALL
  void on_function(command_call& c);       // FUNCTION LOAD / DELETE / FLUSH
  void on_function_call(command_call& c);  // FCALL, FCALL_RO
  void forget_library(std::string_view server, std::string_view library);
  std::string_view function_key(std::string_view server, std::string_view name);

  // ---- effect_calls.cpp ----
  // A counted semaphore's sorted set of its holders' expiries (its acquire scored its
  // holder there), to its count's key: a script that only sets a member's expiry to the
  // past there releases that holder (at most max_zset_semaphores, none forgotten).
  recognizer_detail::string_map<std::string> counted_expiry_sets;
  bool expiry_set_known(const effect::script_effect& e, std::span<const std::string_view> keys) const;
  // The class of a script learnt from the capture: one read by its effect when room is left.
  script_class effect_class(std::string_view text);
  void on_effect_call(command_call& c, std::uint16_t effect, std::span<const std::string_view> keys,
                      std::span<const std::string_view> argv);
  void emit_effect_operations(command_call& c, const effect::script_effect& e, std::span<const std::string_view> keys,
                              std::span<const std::string_view> argv);
  // ---- traced_calls.cpp ----
  // Scripts whose probes show no lock on their KEYS may still build a lock's key inside
  // Lua (`prefix .. id .. ':lock'`, the id popped from a list): each call of such a
  // script is run against a shadow of its server's keys learnt from the earlier calls,
  // and kept only when the run answers what the server answered. Its SETs with an
  // expiry, DELs and re-expiries of a key holding a value the call carried are the lock
  // operations (emitted only when `read`: a call already read otherwise only keeps the
  // shadow). True when the call's run emitted any. A script whose run runs out of its
  // budget is not run again (its text is dropped) and counts as an effect strike.
  bool on_traced_call(command_call& c, learnt_effect& learnt, std::span<const std::string_view> keys,
                      std::span<const std::string_view> argv, bool read);
  // A list move answered by the server (on_list_move), applied to the shadow by the
  // first traced call sent after its reply: a script that ran before the move finished
  // (a blocking pop waits for the push that answers it) does not see it.
  struct pending_list_move {
    std::int64_t reply_us = 0;
    std::string source, destination, item;
    bool from_head = false, to_head = true;
  };
  struct traced_server {
    std::string server;
    effect::shadow_store store;
    std::int64_t aged_to_ms = -1;  // the shadow's TTLs count from this time
    std::vector<pending_list_move> moves;  // by reply time, at most max_pending_moves
  };
  // Moves wait only until the next traced call.
  static constexpr std::size_t max_pending_moves = 64;
  // The shadow of `server_text`, made on first use; nullptr past max_traced_servers.
  traced_server* traced_server_of(std::string_view server_text);
  // Applies server's pending moves answered by `until_us` (traced_calls.cpp).
  static void apply_list_moves(traced_server& server, std::int64_t until_us);
  static constexpr std::size_t max_traced_servers = 8;
  // Runs without a lock operation after which the tracing stops (its shadows dropped):
  // a capture of scripts that build no lock pays for a bounded number of runs.
  static constexpr std::uint64_t max_traced_runs_without_lock = 4096;
  std::vector<traced_server> traced_servers;
  std::uint64_t traced_runs = 0;
  bool traced_found = false;
  bool traced_off = false;
  // Makes `text` the last EVAL's script when it is known.
  bool find_eval(std::string_view text);
  sha_entry* find_sha(std::string_view sha);
  // A script seen in full (EVAL, SCRIPT LOAD) and its SHA1.
  script_class learn(std::string_view text, std::string_view sha);
  // The SHA1 lower-cased into sha_scratch; empty when it is not 40 hex digits.
  std::string_view normal_sha(std::string_view s) {
    if (s.size() != 40) return {};
    for (std::size_t i = 0; i < 40; ++i) {
      const char c = resp::ascii_lower(s[i]);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
      sha_scratch[i] = c;
    }
    return {sha_scratch.data(), 40};
  }
  static std::array<std::uint8_t, 20> sha_bytes(std::string_view hex) noexcept {
    std::array<std::uint8_t, 20> out{};
    auto nibble = [](char c) { return static_cast<std::uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
    for (std::size_t i = 0; i < 20 && 2 * i + 1 < hex.size(); ++i) {
      out[i] = static_cast<std::uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    }
    return out;
  }
  // current_sha = {} in three stores (an EVAL per exchange; GCC zeroed it with `rep stos`).
  void clear_current_sha() noexcept {
    static constexpr std::uint8_t zeros[20] = {};
    std::memcpy(current_sha.data(), zeros, 8);
    std::memcpy(current_sha.data() + 8, zeros, 8);
    std::memcpy(current_sha.data() + 16, zeros, 4);
  }

  // ---- value_tracking.cpp ----

  // The role value flow has shown an inferred script to play (acquire or extend),
  // once the votes agree (4 to 1 at least); none before.
  static script_op learned_role(const sha_entry& e) noexcept;
  // The script that carried a value first turns out to be that value's acquire.
  void vote_first_acquire(recognizer_detail::value_record& rec);
  // The role of an unseen [value, ttl] script from how its value flowed so far (see
  // the header): the first script a value meets is its acquire, a later one its extend.
  script_op value_role(sha_entry& se, std::string_view server, std::string_view key, std::string_view value,
                       const std::array<std::uint8_t, 20>& sha, bool answered_yes, std::int64_t at_us);
  // Follows a value through a SET-based or node-redlock operation about to be
  // emitted; a value-checked call that changed nothing gets outcome `none`.
  void track_value(lock_operation& op);
  // An EXPIRE/PEXPIRE that a GET just before named the value of, and that found the key.
  void note_checked_renewal(const lock_operation& op);
  // A DEL that a GET just before named the value of, and that removed the key.
  void note_checked_release(const lock_operation& op);
  // The unseen script `sha` acquires `key` (and the server's keys): value_role's evidence.
  void note_acquire_script(std::string_view server, std::string_view key, const std::array<std::uint8_t, 20>& sha);
  // A fresh value's acquire by a plain command: the key's acquire is no script.
  void note_command_acquire(std::string_view server, std::string_view key);
  // Redisson ≥ 3.24 / node-redisson: an unlock names a latch key per unlock call; a
  // retry of the call names it again, and the script then replays the first reply
  // (the latch value) without doing anything. The client DELs the latch afterwards.
  // The record naming the unseen script shown to be a key's acquire (refused with
  // acquire_evidence fresh values): its first_sha.
  static std::uint64_t acquire_script_key(std::string_view server, std::string_view key) noexcept {
    return recognizer_detail::value_key(server, key, "\x02" "acquire");
  }
  static constexpr std::uint16_t acquire_evidence = 3;
  static std::uint64_t latch_key(std::string_view server, std::string_view latch) noexcept {
    return recognizer_detail::value_key(server, latch, "\x01latch");
  }
  bool replayed_unlock(std::string_view server, std::string_view latch);
  // A value seen sent over another connection while it held one of the server's keys:
  // no owner's identity (a constant every process sends), on its other keys too.
  static std::uint64_t shared_value_key(std::string_view server, std::string_view value) noexcept {
    return recognizer_detail::value_key(server, "\x03shared", value);
  }

  // ---- plain_commands.cpp ----

  void on_set(command_call& c);
  void on_setnx(command_call& c);
  void on_expire(command_call& c);  // EXPIRE, PEXPIRE
  void on_del(command_call& c);     // DEL, UNLINK
  void on_del_keys(command_call& c);  // DEL, UNLINK of several keys
  void on_get(command_call& c);     // GET: a value checked before a DEL or EXPIRE

  // ---- conditional_commands.cpp: compare-and-set, compare-and-delete ----
  // SET's condition on the key's present value (Redis 8.4, Valkey 8.1): IFEQ/IFNE compare
  // the value itself, IFDEQ/IFDNE its digest.
  enum class value_condition : std::uint8_t { none, equal, not_equal, digest_equal, digest_not_equal };
  struct set_options {
    value_condition condition = value_condition::none;
    std::string_view compared;  // IFEQ's value, IFDEQ's digest...
    bool get = false;           // the reply is the old value (nil: no key)
    bool keep_ttl = false;
    std::int64_t lease = -1;    // ms; -1: none named (KEEPTTL, no expiry)
  };
  void on_conditional_set(command_call& c, const set_options& o);
  void on_delex(command_call& c);   // DELEX key [IFEQ|IFNE|IFDEQ|IFDNE arg], DELIFEQ key value

  // A client that checks its value before a plain DEL or EXPIRE (`GET key`, compared with
  // its own, then `DEL key`: a script's `GET == value then DEL`, done by the client) names
  // the value the command acts for by that GET. The latest GET answered with a value on a
  // connection, kept until the connection's next command: a DEL/UNLINK/EXPIRE/PEXPIRE of
  // that key, sent once the answer came, carries the value as its owner; any other
  // command forgets it. A small table indexed by connection (a GET of another connection
  // in the same slot pushes one out: a check lost, never a wrong value); the strings keep
  // their capacity, so a GET allocates nothing once warm.
  struct checked_read {
    std::uint64_t connection = 0;  // 0: none
    std::int32_t db = 0;
    std::int64_t reply_us = -1;
    std::string key, value;
  };
  static constexpr std::size_t checked_read_slots = 16;  // a power of two
  std::array<checked_read, checked_read_slots> checked_reads{};
  bool any_checked_read = false;  // none yet: the common capture pays one branch
  checked_read& checked_read_of(std::uint64_t connection) noexcept {
    return checked_reads[connection & (checked_read_slots - 1)];
  }
  // The value the connection's GET just read of `key`, checked before this command;
  // empty when none. The read is used up either way.
  std::string_view take_checked_value(const command_call& c, std::string_view key);
  // Any other command on the connection: its read was not a check for a DEL or EXPIRE.
  void forget_checked_read(const command_call& c) noexcept {
    checked_read& r = checked_read_of(c.e.connection);
    if (r.connection != c.e.connection) return;
    switch (c.word) {
      case command_word::del:
      case command_word::unlink:
      case command_word::expire:
      case command_word::pexpire:
      case command_word::get: return;  // their handlers take it or replace it
      default: r.connection = 0;
    }
  }

  // ---- pubsub.cpp ----

  void on_push(const exchange& e, lock_operation& op);
  void on_subscription(command_call& c);  // (S|P)SUBSCRIBE, (S|P)UNSUBSCRIBE
  // Emits the unsubscribe of a tracked channel (a lock channel's, or a key notification's).
  // (sub_count: the server's count of subscriptions left, where its confirmation says.)
  void emit_left(lock_operation& op, const tracked_channel& t, std::int64_t sub_count = -1);

  // ---- keyspace_notifications.cpp: waiters woken by keyspace notifications ----
  // A message on a keyspace or keyevent channel (`source`: the channel, or the pattern
  // that matched it): false when `channel` is no such channel.
  bool on_key_notification(const exchange& e, lock_operation& op, std::string_view source, bool by_pattern,
                           std::string_view channel, std::string_view payload);
  // SUBSCRIBE / UNSUBSCRIBE naming a keyspace or keyevent channel; false when it is not one.
  bool on_key_channel(command_call& c, bool sub, std::string_view channel, std::string_view confirmed, std::int64_t count);
  // PSUBSCRIBE / PUNSUBSCRIBE (patterns name no key: their messages do).
  void on_pattern_subscription(command_call& c, bool sub);
  tracked_channel* key_watch(std::uint64_t connection, std::int32_t db, std::string_view key);
  // The database keyspace notifications named for `key` (-1: none, or several).
  std::int32_t database_of_key(std::string_view key) const;
  void note_key_database(std::string_view key, std::int32_t db);
  void note_lock_key(std::string_view key) {
    if (lock_keys.find(key) != lock_keys.end()) return;
    if (lock_keys.size() >= max_lock_keys) lock_keys.clear();
    lock_keys.emplace(std::string(key), 0);
  }
  tracked_channel& note_key_watch(std::uint64_t connection, std::int32_t db, std::string_view key, std::string_view source,
                                  bool by_pattern);
  // The key notifications delivered by `source` (a channel, or a pattern), forgotten here.
  std::vector<tracked_channel> take_key_watches(std::uint64_t connection, std::string_view source, bool by_pattern);

  // ---- subscription_locks.cpp: locks held by a subscription (PUBSUB NUMSUB) ----
  void on_pubsub(command_call& c);  // PUBSUB NUMSUB
  // RPOPLPUSH / BRPOPLPUSH / LMOVE / BLMOVE answered with the item moved: the traced
  // shadow's lists follow (traced_calls.cpp), as a job queue's worker pops a job id
  // itself and then hands it to the script that locks the job.
  void on_list_move(command_call& c);
  void on_subscriber_count(command_call& c, std::string_view channel, std::int64_t count, std::int64_t at);
  void on_subscription_lock_subscribe(command_call& c, std::string_view channel);
  void on_subscription_lock_left(command_call& c, std::string_view channel);
  void on_subscription_lock_left_all(command_call& c);
  void subscription_holder_ended(std::uint64_t connection, std::int64_t at_us);
  subscription_lock* subscription_lock_of(std::string_view channel);
  subscription_lock& subscription_candidate(std::string_view channel, std::int64_t at);
  void forget_holder(std::uint64_t connection, std::string_view channel);
  void release_all_held_by(std::uint64_t connection, const lock_operation* by, std::int64_t at_us);
  lock_operation holder_operation(const subscription_lock& s, std::int64_t at_us) const;
  void release_subscription_lock(subscription_lock& s, std::string_view channel, const lock_operation& op);
  void emit_subscription_op(std::string_view channel, lock_op_kind kind, op_outcome outcome, lock_operation op);
  void note_subscribed(std::uint64_t connection, std::string_view channel, bool sharded);
  void note_unsubscribed(std::uint64_t connection, std::string_view channel);
  // The channels a bare (S)UNSUBSCRIBE (sharded: SUNSUBSCRIBE) or a RESET (all) leaves;
  // forgotten here.
  std::vector<tracked_channel> take_channels(std::uint64_t connection, left_channels which);

  // ---- nil_releases.cpp ----

  // An unseen script inferred as a release (the holder's value, no lease) that answered
  // nil: nil says nothing when a script answers it whatever it did (node-mutex's `GET ==
  // id then DEL`). Called by the holder inside its lease, the call stays undecided (no
  // operation yet) until the lock's next operation decides it (decide_nil_releases);
  // once a SHA1's nil was decided a release `nil_release_proof` times, never a refusal
  // inside the lease, its nil is a release at once. False: not such a call, handled as
  // before.
  bool defer_nil_release(command_call& c, const script_class& cls, std::span<const std::string_view> keys,
                         std::span<const std::string_view> argv);
  // Decides the undecided calls on `op`'s lock (before `op` goes out): another owner's
  // acquisition inside the lease makes one a release at its call; the holder acting
  // again, another owner refused after its reply, or the lease run out, a refusal.
  void decide_nil_releases(const lock_operation& op);
  // Every undecided call of `connection` goes out as the refusal it was read as before.
  void settle_nil_releases(std::uint64_t connection);
  using endpoint_type = std::remove_const_t<std::remove_pointer_t<decltype(lock_operation::client)>>;
  // An operation kept to go out later (its texts and endpoints owned: the exchange's
  // buffers go), the unseen script's SHA1 that made it, and a deadline.
  struct kept_call {
    lock_operation op;  // its texts are restored() from the owned copies
    std::string lock, owner, client_text, server_text, client_name;
    endpoint_type client{}, server{};
    bool has_client = false, has_server = false;
    std::array<std::uint8_t, 20> sha{};
    std::int64_t deadline_us = -1;  // undecided nil: the holder's lease end (-1 unknown)
    void keep(const lock_operation& o) {
      op = o;
      lock = o.lock;
      owner = o.owner;
      client_text = o.client_text;
      server_text = o.server_text;
      client_name = o.client_name;
      if (o.client != nullptr) client = *o.client;
      if (o.server != nullptr) server = *o.server;
      has_client = o.client != nullptr;
      has_server = o.server != nullptr;
    }
    lock_operation restored() const {
      lock_operation o = op;
      o.lock = lock;
      o.owner = owner;
      o.client_text = client_text;
      o.server_text = server_text;
      o.client_name = client_name;
      o.client = has_client ? &client : nullptr;
      o.server = has_server ? &server : nullptr;
      return o;
    }
  };
  using undecided_nil = kept_call;
  // renew_unseen_hold's calls not yet shown to be renewals (their script not yet seen
  // renewing a key twice), each until its lease's end (deadline_us); at most
  // max_unseen_renewals_kept (the oldest dropped).
  static constexpr std::size_t max_unseen_renewals_kept = 64;
  std::vector<kept_call> unseen_renewals_kept;
  struct nil_votes {
    std::uint32_t releases = 0;
    bool refused = false;
  };
  static constexpr std::uint32_t nil_release_proof = 3;
  static constexpr std::size_t max_undecided_nils = 256;
  std::vector<undecided_nil> undecided_nils;
  std::vector<std::pair<std::array<std::uint8_t, 20>, nil_votes>> nil_release_votes;
  nil_votes& votes_of(const std::array<std::uint8_t, 20>& sha);
  void send_undecided(undecided_nil& u, bool released);

  // ---- transactions.cpp: plain lock commands queued in MULTI, run at EXEC ----

  // A command queued in MULTI is answered `+QUEUED`; what it did comes back in EXEC's
  // array, at its place among the connection's queued commands. From a MULTI seen on a
  // connection to its EXEC or DISCARD, the plain lock commands (SET, SETNX, EXPIRE,
  // PEXPIRE, DEL, UNLINK) are kept, not read at their QUEUED, and read at EXEC with their
  // own element of its reply (their times EXEC's: when they ran). A transaction whose MULTI
  // was not captured is read as before (each command at its QUEUED).
  struct queued_command {
    std::uint32_t position = 0;  // among the transaction's queued commands
    command_word word = command_word::other;
    std::vector<std::string> args;
  };
  struct open_transaction {
    std::uint64_t connection = 0;
    std::uint32_t queued = 0;  // commands answered QUEUED so far
    std::vector<queued_command> commands;
  };
  static constexpr std::size_t max_open_transactions = 64;
  static constexpr std::size_t max_kept_queued = 64;  // a transaction's plain lock commands kept
  std::vector<open_transaction> open_transactions;  // empty: the common capture pays one branch
  // MULTI, a queued command, EXEC or DISCARD on a connection with a MULTI seen: true when
  // the call is taken care of here (not read further as itself).
  bool transaction_step(command_call& c);
  void run_queued(const exchange& exec, open_transaction& t, const message& reply);
  void end_transaction(std::uint64_t connection) noexcept;
  // The body of on_exchange once the call's reply is read: `c.reply` may be an element of
  // EXEC's array (a queued command run at EXEC).
  void read_call(command_call& c);
  // The operation filled with the exchange's connection, database, endpoints and times.
  void begin_call(command_call& c) {
    const exchange& e = c.e;
    lock_operation& op = c.op;
    op.connection = e.connection;
    op.db = database(e);
    op.client = e.client;
    op.server = e.server;
    op.client_text = e.client_text;
    op.server_text = e.server_text;
    op.request_us = e.request_us;
    op.reply_us = e.reply_us;
    op.opened_us = e.opened_us;
    op.connection_sequence = e.connection_sequence;
    if (!client_names.empty()) {
      if (const auto it = client_names.find(e.connection); it != client_names.end()) op.client_name = it->second;
    }
    current_is_script = false;
  }
  inline void read_call_here(command_call& c);  // (defined and used in lock_recognizer.cpp only)

  // ---- connection_state.cpp ----

  void on_select(command_call& c);
  void on_reset(command_call& c);
  void on_connection_end(std::uint64_t connection, std::int64_t at_us);
  // CLIENT SETNAME / HELLO ... SETNAME answered without an error: the connection's name.
  void note_client_name(const command_call& c);

  // ---- redis_cluster.cpp ----

  void on_asking(command_call& c);
  // An error reply: a cluster redirect sets the operation's redirect, slot and target.
  void on_error_reply(command_call& c);
  void on_cluster(command_call& c);  // CLUSTER SLOTS / SHARDS
  void report_link(const exchange& e, std::string_view other_node);
  void report_cluster_nodes(const exchange& e, bool shards);
};

}  // namespace lockscope::locks
