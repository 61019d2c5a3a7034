// The timeline clock's pending lease deadlines: sorted FIFO runs plus a heap.
// Private to lock_timeline.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

#include "text_interner.hpp"
#include "unaligned.hpp"

namespace lockscope::locks::timeline_detail {

// 12 bytes in the heap, 8 in a run: one per held lock.
struct timer {
  unaligned<std::int64_t> at_us;
  std::uint32_t lock;
  bool operator>(const timer& o) const { return at_us > o.at_us; }
};
static_assert(sizeof(timer) == 12);

// A FIFO of timer entries in time order, 8 bytes each: an entry keeps the low 32 bits
// of its time; the high bits, the same for long stretches of a sorted run, are kept
// for the front and the back and change through marker entries (every ~72 minutes of
// timestamps), so every time stays an exact int64.
class timer_run {
 public:
  bool empty() const noexcept { return entries_.empty(); }
  std::int64_t front_us() const noexcept { return join(front_high_, entries_.front().low); }
  std::uint32_t front_lock() const noexcept { return entries_.front().lock; }
  // The last entry's time, kept (a deque's back() is a dozen instructions, and every
  // push asks each run for it).
  std::int64_t back_us() const noexcept { return back_us_; }
  // In time order: t.at_us >= back_us() unless empty.
  void push(const timer& t) {
    back_us_ = t.at_us;
    const std::uint32_t high = high_of(t.at_us);
    if (entries_.empty()) {
      front_high_ = back_high_ = high;
    } else if (high != back_high_) {
      entries_.push_back(entry{marker, high});
      back_high_ = high;
    }
    entries_.push_back(entry{t.lock, static_cast<std::uint32_t>(t.at_us)});
  }
  void pop_front() {
    entries_.pop_front();
    // A marker is always followed by the entry it was pushed with: the front stays real.
    if (!entries_.empty() && entries_.front().lock == marker) {
      front_high_ = entries_.front().low;
      entries_.pop_front();
    }
  }

 private:
  static constexpr std::uint32_t marker = no_id;  // never a lock id
  struct entry {
    std::uint32_t lock;
    std::uint32_t low;  // a marker: the new high bits
  };
  static std::uint32_t high_of(std::int64_t us) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(us) >> 32);
  }
  static std::int64_t join(std::uint32_t high, std::uint32_t low) noexcept {
    return static_cast<std::int64_t>((std::uint64_t{high} << 32) | low);
  }
  std::deque<entry> entries_;
  std::int64_t back_us_ = 0;  // join(back_high_, entries_.back().low) while not empty
  std::uint32_t front_high_ = 0;
  std::uint32_t back_high_ = 0;
};

// The clock's pending entries. Most arrive in time order for their lease (reply time
// + the same lease), so they are appended to one of a few FIFO runs, each sorted: O(1)
// per entry and sequential memory. Entries that fit no run go to a heap. Popping
// takes the earliest of the run fronts and the heap top (on a tie: the heap, then the
// first run), which fixes the order of events due at the same time.
class timer_queue {
 public:
  void push(const timer& t) {
    timer_run* best = nullptr;
    for (timer_run& run : runs_) {
      if (run.empty() || run.back_us() <= t.at_us) {
        if (best == nullptr || best->empty() || (!run.empty() && run.back_us() > best->back_us())) best = &run;
      }
    }
    if (best != nullptr) best->push(t);
    else heap_.push(t);
    if (t.at_us < no_entry_before_) no_entry_before_ = t.at_us;
  }
  // Takes the earliest entry into `due` if there is one at or before `to`.
  bool pop_due(std::int64_t to, timer& due) {
    if (to < no_entry_before_) return false;  // the common case: every operation asks
    timer_run* earliest_run = nullptr;
    std::int64_t earliest = heap_.empty() ? 0 : heap_.top().at_us.get();
    for (timer_run& run : runs_) {
      if (!run.empty() && ((heap_.empty() && earliest_run == nullptr) || run.front_us() < earliest)) {
        earliest_run = &run;
        earliest = run.front_us();
      }
    }
    if (heap_.empty() && earliest_run == nullptr) {
      no_entry_before_ = std::numeric_limits<std::int64_t>::max();
      return false;
    }
    if (earliest > to) {
      no_entry_before_ = earliest;
      return false;
    }
    if (earliest_run == nullptr) {
      due = heap_.top();
      heap_.pop();
    } else {
      due = timer{earliest, earliest_run->front_lock()};
      earliest_run->pop_front();
    }
    return true;
  }
  // Every entry's lock replaced by lock_of(lock), those mapped to no_id dropped; the
  // rest pop in the order they would have.
  template <class LockOf>
  void remap(LockOf&& lock_of) {
    timer_queue kept;
    for (timer t; pop_due(std::numeric_limits<std::int64_t>::max(), t);) {
      const std::uint32_t to = lock_of(t.lock);
      if (to != no_id) kept.push(timer{t.at_us, to});
    }
    *this = std::move(kept);
  }

 private:
  timer_run runs_[4];
  // No entry is due before this (a lower bound: popping the earliest keeps it true), so
  // that asking before it scans nothing.
  std::int64_t no_entry_before_ = std::numeric_limits<std::int64_t>::max();
  std::priority_queue<timer, std::vector<timer>, std::greater<>> heap_;
};

}  // namespace lockscope::locks::timeline_detail
