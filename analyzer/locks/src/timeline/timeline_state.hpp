// lock_timeline's private state: every data member of lock_timeline::impl, declared
// here in one place, and its member functions by job, each job defined in its own
// file of src/timeline/ (named at each group below).
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lockscope/ingest/short_bytes.hpp"
#include "lockscope/lock/naming.hpp"

#include "lockscope/locks/lock_timeline.hpp"
#include "timeline/held_events.hpp"
#include "timeline/lock_store.hpp"
#include "timeline/permit_book.hpp"
#include "timeline/stable_vector.hpp"
#include "timeline/text_interner.hpp"
#include "timeline/timer_queue.hpp"
#include "timeline/timeline_types.hpp"

namespace lockscope::locks {

using namespace timeline_detail;

struct lock_timeline::impl {
  timeline_options options;
  lock_event_sink& sink;
  interner owners;
  interner texts;                     // "ip:port"
  id_table lock_ids{id_table::growth::by_half};
  lock_store locks;
  holder_pool pool;                   // first holders of held locks
  timer_queue timers;
  std::unordered_map<std::uint64_t, std::uint32_t> connection_ids;
  // The connections (indexes) with a record naming an owner of the client: a new
  // waiter finds its client's subscription here, not by walking every connection's
  // records (a herd of 20,000 subscribed waiters: 20,000 walks of 40,000 connections).
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> subscribers_by_client;
  stable_vector<connection_info> connections;
  // What a dormant waiter's record leaves out (waiter_vector.hpp), from its connection.
  struct dormant_fields final : waiter_context {
    explicit dormant_fields(const stable_vector<connection_info>& c) : connections(c) {}
    void complete(waiter& w) const override;
    const stable_vector<connection_info>& connections;
  } waiter_fields{connections};
  std::vector<std::uint32_t> free_connections;  // indices of freed entries, reused first
  stable_vector<lock_side> sides;
  stable_vector<lock_extra> extras;
  std::int64_t now = -1;
  std::int64_t first = -1;
  // Exclusive acquisitions while another owner still held the lock, not reported yet:
  // replies on different connections can be captured out of the server's order, so an
  // unlock by that owner sent before this acquisition's reply (its reply captured just
  // after) means the server ran the unlock first. Reported once reply_skew_us passed.
  struct suspected_overlap {
    std::uint32_t lock = no_id, owner = no_id, other = no_id, conn = no_id;
    std::int64_t at = 0;
    bool inferred = false;
    bool database_guessed = false;  // either connection's database was counted as db 0
    // Not an overlap but a renewal refused to its holder at `at` (the key was gone): the
    // owner's unlock, sent before that reply and captured after it, ran first on the
    // server (the refusal is then its effect, not a lost key). `other` is no_id.
    bool refused_renewal = false;
  };
  std::vector<suspected_overlap> suspected_overlaps;
  // The latest releases (lock, owner's text hash, reply time), a ring: a renewal answered
  // OK whose reply is captured after its owner's release, both outstanding at once, ran
  // first on the server (a watchdog renewal crossing the unlock): it does not bring the
  // holder back. By hash, not interned id: the ring keeps no owner alive.
  struct recent_release {
    std::uint32_t lock = no_id;
    std::uint64_t owner_hash = 0;
    std::int64_t at = 0;
  };
  std::array<recent_release, 8> recent_releases{};
  std::size_t next_release = 0;
  // Every (server, database) a lock was seen in; a lock's row names its scope's index.
  // Found through the server's first scope (its others chained), the last one cached.
  struct scope {
    std::string server;  // "" with merge_servers
    std::int32_t db = 0;
    std::uint32_t next = no_id;  // the server's next scope (another database)
    // Redis Cluster: the scope of the cluster this node's scope joined (no_id: it is
    // its own); `label` names a cluster's scope; `seen`: an operation named it (not
    // only a cluster_link).
    std::uint32_t alias = no_id;
    std::string label;
    bool seen = false;
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  stable_vector<scope> scopes;
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> scope_by_server;
  std::uint32_t last_scope = no_id;
  // link_servers' re-filings so far: a scope resolved before one may be stale, and while
  // there are none every scope is its own (canon() has no alias to walk).
  std::uint64_t scope_links = 0;
  // A client's subscriber connection as far as the episodes tell (its best partner);
  // entries go when that connection ends.
  std::unordered_map<std::uint64_t, std::uint64_t> subscriber_of_client;
  // ---- shared life (subscriber_links.hpp) ----
  // The connections seen from their SYN, by that time (index into connections), and the
  // client each connection name was used by (ambiguous_client: by several).
  std::multimap<std::int64_t, std::uint32_t> opened_connections;
  std::unordered_map<std::string, std::uint64_t, text_hash, std::equal_to<>> client_of_name;
  static constexpr std::uint64_t ambiguous_client = ~std::uint64_t{0};
  // A subscriber opened within this of a command connection of one client (and of no
  // other's) shares that process's life: Redisson opens its pub/sub connection beside its
  // first command connection (seen: 19-34 ms apart on a loaded host), lockscope's client
  // right after its first failed attempt.
  static constexpr std::int64_t opened_together_us = 100'000;
  // What ties a subscriber connection to a client: its name, or its opening.
  struct life_tie {
    std::uint64_t client = 0;
    bool by_name = false;
  };
  impl(const timeline_options& o, lock_event_sink& s)
      : options(o), sink(s), outgoing({o.link_hold_us > 0 ? o.link_hold_us : 0}), forget_at(o.max_locks) {}
  static constexpr std::size_t scanned_holders = 32;  // more: found by holder_index
  static constexpr std::size_t scanned_waiters = 32;  // more: found by waiter_index
  std::uint32_t last_conn_ = no_id;
  // Redisson's waiter fails, SUBSCRIBEs at once, and retries as soon as the SUBSCRIBE is
  // confirmed. When the subscription was guessed to be another waiter's (the latest
  // failure from that address before it, among several), and instead `w` retries first,
  // within subscribe_retry_us of the confirmation, having failed within wake_window
  // before the SUBSCRIBE went out (a client may connect its subscriber first), the
  // subscription is w's: the guessed waiter had not tried again. Not when the traffic
  // has shown w's client subscribing on another connection: a client that retries at
  // once after its first failure (node-redisson's way) looks the same. Seen in churn on
  // one host: a poller's attempt landed between a Redisson-style waiter's failure and
  // its SUBSCRIBE, and the poller was then charged with that subscription's loss and a
  // timer wake-up.
  static constexpr std::int64_t subscribe_retry_us = 2'000;
  // A bound on a subscription's unanswered messages (a client subscribed with no waiter
  // left to answer them).
  static constexpr std::uint32_t max_unanswered = 1u << 20;
  // More exchanges than this over a waiter's connection between its single try and its
  // next attempt: the client did other work meanwhile (continuing_waiter, waiters.hpp).
  // The recordings' pollers carry at most 6 (another thread's heartbeat over a shared
  // pool); a refused job put back (node-resque) is 8, RQ's worker round 19 or more.
  static constexpr std::uint32_t busy_between_tries = 7;
  // The exchanges its connection carried between its latest refusal and `op` (0: `op`
  // came next), at most 255.
  std::uint8_t exchanges_since_refusal(const lock_operation& op) {
    const std::uint32_t between = op.connection_sequence - connections[conn_index(op)].refused_sequence;
    return static_cast<std::uint8_t>(std::clamp<std::uint32_t>(between, 1, 256) - 1);
  }
  // The waiter a subscriber connection's event is about, and how sure that is.
  struct linked {
    waiter* w = nullptr;
    link_confidence confidence = link_confidence::none;
  };
  std::int64_t first_op_us = -1;  // the capture's first operation (request time)
  // continuing_waiter found the owner's wait ended and its new one begun at this request
  // time, before the operation at hand (-1: at this operation, if a new one begins).
  std::int64_t new_wait_from_us = -1;
  // The acquire at hand is its connection's next lock operation after a refused attempt on
  // the same lock (connection_info::refused_lock, read before step_after_refusal clears it):
  // nothing else went over the connection between, not even a release of the refused
  // value (value_redrawn_at_cadence; waiter_of_fresh_value: a waiter's next round).
  bool attempt_follows_own_refusal = false;
  // ... or after a refused attempt on another lock (waiter_of_fresh_value: a single try
  // given up, its client on to its next task).
  bool attempt_follows_other_refusal = false;
  // ... or after any other lock's operation (a refusal, an acquisition, a release).
  bool attempt_follows_other_operation = false;
  // The capture ends: connections that end now were not seen closing (lock_timeline.hpp).
  bool capture_ending = false;
  // The capture's end: the waiters of the connections ending together leave in one pass
  // per lock (capture_end.hpp).
  enum class capture_end_mode : std::uint8_t { undecided, together, one_by_one };
  capture_end_mode capture_end = capture_end_mode::undecided;
  std::vector<std::uint32_t> ending_conns;  // in the order they ended
  std::vector<std::uint32_t> ending_waits;  // the locks they waited on, as listed
  std::int64_t ending_at_us = -1;
  bool defer_capture_end_waits(std::uint32_t conn, std::int64_t at, std::vector<std::uint32_t>& waits);
  void leave_capture_end_waits();
  void capture_end_operation(const lock_operation& op);
  // An anomaly retry() withheld for want of a certain link, and whose attempt it was:
  // said on that attempt's event (lock_event::link_not_certain) by emit().
  anomaly_kind withheld_ = anomaly_kind::none;
  std::uint32_t withheld_owner_ = no_id;
  void withhold(const waiter& w, anomaly_kind kind);
  // Events on their way out; subscriber events whose link is a guess wait there for the
  // traffic's decision (held_events.hpp; dispatch.hpp: emit_linked, decide_link).
  held_events outgoing;
  // ---- per-server waits of MultiLock/RedLock threads (group_waits.hpp) ----
  // A Redisson thread's latest refused attempt, by (name, client IP, thread): the scope
  // it waits in and its owner's text hash (no interned id: the table keeps no owner
  // alive). Its next acquisition or unlock of the name in another scope ends that wait.
  struct thread_wait {
    std::uint32_t scope = no_id;
    std::uint64_t owner_hash = 0;  // 0: a free slot
    std::uint64_t client = 0;      // its uuid's hash
  };
  struct thread_keys {
    std::uint64_t thread = 0, name_ip = 0, client = 0;
  };
  // Up to 4 processes of one host whose threads share a number; their latest unlocks.
  struct thread_slots {
    std::array<thread_wait, 4> waits{};
    struct unlock_seen {
      std::uint64_t client = 0;
      std::uint32_t scope = no_id;
      std::int64_t request_us = 0;
    };
    std::array<unlock_seen, 4> unlocks{};
    std::uint8_t next_wait = 0, next_unlock = 0;
  };
  std::unordered_map<std::uint64_t, thread_slots> thread_waits;
  // (name, IP, scope) → the client (uuid hash) seen acquiring; a second client there
  // marks (name, IP) as two processes whose thread ids may coincide. Then a wait ends
  // only by an action of a client known to share its process: two clients whose unlocks
  // of the name, by one thread number, were sent within pair_window_us (a group's
  // unlock goes to every server at once).
  std::unordered_map<std::uint64_t, std::uint64_t> group_clients;
  std::unordered_set<std::uint64_t> group_ambiguous;
  std::unordered_set<std::uint64_t> group_pairs;
  // (name, scope) whose lock channel was subscribed to or carried a message: its waiters
  // listen (even when no subscriber is tied to one of them).
  std::unordered_set<std::uint64_t> channels_heard;
  static constexpr std::int64_t pair_window_us = 2'000;
  static constexpr std::size_t max_group_entries = 1u << 16;
  static thread_keys group_thread_keys(const lock_operation& op);
  void group_thread_acted(std::uint32_t where, const lock_operation& op);
  bool waits_by_pubsub(std::uint32_t scope, std::string_view name, const waiter& w) const;
  // ---- forgetting idle locks (timeline_options::max_locks) ----
  // Between operations (no row is referenced from the stack), the rows of the locks
  // that still matter are copied into a new store and everything that names a lock by
  // id is rewritten; the old rows, their side records and lookup slots go.
  std::size_t forget_at = 0;  // 0: never
  forgotten_locks forgotten;
  // Rows taken out of the locks after the end (lock_timeline::set_aside).
  std::unordered_set<const lock_state*> set_aside_rows;
  std::vector<lock_timeline::set_aside_family> set_aside_families;
  // A lock whose owner's lease ran out is kept that long after a pass first finds it
  // idle: a late renewal or unlock by that owner (a paused process resuming) is
  // expired_while_held, which only its row can tell.
  static constexpr std::int64_t expired_memory_us = 600'000'000;
  std::vector<std::pair<std::uint32_t, std::int64_t>> expired_kept;  // (id, since), by id
  // ---- announced operations (will_handle) ----
  // will_handle() loads what handling the announced operations reads first (their id
  // table slots, rows and holders) in three passes, so that each pass's misses overlap,
  // and keeps what it resolved. Rows and holders are read, not prefetched: on the
  // (virtualized) machines measured, a software prefetch far from its use often came
  // too late or not at all, while a pass of independent loads overlaps its misses
  // for certain (the keep-up replay: ~8% less CPU than prefetching them). handle()
  // then takes an operation's candidate lock instead of hashing its name and probing
  // again, once it has checked that the candidate is what find_lock() would give (the
  // same scope and name, the table not reshaped since). A stale or wrong announcement costs a lookup, never a wrong lock.
  // (Spreading the passes over the operations handled meanwhile, each stage a few
  // operations ahead, measured ~10% slower than these bursts.)
  struct announced {
    const lock_operation* op = nullptr;  // matched by address only, never read later
    std::uint64_t generation = 0;        // lock_ids' when `id` was read
    // What `where` was resolved from: the operation's server text (its bytes unchanged
    // until delivery: lock_operation_sink::will_handle) and database, and scope_links then.
    const char* server = nullptr;
    std::uint32_t server_size = 0;
    std::int32_t db = 0;
    // The lock's name hashed (`hash`, under `where`): its bytes unchanged, as the server's.
    const char* lock_text = nullptr;
    std::uint32_t lock_size = 0;
    std::uint32_t hash = 0;
    std::uint64_t scope_links = 0;
    std::uint32_t where = no_id;         // no_id: not looked up
    std::uint32_t id = no_id;            // the first id with `hash` in its probe run
  };
  static constexpr std::size_t announced_capacity = 64;
  std::array<announced, announced_capacity> upcoming{};
  std::size_t upcoming_head = 0, upcoming_tail = 0;  // the announced, not yet handled
  unsigned touched = 0;  // what the passes read (kept, so that the reads stay)
  // An operation the key answered as its holder's (a renewal, an unlock, a PEXPIRE or DEL
  // that found it: not an acquisition, as a reentry and a fresh acquisition after an
  // expiry get the same reply) proves the key was there when the command ran, which
  // was before its reply. A holder's deadline between the request and the reply must not
  // fire first (a server descheduled between running the command and writing its reply):
  // it moves past the reply while the clock catches up, and comes back if the operation
  // left it as it was.
  struct shielded_deadline {
    std::uint32_t owner = no_id;
    std::int64_t deadline_us = -1;
  };

  // ---- identity (timeline/identity.hpp) ----
  std::uint32_t canon(std::uint32_t s) const noexcept;
  std::uint32_t scope_of(const lock_operation& op);
  void link_servers(std::string_view a, std::string_view b);
  [[gnu::always_inline]] std::uint32_t raw_scope(std::string_view server, std::int32_t db);
  [[gnu::noinline]] std::uint32_t find_scope(std::string_view server, std::int32_t db);  // identity.cpp
  std::uint32_t scope_of_unknown_db(std::uint32_t db0, std::string_view name) const;
  std::uint32_t lock_of_guessed_db(const lock_operation& op);
  static std::uint32_t lock_hash(std::uint32_t where, std::string_view name) noexcept;
  std::uint32_t find_lock(std::uint32_t where, std::string_view name) const;
  // Whether lock `id` is `name` filed under scope `where`.
  bool lock_is(std::uint32_t id, std::uint32_t where, std::string_view name) const;
  static std::string_view name_of(const lock_state& l) noexcept;
  // Where a lock not found would go in lock_ids: its hash, and the slot the lookup ended
  // on (id_table::no_slot: insert() finds one).
  struct lock_slot {
    std::uint32_t hash = 0;
    std::size_t empty = id_table::no_slot;
  };
  // `found`: find_announced(…, slot), nothing added to lock_ids since.
  std::uint32_t lock_id(std::uint32_t where, std::string_view name, std::uint32_t found, const lock_slot& slot);

  // ---- lock rows (timeline/lock_rows.hpp) ----
  void count_acquisition(lock_state& l);
  void count_renewal(lock_state& l);
  void count_expiry(lock_state& l);
  [[gnu::always_inline]] lock_extra& ex(lock_state& l);
  lock_extra& new_extra(lock_state& l);  // (out of line)
  [[gnu::always_inline]] lock_side& side_of(lock_state& l);
  lock_side& new_side(lock_state& l);  // (out of line)
  const lock_side* side_ptr(const lock_state& l) const;
  [[gnu::always_inline]] bool has_extra(const lock_state& l) const;
  [[gnu::always_inline]] lock_extra* xp(const lock_state& l);
  [[gnu::always_inline]] const lock_extra* xp(const lock_state& l) const;
  void add_hold(lock_state& l, std::int64_t us);
  std::int64_t first_hold_of(const lock_state& l) const;
  void set_first_hold(lock_state& l, std::int64_t us);

  // ---- holders (timeline/holders.hpp) ----
  holder* first_holder(lock_state& l);
  bool has_holder(const lock_state& l) const;
  template <class F>
  void for_each_holder(lock_state& l, F&& f);
  holder* find_holder(lock_state& l, std::uint32_t owner);
  holder& add_holder(lock_state& l, std::uint32_t owner, std::uint32_t conn);
  void remove_holder(lock_state& l, holder* h);
  void clear_holders(lock_state& l);
  void expire(lock_state& l, holder& h, std::int64_t at);
  // A hold begun before the capture (its holder first seen by a renewal or a release):
  // held at least since the capture's first operation (lock_event::held_since_capture_start).
  void held_since_capture(lock_state& l, lock_event& e, std::int64_t at);
  void set_last_expired(lock_state& l, std::uint32_t owner);
  bool take_expired(lock_state& l, std::uint32_t owner);
  void note_owner(std::uint32_t conn, std::uint32_t id, std::uint32_t owner);
  std::uint32_t last_owner_on(std::uint32_t conn, std::uint32_t id) const;
  shielded_deadline shield_answering_holder(lock_state& l, const lock_operation& op, std::int64_t at, bool plain);
  void unshield(std::uint32_t id, lock_state& l, const shielded_deadline& s, std::int64_t at);

  // ---- waiters (timeline/waiters.hpp) ----
  waiter* find_waiter(lock_state& l, std::uint32_t owner);
  waiter* find_waiter(lock_extra& x, std::uint32_t owner);
  [[gnu::always_inline]] void forget_waiter(lock_extra& x, const waiter& w);
  template <class Leaves, class Concerns = bool (*)(const waiter_vector::dormant&)>
  void remove_waiters(lock_extra& x, Leaves&& leaves, Concerns&& concerns = [](const waiter_vector::dormant&) { return true; });
  template <class Leaves>
  void remove_waiters_keyed(lock_extra& x, waiter_keys::map waiter_keys::*by, std::uint64_t key, Leaves&& leaves);
  void after_removals(lock_extra& x, std::size_t before);
  void drop_waiter(lock_state& l, std::uint32_t lock, waiter* w);
  void unlist_wait(std::uint32_t conn, std::uint32_t lock);
  void move_waiter(waiter& w, std::uint32_t lock, std::uint32_t conn, std::uint64_t connection);
  void became_free(lock_state& l, std::int64_t at);
  void free_interval_ends(lock_state& l, std::int64_t at);
  void released_publishing(lock_state& l, std::uint32_t lock, std::int64_t at);
  std::uint64_t client_key(std::uint32_t owner, std::uint64_t connection);
  static std::uint64_t client_key_of(std::string_view uuid, std::uint64_t connection) noexcept;
  std::size_t client_part_size(std::uint32_t owner);
  static std::size_t client_part_length(std::string_view owner) noexcept;
  std::string_view client_part(std::string_view owner) const;
  // client_part's last owner and its answer's length (0: none): an attempt asks about its
  // owner two or three times, and the UUID's check is 160 instructions. A copy of the
  // text, so that a buffer reused at the same address is no match.
  struct client_part_answer {
    std::array<char, 48> owner{};
    std::size_t size = SIZE_MAX;
    std::size_t part = 0;
  };
  mutable client_part_answer client_part_last;
  void retry(lock_state& l, std::uint32_t lock, waiter& w, const lock_operation& op, std::int64_t at);
  waiter* continuing_waiter(lock_state& l, std::uint32_t lock, std::uint32_t owner, const lock_operation& op);
  bool busy_since_single_try(const waiter& w, const lock_operation& op);
  void note_value_back_beside_another(std::uint32_t lock, std::uint32_t owner, const lock_operation& op);
  void note_refused_by_own_hold(lock_state& l, std::uint32_t owner, std::uint32_t conn);
  void hold_as_cut(waiter& w);
  void say_held_cut(lock_state& l, const waiter& w, std::int64_t at);
  void cut_was_still_waiting(waiter& w, const lock_operation& op);
  waiter* end_pending_cuts(lock_state& l, std::uint32_t lock, waiter& w, const lock_operation& op);
  bool tried_beside_held_cut(std::uint32_t lock, const waiter& w, std::int64_t at_once_us);
  waiter* waiter_of_owner(lock_state& l, std::uint32_t owner, const lock_operation& op);
  waiter* waiter_of_fresh_value(lock_state& l, std::uint32_t lock, std::uint32_t owner, const lock_operation& op);
  void note_side_by_side_waits(const waiter& w, std::uint32_t lock);  // waiter_moved_on.hpp
  void follow_up_refusal(std::uint32_t conn, std::uint32_t id, const lock_operation& op);  // waiter_moved_on.hpp
  bool cleaned_up_again(std::uint32_t conn, const lock_operation& op);  // waiter_moved_on.hpp
  [[gnu::always_inline]] void step_after_refusal(std::uint32_t conn, std::uint32_t id, const lock_operation& op);
  void closed_after_cleanup(std::uint32_t conn, std::int64_t at);
  void gave_up_at_cleanup(std::uint32_t conn, std::uint32_t lock, wait_end how, std::int64_t at);
  void left_queue(std::uint32_t id, const lock_operation& op, std::uint32_t owner);
  void withdrew_attempt(lock_state& l, std::uint32_t lock, std::uint32_t owner, const lock_operation& op);
  std::int64_t expected_wait_us(lock_state& l, const lock_operation& op, std::int64_t at);
  bool waits_on_subscription(const waiter& w, std::uint32_t lock, std::uint64_t ended);
  static bool polls(const waiter& w);
  bool has_sibling(lock_state& l, std::uint32_t owner, std::uint64_t client);
  void report_give_up(lock_state& l, const waiter& w, wait_end how, std::int64_t ended, std::int64_t at, bool at_least);
  void give_up(lock_state& l, std::uint32_t lock, waiter* w, wait_end how, std::int64_t ended, std::int64_t at,
               bool ended_at_least = false);
  void remember_exact_give_up(lock_extra& x, const waiter& w, std::int64_t wait_us);
  void likely_wait(const lock_extra& x, const waiter& w, lock_event& e);
  void stretch_waited_through_before_give_up(lock_state& l, const waiter& w, std::int64_t ended, std::int64_t at, lock_event& gave_up);
  void give_up_due_waiters(lock_state& l, std::uint32_t lock, std::int64_t at);
  void give_up_stopped_pollers(std::int64_t end_us);
  void attribute_to_closed_holder(const lock_state& l, lock_event& e, std::int64_t first_us, std::int64_t until_us) const;

  // ---- waiter lookups (timeline/waiter_lookup.hpp) ----
  static waiter* waiter_at(lock_extra& x, std::uint64_t seq);
  waiter_keys& keys_of(lock_extra& x);
  [[gnu::always_inline]] static void index_keys(lock_extra& x, const waiter& w);
  static void index_kept_keys(waiter_keys& keys, const waiter& w);
  static void unindex_keys(lock_extra& x, const waiter& w);
  static void note_attempt(lock_extra& x, const waiter& w);
  static void no_waiters_left(lock_extra& x);
  static void set_sub_connection(lock_extra& x, waiter& w, std::uint64_t sub);
  static void set_waiter_conn(lock_extra& x, waiter& w, std::uint32_t conn, std::uint16_t ip_tag);
  waiter* first_on_conn(lock_extra& x, std::uint32_t conn);
  static void set_waiter_deadline(lock_extra& x, waiter& w, std::int64_t t);
  static std::int64_t earliest_waiter_deadline(lock_extra& x);
  std::vector<std::uint64_t> woken_seqs;  // a key's seqs copied for a pass that edits the key (kept: no allocation a pass)
  std::vector<std::uint64_t> keyed_seqs;  // choose_waiter's and link's, as woken_seqs
  std::vector<std::uint64_t> address_seqs;  // the waiters of a subscriber's address (by_ip)

  // ---- subscriptions (timeline/subscriptions.hpp) ----
  static connection_info::subscription* subscription_of(connection_info& c, std::uint32_t lock);
  static connection_info::subscription* record_of(connection_info& c, std::uint32_t lock);
  void set_inactive(std::uint32_t conn, std::uint32_t lock, std::int64_t at);
  void put_subscription(std::uint32_t conn, connection_info::subscription* r, const connection_info::subscription& v);
  void unindex_subscriber(std::uint32_t conn, std::uint64_t client);
  bool subscribed(const waiter& w, std::uint32_t lock);
  bool has_subscribed_waiter(lock_state& l, std::uint32_t lock);
  void subscription_ended(std::uint32_t lock, std::uint64_t sub, std::int64_t at);
  void left_again(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t at);  // waiter_moved_on.hpp
  static std::int64_t left_until(const lock_extra& x, const waiter& w);  // waiter_moved_on.hpp

  // ---- subscriber links (timeline/subscriber_links.hpp) ----
  static pairing pairing_of(const connection_info& s, std::uint64_t client);
  static std::uint64_t best_partner(const connection_info& s);
  void learn(connection_info& s, std::uint64_t client);
  static std::uint32_t episodes_of(const connection_info& s, std::uint64_t client);
  void forget_subscriber(std::uint64_t client, std::uint64_t sub);
  bool subscribes_elsewhere(std::uint64_t client, const connection_info& s);
  bool listens_elsewhere(std::uint64_t client, const connection_info& s, std::uint32_t lock);
  bool busy_before_capture(const lock_state& l) const;
  bool message_just_before(const lock_extra& x, std::int64_t at) const;
  void learn_lone_refused(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t request);
  std::uint64_t learn_lone_acquirer(lock_state& l, std::uint32_t lock, connection_info& s,
                           const connection_info::subscription* sub, std::int64_t request);
  static constexpr std::int64_t slow_leave_us = 250'000;
  // How long after an acquisition that ended a wait a subscription begun before the
  // capture may leave and be taken for the acquirer's (acquirer_leaving_unknown): a JVM
  // on a loaded host leaves 20-60 ms after (seen up to 150 ms); past 60 ms node-redisson's
  // stale timers' leaves beside other processes' acquisitions come in (thirdparty
  // redisson.pcap: at 150 ms, 2 of its events lost their name).
  static constexpr std::int64_t unknown_leave_us = 60'000;
  std::uint64_t acquirer_leaving_unknown(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t request);
  link_confidence confidence_of(const connection_info& s, std::uint64_t client, link_confidence guess);
  link_confidence established_confidence(const connection_info& s, std::uint64_t client);
  void settle_wake(wake& k, std::int64_t t);
  void attribute_wakes(lock_extra& x, std::uint64_t client, std::int64_t t);
  void note_wake(lock_extra& x, std::uint64_t sub, std::int64_t at, bool message);
  bool woken_by_message(lock_extra& x, const waiter& w, std::int64_t t);
  void take_guessed_subscription(lock_state& l, std::uint32_t lock, waiter& w, std::int64_t t);
  void note_subscribe(lock_extra& x, const connection_info& s, std::int64_t request, std::int64_t confirmed, const waiter* chosen);
  bool known_other_client(connection_info& s, std::uint32_t lock, std::uint64_t client);
  void note_message(lock_extra& x, const connection_info& s, std::int64_t at);
  void take_subscription_by_retry(lock_state& l, std::uint32_t lock, waiter& w, std::int64_t t);
  void link_existing_subscription(std::uint32_t lock, waiter& w);
  void link(lock_state& l, std::uint32_t lock, waiter& w, connection_info& s, link_confidence conf, std::int64_t at);
  linked choose_waiter(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t at, std::int64_t request);
  bool explained_unsubscribe(lock_state& l, const connection_info& s, const connection_info::subscription& sub, const lock_operation& op);
  waiter* partner_waiter(lock_state& l, const connection_info& s);
  waiter* last_candidate(lock_state& l, std::uint32_t lock, const connection_info& s);
  void note_guess(lock_state& l, const connection_info& s, const lock_operation& op, const linked& chosen);
  life_tie tie_of(const connection_info& s, std::uint32_t lock = no_id);
  bool listens_elsewhere(std::uint64_t client, const connection_info& s, std::uint32_t lock, bool any_confidence);
  void drop_guesses_elsewhere(lock_state& l, std::uint32_t lock, const connection_info& s, std::uint64_t client);
  static bool told_during(const lock_extra& x, const waiter& w, std::int64_t request, std::int64_t reply);
  std::uint32_t holder_of_client(lock_state& l, std::uint64_t client);
  bool names_differ(const connection_info& s, const connection_info& command) const;
  void note_connection_life(std::uint32_t conn, const lock_operation& op);
  static bool link_certain(const waiter& w);
  bool subscribed_by(const waiter& w, std::uint32_t lock, std::int64_t t);

  // ---- connections (timeline/connections.hpp) ----
  connection_info* open_connection(std::uint64_t id);
  [[gnu::always_inline]] std::uint32_t conn_index(const lock_operation& op);
  std::uint32_t conn_lookup(const lock_operation& op);
  void retain_connection(std::uint32_t conn) noexcept;
  void release_connection(std::uint32_t conn);
  void free_connection(std::uint32_t conn);
  void connection_ended(std::uint64_t connection, std::int64_t at);
  void holders_lost_connection(std::uint32_t conn, std::size_t holders, std::int64_t at);
  void set_closed_holder(lock_state& l, std::uint32_t owner, std::int64_t at);
  void release_closed_holder_if_done(lock_state& l);
  void holder_acted_elsewhere(lock_state& l, holder& h, std::uint32_t conn);
  void collect();
  // The event's client and server (texts and addresses) from the connection (none: unchanged).
  void name_connection(lock_event& e, std::uint32_t conn) const;

  // ---- clock (timeline/clock.hpp) ----
  void schedule(std::uint32_t id);
  void schedule(std::uint32_t id, lock_state& l);
  void schedule_at(std::uint32_t id, std::int64_t t);
  void schedule_at(std::uint32_t id, lock_state& l, std::int64_t t);
  void fire(std::uint32_t id, lock_state& l, std::int64_t at);
  [[gnu::always_inline]] void advance(std::int64_t to);
  void report_overlaps(std::int64_t until, bool all = false);
  void forget_overlap(const suspected_overlap& p);
  void released_before(std::uint32_t id, std::uint32_t owner, std::int64_t request_us);

  // ---- lock operations (timeline/lock_operations.hpp) ----
  // Each takes the lock's id and its row `l` (locks[id]), found once by handle(): rows
  // do not move while an operation is handled (forget_idle_locks runs between them).
  void on_acquire(std::uint32_t id, lock_state& l, const lock_operation& op);
  void on_contended(std::uint32_t id, lock_state& l, const lock_operation& op, std::uint32_t owner, std::uint32_t conn,
                    std::uint64_t client);
  void on_reentered(std::uint32_t id, lock_state& l, const lock_operation& op, holder& h);
  void check_other_holders(std::uint32_t id, lock_state& l, const lock_operation& op, std::uint32_t owner, std::uint32_t conn);
  void on_acquired(std::uint32_t id, lock_state& l, const lock_operation& op, std::uint32_t owner, std::uint32_t conn,
                   std::uint64_t client);
  bool held_before_capture(lock_state& l, std::uint32_t owner, std::uint32_t conn);
  void unseen_hold_ended(lock_state& l, const lock_operation& op);
  bool own_refusals_before(lock_state& l, std::uint32_t lock, std::uint32_t owner, std::uint32_t conn);
  void rejected_by_owner(lock_state& l, std::uint32_t owner, std::uint32_t conn, std::int64_t at, bool inferred, bool renew,
                         std::int64_t report_at = -1);
  bool defer_refused_renewal(std::uint32_t id, const lock_operation& op, std::uint32_t owner, std::uint32_t conn);
  void settle_refused_renewal(const suspected_overlap& p, std::int64_t ts);
  void note_release(std::uint32_t id, std::uint32_t owner, std::int64_t at);
  bool group_cleanup_unlock(lock_state& l, std::uint32_t owner, std::uint32_t conn);
  bool released_after(std::uint32_t id, std::string_view owner, std::int64_t request_us) const;
  void on_unlock(std::uint32_t id, lock_state& l, const lock_operation& op);
  void on_renew(std::uint32_t id, lock_state& l, const lock_operation& op);
  void on_plain(std::uint32_t id, lock_state& l, const lock_operation& op);
  void on_force_unlock(std::uint32_t id, lock_state& l, const lock_operation& op);

  // ---- channel operations (timeline/channel_operations.hpp) ----
  void on_subscribe(std::uint32_t id, const lock_operation& op);
  void on_message(std::uint32_t id, const lock_operation& op);
  void on_key_notification(std::uint32_t id, const lock_operation& op);
  waiter* notified_waiter(lock_state& l, std::uint32_t lock, const connection_info& s, std::int64_t previous_us,
                          std::int64_t at);
  void on_unsubscribe(std::uint32_t id, const lock_operation& op);

  // ---- dispatch (timeline/dispatch.hpp) ----
  lock_event base(const lock_state& l, std::int64_t ts) const;
  void give_owner_hash(lock_event& e, std::uint32_t owner) const noexcept;
  lock_event from_op(const lock_state& l, const lock_operation& op, lock_event_kind kind) const;
  void on_redirect(std::uint32_t id, const lock_operation& op);
  void emit(lock_state& l, lock_event& e);
  void emit_linked(const lock_state& l, lock_event& e, std::uint64_t sub, bool unknown = false);
  void decide_link(const lock_state& l, std::uint64_t sub, std::string_view owner, link_confidence confidence);
  void release_held();
  void anomaly(lock_state& l, std::int64_t ts, anomaly_kind kind, std::uint32_t owner, std::uint32_t conn, const anomaly_facts& found, bool inferred = false, std::int64_t interval_start = -1, std::int64_t interval = -1);
  void on_operation(const lock_operation& op);
  void handle(const lock_operation& op, const announced* ann);
  [[gnu::always_inline]] void dispatch(std::uint32_t id, lock_state& l, const lock_operation& op, bool plain);

  // ---- announcements (timeline/announced.hpp) ----
  void will_handle(std::span<const lock_operation> ops) noexcept;
  const announced* take_announced(const lock_operation& op) noexcept;
  std::uint32_t announced_scope(const announced* a, const lock_operation& op) noexcept;
  std::uint32_t find_announced(const announced* a, std::uint32_t where, std::string_view name, lock_slot& slot) const;
  static unsigned touch_ends(const void* p, std::size_t bytes) noexcept;
  std::uint32_t known_scope(const lock_operation& op) const noexcept;

  // ---- permits (timeline/permits.hpp): semaphores and latches ----
  permit_book permits;
  permit_lock& permit_lock_of(std::uint32_t id);
  lock_event permit_event(const permit_lock& p, std::int64_t ts, lock_event_kind kind) const;
  void permit_deadlines(permit_lock& p);
  // Out of line and cold: the lock path's handle() stays as small as it was (inlined
  // into handle(), these shifted GCC's inlining of the lock handlers: +2% instructions).
  [[gnu::noinline, gnu::cold]] void expire_permits(std::int64_t to);
  void expire_by_caller_clock(permit_lock& p, std::int64_t caller_now_ms, std::int64_t at);
  void judge_overrun(permit_lock& p, std::int64_t now_us, bool all);
  [[gnu::noinline, gnu::cold]] void on_permit_operation(std::uint32_t id, const lock_operation& op);
  void forget_permit_waiter(permit_lock& p, std::unordered_map<std::string, permit_waiter>::iterator w);
  [[gnu::noinline, gnu::cold]] void permit_waiters_connection_closed(std::uint64_t connection, std::int64_t at);
  void report_permit_give_up(const permit_lock& p, std::string_view owner, const permit_waiter& v, std::int64_t at,
                             wait_end ended, std::int64_t stopped_by_us);
  [[gnu::noinline, gnu::cold]] void permit_waiters_moved_on(const lock_operation& op, std::string_view owner,
                                                               const permit_lock* current);
  void permit_went_free(permit_lock& p, std::int64_t at);
  void permit_free_stretch_ended(std::uint32_t id, permit_lock& p, std::int64_t at);

  // ---- forgetting (timeline/forgetting.cpp) ----
  bool idle(const lock_state& l) const;
  lock_stats counts_of(const lock_state& l) const;
  void fold_into_forgotten(const lock_state& l);
  void forget_idle_locks();
};

}  // namespace lockscope::locks
