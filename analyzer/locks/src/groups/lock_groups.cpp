#include "lockscope/locks/lock_groups.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>


#include "lockscope/lock/naming.hpp"
#include "lockscope/ingest/short_bytes.hpp"
#include "timeline/stable_vector.hpp"
#include "timeline/text_interner.hpp"

namespace lockscope::locks {

namespace {

struct text_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return timeline_detail::hash_text(s); }
};

// What a record is found by: up to two texts and a number (a key: name and db; an
// attempt: name, group and db; a set: owner and client). The parts are hashed and
// compared one by one, never joined into one text.
struct record_key {
  std::string_view first, second;
  std::int64_t number = 0;
  // Where first's hash_text is kept once worked out (no_id: not yet), when the caller
  // looks several keys up under one text; nullptr: worked out each time.
  std::uint32_t* first_hash = nullptr;
};

// A key's hash from its texts' hash_text.
inline std::uint32_t record_hash(std::uint32_t first_hash, std::uint32_t second_hash, std::int64_t number) noexcept {
  std::uint64_t h = (std::uint64_t{first_hash} << 32 | second_hash) ^ (static_cast<std::uint64_t>(number) * 0x9e3779b97f4a7c15ull);
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}
inline std::uint32_t record_hash(const record_key& k) noexcept {
  std::uint32_t first = k.first_hash != nullptr ? *k.first_hash : timeline_detail::no_id;
  if (first == timeline_detail::no_id) {
    first = timeline_detail::hash_text(k.first);
    if (k.first_hash != nullptr) *k.first_hash = first;
  }
  return record_hash(first, timeline_detail::hash_text(k.second), k.number);
}

// Records by key whose erased entries are kept and reused (key bytes and value keep
// their capacity): no allocation per event once warm. V::reset() readies a reused value.
// Open addressing over 8-byte slots (the timeline's id_table: one hash of the key per
// lookup, none to erase, no node per entry); a record is named by its id, and a V&
// stays valid while more are added.
// Timers name records by id too, and pin them: a record erased while a timer is pending
// for it stays in the table, closed, and a record added later with its key is that one
// again (the timer then finds what a lookup of its key would: the live record of that
// key, or none), so no timer keeps a copy of its key. It is freed with its last pin.
// The record found or added last is remembered: a client's pipelined calls come in runs
// from one connection and owner, and comparing one key is cheaper than hashing it.
template <class V>
class record_table {
  struct entry {
    std::unique_ptr<char[]> text;  // first, then second
    std::uint32_t capacity = 0;
    std::uint32_t first_size = 0, second_size = 0;
    std::int64_t number = 0;
    std::uint32_t hash = 0;  // the key's; for a free entry, the next free id
    std::uint32_t pins = 0;  // timers pending for it
    bool live = false;
    V value{};
    std::string_view first() const noexcept { return {text.get(), first_size}; }
    std::string_view second() const noexcept { return {text.get() + first_size, second_size}; }
    bool is(const record_key& k) const noexcept {
      return number == k.number && first_size == k.first.size() && second_size == k.second.size() &&
             ingest::same_bytes(first(), k.first) && ingest::same_bytes(second(), k.second);
    }
  };

 public:
  explicit record_table(bool remember_last) : remember_last_(remember_last) {}
  // The live record keyed k; no_id when there is none. `hash`: k's record_hash, or no_id
  // when not worked out yet (then it is, and left there for add, unless the record used
  // last is k's).
  [[gnu::always_inline]] std::uint32_t find(const record_key& k, std::uint32_t& hash) {
    if (last_ != timeline_detail::no_id && entries_[last_].is(k)) return last_;
    return find_past_last(k, hash);
  }
  // find(), the record used last known not to be keyed k (last_found answered no_id).
  [[gnu::always_inline]] std::uint32_t find_past_last(const record_key& k, std::uint32_t& hash) {
    if (hash == timeline_detail::no_id) hash = record_hash(k);
    const std::uint32_t id = keyed(k, hash);
    if (id == timeline_detail::no_id || !entries_[id].live) return timeline_detail::no_id;
    if (remember_last_) last_ = id;
    return id;
  }
  // The record used last, when it is keyed (first, second, number); no_id otherwise.
  std::uint32_t last_found(std::string_view first, std::string_view second, std::int64_t number) const noexcept {
    if (last_ == timeline_detail::no_id || !entries_[last_].is(record_key{first, second, number})) return timeline_detail::no_id;
    return last_;
  }
  // A new live record keyed k (there is none live): the closed one of k when a timer
  // still pins it, else a free or new entry. `hash` as for find.
  std::uint32_t add(const record_key& k, std::uint32_t hash) {
    if (hash == timeline_detail::no_id) hash = record_hash(k);
    std::uint32_t id = closed_ > 0 ? keyed(k, hash) : timeline_detail::no_id;
    if (id != timeline_detail::no_id) {
      --closed_;
      entries_[id].value.reset();
    } else {
      id = free_;
      if (id != timeline_detail::no_id) {
        free_ = entries_[id].hash;  // the free list runs through the hash fields
        entries_[id].value.reset();
      } else {
        id = static_cast<std::uint32_t>(entries_.size());
        entries_.emplace_back();
      }
      entry& e = entries_[id];
      const std::size_t size = k.first.size() + k.second.size();
      if (size > e.capacity) {
        e.capacity = static_cast<std::uint32_t>(std::max<std::size_t>(size, 64));
        e.text = std::make_unique<char[]>(e.capacity);
      }
      ingest::copy_bytes(ingest::copy_bytes(e.text.get(), k.first), k.second);
      e.first_size = static_cast<std::uint32_t>(k.first.size());
      e.second_size = static_cast<std::uint32_t>(k.second.size());
      e.number = k.number;
      e.hash = hash;
      table_.insert(id, hash);
    }
    entries_[id].live = true;
    ++size_;
    if (remember_last_) last_ = id;
    return id;
  }
  // erase(id) and then add() of its key, in one step: a live record pinned by a timer
  // (erase would keep it, closed, and add open it again), its value reset.
  void reopen(std::uint32_t id) {
    entries_[id].value.reset();
    if (remember_last_) last_ = id;
  }
  bool pinned(std::uint32_t id) const noexcept { return entries_[id].pins > 0; }
  V& operator[](std::uint32_t id) noexcept { return entries_[id].value; }
  bool live(std::uint32_t id) const noexcept { return entries_[id].live; }
  // A record's key parts, as kept: valid while it is in the table (live or pinned).
  std::string_view first(std::uint32_t id) const noexcept { return entries_[id].first(); }
  std::string_view second(std::uint32_t id) const noexcept { return entries_[id].second(); }
  // Ends a live record (nothing when it is not): freed, or closed while pinned.
  void erase(std::uint32_t id) {
    entry& e = entries_[id];
    if (!e.live) return;
    e.live = false;
    --size_;
    if (id == last_) last_ = timeline_detail::no_id;
    if (e.pins == 0) release(id);
    else ++closed_;
  }
  void pin(std::uint32_t id) noexcept { ++entries_[id].pins; }
  void unpin(std::uint32_t id) {
    entry& e = entries_[id];
    if (--e.pins == 0 && !e.live) {
      --closed_;
      release(id);
    }
  }
  bool empty() const noexcept { return size_ == 0; }
  // Whether a closed record (erased, still pinned) is keyed k: add would reuse it.
  bool has_closed(const record_key& k, std::uint32_t hash) const {
    if (closed_ == 0) return false;
    const std::uint32_t id = keyed(k, hash);
    return id != timeline_detail::no_id && !entries_[id].live;
  }

 private:
  // The record in the table (live or closed) keyed k.
  std::uint32_t keyed(const record_key& k, std::uint32_t hash) const {
    return table_.find_if(hash, [&](std::uint32_t id) { return entries_[id].is(k); });
  }
  void release(std::uint32_t id) {
    entry& e = entries_[id];
    table_.erase(id, e.hash);
    e.hash = free_;
    free_ = id;
  }
  bool remember_last_ = true;
  std::uint32_t last_ = timeline_detail::no_id;  // a live entry
  timeline_detail::stable_vector<entry> entries_;  // by id; erased ones on the free list
  timeline_detail::id_table table_;
  std::uint32_t free_ = timeline_detail::no_id;
  std::size_t size_ = 0;
  std::size_t closed_ = 0;  // erased but pinned
};

// Vectors whose elements are reused: `n` in use, the rest kept with their capacity.
template <class T>
struct reused {
  std::vector<T> items;
  std::size_t n = 0;
  T& add() {
    if (n == items.size()) items.emplace_back();
    return items[n++];
  }
  T* begin() noexcept { return items.data(); }
  T* end() noexcept { return items.data() + n; }
  const T* begin() const noexcept { return items.data(); }
  const T* end() const noexcept { return items.data() + n; }
  void clear() noexcept { n = 0; }
  // Removes the elements for which pred holds, keeping the others' order; the removed
  // ones go past n with their capacity (swapped, never freed).
  template <class Pred>
  void erase_if(Pred&& pred) {
    T* out = begin();
    for (T* it = begin(); it != end(); ++it) {
      if (pred(*it)) continue;
      if (it != out) std::swap(*out, *it);
      ++out;
    }
    n = static_cast<std::size_t>(out - begin());
  }
  void erase_at(std::size_t i) {
    std::rotate(items.begin() + static_cast<std::ptrdiff_t>(i), items.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                items.begin() + static_cast<std::ptrdiff_t>(n));
    --n;
  }
  bool empty() const noexcept { return n == 0; }
  std::size_t size() const noexcept { return n; }
};

bool is_try(lock_event_kind k) { return k == lock_event_kind::acquired || k == lock_event_kind::contended; }
bool is_release(lock_event_kind k) {
  return k == lock_event_kind::released || k == lock_event_kind::unlock_rejected ||
         k == lock_event_kind::force_released;
}

}  // namespace

struct lock_groups::impl {
  struct vote {
    std::uint32_t server = 0;
    std::string owner;
    bool acquired = false;
  };
  // One owner's tries of one key over several servers.
  struct attempt {
    std::string name;
    std::int32_t db = 0;
    std::string group;   // the owner, or "<client ip> thread <n>" for Redisson owner ids
    std::int64_t start_us = 0, end_us = 0;
    std::size_t servers_at_start = 0;  // the key's servers known when it began
    reused<vote> votes;
    // Redisson's RedissonRedLock goes on to the next server past a refusal (one client a
    // server, the owner ids differ, the thread id is shared); RedissonMultiLock instead
    // gives back what it took and starts again (all servers are needed).
    bool redisson = false;
    bool moved_past_refusal = false;
    void reset() {
      votes.clear();
      redisson = false;
      moved_past_refusal = false;
    }
  };
  // A successful attempt's servers still held.
  // Kept with its capacity when it ends (key_record::holdings is a reused vector).
  struct holding {
    std::string group;
    std::string owner;   // its first owner (what the anomalies name)
    std::vector<std::uint32_t> held;
    reused<std::string> held_owners;  // the owner on each server held (Redisson: one a server)
    std::uint32_t total = 0, needed = 0;
    std::uint32_t lost = 0;  // servers lost by expiry or refused renewal
    std::uint32_t given_back = 0;  // servers released by the owner while still held
    std::int64_t last_renew_us = -1;
    bool lost_reported = false, split_reported = false;
    void reset() {
      held.clear();
      held_owners.clear();
      total = needed = lost = given_back = 0;
      last_renew_us = -1;
      lost_reported = split_reported = false;
    }
  };
  // A key seen on two or more servers (or with an attempt open).
  struct key_record {
    std::vector<std::uint32_t> servers;
    reused<holding> holdings;
    std::size_t open = 0;  // its attempts open now
    void reset() {
      servers.clear();
      holdings.clear();
      open = 0;
    }
  };
  struct set_key {
    std::string name;
    std::int32_t db = 0;
    bool acquired = false;
    bool released = false;  // given back while other keys of its set are still held
    std::int64_t ts_us = 0;  // when it was tried
  };
  // One owner's tries of several keys on one connection (MultiLock).
  struct key_set {
    // Views into the set's key in `sets` (owner, client), kept as long as the set.
    std::string_view owner, client;
    std::uint32_t server = 0;  // by id (servers)
    endpoint client_address{}, server_address{};
    bool has_client_address = false, has_server_address = false;
    std::int64_t start_us = 0, end_us = 0;
    reused<set_key> keys;
    bool overflowed = false;  // more than max_set_keys: no MultiLock, not reported
    // When a key of the set was last refused (-1: none was): a MultiLock tries its next
    // key only while it holds every key before it. Past a refusal it gives back what it
    // took (a release: the set ends) and starts again from its first key, or gives up
    // (Redisson's MultiLock; node-redlock's multi-key script sets all keys or none). A
    // different key tried after a refusal, nothing given back, is the owner's next lock
    // taken alone (a poller that gave up on one key and goes on to the next: redis-mutex,
    // one value for every key). Only the keys of the refused call itself (a multi-key
    // script's, one reply for all: the same time) belong with it.
    std::int64_t refused_us = -1;
    // When its first key was given back while others were still held (-1: none was):
    // the rest must follow within release_together_us for the set to be a MultiLock.
    std::int64_t partly_released_us = -1;
    bool partly_released() const {
      return partly_released_us >= 0 &&
             std::any_of(keys.begin(), keys.end(), [](const set_key& k) { return k.acquired && !k.released; });
    }
    void reset() {
      keys.clear();
      overflowed = false;
      refused_us = -1;
      partly_released_us = -1;
    }
  };

  group_options options;
  lock_event_sink& next;
  record_table<attempt> attempts{options.lookup_shortcuts};  // by name, group, db
  record_table<key_record> keys{options.lookup_shortcuts};   // by name, db
  record_table<key_set> sets{options.lookup_shortcuts};      // by owner, client
  // Owners (by stream_text) whose last set overflowed, and when: their next set within a
  // window of it is part of the same stream, not a MultiLock.
  std::unordered_map<std::string, std::int64_t, text_hash, std::equal_to<>> streaming;
  // What a Redisson group (by group text) showed itself to be: a RedLock (it went on
  // past a refusal) or a MultiLock (it gave back after one refusal, servers untried).
  enum class group_kind : std::uint8_t { unknown, redlock, multilock };
  std::unordered_map<std::string, group_kind, text_hash, std::equal_to<>> kinds;
  std::vector<std::string> servers;  // by id
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> server_ids;
  // Values several clients send at once (lock_event::owner_shared: refused over one
  // connection while holding over another to the same server; redis-mutex's `mutex`
  // from every process): no owner, so no quorum attempt is kept for them. A quorum
  // attempt is one client's (node-redlock's one value on every server, over one
  // connection a server); keyed by the value alone, the tries of different processes on
  // different servers would read as one. Bounded: past max_open, forgotten and learnt again.
  std::unordered_set<std::string, text_hash, std::equal_to<>> shared_values;
  bool shared_value(const lock_event& e) {
    if (e.owner_shared) [[unlikely]] {
      if (shared_values.size() >= options.max_open) shared_values.clear();
      shared_values.emplace(e.owner);
      return true;
    }
    return !shared_values.empty() && shared_values.find(e.owner) != shared_values.end();
  }
  // The value's open attempt on this key, dropped unreported (shared: not one client's).
  void drop_attempt(const lock_event& e) {
    if (attempts.empty()) return;
    make_attempt_key(e, e.owner);
    const std::uint32_t id = attempts.find(attempt_lookup, attempt_hash);
    if (id == timeline_detail::no_id) return;
    make_key(e.lock, e.db);
    std::uint32_t key_id = timeline_detail::no_id;
    if (key_record* kr = find_key(key_id); kr != nullptr) {
      if (kr->open > 0) --kr->open;
      if (kr->open == 0 && kr->holdings.empty() && kr->servers.size() <= 1) keys.erase(key_id);  // as close_attempt
    }
    attempts.erase(id);
  }
  // Scratch, reused.
  std::string group_text, stream_text;
  // The keys looked up last, and their hashes once worked out (no_id: not yet): each key
  // is hashed once, however many lookups and adds it takes part in. Their texts are
  // views: into the event, or into texts that stay put while the key is used.
  record_key key_lookup, attempt_lookup, set_lookup;
  std::uint32_t key_hash = timeline_detail::no_id, attempt_hash = timeline_detail::no_id;
  std::vector<std::string_view> views_a, views_b, views_c;

  impl(const group_options& o, lock_event_sink& n) : options(o), next(n) {}

  // Always inlined: the per-event path (it was, until this file grew past GCC's inlining budget).
  [[gnu::always_inline]] std::uint32_t server_id(std::string_view s) {
    if (last_server_id < servers.size() && ingest::same_bytes(servers[last_server_id], s)) return last_server_id;
    return find_server_id(s);
  }
  // server_id's lookup by hash, and a new server's id.
  // A capture's few servers are compared in turn (a RedLock's events alternate between
  // them, so the one used last is seldom the one asked for); many are hashed.
  static constexpr std::size_t servers_scanned = 8;
  [[gnu::noinline]] std::uint32_t find_server_id(std::string_view s) {
    if (servers.size() <= servers_scanned) {
      for (std::size_t i = 0; i < servers.size(); ++i) {
        if (ingest::same_bytes(servers[i], s)) return last_server_id = static_cast<std::uint32_t>(i);
      }
    } else if (const auto it = server_ids.find(s); it != server_ids.end()) {
      return last_server_id = it->second;
    }
    const auto id = static_cast<std::uint32_t>(servers.size());
    servers.emplace_back(s);
    server_ids.emplace(std::string(s), id);
    return last_server_id = id;
  }
  std::uint32_t last_server_id = UINT32_MAX;
  // The id of a server seen before; UINT32_MAX when it was not.
  std::uint32_t known_server_id(std::string_view s) const {
    if (last_server_id < servers.size() && ingest::same_bytes(servers[last_server_id], s)) return last_server_id;
    if (servers.size() <= servers_scanned) {
      for (std::size_t i = 0; i < servers.size(); ++i) {
        if (ingest::same_bytes(servers[i], s)) return static_cast<std::uint32_t>(i);
      }
      return UINT32_MAX;
    }
    const auto it = server_ids.find(s);
    return it == server_ids.end() ? UINT32_MAX : it->second;
  }
  // The owner an attempt belongs to: the value itself, or for a Redisson owner id (one
  // UUID per client instance, hence per server in a RedLock) its client IP and thread.
  // The IP as its bytes (a key, never shown); an event without an address has none.
  std::string_view group_of(std::string_view owner, const endpoint* client) {
    const auto parts = lock::parse_owner_id(owner);
    if (!parts) return owner;
    group_text.clear();
    if (client != nullptr) {
      group_text.push_back(static_cast<char>(client->family));
      group_text.append(reinterpret_cast<const char*>(client->address.data()), client->family == 6 ? 16 : 4);
    }
    group_text += " thread ";
    group_text += parts->thread_id;
    return group_text;
  }
  // The group an event belongs to. Redisson's: by client IP and thread, and since two
  // processes on one host may number their threads alike, one of up to max_slots
  // attempts of that group open at once: the one with this owner's try on this server,
  // else one with no try on it yet (one whose first server's owner shares a process with
  // this one, as learnt from groups won before, first), else a new one.
  static constexpr int max_slots = 4;
  std::string_view group_for(const lock_event& e) {
    const std::string_view base = event_group_of(e);
    if (!event_group_by_thread || attempts.empty()) return base;
    const std::uint32_t server = known_server_id(e.server);
    const auto home = homes.find(process_of(e.owner));
    int compatible = -1, linked = -1, fresh = -1;
    std::int64_t compatible_end = 0;
    bool compatible_granted = false;
    for (int k = 0; k < max_slots; ++k) {
      slot_text.assign(base);
      if (k > 0) {
        slot_text += '\x01';
        slot_text += static_cast<char>('0' + k);
      }
      make_attempt_key(e, slot_text);
      const std::uint32_t id = attempts.find(attempt_lookup, attempt_hash);
      const attempt* a = id == timeline_detail::no_id ? nullptr : &attempts[id];
      if (a == nullptr) {
        if (fresh < 0) fresh = k;
        continue;
      }
      bool on_server = false;
      for (const vote& v : a->votes) {
        if (v.server != server) continue;
        on_server = true;
        if (v.owner == e.owner) return slot(base, k);
      }
      if (on_server || a->votes.n == 0) continue;
      if (home != homes.end()) {
        // Its process is known to have won groups with other clients: only theirs.
        if (linked < 0 && std::any_of(a->votes.begin(), a->votes.end(), [&](const vote& v) {
              const auto h = homes.find(process_of(v.owner));
              return h != homes.end() && h->second == home->second;
            })) {
          linked = k;
        }
        continue;
      }
      // Unknown yet: one whose last server granted (a thread refused on a server waits
      // there before it tries another), the one tried last first (a thread tries the next
      // server as soon as the previous one answered).
      // (A thread goes on to the next server at once, or when its wait on one ends: not
      // long after its last try there.)
      if (e.ts_us - a->end_us > options.window_us / 4) continue;
      const bool granted_last = (a->votes.end() - 1)->acquired;
      if (compatible < 0 || granted_last > compatible_granted ||
          (granted_last == compatible_granted && a->end_us > compatible_end)) {
        compatible = k;
        compatible_end = a->end_us;
        compatible_granted = granted_last;
      }
    }
    return slot(base, linked >= 0 ? linked : compatible >= 0 ? compatible : fresh >= 0 ? fresh : 0);
  }
  std::string_view slot(std::string_view base, int k) {
    slot_text.assign(base);
    if (k > 0) {
      slot_text += '\x01';
      slot_text += static_cast<char>('0' + k);
    }
    return slot_text;
  }
  // A slot's mark ends the text ("... thread <id>" never does; the IP's bytes may hold one).
  static std::string_view unslotted(std::string_view group) {
    return group.size() >= 2 && group[group.size() - 2] == '\x01' ? group.substr(0, group.size() - 2) : group;
  }
  // A Redisson owner id's process part (its client's id: one a server in a group).
  static std::string_view process_of(std::string_view owner) { return owner.substr(0, owner.rfind(':')); }
  // The owners of a group won by one process (a client a server): each client's first
  // server's client, so that its next attempts find their own slot.
  void learn_homes(const attempt& a) {
    if (a.votes.n < 2) return;
    const std::string_view first = process_of(a.votes.begin()->owner);
    if (homes.size() >= options.max_open) homes.clear();  // bounded whatever the churn
    for (const vote& v : a.votes) {
      const std::string_view p = process_of(v.owner);
      if (const auto it = homes.find(p); it != homes.end()) it->second.assign(first);
      else homes.emplace(std::string(p), std::string(first));
    }
  }
  std::unordered_map<std::string, std::string, text_hash, std::equal_to<>> homes;
  std::string slot_text;

  // The lock name of the event being handled, and its hash_text once worked out: the
  // keys and attempts of one event are looked up under it several times. Only that
  // text's (an event's texts stay put while it is handled; a record's may be rewritten).
  std::string_view event_lock;
  std::uint32_t event_lock_hash = timeline_detail::no_id;
  void handling(const lock_event& e) {
    event_lock = e.lock;
    event_lock_hash = timeline_detail::no_id;
  }
  std::uint32_t* name_hash_of(std::string_view name) {
    return name.data() == event_lock.data() && name.size() == event_lock.size() ? &event_lock_hash : nullptr;
  }
  // `name` must stay put while key_lookup is used.
  void make_key(std::string_view name, std::int32_t db) {
    key_lookup = record_key{name, {}, db, name_hash_of(name)};
    key_hash = timeline_detail::no_id;
  }
  key_record* find_key(std::uint32_t& id) {
    id = keys.find(key_lookup, key_hash);
    return id == timeline_detail::no_id ? nullptr : &keys[id];
  }

  // ---- output ----
  // `about`: the event whose owner and connection the anomaly names.
  void emit_anomaly(const std::string& name, std::int32_t db, anomaly_kind kind, std::int64_t ts,
                    const lock_event& about, const anomaly_facts& found) {
    lock_event e;
    e.ts_us = ts;
    e.event = lock_event_kind::anomaly;
    e.kind = kind;
    e.lock = name;
    e.db = db;
    e.owner = about.owner;
    e.client = about.client;
    e.server = about.server;
    e.client_endpoint = about.client_endpoint;
    e.server_endpoint = about.server_endpoint;
    e.found = found;
    next.on_event(e);
  }

  // ---- quorum attempts ----
  void close_attempt(std::uint32_t id, bool released) {
    attempt& a = attempts[id];
    make_key(a.name, a.db);
    std::uint32_t key_id = timeline_detail::no_id;
    key_record* kr = find_key(key_id);
    const std::size_t voted = a.votes.n;
    if (kr != nullptr && kr->open > 0) --kr->open;
    if (voted >= 2 && kr != nullptr) {
      lock_group g;
      g.start_us = a.start_us;
      g.end_us = a.end_us;
      g.total = static_cast<std::uint32_t>(std::max(kr->servers.size(), voted));
      g.needed = g.total / 2 + 1;
      views_a.clear();
      views_b.clear();
      for (const vote& v : a.votes) {
        if (!v.acquired) continue;
        views_a.push_back(servers[v.server]);
        views_b.push_back(v.owner);
      }
      g.acquired = static_cast<std::uint32_t>(views_a.size());
      const group_kind kind = kind_of(a, *kr, released);
      if (kind == group_kind::multilock) {
        g.needed = g.total;  // every server (Redisson's MultiLock over one client a server)
        views_c.clear();
        for (const std::uint32_t server : kr->servers) views_c.push_back(servers[server]);
        g.tried = views_c;
        g.total = static_cast<std::uint32_t>(views_c.size());
        g.needed = g.total;
      }
      g.kind_unknown = a.redisson && kind == group_kind::unknown && g.total >= 3;
      g.succeeded = g.acquired >= g.needed;
      g.released = !g.succeeded && released;
      g.acquired_on = views_a;
      g.owners = views_b;
      lock_event e;
      e.ts_us = a.end_us;
      e.event = kind == group_kind::multilock ? lock_event_kind::multilock : lock_event_kind::quorum;
      e.lock = a.name;
      e.db = a.db;
      e.owner = views_b.empty() ? std::string_view(a.votes.begin()->owner) : views_b.front();
      e.group = &g;
      next.on_event(e);
      if (g.succeeded) start_holding(*kr, a, g);
    }
    if (kr != nullptr && kr->open == 0 && kr->holdings.empty() && kr->servers.size() <= 1) keys.erase(key_id);
    attempts.erase(id);
  }

  // Whether a Redisson attempt over servers is a RedLock or a MultiLock, from what its
  // group did so far: a RedLock goes on to another server past a refusal; a MultiLock gives
  // back what it took after one refusal with servers left untried. Unknown (every server
  // granted at once, nothing refused yet): a quorum, as any other group.
  // What kinds are kept by: the key and the process of the attempt's first server's owner
  // (Redisson tries the servers in one order: all its threads share that client).
  std::string kind_text;
  std::string_view kind_key(const attempt& a) {
    kind_text.assign(a.name);
    kind_text += '\0';
    if (a.votes.n > 0) kind_text += process_of(a.votes.begin()->owner);
    return kind_text;
  }
  group_kind kind_of(const attempt& a, const key_record& kr, bool released) {
    if (!a.redisson) return group_kind::unknown;
    const auto refused = static_cast<std::size_t>(
        std::count_if(a.votes.begin(), a.votes.end(), [](const vote& v) { return !v.acquired; }));
    group_kind seen = group_kind::unknown;
    if (a.moved_past_refusal) seen = group_kind::redlock;
    else if (released && refused == 1 && a.votes.n < kr.servers.size()) seen = group_kind::multilock;
    const std::string_view group = kind_key(a);
    const auto it = kinds.find(group);
    if (seen != group_kind::unknown) {
      // Once seen going on past a refusal, a RedLock stays one: a RedLock whose wait ran
      // out after one refusal gives back what it took too.
      if (it != kinds.end() && it->second == group_kind::redlock) return group_kind::redlock;
      if (it != kinds.end()) it->second = seen;
      else if (kinds.size() < options.max_open) kinds.emplace(std::string(group), seen);
      return seen;
    }
    return it == kinds.end() ? group_kind::unknown : it->second;
  }

  void start_holding(key_record& kr, const attempt& a, const lock_group& g) {
    kr.holdings.erase_if([&](const holding& h) { return h.group == a.group; });  // its previous round
    holding& h = kr.holdings.add();
    h.reset();
    h.group.assign(a.group);
    h.owner.assign(g.owners.front());
    for (const vote& v : a.votes) {
      if (!v.acquired) continue;
      h.held.push_back(v.server);
      h.held_owners.add().assign(v.owner);
    }
    // Links are learnt only from a group won on every server of the capture: a key's
    // record forgets the servers it was given back on, so two processes' warm-ups (one
    // server after another, taken and given back) overlapping on two of three servers
    // would otherwise teach a link between their clients that then holds.
    if (a.redisson && g.succeeded && a.votes.n == kr.servers.size() && a.votes.n == servers.size()) learn_homes(a);
    h.total = g.total;
    h.needed = g.needed;
    for (holding& other : kr.holdings) {
      if (&other == &h || other.held.size() < other.needed || (other.split_reported && h.split_reported)) continue;
      anomaly_facts found{anomaly_finding::two_quorums_held, other.owner};
      found.quorum.held = static_cast<std::uint32_t>(h.held.size());
      found.quorum.total = h.total;
      found.quorum.needed = h.needed;
      found.quorum.other_held = static_cast<std::uint32_t>(other.held.size());
      found.quorum.other_total = other.total;
      h.split_reported = other.split_reported = true;
      lock_event about;
      about.owner = h.owner;
      emit_anomaly(a.name, a.db, anomaly_kind::split_quorum, a.end_us, about, found);
      break;
    }
  }

  // A change on a key a holding may include (after the attempt, if any, was closed).
  void update_holding(const lock_event& e, std::string_view group) {
    make_key(e.lock, e.db);
    std::uint32_t key_id = timeline_detail::no_id;
    key_record* kr = find_key(key_id);
    if (kr == nullptr) return;
    const std::uint32_t server = known_server_id(e.server);
    // The holding whose owner on this server this is (two processes' threads may share a
    // thread id), else the group's.
    auto it = std::find_if(kr->holdings.begin(), kr->holdings.end(), [&](const holding& h) {
      for (std::size_t i = 0; i < h.held.size(); ++i) {
        if (h.held[i] == server && h.held_owners.items[i] == e.owner) return true;
      }
      return false;
    });
    if (it == kr->holdings.end()) {
      it = std::find_if(kr->holdings.begin(), kr->holdings.end(), [&](const holding& h) { return h.group == group; });
    }
    if (it == kr->holdings.end()) return;
    holding& h = *it;
    const auto held = std::find(h.held.begin(), h.held.end(), server);
    const auto erase_held = [&] {
      h.held_owners.erase_at(static_cast<std::size_t>(held - h.held.begin()));
      h.held.erase(held);
    };
    switch (e.event) {
      case lock_event_kind::released:
      case lock_event_kind::force_released:
      case lock_event_kind::unlock_rejected:
        // Given back (or found gone while giving it back): the owner is letting go. A
        // release after its quorum ran out shows it worked on as the holder meanwhile,
        // unprotected (a stalled node-redlock holder releases only then).
        report_quorum_lost(*kr, h, e);
        if (held != h.held.end()) {
          erase_held();
          ++h.given_back;
        }
        if (h.held.empty()) kr->holdings.erase_at(static_cast<std::size_t>(it - kr->holdings.begin()));
        break;
      case lock_event_kind::expired:
      case lock_event_kind::renew_failed: {
        if (held == h.held.end()) break;
        erase_held();
        ++h.lost;
        // Refused in the same round as a successful renewal: it still acts as holder.
        if (e.event == lock_event_kind::renew_failed && h.last_renew_us >= 0 &&
            e.ts_us - h.last_renew_us <= options.window_us) {
          report_quorum_lost(*kr, h, e);
        }
        break;
      }
      case lock_event_kind::renewed:
        h.last_renew_us = e.ts_us;
        report_quorum_lost(*kr, h, e);
        break;
      default:
        break;
    }
  }

  void report_quorum_lost(key_record&, holding& h, const lock_event& e) {
    if (h.lost_reported || h.lost == 0 || h.held.size() + h.given_back >= h.needed) return;
    h.lost_reported = true;
    anomaly_facts found{anomaly_finding::holds_below_quorum};
    found.quorum.held = static_cast<std::uint32_t>(h.held.size());
    found.quorum.total = h.total;
    found.quorum.needed = h.needed;
    found.quorum.lost = h.lost;
    emit_anomaly(std::string(e.lock), e.db, anomaly_kind::quorum_lost, e.ts_us, e, found);
  }

  // A try on a server (key) the open attempt (set) already has: that one is over.
  void end_previous_round(const lock_event& e, std::string_view group) {
    make_attempt_key(e, group);
    if (const std::uint32_t id = attempts.find(attempt_lookup, attempt_hash); id != timeline_detail::no_id) {
      attempt* a = &attempts[id];
      const std::uint32_t server = known_server_id(e.server);
      if (server != UINT32_MAX && retried_vote(*a, server, e) == nullptr &&
          std::any_of(a->votes.begin(), a->votes.end(), [&](const vote& v) { return v.server == server; })) {
        close_attempt(id, false);
      }
    }
  }
  // Redisson waits on each server in turn (tryLock on one client, retried when told or
  // timed out) before it tries the next: a try by the same owner on the server that last
  // refused it in this attempt, none tried since, is that wait, not the group's next
  // round (a client that polls every server in rounds has tried the others since).
  vote* retried_vote(attempt& a, std::uint32_t server, const lock_event& e) {
    if (!a.redisson || a.votes.n == 0) return nullptr;
    vote& last = *(a.votes.end() - 1);
    return last.server == server && !last.acquired && last.owner == e.owner ? &last : nullptr;
  }
  // Returns the owner's open set still open after this (no_id: none), for on_set_try,
  // which follows with the same set_lookup: one lookup per try, not two. An overflowed
  // set (a stream of locks, not a MultiLock) found as the last one used needs no lookup:
  // on_set_try only moves its end.
  // `nothing_between`: no set is looked up or closed between this and on_set_try (no
  // quorum attempt is kept for the try).
  std::uint32_t end_previous_set(const lock_event& e, bool nothing_between) {
    const std::uint32_t last = sets.last_found(e.owner, e.client, 0);
    if (last != timeline_detail::no_id && sets[last].overflowed) return last;
    return end_previous_set_by_key(e, last, nothing_between);
  }
  // `last`: the record used last when it is e's set's (find would answer it), else no_id.
  [[gnu::noinline]] std::uint32_t end_previous_set_by_key(const lock_event& e, std::uint32_t last, bool nothing_between) {
    make_set_key(e);
    const std::uint32_t id = last != timeline_detail::no_id ? last : find_set(true);
    if (id == timeline_detail::no_id) return id;
    const key_set& st = sets[id];
    if (!st.overflowed && std::any_of(st.keys.begin(), st.keys.end(), [&](const set_key& k) {
          return k.name == e.lock && k.db == e.db;
        })) {
      // A set of this one key, tried again (a waiter's next try on one server): closing it
      // reports nothing and keeps its record, pinned by its timer, which on_set_try_member
      // would open again at once. on_set_try_member opens it again in place instead.
      if (nothing_between && st.keys.n == 1 && options.reopen_retried_sets && sets.pinned(id)) {
        retried_set = id;
        return timeline_detail::no_id;
      }
      close_set(id, false);
      return timeline_detail::no_id;
    }
    return id;
  }
  // The one-key set end_previous_set left open for on_set_try_member to open again.
  std::uint32_t retried_set = timeline_detail::no_id;
  // `group` must stay put while attempt_lookup is used.
  void make_attempt_key(const lock_event& e, std::string_view group) {
    attempt_lookup = record_key{e.lock, group, e.db, name_hash_of(e.lock)};
    attempt_hash = timeline_detail::no_id;
  }

  void on_try(const lock_event& e, std::string_view group) {
    make_attempt_key(e, group);
    const std::uint32_t server = server_id(e.server);
    std::uint32_t id = attempts.find(attempt_lookup, attempt_hash);
    attempt* a = id == timeline_detail::no_id ? nullptr : &attempts[id];
    if (a != nullptr) {
      if (vote* again = retried_vote(*a, server, e)) {
        again->acquired = e.event == lock_event_kind::acquired;
        a->end_us = e.ts_us;
        close_if_complete(id);
        return;
      }
    }
    if (a != nullptr && std::any_of(a->votes.begin(), a->votes.end(), [&](const vote& v) { return v.server == server; })) {
      close_attempt(id, false);  // a second try on a server: its next round
      a = nullptr;
    }
    make_key(e.lock, e.db);
    std::uint32_t key_id = timeline_detail::no_id;
    key_record* kr = find_key(key_id);
    if (kr == nullptr) kr = &keys[keys.add(key_lookup, key_hash)];
    if (a == nullptr) {
      id = attempts.add(attempt_lookup, attempt_hash);
      a = &attempts[id];
      a->name.assign(e.lock);
      a->db = e.db;
      a->group.assign(group);
      a->start_us = e.ts_us;
      a->redisson = group != e.owner;  // grouped by client IP and thread: Redisson's owner ids
      a->servers_at_start = kr->servers.size();
      ++kr->open;
      push_timer(timer_kind::attempt, id, e.ts_us);
    }
    if (std::find(kr->servers.begin(), kr->servers.end(), server) == kr->servers.end()) kr->servers.push_back(server);
    if (std::any_of(a->votes.begin(), a->votes.end(), [](const vote& x) { return !x.acquired; })) {
      a->moved_past_refusal = true;  // a new server after one that refused
    }
    vote& v = a->votes.add();
    v.server = server;
    v.owner.assign(e.owner);
    v.acquired = e.event == lock_event_kind::acquired;
    a->end_us = e.ts_us;
    close_if_complete(id);
  }
  // Every server the key was known on has answered and granted a quorum (every server,
  // for a known MultiLock): nothing more to wait for. A failed one stays open for its
  // clean-up (the releases that follow), a Redisson one for its waits on each server.
  void close_if_complete(std::uint32_t id) {
    const attempt& a = attempts[id];
    if (a.servers_at_start < 2 || a.votes.n < a.servers_at_start) return;
    const auto granted = static_cast<std::size_t>(
        std::count_if(a.votes.begin(), a.votes.end(), [](const vote& x) { return x.acquired; }));
    std::size_t needed = a.votes.n / 2 + 1;
    if (a.redisson) {
      const auto it = kinds.find(kind_key(a));
      if (it != kinds.end() && it->second == group_kind::multilock) needed = a.votes.n;
    }
    if (granted >= needed) close_attempt(id, false);
  }

  // Tries seen while the capture had one server (a ring of the last recent_tries).
  // Its lock, owner and client texts one after the other in `text` (one copy per try,
  // into a buffer that is kept). Its server is the one server seen so far: servers[0].
  // A try that opened a single (nearly every try on one server) is not copied: the
  // single holds the same texts and fields, and `single` names it until the single is
  // dropped, which copies them here first (single_set::recent names the slot back).
  struct recent_try {
    std::unique_ptr<char[]> text;
    std::size_t capacity = 0;
    std::size_t lock_size = 0, owner_size = 0, client_size = 0;
    std::int32_t db = 0;
    std::int64_t ts_us = 0;
    lock_event_kind event = lock_event_kind::acquired;
    endpoint client_address{}, server_address{};
    bool has_client_address = false, has_server_address = false;
    std::uint32_t single = timeline_detail::no_id;
  };
  static constexpr std::size_t recent_tries = 256;
  static constexpr std::uint16_t no_recent = 0xffff;
  std::vector<recent_try> recent;
  std::size_t recent_next = 0;
  // The single opened by the try on_event handles (no_id: none yet).
  std::uint32_t try_single = timeline_detail::no_id;
  // e: a try while the capture has one server (e.server is servers[0]), after it was
  // handled: the single it opened, if any, stands for its copy.
  void remember_try(const lock_event& e) {
    recent_try& r = next_recent();
    r.single = try_single;
    if (try_single != timeline_detail::no_id) {
      singles[try_single].recent = static_cast<std::uint16_t>(&r - recent.data());
      return;
    }
    copy_try(r, e.lock, e.owner, e.client, e.db, e.ts_us, e.event, e.client_endpoint, e.server_endpoint);
  }
  // e: a hold given back (or run out) while the capture has one server. Replayed too, so that a try
  // whose hold ended before the second server appeared is no open vote then: a hold
  // taken and given back before the owner's next server is no group (two processes'
  // warm-ups, each taking and giving back one server after another, would read as one).
  void remember_release(const lock_event& e) {
    recent_try& r = next_recent();
    r.single = timeline_detail::no_id;
    copy_try(r, e.lock, e.owner, e.client, e.db, e.ts_us, e.event, e.client_endpoint, e.server_endpoint);
  }
  recent_try& next_recent() {
    if (recent.size() < recent_tries) recent.emplace_back();
    const std::size_t slot = recent_next;
    recent_try& r = recent[slot];
    recent_next = (recent_next + 1) % recent_tries;
    if (r.single != timeline_detail::no_id) singles[r.single].recent = no_recent;
    r.single = timeline_detail::no_id;
    return r;
  }
  static void copy_try(recent_try& r, std::string_view lock, std::string_view owner, std::string_view client,
                       std::int32_t db, std::int64_t ts_us, lock_event_kind event, const endpoint* client_endpoint,
                       const endpoint* server_endpoint) {
    const std::size_t size = lock.size() + owner.size() + client.size();
    if (r.capacity < size) {
      r.capacity = std::max<std::size_t>(size, 128);
      r.text = std::make_unique<char[]>(r.capacity);
    }
    ingest::copy_bytes(ingest::copy_bytes(ingest::copy_bytes(r.text.get(), lock), owner), client);
    r.lock_size = lock.size();
    r.owner_size = owner.size();
    r.client_size = client.size();
    r.db = db;
    r.ts_us = ts_us;
    r.event = event;
    r.has_client_address = client_endpoint != nullptr;
    if (client_endpoint != nullptr) r.client_address = *client_endpoint;
    r.has_server_address = server_endpoint != nullptr;
    if (server_endpoint != nullptr) r.server_address = *server_endpoint;
  }
  // Single i leaves: the try it stands for in the ring, if any, takes its copy.
  void copy_single_to_recent(std::uint32_t i) {
    single_set& o = singles[i];
    recent_try& r = recent[o.recent];
    o.recent = no_recent;
    r.single = timeline_detail::no_id;
    copy_try(r, o.lock(), o.owner(), o.client(), o.db, o.start_us,
             o.acquired ? lock_event_kind::acquired : lock_event_kind::contended,
             o.has_client_address ? &o.client_address : nullptr, o.has_server_address ? &o.server_address : nullptr);
  }
  // Called when the second server appears: servers[0] is still the first.
  void replay_recent_tries(std::int64_t now) {
    const std::size_t n = recent.size();
    for (recent_try& r : recent) {  // their own copies first: replaying may drop singles
      if (r.single != timeline_detail::no_id) copy_single_to_recent(r.single);
    }
    const std::string first_server = servers[0];  // a copy: a view would not outlive servers' growth
    for (std::size_t i = 0; i < n; ++i) {
      const recent_try& r = recent[(recent_next + i) % n];  // oldest first, full or not
      if (now - r.ts_us > options.window_us) continue;
      const std::string_view text(r.text.get(), r.lock_size + r.owner_size + r.client_size);
      lock_event e;  // at the same address every time round: event_group_of must not take it for the last one
      grouped_event = nullptr;
      e.ts_us = r.ts_us;
      e.event = r.event;
      e.lock = text.substr(0, r.lock_size);
      e.owner = text.substr(r.lock_size, r.owner_size);
      e.client = text.substr(r.lock_size + r.owner_size, r.client_size);
      e.client_endpoint = r.has_client_address ? &r.client_address : nullptr;
      e.server = first_server;
      e.server_endpoint = r.has_server_address ? &r.server_address : nullptr;
      e.db = r.db;
      if (!shared_values.empty() && shared_values.find(e.owner) != shared_values.end()) continue;
      handling(e);
      if (is_try(e.event)) {
        on_try(e, group_for(e));
        continue;
      }
      make_attempt_key(e, group_for(e));
      if (const std::uint32_t id = attempts.find(attempt_lookup, attempt_hash); id != timeline_detail::no_id) {
        close_attempt(id, is_release(e.event));
      }
    }
    std::vector<recent_try>().swap(recent);
  }

  // ---- MultiLock sets ----
  // `report`: false for a set found to be no MultiLock after all (on_set_release).
  void close_set(std::uint32_t id, bool released, bool report = true) {
    key_set& s = sets[id];
    if (s.overflowed) note_streaming(s.owner, s.client, s.end_us);
    // A value several clients send (shared_values, learnt within the set's window: RQ's
    // cleaning locks, `1` from every worker, each queue's taken in turn and kept) names
    // no one owner: its keys taken one after another say nothing of a MultiLock.
    const bool shared = !shared_values.empty() && shared_values.find(s.owner) != shared_values.end();
    if (report && s.keys.n >= 2 && !s.overflowed && !shared && !s.partly_released()) {
      // Keys taken one by one, some apart (a job worker's one token for each job it takes
      // when the job comes) are a MultiLock only if given back together: reported then.
      if (!released && !taken_back_to_back(s) && holds_a_key(s) && held_open < options.max_open) hold_set(s);
      else report_set(s, released);
    }
    if (s.keys.n >= 2) unindex_set(id);
    sets.erase(id);
  }
  bool taken_back_to_back(const key_set& s) const {
    for (const set_key* k = s.keys.begin() + 1; k < s.keys.end(); ++k) {
      if (k->ts_us - (k - 1)->ts_us > options.back_to_back_us) return false;
    }
    return true;
  }
  // A key of s deleted from another host than the one that took it (a peer clearing a
  // stale lock) was not given back by its owner: it says nothing of how s was taken.
  static bool taken_by_another_host(const key_set& s, const lock_event& e) {
    return e.event != lock_event_kind::expired && e.client_endpoint != nullptr && s.has_client_address &&
           (e.client_endpoint->family != s.client_address.family || e.client_endpoint->address != s.client_address.address);
  }
  static bool holds_a_key(const key_set& s) {
    return std::any_of(s.keys.begin(), s.keys.end(), [](const set_key& k) { return k.acquired && !k.released; });
  }
  void report_set(const key_set& s, bool released) {
    lock_group g;
    g.start_us = s.start_us;
    g.end_us = s.end_us;
    views_a.clear();
    views_c.clear();
    for (const set_key& k : s.keys) {
      views_c.push_back(k.name);
      if (k.acquired) views_a.push_back(k.name);
    }
    g.total = static_cast<std::uint32_t>(views_c.size());
    g.acquired = static_cast<std::uint32_t>(views_a.size());
    g.needed = g.total;
    g.succeeded = g.acquired == g.total;
    g.released = !g.succeeded && released;
    g.acquired_on = views_a;
    g.tried = views_c;
    lock_event e;
    e.ts_us = s.end_us;
    e.event = lock_event_kind::multilock;
    e.lock = s.keys.begin()->name;
    e.db = s.keys.begin()->db;
    e.owner = s.owner;
    e.client = s.client;
    e.server = servers[s.server];
    e.client_endpoint = s.has_client_address ? &s.client_address : nullptr;
    e.server_endpoint = s.has_server_address ? &s.server_address : nullptr;
    e.group = &g;
    next.on_event(e);
  }

  // Sets closed to tries while their keys are still held, taken apart: reported when
  // their keys are given back together (or the capture ends with them held), dropped
  // when one is given back and another still held release_together_us later.
  struct held_set {
    std::string owner, client;  // s's views point here
    key_set s;
    std::uint64_t order = 0;
  };
  std::vector<std::unique_ptr<held_set>> held_sets;  // null: a free slot
  std::vector<std::uint32_t> free_held;
  std::size_t held_open = 0;
  std::uint64_t held_order = 0;
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> held_keys;  // a held key's slot
  void hold_set(const key_set& s) {
    std::uint32_t slot = 0;
    if (!free_held.empty()) {
      slot = free_held.back();
      free_held.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(held_sets.size());
      held_sets.emplace_back();
    }
    held_sets[slot] = std::make_unique<held_set>();
    held_set& h = *held_sets[slot];
    h.owner.assign(s.owner);
    h.client.assign(s.client);
    h.s = s;
    h.s.owner = h.owner;
    h.s.client = h.client;
    h.order = held_order++;
    ++held_open;
    for (const set_key& k : h.s.keys) {
      if (k.acquired) held_keys.insert_or_assign(k.name, slot);
    }
  }
  void drop_held(std::uint32_t slot) {
    for (const set_key& k : held_sets[slot]->s.keys) {
      if (const auto it = held_keys.find(k.name); it != held_keys.end() && it->second == slot) held_keys.erase(it);
    }
    held_sets[slot].reset();
    free_held.push_back(slot);
    --held_open;
  }
  // A key of a held set given back (released, expired) by its owner.
  void on_held_release(const lock_event& e) {
    const auto it = held_keys.find(e.lock);
    if (it == held_keys.end()) return;
    const std::uint32_t slot = it->second;
    key_set& s = held_sets[slot]->s;
    if (s.owner != e.owner) return;
    set_key* const member = key_of(s, e);
    if (member == nullptr || !member->acquired || member->released) return;
    if (gave_back_all(s, *member, slot, true, e)) {
      if (s.partly_released_us < 0 || e.ts_us - s.partly_released_us <= options.release_together_us) report_set(s, true);
      drop_held(slot);
    }
  }
  // At the capture's end: the sets still held, in the order they were taken.
  [[gnu::noinline]] void report_held() {
    std::vector<std::uint32_t> slots;
    for (std::uint32_t i = 0; i < held_sets.size(); ++i) {
      if (held_sets[i] != nullptr) slots.push_back(i);
    }
    std::sort(slots.begin(), slots.end(), [&](std::uint32_t a, std::uint32_t b) { return held_sets[a]->order < held_sets[b]->order; });
    for (const std::uint32_t slot : slots) {
      if (!held_sets[slot]->s.partly_released()) report_set(held_sets[slot]->s, false);
      drop_held(slot);
    }
  }

  // The sets of two or more keys by key name: a key may be given back over another
  // connection than the one that took it (a job worker's blocking connection takes the
  // job, another frees it), and the set is keyed by the taking connection.
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> multi_key_sets;
  void index_key(std::string_view name, std::uint32_t id) {
    if (const auto it = multi_key_sets.find(name); it != multi_key_sets.end()) it->second = id;
    else multi_key_sets.emplace(std::string(name), id);
  }
  void unindex_set(std::uint32_t id) {
    for (const set_key& k : sets[id].keys) {
      if (const auto it = multi_key_sets.find(k.name); it != multi_key_sets.end() && it->second == id) {
        multi_key_sets.erase(it);
      }
    }
  }
  // The multi-key set of e's owner holding e's key, taken over any connection (no_id: none).
  std::uint32_t set_holding(const lock_event& e) {
    const auto it = multi_key_sets.find(e.lock);
    if (it == multi_key_sets.end() || !sets.live(it->second)) return timeline_detail::no_id;
    const key_set& s = sets[it->second];
    return s.owner == e.owner && !s.overflowed ? it->second : timeline_detail::no_id;
  }

  void make_set_key(const lock_event& e) {
    set_lookup = record_key{e.owner, e.client, 0};
    set_owner_hash = e.owner_hashed != nullptr && e.owner_hashed == e.owner.data() ? e.owner_hash : timeline_detail::no_id;
    set_lookup.first_hash = &set_owner_hash;
    set_hash = timeline_detail::no_id;
  }
  std::uint32_t set_hash = timeline_detail::no_id;  // set_lookup's, once worked out
  std::uint32_t set_owner_hash = timeline_detail::no_id;  // its owner's hash_text: the event's, or once worked out

  // A set's owner and client as one text, for `streaming`: the owner's length first, so
  // that no two pairs make one text.
  std::string_view stream_key(std::string_view owner, std::string_view client) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, owner.size());
    stream_text.assign(digits, r.ptr);
    stream_text += ':';
    stream_text += owner;
    stream_text += client;
    return stream_text;
  }

  // `id`: end_previous_set's answer for this event (set_lookup is still its key).
  void on_set_try(const lock_event& e, std::uint32_t id) {
    if (id != timeline_detail::no_id && sets[id].overflowed) {
      sets[id].end_us = e.ts_us;
      return;
    }
    on_set_try_member(e, id);
  }
  [[gnu::noinline]] void on_set_try_member(const lock_event& e, std::uint32_t id) {
    if (id != timeline_detail::no_id &&
        ((sets[id].refused_us >= 0 && sets[id].refused_us != e.ts_us) || sets[id].partly_released_us >= 0 ||
         std::any_of(sets[id].keys.begin(), sets[id].keys.end(),
                     [&](const set_key& k) { return k.name == e.lock && k.db == e.db; }))) {
      close_set(id, false);  // its next round, or the next lock after a refusal: not held with it
      id = timeline_detail::no_id;
    }
    if (id == timeline_detail::no_id) {
      bool streamed = false;
      if (!streaming.empty()) {
        if (const auto it = streaming.find(stream_key(e.owner, e.client)); it != streaming.end()) {
          if (e.ts_us - it->second <= options.window_us) streamed = true;
          else streaming.erase(it);
        }
      }
      if (retried_set != timeline_detail::no_id) {
        // Closed (a set of one key: unreported) and opened again, as add would reuse it.
        id = retried_set;
        retried_set = timeline_detail::no_id;
        sets.reopen(id);
      } else {
        // A record closed but pinned by its timer is the one add would open again: only a
        // key without one starts as a single (its timer then stands for a record of its own).
        if (!streamed && options.compact_single_sets && options.max_set_keys > 0) {
          if (set_hash == timeline_detail::no_id) set_hash = record_hash(set_lookup);
          if (!sets.has_closed(set_lookup, set_hash)) {
            const std::uint32_t closed = single_keyed(true);
            if (closed == timeline_detail::no_id) {
              open_single(e);
              return;
            }
            set_of_single(closed);  // the closed record add opens again
          }
        }
        id = sets.add(set_lookup, set_hash);
      }
      key_set& s = sets[id];
      s.overflowed = streamed;
      s.owner = sets.first(id);
      s.client = sets.second(id);
      s.server = server_id(e.server);
      s.has_client_address = e.client_endpoint != nullptr;
      if (e.client_endpoint != nullptr) s.client_address = *e.client_endpoint;
      s.has_server_address = e.server_endpoint != nullptr;
      if (e.server_endpoint != nullptr) s.server_address = *e.server_endpoint;
      s.start_us = e.ts_us;
      push_timer(timer_kind::set, id, e.ts_us);
    }
    key_set& s = sets[id];
    if (s.overflowed || s.keys.n >= options.max_set_keys) {
      s.overflowed = true;
      s.end_us = e.ts_us;
      return;
    }
    set_key& k = s.keys.add();
    k.name.assign(e.lock);
    k.db = e.db;
    k.acquired = e.event == lock_event_kind::acquired;
    k.ts_us = e.ts_us;
    k.released = false;
    if (!k.acquired) s.refused_us = e.ts_us;
    s.end_us = e.ts_us;
    if (s.keys.n == 2) {
      for (const set_key& member : s.keys) index_key(member.name, id);
    } else if (s.keys.n > 2) {
      index_key(k.name, id);
    }
  }

  // Sets of one key (a try whose owner has no set open on its connection: on one server,
  // nearly every try) kept as a copy of what their record would hold, found by the same
  // key and hash, their timer in the ring as a record's. Whatever finds one (find_set:
  // its owner's next try, a release) turns it into that record first, the timer pointed
  // at it, so the code past find_set sees records only; its own timer just drops it (a
  // set of one key closes unreported). No record, pin or key string per lone try.
  struct single_set {
    std::unique_ptr<char[]> text;  // owner, client, lock; kept with its capacity
    std::uint32_t capacity = 0;
    std::uint32_t owner_size = 0, client_size = 0, lock_size = 0;
    std::uint32_t hash = 0;  // the set key's record_hash
    std::uint32_t server = 0;
    std::int32_t db = 0;
    bool acquired = false;
    // Its key given up (released, expired): the set closed, as close_set leaves a record
    // its timer still pins (found by no lookup; the key's next set opens it again).
    bool closed = false;
    bool has_client_address = false, has_server_address = false;
    endpoint client_address{}, server_address{};
    std::int64_t start_us = 0;
    std::uint64_t timer = 0;  // its timer's number (pushed)
    std::uint16_t recent = no_recent;  // the ring slot of the try it stands for (remember_try)
    std::string_view owner() const noexcept { return {text.get(), owner_size}; }
    std::string_view client() const noexcept { return {text.get() + owner_size, client_size}; }
    std::string_view lock() const noexcept { return {text.get() + owner_size + client_size, lock_size}; }
  };
  timeline_detail::stable_vector<single_set> singles;  // by id; free ones on free_singles
  std::vector<std::uint32_t> free_singles;
  timeline_detail::id_table single_ids;
  std::size_t singles_open = 0;    // in single_ids, closed or not
  std::size_t singles_closed = 0;  // of them, closed

  // The set keyed set_lookup (a record, or a single made one); no_id when there is none.
  // `past_last`: the record used last is known not to be it.
  std::uint32_t find_set(bool past_last = false) {
    const std::uint32_t id = past_last ? sets.find_past_last(set_lookup, set_hash) : sets.find(set_lookup, set_hash);
    if (id != timeline_detail::no_id || singles_open == 0) return id;
    const std::uint32_t single = single_keyed(false);
    return single == timeline_detail::no_id ? single : set_of_single(single);
  }
  // The single keyed set_lookup, open or closed; no_id when there is none.
  std::uint32_t single_keyed(bool closed) {
    if ((closed ? singles_closed : singles_open - singles_closed) == 0) return timeline_detail::no_id;
    if (set_hash == timeline_detail::no_id) set_hash = record_hash(set_lookup);
    return single_ids.find_if(set_hash, [&](std::uint32_t i) {
      const single_set& o = singles[i];
      return o.closed == closed && ingest::same_bytes(o.owner(), set_lookup.first) &&
             ingest::same_bytes(o.client(), set_lookup.second);
    });
  }
  // e's try as a single (set_lookup is its key, set_hash its hash).
  void open_single(const lock_event& e) {
    std::uint32_t i = 0;
    if (!free_singles.empty()) {
      i = free_singles.back();
      free_singles.pop_back();
    } else {
      i = static_cast<std::uint32_t>(singles.size());
      singles.emplace_back();
    }
    single_set& o = singles[i];
    const std::size_t size = e.owner.size() + e.client.size() + e.lock.size();
    if (size > o.capacity) {
      o.capacity = static_cast<std::uint32_t>(std::max<std::size_t>(size, 96));
      o.text = std::make_unique<char[]>(o.capacity);
    }
    ingest::copy_bytes(ingest::copy_bytes(ingest::copy_bytes(o.text.get(), e.owner), e.client), e.lock);
    o.owner_size = static_cast<std::uint32_t>(e.owner.size());
    o.client_size = static_cast<std::uint32_t>(e.client.size());
    o.lock_size = static_cast<std::uint32_t>(e.lock.size());
    o.hash = set_hash;
    o.server = server_id(e.server);
    o.db = e.db;
    o.acquired = e.event == lock_event_kind::acquired;
    o.has_client_address = e.client_endpoint != nullptr;
    if (e.client_endpoint != nullptr) o.client_address = *e.client_endpoint;
    o.has_server_address = e.server_endpoint != nullptr;
    if (e.server_endpoint != nullptr) o.server_address = *e.server_endpoint;
    o.start_us = e.ts_us;
    o.closed = false;
    o.timer = pushed;
    o.recent = no_recent;
    try_single = i;
    single_ids.insert(i, set_hash);
    ++singles_open;
    push_timer(timer_kind::single, i, e.ts_us);
  }
  void drop_single(std::uint32_t i) {
    if (singles[i].recent != no_recent) copy_single_to_recent(i);
    if (singles[i].closed) --singles_closed;
    single_ids.erase(i, singles[i].hash);
    free_singles.push_back(i);
    --singles_open;
  }
  // The record single i stands for, as on_set_try_member would have opened it, its timer
  // now the record's.
  std::uint32_t set_of_single(std::uint32_t i) {
    const single_set& o = singles[i];
    const std::uint32_t id = sets.add(record_key{o.owner(), o.client(), 0}, o.hash);
    key_set& s = sets[id];
    s.owner = sets.first(id);
    s.client = sets.second(id);
    s.server = o.server;
    s.has_client_address = o.has_client_address;
    s.client_address = o.client_address;
    s.has_server_address = o.has_server_address;
    s.server_address = o.server_address;
    s.start_us = s.end_us = o.start_us;
    set_key& k = s.keys.add();
    k.name.assign(o.lock());
    k.db = o.db;
    k.acquired = o.acquired;
    k.ts_us = o.start_us;
    k.released = false;
    if (!k.acquired) s.refused_us = o.start_us;
    sets.pin(id);
    ring[(head + static_cast<std::size_t>(o.timer - (pushed - queued))) % ring.size()] =
        timer{o.start_us, id, timer_kind::set};
    const bool closed = o.closed;
    drop_single(i);
    if (closed) sets.erase(id);  // closed, pinned by its timer
    return id;
  }

  // An overflowed set's owner tried its last key at `ts`.
  void note_streaming(std::string_view owner, std::string_view client, std::int64_t ts) {
    const std::string_view key = stream_key(owner, client);
    if (const auto it = streaming.find(key); it != streaming.end()) {
      it->second = ts;
      return;
    }
    if (streaming.size() >= options.max_open) {
      std::erase_if(streaming, [&](const auto& entry) { return ts - entry.second > options.window_us; });
      if (streaming.size() >= options.max_open) streaming.clear();  // bounded whatever the rate
    }
    streaming.emplace(std::string(key), ts);
  }

  void on_set_release(const lock_event& e) {
    make_set_key(e);
    const std::uint32_t id = sets.find(set_lookup, set_hash);
    if (id == timeline_detail::no_id) {
      // A single whose key this is closes as close_set would close its record (a set of
      // one key: unreported), without becoming one (a RedLock's release on each server).
      if (const std::uint32_t i = single_keyed(false);
          i != timeline_detail::no_id && singles[i].lock() == e.lock && singles[i].db == e.db) {
        singles[i].closed = true;
        ++singles_closed;
        return;
      }
    } else if (sets[id].overflowed) {
      return;
    } else if (give_back(id, e)) {
      return;
    }
    if (!multi_key_sets.empty()) {
      if (const std::uint32_t other = set_holding(e); other != timeline_detail::no_id && other != id && give_back(other, e)) {
        return;
      }
    }
    if (held_open > 0) on_held_release(e);
  }
  // e gives back a key of open set `id`; false: the key is none of the set's.
  bool give_back(std::uint32_t id, const lock_event& e) {
    key_set& s = sets[id];
    set_key* const member = key_of(s, e);
    if (member == nullptr) return false;
    // A MultiLock refused a key gives back what it took, and only that: a plain DEL that
    // names more keys than the set took removes what it never held (RQ's scheduler
    // deletes every queue's lock, held or not, after taking one of two). No give-back, so
    // no MultiLock: closed unreported.
    const auto taken = std::count_if(s.keys.begin(), s.keys.end(), [](const set_key& k) { return k.acquired; });
    const bool failed = taken < static_cast<std::ptrdiff_t>(s.keys.n);
    if (failed && e.keys_named > taken) {
      close_set(id, true, false);
      return true;
    }
    if (gave_back_all(s, *member, id, false, e)) close_set(id, true);
    return true;
  }
  static set_key* key_of(key_set& s, const lock_event& e) {
    const auto it = std::find_if(s.keys.begin(), s.keys.end(),
                                 [&](const set_key& k) { return k.name == e.lock && k.db == e.db; });
    return it == s.keys.end() ? nullptr : &*it;
  }
  // e gives back `member` of s (set `id`, or held set slot `id`): true when s then holds
  // no key. Otherwise the first key given back starts release_together_us's wait for the
  // others, unless another host took it (no give-back of the owner's).
  bool gave_back_all(key_set& s, set_key& member, std::uint32_t id, bool held, const lock_event& e) {
    if (member.acquired) member.released = true;
    if (!holds_a_key(s)) return true;
    if (s.partly_released_us < 0 && !taken_by_another_host(s, e)) {
      s.partly_released_us = e.ts_us;
      partly_released.push_back({id, s.start_us, e.ts_us, held});
    }
    return false;
  }
  // Sets whose first key was given back while others were still held, in the order that
  // happened: each is ended unreported once release_together_us passes with a key held.
  struct partial_release {
    std::uint32_t id = 0;  // a set's, or a held set's slot
    std::int64_t start_us = 0, released_us = 0;
    bool held = false;
  };
  std::vector<partial_release> partly_released;
  std::size_t partly_released_head = 0;
  [[gnu::noinline]] void end_partial_releases(std::int64_t now, bool all) {
    while (partly_released_head < partly_released.size()) {
      const partial_release& p = partly_released[partly_released_head];
      if (!all && now - p.released_us <= options.release_together_us) break;
      ++partly_released_head;
      if (p.held) {
        if (p.id < held_sets.size() && held_sets[p.id] != nullptr && held_sets[p.id]->s.start_us == p.start_us &&
            held_sets[p.id]->s.partly_released_us == p.released_us) {
          drop_held(p.id);
        }
      } else if (sets.live(p.id) && sets[p.id].start_us == p.start_us &&
                 sets[p.id].partly_released_us == p.released_us) {
        close_set(p.id, true);
      }
    }
    if (partly_released_head == partly_released.size()) {
      partly_released.clear();
      partly_released_head = 0;
    }
  }

  // ---- the clock ----
  // Open attempts and sets by window end, in the order they opened (times only grow,
  // so this is time order); an entry closed meanwhile is skipped (its start differs or
  // it is closed). A timer names its record by id and pins it (record_table): the same
  // key opened again is the same record, so the same key opened again at the same time
  // is that timer's too, as a lookup of the key would find. A ring of reused entries.
  enum class timer_kind : std::uint8_t { attempt, set, single };
  struct timer {
    std::int64_t start_us = 0;
    std::uint32_t id = 0;
    timer_kind kind = timer_kind::attempt;
  };
  std::vector<timer> ring;
  std::size_t head = 0, queued = 0;
  std::uint64_t pushed = 0;  // timers pushed so far: the ring's front is number pushed - queued
  void push_timer(timer_kind kind, std::uint32_t id, std::int64_t start_us) {
    // Pinned first: a full ring's oldest timer may close this very record (opened again at
    // its time), which must stay findable by the timer pushed here.
    if (kind == timer_kind::set) sets.pin(id);
    else if (kind == timer_kind::attempt) attempts.pin(id);
    if (queued >= options.max_open) close_front();  // memory stays bounded at any rate
    if (queued == ring.size()) {
      std::rotate(ring.begin(), ring.begin() + static_cast<std::ptrdiff_t>(head), ring.end());
      head = 0;
      ring.resize(std::max<std::size_t>(16, ring.size() * 2));
    }
    ring[(head + queued++) % ring.size()] = timer{start_us, id, kind};
    ++pushed;
  }
  void close_front() {
    const timer t = ring[head];
    head = (head + 1) % ring.size();
    --queued;
    if (t.kind == timer_kind::single) {
      drop_single(t.id);
    } else if (t.kind == timer_kind::set) {
      if (sets.live(t.id) && sets[t.id].start_us == t.start_us) close_set(t.id, false);
      sets.unpin(t.id);
    } else {
      if (attempts.live(t.id) && attempts[t.id].start_us == t.start_us) close_attempt(t.id, false);
      attempts.unpin(t.id);
    }
  }
  void advance(std::int64_t now, bool all) {
    if (!partly_released.empty()) end_partial_releases(now, all);
    while (queued > 0 && (all || now > ring[head].start_us + options.window_us)) close_front();
    if (all && held_open > 0) report_held();
  }

  // group_of(e.owner, e.client_endpoint) for the event on_event handles, worked out once
  // (parse_owner_id on every use was a tenth of the groups' time over 3 servers) and
  // copied when it is made (group_text is scratch that other calls reuse); an owner that
  // is its own group is the event's text, which stays put while the event is handled.
  const lock_event* grouped_event = nullptr;
  std::string event_group;
  bool event_group_by_thread = false;
  std::string_view event_group_of(const lock_event& e) {
    if (grouped_event != &e) {
      const std::string_view g = group_of(e.owner, e.client_endpoint);
      event_group_by_thread = g.data() != e.owner.data();  // a Redisson owner id: by client IP and thread
      if (event_group_by_thread) event_group.assign(g);
      grouped_event = &e;
    }
    return event_group_by_thread ? std::string_view(event_group) : e.owner;
  }

  // The owner of each connection's latest try, by its client endpoint (direct-mapped on
  // the port; a slot holding another connection tells nothing). A MultiLock takes its
  // keys one after another over its connection: another owner's try over that connection
  // between two of them means they were not taken together (a client setting markers,
  // `SET … NX PX` keys never released, between its other locks), and the set so far ends.
  // The owner is kept as a fingerprint (its length, first and last 8 bytes): two owners
  // alike in all three read as one, which only keeps a set open as before. No copy, no
  // hash: this runs on every try.
  struct owner_print {
    std::uint64_t head = 0, tail = 0;
    std::size_t size = 0;
    bool operator==(const owner_print&) const = default;
  };
  static owner_print print_of(std::string_view owner) noexcept {
    owner_print p;
    p.size = owner.size();
    if (owner.size() >= 8) {  // two fixed loads (a copy of n bytes is a call)
      std::memcpy(&p.head, owner.data(), 8);
      std::memcpy(&p.tail, owner.data() + owner.size() - 8, 8);
      return p;
    }
    std::memcpy(&p.head, owner.data(), owner.size());
    std::memcpy(&p.tail, owner.data(), owner.size());
    return p;
  }
  struct latest_try {
    ingest::endpoint client{};
    owner_print owner;
    bool used = false;
  };
  std::array<latest_try, 256> latest_tries{};
  // Whether another owner tried over e's connection since its owner's try before; notes e.
  bool other_owner_tried_between(const lock_event& e) {
    if (e.client_endpoint == nullptr) return false;
    latest_try& t = latest_tries[e.client_endpoint->port & 0xffu];
    const owner_print owner = print_of(e.owner);
    const bool same_connection = t.used && t.client == *e.client_endpoint;
    const bool other = same_connection && !(t.owner == owner);
    if (!same_connection) {
      t.client = *e.client_endpoint;
      t.used = true;
    }
    t.owner = owner;
    return other;
  }

  // An event that is neither a try nor news of a hold (a re-entry, a subscription: most
  // of an uncontended load's) takes a path of its own, in a small frame: it paid the
  // register saves of the whole function.
  void on_event(const lock_event& e) {
    if (!is_try(e.event) && !hold_news(e.event)) {
      on_other_event(e);
      return;
    }
    on_try_or_hold_news(e);
  }
  static bool hold_news(lock_event_kind k) noexcept {
    return is_release(k) || k == lock_event_kind::expired || k == lock_event_kind::renewed ||
           k == lock_event_kind::renew_failed || k == lock_event_kind::partially_released;
  }
  // on_try_or_hold_news's steps for an event that is neither.
  void on_other_event(const lock_event& e) {
    grouped_event = nullptr;
    handling(e);
    advance(e.ts_us, false);
    if (e.group == nullptr && !e.owner.empty() && e.event != lock_event_kind::anomaly) {
      const std::size_t known = servers.size();
      server_id(e.server);
      if (servers.size() >= 2 && known == 1) [[unlikely]] {
        replay_recent_tries(e.ts_us);
        handling(e);
      }
    }
    next.on_event(e);
  }
  [[gnu::noinline]] void on_try_or_hold_news(const lock_event& e) {
    grouped_event = nullptr;
    handling(e);
    advance(e.ts_us, false);
    if (e.group != nullptr || e.owner.empty() || e.event == lock_event_kind::anomaly) {
      next.on_event(e);
      return;
    }
    // Quorums need a key on two servers: until a second server shows up, no attempt
    // or holding is kept (a one-server capture pays little for them); the last tries
    // are kept in a small ring and replayed when it does.
    const std::size_t known = servers.size();
    server_id(e.server);
    const bool quorums = servers.size() >= 2;
    if (quorums && known == 1) {
      replay_recent_tries(e.ts_us);
      handling(e);
    }
    if (is_try(e.event)) {
      // Redisson owner ids are one process's (its threads re-enter what they hold): never shared.
      const bool shared = shared_value(e);
      if (shared && e.owner_shared) drop_attempt(e);
      const bool grouped = quorums && !shared;
      try_single = timeline_detail::no_id;
      if (grouped) end_previous_round(e, group_for(e));  // reported before the try that starts the next
      std::uint32_t open_set = end_previous_set(e, !grouped);
      if (other_owner_tried_between(e) && open_set != timeline_detail::no_id && !sets[open_set].overflowed) {
        close_set(open_set, false);
        open_set = timeline_detail::no_id;
      }
      next.on_event(e);
      if (grouped) {
        on_try(e, group_for(e));
        // on_try's timers may have closed sets: look again.
        make_set_key(e);
        open_set = find_set();
      }
      on_set_try(e, open_set);
      if (!quorums && !shared) remember_try(e);
      return;
    }
    const bool relevant = hold_news(e.event);
    if (relevant) {
      // The owner has moved on from its attempt on this key.
      if (!attempts.empty()) {
        make_attempt_key(e, group_for(e));
        // Not by a Redisson watchdog renewing the servers taken while its thread still tries
        // the others.
        if (const std::uint32_t id = attempts.find(attempt_lookup, attempt_hash);
            id != timeline_detail::no_id && !(attempts[id].redisson && e.event == lock_event_kind::renewed)) {
          close_attempt(id, is_release(e.event));
        }
      }
      // A key given up (released, or its lease ran out) ends the owner's set: what it
      // takes next is not held together with it.
      if (is_release(e.event) || e.event == lock_event_kind::expired) on_set_release(e);
      if (!quorums && (is_release(e.event) || e.event == lock_event_kind::expired)) remember_release(e);
    }
    next.on_event(e);
    // group_text may have been reused by close_attempt's callees: recompute.
    if (relevant && !keys.empty()) update_holding(e, group_for(e));
  }
};

lock_groups::lock_groups(const group_options& options, lock_event_sink& next)
    : impl_(std::make_unique<impl>(options, next)) {}
lock_groups::~lock_groups() = default;

void lock_groups::on_event(const lock_event& e) { impl_->on_event(e); }
void lock_groups::advance_to(std::int64_t now_us) { impl_->advance(now_us, false); }
void lock_groups::finish(std::int64_t) { impl_->advance(0, true); }

}  // namespace lockscope::locks
