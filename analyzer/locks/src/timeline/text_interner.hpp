// Interned texts (owners, "ip:port") with reference counts, and the open-addressing
// table of 32-bit ids they (and the lock names) are found by.
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include <sys/mman.h>

#include "huge_pages.hpp"
#include "stable_vector.hpp"
#include "lockscope/ingest/short_bytes.hpp"

namespace lockscope::locks::timeline_detail {

constexpr std::uint32_t no_id = 0xffffffffu;

// Eight bytes a step (lock names and owners are 20-60 bytes, hashed on every
// operation), mixed by multiplication; the table's slot comes from the high bits after
// id_table's own finalizer. Always inlined: on the operation path the compiler's budget
// for the translation unit decided it, so that code elsewhere growing moved its call out
// of line (+0.4 M instructions on the 3 servers' 20 MB head).
[[gnu::always_inline]] inline std::uint32_t hash_text(std::string_view s) noexcept {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  const char* p = s.data();
  std::size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  if (n > 0) {
    // The last n bytes as a number, byte i at bits 8i: from the 8 bytes ending with them
    // when the text has 8 (no loop over the tail; on a little-endian machine the same
    // number), else from two loads that overlap (a byte read twice is ORed onto itself:
    // a herd's lock names, `herd:0`, were hashed byte by byte on every operation).
    std::uint64_t v = 0;
    if (s.size() >= 8) {
      std::memcpy(&v, p + n - 8, 8);
      v >>= 8 * (8 - n);
    } else if (n >= 4) {
      std::uint32_t first, last;
      std::memcpy(&first, p, 4);
      std::memcpy(&last, p + n - 4, 4);
      v = first | (std::uint64_t{last} << (8 * (n - 4)));
    } else {
      const auto byte = [&](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i); };
      v = byte(0) | byte(n / 2) | byte(n - 1);
    }
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 29;
  }
  h *= 0xff51afd7ed558ccdull;
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// An open-addressing table of 32-bit ids (any value but no_id) keyed by text that
// lives elsewhere: 8 bytes a slot (id and hash), so a probe touches the text only when
// the hashes agree. Linear probing; erase shifts the entries after it back (no
// tombstones), so the table never degrades however many ids come and go.
class id_table {
 public:
  // How much a table of grow_in_place_from slots or more grows at a time: a quarter
  // keeps the memory close to the ids (the owners: an anomaly storm's are most of its
  // peak); a half re-places each id about half as often (the locks: the keep-up load
  // names a new one every other operation, and its growths cost 60 instructions an
  // exchange).
  enum class growth : std::uint8_t { by_quarter = 4, by_half = 2 };
  explicit id_table(growth g = growth::by_quarter) noexcept : growth_divisor_(static_cast<std::uint8_t>(g)) {}
  template <class TextOf>
  std::uint32_t find(std::string_view s, std::uint32_t h, TextOf&& text_of) const {
    if (slots_.empty()) return no_id;
    for (std::size_t i = start(h);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id) return no_id;
      if (e.hash == h && ingest::same_bytes(text_of(e.id), s)) return e.id;
    }
  }
  // find(), and when `s` is not there, where insert_at() puts it (the probe's first empty
  // slot, where insert() would place it): one probe for a new text, not two.
  template <class TextOf>
  std::uint32_t find_slot(std::string_view s, std::uint32_t h, TextOf&& text_of, std::size_t& empty) const {
    return find_if_slot(h, [&](std::uint32_t id) { return ingest::same_bytes(text_of(id), s); }, empty);
  }
  // find_if(), and when no id matches, where insert_at() puts one (as find_slot).
  template <class Matches>
  std::uint32_t find_if_slot(std::uint32_t h, Matches&& matches, std::size_t& empty) const {
    empty = no_slot;
    if (slots_.empty()) return no_id;
    for (std::size_t i = start(h);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id) {
        empty = i;
        return no_id;
      }
      if (e.hash == h && matches(e.id)) return e.id;
    }
  }
  static constexpr std::size_t no_slot = ~std::size_t{0};
  // insert(id, h) where find_slot() found no entry for the text hashed `h` and answered
  // `empty`, nothing inserted since.
  void insert_at(std::size_t empty, std::uint32_t id, std::uint32_t h) {
    if ((++count_) * 10 > slots_.size() * 7) {  // (always so for an empty table: no slot found)
      grow();
      place(id, h);
      return;
    }
    slots_[empty] = slot{id, h};
  }
  // The id with hash `h` for which matches(id) holds.
  template <class Matches>
  std::uint32_t find_if(std::uint32_t h, Matches&& matches) const {
    if (slots_.empty()) return no_id;
    for (std::size_t i = start(h);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id) return no_id;
      if (e.hash == h && matches(e.id)) return e.id;
    }
  }
  // Starts loading the slot where a probe for hash `h` begins.
  void prefetch(std::uint32_t h) const noexcept {
    if (!slots_.empty()) __builtin_prefetch(&slots_[start(h)]);
  }
  // The first id in the probe run of `h` whose hash is `h` (its text unchecked);
  // no_id when the run has none. For prefetching: find_if() decides.
  std::uint32_t first_with_hash(std::uint32_t h) const noexcept {
    if (slots_.empty()) return no_id;
    for (std::size_t i = start(h);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id || e.hash == h) return e.id;
    }
  }
  void insert(std::uint32_t id, std::uint32_t h) {
    // At most 7/10 full, growing by a quarter (or its growth) past 32Ki slots: 8 bytes a slot, 11-15 bytes an id (at 4/5 a storm's
    // owners, interned and freed by the 100,000, cost 100 instructions an erase in long runs).
    if ((++count_) * 10 > slots_.size() * 7) grow();
    place(id, h);
  }
  std::size_t capacity() const noexcept { return slots_.size(); }
  // Every id placed again under hash_of(id) (the identity of some entries changed).
  template <class HashOf>
  void rehash(HashOf&& hash_of) {
    ++generation_;
    slot_array old = std::move(slots_);
    slots_.assign_empty(old.size());
    for (std::size_t i = 0; i < old.size(); ++i) {
      if (old[i].id != no_id) place(old[i].id, hash_of(old[i].id));
    }
  }
  // Every id for which keep(id) holds placed again under the hash it was inserted with;
  // the others gone. Erasing many ids at once (a capture's end frees a storm's waiters'
  // owners: 30,000 backward shifts) costs a pass over the slots instead, in place (a second
  // table beside it was 3.4 MB more at the storm's peak). The pass starts after a slot
  // that is empty before it (no run crosses it), and takes each entry out and places it
  // again from its home: it only moves back, into slots the pass has emptied before it.
  template <class Keep>
  void keep_only(Keep&& keep) {
    ++generation_;
    count_ = 0;
    const std::size_t n = slots_.size();
    if (n == 0) return;
    std::size_t boundary = 0;
    while (slots_[boundary].id != no_id) ++boundary;  // never full (at most 7/10)
    for (std::size_t k = 1; k <= n; ++k) {
      const std::size_t i = boundary + k < n ? boundary + k : boundary + k - n;
      const slot e = slots_[i];
      if (e.id == no_id) continue;
      slots_[i] = slot{};
      if (!keep(e.id)) continue;
      place(e.id, e.hash);
      ++count_;
    }
  }
  // Changes whenever entries may have moved (grow, rehash, erase): an id that was the first of
  // its hash in its probe run stays so while this is unchanged (an insert goes after
  // every entry of its run).
  std::uint64_t generation() const noexcept { return generation_; }
  // Removes `id`, inserted with hash `h` (it must be there).
  void erase(std::uint32_t id, std::uint32_t h) noexcept {
    std::size_t hole = start(h);
    while (slots_[hole].id != id) hole = next(hole);
    --count_;
    ++generation_;
    // Backward shift: move up every later entry of the run whose home slot is not
    // between the hole and itself (cyclically).
    for (std::size_t i = next(hole);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id) break;
      const std::size_t home = start(e.hash);
      const bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
      if (stays) continue;
      slots_[hole] = e;
      hole = i;
    }
    slots_[hole] = slot{};
  }

 private:
  struct slot {
    std::uint32_t id = no_id;
    std::uint32_t hash = 0;
  };
  // The slots: from the heap while small, else a huge-page mapping that grows in place
  // (mremap moves its pages; nothing is copied, and the old and the new table are never
  // both resident).
  class slot_array {
   public:
    slot_array() = default;
    slot_array(const slot_array&) = delete;
    slot_array& operator=(const slot_array&) = delete;
    slot_array(slot_array&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    slot_array& operator=(slot_array&& o) noexcept {
      if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
      }
      return *this;
    }
    ~slot_array() { release(); }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    slot& operator[](std::size_t i) noexcept { return data_[i]; }
    const slot& operator[](std::size_t i) const noexcept { return data_[i]; }
    // `n` empty slots (the contents before are dropped).
    void assign_empty(std::size_t n) {
      release();
      data_ = allocate(n);
      size_ = n;
      std::fill_n(data_, n, slot{});
    }
    // `n` slots (n > size()), the first size() as they were; the others' contents unspecified.
    void grow_keeping(std::size_t n) {
#ifndef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
      if (big(size_)) {
        const std::size_t old_bytes = round_to_huge_pages(size_ * sizeof(slot));
        const std::size_t new_bytes = round_to_huge_pages(n * sizeof(slot));
        if (new_bytes == old_bytes) {  // the mapping already holds them
          size_ = n;
          return;
        }
        void* target = map_huge(n * sizeof(slot));  // aligned, untouched: no memory yet
        void* moved = ::mremap(data_, old_bytes, new_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, target);
        if (moved != MAP_FAILED) {
          data_ = static_cast<slot*>(moved);
          size_ = n;
          return;
        }
        unmap_huge(target, n * sizeof(slot));
      }
#endif
      slot* grown = allocate(n);
      std::copy_n(data_, size_, grown);
      release();
      data_ = grown;
      size_ = n;
    }

   private:
    static bool big(std::size_t n) noexcept { return n * sizeof(slot) >= huge_page_bytes / 2; }
    static slot* allocate(std::size_t n) {
      if (big(n)) return static_cast<slot*>(map_huge(n * sizeof(slot)));
      return static_cast<slot*>(::operator new(n * sizeof(slot), std::align_val_t{alignof(slot)}));
    }
    void release() noexcept {
      if (data_ == nullptr) return;
      if (big(size_)) unmap_huge(data_, size_ * sizeof(slot));
      else ::operator delete(data_, std::align_val_t{alignof(slot)});
      data_ = nullptr;
      size_ = 0;
    }
    slot* data_ = nullptr;
    std::size_t size_ = 0;
  };
  // The range reduction uses the high bits: hash_text() ends with a full 64-bit mix
  // folded to 32 bits, so they are as good as the low ones (no finalizer of its own here:
  // two multiplies on the path of every lookup).
  std::size_t start(std::uint32_t h) const noexcept {
    return static_cast<std::size_t>((std::uint64_t{h} * slots_.size()) >> 32);
  }
  std::size_t next(std::size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void place(std::uint32_t id, std::uint32_t h) {
    std::size_t i = start(h);
    while (slots_[i].id != no_id) i = next(i);
    slots_[i] = slot{id, h};
  }
  void grow() {
    ++generation_;
    // Doubled while small (a storm's 33,000 owners in 20 MB were placed again four times
    // over, growing by a quarter: 130 instructions an owner), by the table's growth from
    // grow_in_place_from on, where the memory is.
    const std::size_t size = slots_.size() < grow_in_place_from / 2 ? std::max<std::size_t>(64, slots_.size() * 2)
                                                                    : slots_.size() + slots_.size() / growth_divisor_;
    if (slots_.size() >= grow_in_place_from) {
      grow_in_place(size);
      return;
    }
    slot_array old = std::move(slots_);
    slots_.assign_empty(size);
    for (std::size_t i = 0; i < old.size(); ++i) {
      if (old[i].id != no_id) place(old[i].id, old[i].hash);
    }
  }
  // Tables of this many slots (512 KiB) or more grow in place.
  static constexpr std::size_t grow_in_place_from = std::size_t{1} << 16;
  // The same table, `size` slots: its entries gathered at the front in hash order (the
  // order of their slots under any size: start() is monotone in the hash), the table
  // grown, then each entry laid out from the back at max(its slot, the previous one's + 1),
  // which is what inserting them in hash order would give. An entry's place is never
  // before its index in the gathered order, so the backward pass only writes slots
  // already emptied. Memory: the positions (4 bytes an entry) and the run that wraps.
  void grow_in_place(std::size_t size) {
    const std::size_t old_size = slots_.size();
    // 1. Gather. The slots before the first empty one hold the run that wrapped past
    // the end (homes near the end: they go last) and entries whose homes are there (the
    // lowest of all: first); every other entry's home is past that empty slot.
    std::size_t first_empty = 0;
    while (slots_[first_empty].id != no_id) ++first_empty;
    std::vector<slot> low, high;
    for (std::size_t i = 0; i < first_empty; ++i) (start(slots_[i].hash) <= i ? low : high).push_back(slots_[i]);
    std::sort(low.begin(), low.end(), [](const slot& a, const slot& b) { return a.hash < b.hash; });
    std::size_t n = low.size();
    for (std::size_t r = first_empty + 1; r < old_size; ++r) {
      if (slots_[r].id != no_id) slots_[n++] = slots_[r];
    }
    std::copy(low.begin(), low.end(), &slots_[0]);
    for (const slot& e : high) slots_[n++] = e;
    // 2. Hash order: within each run the slots' order is the order of insertion, and
    // the high ones belong to the last run, so few entries move far.
    for (std::size_t i = 1; i < n; ++i) {
      const slot e = slots_[i];
      std::size_t j = i;
      for (; j > 0 && slots_[j - 1].hash > e.hash; --j) slots_[j] = slots_[j - 1];
      slots_[j] = e;
    }
    // 3. Grow, then lay out from the back.
    slots_.grow_keeping(size);
    std::fill(&slots_[0] + n, &slots_[0] + size, slot{});
    std::vector<std::uint32_t> at(n);
    std::size_t fits = n;  // entries from here on would run past the end: placed last
    for (std::size_t i = 0, next_free = 0; i < n; ++i) {
      const std::size_t p = std::max(start(slots_[i].hash), next_free);
      if (p >= size) {
        fits = i;
        break;
      }
      at[i] = static_cast<std::uint32_t>(p);
      next_free = p + 1;
    }
    std::vector<slot> past_end(&slots_[0] + fits, &slots_[0] + n);
    std::fill(&slots_[0] + fits, &slots_[0] + n, slot{});
    for (std::size_t i = fits; i-- > 0;) {
      const slot e = slots_[i];
      slots_[i] = slot{};
      slots_[at[i]] = e;
    }
    for (const slot& e : past_end) place(e.id, e.hash);
  }
  slot_array slots_;
  std::size_t count_ = 0;
  std::uint64_t generation_ = 0;
  std::uint8_t growth_divisor_;
};

// Interns strings as dense, reference-counted ids (owners, "ip:port" texts).
//
//   std::uint32_t o = owners.id(text);  // new ids start with no reference
//   owners.retain(o);  ...  owners.release(o);
//   owners.collect();  // frees every id left without references, may move the texts
//
// An id is freed by the first collect() after it was left unreferenced (or created
// and never retained), so ids and views stay usable until then: the timeline collects
// once per operation, when it holds no view. Freed ids are reused first. The texts sit
// back to back in 64 KiB blocks; collect() copies the live ones into fresh blocks once
// the dead bytes outweigh them (and at least `compact_after` are dead), so the memory
// follows the live texts, not every text ever seen: 24 bytes an id, its text, its slot
// in the id table, and at most as many dead bytes as live ones.
// A freed text of 8 to max_reused bytes is reused by the next new text of its length
// (owners of one client library have one length: an anomaly storm's refused unlocks,
// each a fresh owner freed at once, left up to as many dead bytes as live ones, and
// each compaction a copy of them all).
class interner {
 public:
  explicit interner(std::size_t compact_after = 64 * 1024) : compact_after_(compact_after) {}

  // The same text as the last one (every operation of one owner) is compared with the
  // last id's text, kept beside it: no lookup of its entry (a block table's two loads),
  // and no call.
  [[gnu::always_inline]] std::uint32_t id(std::string_view s) {
    if (last_ != no_id && ingest::same_bytes(last_text_, s)) return last_;  // the same owner again: common
    remember_last(lookup<false>(s));
    return last_;
  }
  // id(s) for a text that stays put until the next collect() (an operation's own, which
  // the timeline collects after it): a new id views it there, and is stored and put in
  // the table only if that collect finds it referenced. A storm's refused unlock names a
  // fresh owner that the collect frees at once: no copy, no insert and erase. Ids and
  // texts come out as id()'s.
  std::uint32_t id_of_view(std::string_view s) {
    if (last_ != no_id && ingest::same_bytes(last_text_, s)) return last_;
    remember_last(free_ != no_id ? lookup<true>(s) : lookup<false>(s));
    return last_;
  }
  std::string_view text(std::uint32_t id) const {
    return id == no_id ? std::string_view() : std::string_view(entries_[id].data, entries_[id].size);
  }
  // hash_text() of a live id's text (worked out when it was interned).
  std::uint32_t hash(std::uint32_t id) const noexcept { return entries_[id].hash; }
  // A word its user keeps with each id (0 for a new id): what it learnt of the text once,
  // so that it need not read the text again at each operation that names it.
  std::uint32_t note(std::uint32_t id) const noexcept { return entries_[id].note; }
  void set_note(std::uint32_t id, std::uint32_t note) noexcept { entries_[id].note = note; }
  void retain(std::uint32_t id) noexcept {
    if (id != no_id) ++entries_[id].refs;
  }
  void release(std::uint32_t id) {
    if (id != no_id && --entries_[id].refs == 0) unreferenced_.push_back(id);
  }
  // Frees the ids left without references; invalidates every view given out before.
  // (Inline: the timeline calls it after every operation, and most leave nothing.)
  [[gnu::always_inline]] void collect() {
    if (!unreferenced_.empty()) [[unlikely]] collect_unreferenced();
  }

  std::size_t live() const noexcept { return live_; }             // ids in use
  std::size_t text_bytes() const noexcept { return live_bytes_; }  // their texts
  std::size_t arena_bytes() const noexcept { return arena_bytes_; }  // blocks held

 private:
  [[gnu::noinline]] void collect_unreferenced() {
    // A viewed id still referenced is kept as id() would have kept it (before any erase:
    // its slot is the one its lookup found).
    if (viewed_ != no_id && entries_[viewed_].refs != 0) settle_viewed();
    // A new id its operation retained (a fresh owner: every try of a storm) frees nothing,
    // and leaves nothing to compact (only a free adds dead bytes).
    if (unreferenced_.size() == 1 && entries_[unreferenced_[0]].refs != 0) {
      unreferenced_.clear();
      return;
    }
    // Many at once (a fifth of the table or more): the table is rebuilt after, not shifted
    // once an id.
    const bool rebuild = unreferenced_.size() >= 1024 && unreferenced_.size() * 5 >= table_.capacity();
    for (std::uint32_t id : unreferenced_) {
      entry& e = entries_[id];
      if (e.refs != 0 || e.data == nullptr) continue;  // retained again, or already freed
      live_bytes_ -= e.size;
      if (id == viewed_) {
        viewed_ = no_id;  // neither stored nor in the table
      } else {
        if (!rebuild) table_.erase(id, e.hash);
        dead_bytes_ += e.size;
        if (e.size >= sizeof(char*) && e.size <= max_reused) {
          // The freed text's first bytes link it into its length's free list.
          char* const text = const_cast<char*>(e.data);
          std::memcpy(text, &free_texts_[e.size], sizeof(char*));
          free_texts_[e.size] = text;
        }
      }
      e = entry{};
      e.hash = free_;  // the free list runs through the hash fields
      free_ = id;
      --live_;
      if (last_ == id) last_ = no_id;
    }
    unreferenced_.clear();
    if (rebuild) table_.keep_only([this](std::uint32_t id) { return entries_[id].data != nullptr; });
    if (dead_bytes_ >= compact_after_ && dead_bytes_ > live_bytes_) compact();
    remember_last(last_);  // settled or compacted: its text may have moved
  }
  struct entry {
    const char* data = nullptr;  // nullptr: a free id
    std::uint32_t size = 0;
    std::uint32_t refs = 0;
    std::uint32_t hash = 0;
    std::uint32_t note = 0;  // (in what was the entry's padding)
  };
  static_assert(sizeof(entry) == 24);
  struct block {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  static constexpr std::size_t block_bytes = 64 * 1024;
  static constexpr std::size_t max_reused = 128;

  // `view`: as id_of_view() (s stays put until the next collect).
  template <bool view>
  std::uint32_t lookup(std::string_view s) {
    const std::uint32_t h = hash_text(s);
    if (viewed_ != no_id) [[unlikely]] {
      if (entries_[viewed_].hash == h && ingest::same_bytes(text(viewed_), s)) return viewed_;
      settle_viewed();  // in the table before this probe, as id() would have put it
    }
    std::size_t empty;
    const std::uint32_t found = table_.find_slot(s, h, [this](std::uint32_t id) { return text(id); }, empty);
    if (found != no_id) return found;
    std::uint32_t id = free_;
    if (view || id != no_id) {  // (id_of_view() views only into a freed id: a new one is copied)
      free_ = entries_[id].hash;
    } else {
      id = static_cast<std::uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    entry& e = entries_[id];
    if constexpr (view) e.data = s.data();
    else e.data = store(s);
    e.size = static_cast<std::uint32_t>(s.size());
    e.refs = 0;
    e.hash = h;
    e.note = 0;
    if constexpr (view) {
      viewed_ = id;
      viewed_slot_ = empty;
    } else {
      table_.insert_at(empty, id, h);
    }
    unreferenced_.push_back(id);  // freed by the next collect() unless retained
    live_bytes_ += s.size();
    ++live_;
    return id;
  }
  // The viewed id's text stored and the id put in the table, where its lookup found room
  // (nothing was inserted or erased since).
  [[gnu::noinline]] void settle_viewed() {
    entry& e = entries_[viewed_];
    e.data = store(std::string_view(e.data, e.size));
    table_.insert_at(viewed_slot_, viewed_, e.hash);
    viewed_ = no_id;
    remember_last(last_);  // the viewed id may be the last one: its text is stored now
  }
  const char* store(std::string_view s) {
    if (s.size() >= sizeof(char*) && s.size() <= max_reused && free_texts_[s.size()] != nullptr) {
      char* const at = free_texts_[s.size()];
      std::memcpy(&free_texts_[s.size()], at, sizeof(char*));
      std::memcpy(at, s.data(), s.size());
      dead_bytes_ -= s.size();
      return at;
    }
    if (blocks_.empty() || blocks_.back().size - blocks_.back().used < s.size()) {
      const std::size_t size = std::max(s.size(), block_bytes);
      blocks_.push_back(block{std::make_unique_for_overwrite<char[]>(size), size, 0});
      arena_bytes_ += size;
    }
    block& b = blocks_.back();
    char* at = b.bytes.get() + b.used;
    if (!s.empty()) std::memcpy(at, s.data(), s.size());
    b.used += s.size();
    return at;
  }
  // The live texts into fresh blocks, the old blocks freed.
  void compact() {
    std::vector<block> old = std::move(blocks_);
    blocks_.clear();
    free_texts_.fill(nullptr);
    arena_bytes_ = 0;
    for (entry& e : entries_) {
      if (e.data != nullptr) e.data = store(std::string_view(e.data, e.size));
    }
    dead_bytes_ = 0;
  }

  // The id id() answered last, and its text (text(last_), kept up to date wherever
  // texts move: settle_viewed, compact; freed, it is no_id).
  void remember_last(std::uint32_t id) noexcept {
    last_ = id;
    last_text_ = text(id);
  }
  std::size_t compact_after_;
  std::uint32_t last_ = no_id;
  std::string_view last_text_;
  id_table table_;
  // In blocks of 4096 that never move: a vector's growth held the old entries and the
  // new at once (a storm's 300,000 live owners: 14 MB at that moment, for 7 MB of entries).
  stable_vector<entry, 12> entries_;
  std::vector<std::uint32_t> unreferenced_;  // candidates for the next collect()
  // The id made by id_of_view() since the last collect (at most one: any other lookup
  // settles it first), its text the caller's, not in the table; no_id: none.
  std::uint32_t viewed_ = no_id;
  std::size_t viewed_slot_ = 0;  // where its lookup found room in the table
  std::uint32_t free_ = no_id;
  std::vector<block> blocks_;
  std::array<char*, max_reused + 1> free_texts_{};  // by length: freed texts, each linking the next
  std::size_t live_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t dead_bytes_ = 0;
  std::size_t arena_bytes_ = 0;
};

}  // namespace lockscope::locks::timeline_detail
