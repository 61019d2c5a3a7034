// A lock's waiters (lock_extra::waiters): a std::vector of full records, in seq order, and
// beside it the dormant ones, 40 bytes each instead of 144. Private to lock_timeline.cpp.
//
// Dormant: a waiter that made one refused attempt and nothing since (no retry, no
// subscription, no message; what a fresh owner that never comes back is: an anomaly
// storm's 300,000 refused acquires with random owners keep that many such waiters until
// their deadline, 32 s after a capture that spans 1 s). A waiter is made dormant only
// when its record holds it exactly (materialize() gives back a waiter equal to it, every
// field compared), so nothing a report reads can differ.
//
// Every access but size() and empty() makes the dormant waiters full again first
// (promote), merged in seq order: the code that scans, finds or updates waiters sees one
// vector as before. Pointers into it are invalidated by emplace_back() and by removals
// (all of them: a removal may shift the waiters before it), and by a promotion; a lock whose waiter was found by owner or seq is
// promoted by that lookup, so a pointer held to one of its waiters stays valid until the
// vector is changed. The passes that visit every waiter without needing a vector
// (remove_if, earliest_deadline) read the dormant records in place.
//
// A waiter that leaves from the middle (erase, remove_among) leaves a hole: its record
// stays, `attempts` 0 (a waiter has made one at least), skipped by the iterators, which
// pass over the records in place (a herd's woken waiter, in the middle of 4,000, moved
// half of them: 144 bytes each). Those at either end leave at once, so the first and the
// last record are always waiters; the holes are closed in one pass once they are an
// eighth of the waiters, or before any access that needs the records contiguous
// (indexing, a promotion or demotion, remove_if). No waiter is dormant while there are
// holes (a demotion closes them first).
//
// A lookup by seq reads the record's position from a table by seq (the records of a lock
// with more than `indexed_after` waiters, from the first record's seq on): a binary search
// over a herd's 4,000 records was ~165 instructions, asked for every message's waiters and
// every attempt's. A record keeps its position until the records move (holes closed, room
// at the front given back, a pass that removes, a promotion or demotion): then the table
// is made again at the next lookup. New waiters join it at the next lookup too (their seq
// is given after emplace_back). Each position read is checked (the record there has the
// seq), and a seq the table does not place is searched as before.
//
// A waiter is made dormant when the next one comes (emplace_back: it is complete by then)
// on a lock with more than `dormant_after` waiters (the first time, with every waiter
// before it); after a promotion, not before half as many new waiters came as the lock had,
// and then with every waiter (each promotion copies them all: a lock whose waiters are
// promoted often stays full, at no more than twice the cost of its arrivals).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace lockscope::locks::timeline_detail {

// A waiter's seq in 32 bits, for its lock's index by owner (8-byte slots, not 12: a storm's
// lock with 300 waiters has 512): a lock's live waiters' seqs lie within 2^32 of its next
// seq (4 billion waiters would have to come while one waits), so the low bits name one.
struct seq32 {
  std::uint32_t low = 0;
  seq32() = default;
  seq32(std::uint64_t seq) noexcept : low(static_cast<std::uint32_t>(seq)) {}  // NOLINT: implicit, as the seq it stands for
  bool operator==(std::uint64_t seq) const noexcept { return low == static_cast<std::uint32_t>(seq); }
  // The seq it stands for, of a waiter that came before `next` (the lock's next seq).
  std::uint64_t before(std::uint64_t next) const noexcept {
    return next - static_cast<std::uint32_t>(static_cast<std::uint32_t>(next) - low);
  }
};

// What a dormant record leaves out, found again from the tables its fields name (the
// connection's id and its address's tag, from the waiter's `conn`).
template <class Waiter>
struct dormant_context {
  virtual void complete(Waiter& w) const = 0;

 protected:
  ~dormant_context() = default;
};

template <class Waiter>
struct dormant_record {
  std::uint64_t client;
  std::int64_t first_us;
  seq32 seq;                        // the lock's newest seq made dormant names the rest
  std::uint32_t owner;
  std::uint32_t conn;
  std::uint32_t reply_and_flags;    // last_attempt_us - first_us (30 bits), pubsub, mid_stream
  std::uint32_t deadline_after_us;  // deadline_us - last_attempt_us
  std::int32_t ttl_ms;              // last_ttl_us = first_ttl_us = ttl_ms * 1000; -1: none

  static constexpr std::uint32_t pubsub_bit = 1u << 31, mid_stream_bit = 1u << 30, reply_mask = mid_stream_bit - 1;

  // The record of `w`, when it holds it exactly (`w` is the newest waiter made dormant).
  static std::optional<dormant_record> of(const Waiter& w, const dormant_context<Waiter>& context) {
    const std::int64_t reply = w.last_attempt_us - w.first_us;
    const std::int64_t deadline = w.deadline_us - w.last_attempt_us;
    // (The cheap refusals first: a subscribed waiter, a herd's, is never dormant.)
    if (w.conn == 0xffffffffu || w.attempts != 1 || w.sub_connection != 0 || w.subscribed_us >= 0 || reply < 0 ||
        reply > reply_mask || w.deadline_us < 0 || deadline < 0 || deadline > 0xffffffffll ||
        w.last_ttl_us != w.first_ttl_us || w.last_ttl_us < -1 || w.last_ttl_us % 1000 != 0 ||
        w.last_ttl_us / 1000 > 0x7fffffff) {
      return std::nullopt;
    }
    const dormant_record d{w.client,
                           w.first_us,
                           seq32(w.seq),
                           w.owner,
                           w.conn,
                           static_cast<std::uint32_t>(reply) | (w.pubsub ? pubsub_bit : 0) | (w.mid_stream ? mid_stream_bit : 0),
                           static_cast<std::uint32_t>(deadline),
                           w.last_ttl_us < 0 ? -1 : static_cast<std::int32_t>(w.last_ttl_us / 1000)};
    if (!rest_as_given_back(w, context)) return std::nullopt;  // some other field is not its default
    return d;
  }
  // Whether every field of `w` that the record leaves out holds what materialize() gives it
  // (the fields it keeps pass the checks above, which make each come back exactly): `w`'s
  // bytes with the kept and the completed fields set as a default waiter has them are a
  // default waiter's bytes. Equal to materialize(w.seq, context) == w (a waiter has no
  // padding: equal bytes, equal fields), without building one and comparing field by field.
  static bool rest_as_given_back(const Waiter& w, const dormant_context<Waiter>& context) {
    static_assert(std::has_unique_object_representations_v<Waiter>);
    static const Waiter blank{};
    Waiter rest = w;
    context.complete(rest);
    if (rest.connection != w.connection || rest.ip_tag != w.ip_tag) return false;
    rest.seq = blank.seq;
    rest.owner = blank.owner;
    rest.conn = blank.conn;
    rest.client = blank.client;
    rest.first_us = blank.first_us;
    rest.last_attempt_us = blank.last_attempt_us;
    rest.deadline_us = blank.deadline_us;
    rest.last_ttl_us = blank.last_ttl_us;
    rest.first_ttl_us = blank.first_ttl_us;
    rest.pubsub = blank.pubsub;
    rest.mid_stream = blank.mid_stream;
    rest.connection = blank.connection;
    rest.ip_tag = blank.ip_tag;
    return std::memcmp(&rest, &blank, sizeof(Waiter)) == 0;
  }
  // `newest`: the newest seq made dormant on its lock (no older than this one's).
  Waiter materialize(std::uint64_t newest, const dormant_context<Waiter>& context) const {
    Waiter w;
    w.seq = seq_of(newest);
    w.owner = owner;
    w.conn = conn;
    w.client = client;
    w.first_us = first_us;
    w.last_attempt_us = first_us + (reply_and_flags & reply_mask);
    w.deadline_us = w.last_attempt_us + deadline_after_us;
    w.last_ttl_us = w.first_ttl_us = ttl_ms < 0 ? -1 : std::int64_t{ttl_ms} * 1000;
    w.pubsub = (reply_and_flags & pubsub_bit) != 0;
    w.mid_stream = (reply_and_flags & mid_stream_bit) != 0;
    context.complete(w);
    return w;
  }
  std::uint64_t seq_of(std::uint64_t newest) const noexcept { return newest - static_cast<std::uint32_t>(static_cast<std::uint32_t>(newest) - seq.low); }
  std::int64_t deadline_us() const noexcept { return first_us + (reply_and_flags & reply_mask) + deadline_after_us; }
};

// A waiter's record that is a hole (dormant_waiter_vector): a waiter has made one attempt at least.
template <class Waiter>
[[gnu::always_inline]] inline bool is_hole(const Waiter& w) noexcept {
  return w.attempts == 0;
}

// Forward over the records in [at, end), holes skipped (`at` is a waiter or `end`);
// `holes` false: there are none (each step one test of a flag, not of the record).
template <class Record>
class waiter_iterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = std::remove_const_t<Record>;
  using difference_type = std::ptrdiff_t;
  using pointer = Record*;
  using reference = Record&;

  waiter_iterator() = default;
  waiter_iterator(Record* at, Record* end, bool holes) noexcept : at_(at), end_(end), holes_(holes) {}
  operator waiter_iterator<const Record>() const noexcept { return {at_, end_, holes_}; }  // NOLINT: as a container's
  reference operator*() const noexcept { return *at_; }
  pointer operator->() const noexcept { return at_; }
  waiter_iterator& operator++() noexcept {
    ++at_;
    if (holes_) [[unlikely]] {
      while (at_ != end_ && is_hole(*at_)) ++at_;
    }
    return *this;
  }
  waiter_iterator operator++(int) noexcept {
    waiter_iterator was = *this;
    ++*this;
    return was;
  }
  bool operator==(const waiter_iterator& o) const noexcept { return at_ == o.at_; }

 private:
  Record* at_ = nullptr;
  Record* end_ = nullptr;
  bool holes_ = false;
};

template <class Waiter>
class dormant_waiter_vector {
 public:
  using dormant = dormant_record<Waiter>;
  using full_vector = std::vector<Waiter>;
  using iterator = waiter_iterator<Waiter>;
  using const_iterator = waiter_iterator<const Waiter>;
  static constexpr std::size_t dormant_after = 32;
  static constexpr std::size_t indexed_after = 32;  // more records: positions by seq kept

  [[gnu::always_inline]] std::size_t size() const noexcept { return full_.size() - head_ - holes_ + dormant_count(); }
  [[gnu::always_inline]] bool empty() const noexcept { return size() == 0; }
  [[gnu::always_inline]] std::size_t dormant_count() const noexcept { return dormant_ ? dormant_->size() : 0; }
  // Without a context no waiter becomes dormant.
  void set_context(const dormant_context<Waiter>* context) noexcept { context_ = context; }

  // Generic access: every waiter full first.
  iterator begin() { return promote(), iterator(full_.data() + head_, full_.data() + full_.size(), holes_ > 0); }
  iterator end() { return promote(), iterator(full_.data() + full_.size(), full_.data() + full_.size(), false); }
  const_iterator begin() const { return promote(), const_iterator(full_.data() + head_, full_.data() + full_.size(), holes_ > 0); }
  const_iterator end() const { return promote(), const_iterator(full_.data() + full_.size(), full_.data() + full_.size(), false); }
  Waiter& operator[](std::size_t i) { return promote(), close_holes(), full_[head_ + i]; }
  const Waiter& operator[](std::size_t i) const { return promote(), close_holes(), full_[head_ + i]; }
  Waiter& front() { return promote(), full_[head_]; }
  Waiter& back() { return promote(), full_.back(); }
  // Every record in order, holes too (is_hole), for a pass whose change to a hole does
  // nothing (a hole is never read again: a herd's release visits 4,000 waiters a lock),
  // or that asks is_hole() only of the record it picks.
  std::span<Waiter> records_with_holes() { return promote(), std::span<Waiter>(full_.data() + head_, full_.size() - head_); }
  // The waiter with `seq`, if it waits (its position by seq, else a binary search: holes
  // keep their seq).
  [[gnu::noinline]] Waiter* find_seq(std::uint64_t seq) {
    promote();
    if (const std::uint32_t p = position_of(seq); p != no_position) {
      Waiter& w = full_[p];
      if (w.seq == seq) return is_hole(w) ? nullptr : &w;
    }
    const auto at = std::lower_bound(full_.begin() + head(), full_.end(), seq, [](const Waiter& w, std::uint64_t s) { return w.seq < s; });
    return at != full_.end() && at->seq == seq && !is_hole(*at) ? &*at : nullptr;
  }
  // `w` (a waiter of this vector) leaves: a hole unless it is the first or the last.
  void erase(Waiter* w) {
    if (dormant_) [[unlikely]] {  // (a pointer held is to a promoted vector: not expected)
      const std::uint64_t seq = w->seq;
      promote();
      w = find_seq(seq);
    }
    leave(static_cast<std::size_t>(w - full_.data()));
    close_ends();
    close_holes_if_many();
  }
  void resize(std::size_t n) {
    promote();
    close_holes();
    full_.resize(head_ + n);
    positions_moved();
  }

  // A new waiter at the end (the caller gives it the next seq). The one before it, complete
  // by now, may become dormant.
  Waiter& emplace_back() {
    if (hold_off_ > 0) {
      --hold_off_;
    } else if (size() > dormant_after && context_ != nullptr) {
      if (sweep_) {
        demote_all();
      } else if (!full_.empty()) {
        demote_last();
      }
    }
    if (full_.size() == full_.capacity()) make_room();
    ++unplaced_;
    return full_.emplace_back();
  }
  // Gives back the room of waiters gone once it is four times what those left use (a
  // storm's lock, its waiters dormant but the newest, kept room for the 40 it had).
  void shrink_if_sparse() {
    if (full_.capacity() > 8 && (full_.size() - head_ - holes_) * 4 < full_.capacity()) {
      close_holes();
      drop_head();
      full_.shrink_to_fit();
      drop_positions();
    }
  }

  // remove_if() asking only the waiters whose seqs are `seqs` (ascending): those `leaves`
  // picks leave, after `gone(w)`, as holes; the others stay in order.
  template <class Leaves, class Gone>
  void remove_among(const std::vector<std::uint64_t>& seqs, Leaves&& leaves, Gone&& gone) {
    promote();
    bool any = false;
    auto from = full_.begin() + head();
    for (const std::uint64_t seq : seqs) {
      from = std::lower_bound(from, full_.end(), seq, [](const Waiter& w, std::uint64_t s) { return w.seq < s; });
      if (from == full_.end()) break;
      if (from->seq != seq || is_hole(*from) || !leaves(*from)) continue;
      gone(*from);
      leave(static_cast<std::size_t>(from - full_.begin()));
      any = true;
    }
    if (!any) return;
    close_ends();
    close_holes_if_many();
    shrink_if_sparse();
  }

  // The earliest deadline of any waiter (-1: none), without promoting.
  std::int64_t earliest_deadline() const {
    std::int64_t earliest = -1;
    const auto consider = [&](std::int64_t t) {
      if (t >= 0 && (earliest < 0 || t < earliest)) earliest = t;
    };
    for (std::size_t i = head_; i < full_.size(); ++i) {
      if (!is_hole(full_[i])) consider(full_[i].deadline_us);
    }
    if (dormant_) {
      for (const dormant& d : *dormant_) consider(d.deadline_us());
    }
    return earliest;
  }

  // One pass in seq order, without promoting: the waiters `leaves` picks leave (after
  // `gone(w)`), the others stay in order (leaves may update them: a dormant one it
  // changed is full again). `concerns(record)` false: leaves would neither pick nor change
  // that dormant waiter (it is not read: a connection's end visits every waiter of each
  // lock it waited on, and at a capture's end every connection ends).
  template <class Leaves, class Gone, class Concerns>
  void remove_if(Leaves&& leaves, Gone&& gone, Concerns&& concerns) {
    close_holes();  // (the pass visits every record anyway)
    positions_moved();
    if (!dormant_) {  // the vector's pass: every waiter asked, then the gaps closed
      std::vector<std::size_t> gone_at;
      gone_at.swap(scratch());  // (its room, shared by every lock's pass; a pass within it takes none)
      gone_at.clear();
      for (std::size_t i = head_; i < full_.size(); ++i) {
        if (leaves(full_[i])) {
          gone(full_[i]);
          gone_at.push_back(i);
        }
      }
      close_gaps(gone_at);
      gone_at.swap(scratch());
      shrink_if_sparse();
      return;
    }
    drop_head();
    std::size_t keep_full = 0, next_full = 0;
    using dormant_iterator = typename std::deque<dormant>::iterator;
    dormant_iterator keep_dormant{}, next_dormant{}, dormant_end{};
    if (dormant_) keep_dormant = next_dormant = dormant_->begin(), dormant_end = dormant_->end();
    full_vector changed;  // dormant waiters leaves() changed, in seq order
    while (next_full < full_.size() || next_dormant != dormant_end) {
      if (next_dormant == dormant_end || (next_full < full_.size() && full_[next_full].seq < next_dormant->seq_of(newest_))) {
        Waiter& w = full_[next_full++];
        if (leaves(w)) {
          gone(w);
          continue;
        }
        if (keep_full != next_full - 1) full_[keep_full] = std::move(w);
        ++keep_full;
        continue;
      }
      if (!concerns(*next_dormant)) {  // kept as it is: moved only once one before it left
        if (keep_dormant != next_dormant) *keep_dormant = *next_dormant;
        ++keep_dormant;
        ++next_dormant;
        continue;
      }
      const dormant d = *next_dormant++;
      Waiter w = d.materialize(newest_, *context_);
      if (leaves(w)) {
        gone(w);
        continue;
      }
      if (w == d.materialize(newest_, *context_)) {
        *keep_dormant++ = d;
      } else {
        changed.push_back(std::move(w));
      }
    }
    full_.resize(keep_full);
    if (dormant_) {
      dormant_->erase(keep_dormant, dormant_->end());
      if (dormant_->empty()) dormant_.reset();
    }
    if (!changed.empty()) merge_into_full(changed);
    shrink_if_sparse();
  }

 private:
  // Every dormant waiter full again, in seq order.
  void promote() const {
    if (!dormant_) return;  // (no holes while any waiter is dormant)
    full_vector merged;
    merged.reserve(size());
    auto f = full_.begin() + head();
    for (const dormant& d : *dormant_) {
      for (; f != full_.end() && f->seq < d.seq_of(newest_); ++f) merged.push_back(std::move(*f));
      merged.push_back(d.materialize(newest_, *context_));
    }
    for (; f != full_.end(); ++f) merged.push_back(std::move(*f));
    full_ = std::move(merged);
    head_ = 0;
    dormant_.reset();
    positions_moved();
    hold_off_ = static_cast<std::uint32_t>(full_.size() / 2);
    sweep_ = true;
  }
  // The last full waiter, the newest of all, dormant if its record holds it.
  void demote_last() {
    if (dormant_ && !dormant_->empty() && newest_ > full_.back().seq) return;  // keeps seq order
    if (const std::optional<dormant> d = dormant::of(full_.back(), *context_)) {
      close_holes();
      drop_head();  // (no room at the front while any waiter is dormant)
      newest_ = full_.back().seq;
      dormant_list().push_back(*d);
      full_.pop_back();
    }
  }
  // Every full waiter its record holds, dormant (seq order kept).
  void demote_all() {
    sweep_ = false;
    close_holes();
    drop_head();
    positions_moved();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < full_.size(); ++i) {
      const bool in_order = !dormant_ || dormant_->empty() || newest_ < full_[i].seq;
      if (const std::optional<dormant> d = in_order ? dormant::of(full_[i], *context_) : std::nullopt) {
        newest_ = full_[i].seq;
        dormant_list().push_back(*d);
        continue;
      }
      if (kept != i) full_[kept] = std::move(full_[i]);
      ++kept;
    }
    full_.resize(kept);
    if (dormant_ && dormant_->empty()) dormant_.reset();
    shrink_if_sparse();
  }
  // Grown by a quarter, not doubled: a storm's locks, 300 waiters each, had room for 512.
  // The room of waiters gone from the front is taken back first once it is a fifth of
  // those left (each waiter is moved once for every fifth as many that left).
  [[gnu::noinline]] void make_room() {
    if (holes_ > 0) {
      close_holes();
      if (full_.size() < full_.capacity()) return;
    }
    const std::size_t live = full_.size() - head_;
    if (head_ == 0) {
      full_.reserve(live + live / 4 + 4);
    } else if (head_ * 5 >= live + 5) {
      drop_head();
    } else {
      full_vector grown;
      grown.reserve(live + live / 4 + 4);
      grown.insert(grown.end(), std::make_move_iterator(full_.begin() + head()), std::make_move_iterator(full_.end()));
      full_ = std::move(grown);
      head_ = 0;
      positions_moved();
    }
  }
  // The waiter at full_[i] leaves: a hole (close_ends() then takes those at either end).
  void leave(std::size_t i) noexcept {
    full_[i].attempts = 0;
    ++holes_;
  }
  // The holes at the front and the back leave the records (the first and the last are waiters).
  void close_ends() noexcept {
    while (head_ < full_.size() && is_hole(full_[head_])) ++head_, --holes_;
    while (full_.size() > head_ && is_hole(full_.back())) full_.pop_back(), --holes_;
    if (head_ == full_.size()) full_.clear(), head_ = 0, drop_positions();
  }
  // Each waiter is moved once for every eighth as many holes, a pass over the waiters
  // skips no more than an eighth as many.
  void close_holes_if_many() {
    if (holes_ > 4 && holes_ * 8 > full_.size() - head_ - holes_) close_holes();
  }
  // The waiters contiguous again, in order, from head_.
  [[gnu::noinline]] void close_holes() const {
    if (holes_ == 0) return;
    std::size_t kept = head_;
    for (std::size_t i = head_; i < full_.size(); ++i) {
      if (is_hole(full_[i])) continue;
      if (kept != i) full_[kept] = std::move(full_[i]);
      ++kept;
    }
    full_.resize(kept);
    holes_ = 0;
    positions_moved();
  }
  std::ptrdiff_t head() const noexcept { return static_cast<std::ptrdiff_t>(head_); }
  // The room of the waiters gone from the front given back to the vector's end.
  void drop_head() const {
    if (head_ == 0) return;
    full_.erase(full_.begin(), full_.begin() + head());
    head_ = 0;
    positions_moved();
  }
  static std::vector<std::size_t>& scratch() {
    static thread_local std::vector<std::size_t> positions;
    return positions;
  }
  // The waiters at `gone_at` (ascending) leave: the side of them with fewer waiters to
  // move closes the gaps, in runs (a connection's end takes a few of a herd's thousands,
  // mostly the oldest).
  void close_gaps(const std::vector<std::size_t>& gone_at) {
    if (gone_at.empty()) return;
    positions_moved();
    const std::size_t n = full_.size(), k = gone_at.size();
    if (k == n - head_) {
      full_.clear();
      head_ = 0;
      return;
    }
    const auto at = [&](std::size_t i) { return full_.begin() + static_cast<std::ptrdiff_t>(i); };
    const std::size_t after = n - gone_at.front() - k, before = gone_at.back() - head_ - (k - 1);
    if (after <= before) {  // the waiters after the first gap move towards the front
      std::size_t write = gone_at.front();
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t from = gone_at[j] + 1, to = j + 1 < k ? gone_at[j + 1] : n;
        std::move(at(from), at(to), at(write));
        write += to - from;
      }
      full_.resize(write);
      return;
    }
    std::size_t write_end = gone_at.back() + 1;  // those before the last gap move back
    for (std::size_t j = k; j-- > 0;) {
      const std::size_t from = j > 0 ? gone_at[j - 1] + 1 : head_, to = gone_at[j];
      std::move_backward(at(from), at(to), at(write_end));
      write_end -= to - from;
    }
    head_ += k;
  }
  static constexpr std::uint32_t no_position = 0xffffffffu;
  // The records moved: the table of positions is made again at the next lookup.
  void positions_moved() const noexcept { positions_valid_ = false; }
  void drop_positions() const {
    positions_valid_ = false;
    std::vector<std::uint32_t>().swap(position_at_);
  }
  // The position of the record with `seq` as the table gives it (no_position: not placed
  // there, or the table is not kept: few records, or seqs too far apart).
  std::uint32_t position_of(std::uint64_t seq) {
    if (!positions_valid_) {
      if (!place_all()) return no_position;
    } else if (unplaced_ > 0) {
      place_new();
    }
    const std::uint64_t i = seq - positions_base_;  // (a seq before the base: past the end)
    if (i >= position_at_.size()) return no_position;
    const std::uint32_t p = position_at_[i];
    return p >= head_ && p < full_.size() ? p : no_position;
  }
  // The table made from every record (false: not kept).
  bool place_all() {
    unplaced_ = 0;
    positions_valid_ = false;
    const std::size_t live = full_.size() - head_;
    if (live <= indexed_after || full_.size() >= no_position) return false;
    const std::uint64_t span = full_.back().seq - full_[head_].seq + 1;
    if (span > 4 * live + 64) return false;  // (a waiter left behind by many: searched)
    positions_base_ = full_[head_].seq;
    position_at_.assign(span, no_position);
    for (std::size_t i = head_; i < full_.size(); ++i) position_at_[full_[i].seq - positions_base_] = static_cast<std::uint32_t>(i);
    positions_valid_ = true;
    return true;
  }
  // The waiters that came since join the table (or it is made again, their seqs too far on).
  void place_new() {
    const std::size_t n = full_.size() - head_, from = full_.size() - std::min<std::size_t>(unplaced_, n);
    unplaced_ = 0;
    for (std::size_t i = from; i < full_.size(); ++i) {
      const std::uint64_t at = full_[i].seq - positions_base_;
      if (at >= position_at_.size()) {
        if (at >= 4 * n + 64) {
          place_all();
          return;
        }
        position_at_.resize(at + 1, no_position);
      }
      position_at_[at] = static_cast<std::uint32_t>(i);
    }
  }

  std::deque<dormant>& dormant_list() {
    if (!dormant_) dormant_ = std::make_unique<std::deque<dormant>>();
    return *dormant_;
  }
  void merge_into_full(full_vector& more) {
    full_vector merged;
    merged.reserve(full_.size() + more.size());
    auto a = full_.begin();
    for (Waiter& w : more) {
      for (; a != full_.end() && a->seq < w.seq; ++a) merged.push_back(std::move(*a));
      merged.push_back(std::move(w));
    }
    for (; a != full_.end(); ++a) merged.push_back(std::move(*a));
    full_ = std::move(merged);
    positions_moved();
  }

  // Promoting is no change of what the vector holds, only of how: const access may do it.
  mutable full_vector full_;
  // full_[0, head_): room left by waiters gone from the front (no dormant waiter then).
  mutable std::size_t head_ = 0;
  mutable std::size_t holes_ = 0;  // records in full_[head_, end) that are holes (is_hole)
  // In seq order; 512-byte blocks (std::deque's), which the allocator reuses whole:
  // no room left behind by growth. Allocated with the first dormant waiter.
  mutable std::unique_ptr<std::deque<dormant>> dormant_;
  mutable std::uint32_t hold_off_ = 0;  // new waiters to come before the next demotion
  const dormant_context<Waiter>* context_ = nullptr;
  std::uint64_t newest_ = 0;  // the newest seq made dormant (the records' seqs are its 2^32 before)
  mutable bool sweep_ = true;  // the next demotion visits every full waiter (demote_all)
  // Positions in full_ by seq - positions_base_ (no_position: none), kept while
  // positions_valid_; the newest `unplaced_` records came since (position_of).
  mutable std::vector<std::uint32_t> position_at_;
  std::uint64_t positions_base_ = 0;
  std::uint32_t unplaced_ = 0;
  mutable bool positions_valid_ = false;
};

}  // namespace lockscope::locks::timeline_detail
