// The timeline's events on their way out, held back while a subscriber link is a guess.
//
// A subscription guessed at its SUBSCRIBE among processes that subscribed within
// milliseconds of each other is a `low` guess; what tells them apart (an acquisition and
// the leave right after it, on the subscriber) comes later. Its `subscribed` and
// `notified` events wait here for that evidence (lock_timeline::impl::decide_link) and
// then go out naming the process it showed; every event emitted after a held one waits
// behind it, so the output stays in time order.
//
// Bounded: an event waits at most `hold_us` of capture time (timeline_options::
// link_hold_us; checked as the clock advances, so live output stays prompt), at most
// `per_lock` undecided events per lock and `total` events in all; past a bound the
// oldest undecided event goes out with its guess, as it would have without holding.
// With nothing held, an event goes straight to the sink (no copy).
//
// A held event owns its texts (the views of an emitted event last only until the
// timeline's next collect()): each slot is an owned_event, keeping its strings'
// capacity, so once warm a held event costs no allocation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockscope/locks/lock_event.hpp"
#include "vocabulary/owned_event.hpp"

namespace lockscope::locks::timeline_detail {

class held_events {
 public:
  struct limits {
    std::int64_t hold_us = 0;  // 0: nothing is held
    std::size_t per_lock = 512;
    std::size_t total = 2048;
  };

  explicit held_events(const limits& l) : limits_(l) {}

  bool enabled() const noexcept { return limits_.hold_us > 0; }
  bool empty() const noexcept { return count_ == 0; }
  std::size_t size() const noexcept { return count_; }
  std::size_t undecided() const noexcept { return undecided_; }
  // The oldest held event's time (-1: none held).
  std::int64_t oldest_us() const noexcept { return count_ == 0 ? -1 : at(0).ev.event().ts_us; }

  // `e` goes out now (nothing held before it) or after those held.
  template <class Sink>
  void pass(const lock_event& e, Sink& sink) {
    if (count_ == 0) {
      sink.on_event(e);
      return;
    }
    push(e, false, 0, nullptr);
    release(sink);
  }

  // Holds `e`, a subscriber event whose link (subscriber connection `sub`, lock `lock`)
  // is a guess, until decide() or a bound. Returns false (and holds nothing) when
  // holding is off.
  template <class Sink>
  bool hold(const lock_event& e, std::uint64_t sub, const void* lock, Sink& sink) {
    if (!enabled()) return false;
    push(e, true, sub, lock);
    ++undecided_;
    ++pending_per_sub_[sub];
    if (++pending_per_lock_[lock] > limits_.per_lock) settle_oldest_of(lock);
    release(sink);
    return true;
  }

  // Whether any held event waits on (sub, lock): a decision is worth making.
  bool waits_on(std::uint64_t sub, const void* lock) const noexcept {
    if (undecided_ == 0 || !pending_per_sub_.contains(sub)) return false;
    for (std::size_t i = 0; i < count_; ++i) {
      const slot& s = at(i);
      if (s.undecided && s.sub == sub && s.lock_row == lock) return true;
    }
    return false;
  }

  // The traffic decided (sub, lock)'s link: `owner` with `confidence`. A held event
  // naming another process than `owner`'s (another owner text, not of the same client:
  // `same_client`) is named `owner`; one of the same process keeps its owner and takes
  // the decision's confidence if higher. `owner` empty: the guesses stand.
  template <class SameClient>
  void decide(std::uint64_t sub, const void* lock, std::string_view owner, link_confidence confidence,
              SameClient&& same_client) {
    if (undecided_ == 0 || !pending_per_sub_.contains(sub)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (!s.undecided || s.sub != sub || s.lock_row != lock) continue;
      if (!owner.empty()) {
        lock_event& e = s.ev.event();
        // Decided by a later subscription's link: the process is shown, the waiter of it
        // that an ended subscription served stays a guess.
        const link_confidence shown = s.outlived ? link_confidence::low : confidence;
        if (e.owner != owner && !same_client(e.owner, owner)) {
          s.ev.set_owner(owner);
          e.confidence = shown;
        } else if (rank(shown) > rank(e.confidence)) {
          e.confidence = shown;
        }
      }
      settle(s);
    }
  }

  // The subscription (sub, lock) ended with nothing shown: its held events wait on for
  // the connection's next sure link (a connection is one process's) or the bound.
  void outlive(std::uint64_t sub, const void* lock) {
    if (undecided_ == 0 || !pending_per_sub_.contains(sub)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (s.undecided && s.sub == sub && s.lock_row == lock) s.outlived = true;
    }
  }

  // The traffic showed that (sub, lock) is not the process `names` picks out (an owner
  // text of it): the held events naming it lose their guess and wait on, unlinked, for a
  // decision; past the bound they go out naming nobody.
  template <class Names>
  void refute(std::uint64_t sub, const void* lock, Names&& names) {
    if (undecided_ == 0 || !pending_per_sub_.contains(sub)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (!s.undecided || s.sub != sub || s.lock_row != lock || s.ev.event().owner.empty() || !names(s.ev.event().owner)) {
        continue;
      }
      s.ev.set_owner({});
      s.ev.event().confidence = link_confidence::none;
    }
  }

  // A guess (`owner`, `confidence`) for the held events of (sub, lock) that name nobody
  // yet: they wait on for a decision as guesses do, and go out with it past the bound.
  void suggest(std::uint64_t sub, const void* lock, std::string_view owner, link_confidence confidence) {
    if (undecided_ == 0 || owner.empty() || !pending_per_sub_.contains(sub)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (!s.undecided || s.sub != sub || s.lock_row != lock || !s.ev.event().owner.empty()) continue;
      s.ev.set_owner(owner);
      s.ev.event().confidence = confidence;
    }
  }

  // Every undecided event of `lock` keeps its guess (it became a herd's: no decision worth
  // its wait).
  void settle_lock(const void* lock) {
    if (undecided_ == 0 || !pending_per_lock_.contains(lock)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (s.undecided && s.lock_row == lock) settle(s);
    }
  }

  // Every undecided event keeps its guess (the locks' rows, their keys, move).
  void settle_all() {
    for (std::size_t i = 0; undecided_ > 0 && i < count_; ++i) settle(at(i));
  }

  // Every undecided event of subscriber `sub` (any lock) keeps its guess: its connection ended.
  void settle_connection(std::uint64_t sub) {
    if (undecided_ == 0 || !pending_per_sub_.contains(sub)) return;
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (s.undecided && s.sub == sub) settle(s);
    }
  }

  // Sends what may go: the front, while decided; an undecided front older than the
  // bound at `now` (capture time) goes with its guess.
  template <class Sink>
  void release(Sink& sink, std::int64_t now = -1) {
    while (count_ > 0) {
      slot& s = at(0);
      if (s.undecided) {
        const bool timed_out = now >= 0 && now - s.ev.event().ts_us >= limits_.hold_us;
        if (!timed_out && count_ <= limits_.total) break;
        settle(s);
      }
      sink.on_event(s.ev.event());
      head_ = (head_ + 1) % slots_.size();
      --count_;
    }
  }

  // The end: everything goes, guesses as they are.
  template <class Sink>
  void flush(Sink& sink) {
    while (count_ > 0) {
      slot& s = at(0);
      if (s.undecided) settle(s);
      sink.on_event(s.ev.event());
      head_ = (head_ + 1) % slots_.size();
      --count_;
    }
  }

 private:
  struct slot {
    owned_event ev;
    bool undecided = false;
    bool outlived = false;  // its subscription ended unexplained (outlive)
    std::uint64_t sub = 0;
    const void* lock_row = nullptr;  // the lock's row (lock_store: stable while the lock is kept)
  };

  static int rank(link_confidence c) noexcept {
    switch (c) {
      case link_confidence::certain: return 3;
      case link_confidence::high: return 2;
      case link_confidence::low: return 1;
      default: return 0;
    }
  }

  slot& at(std::size_t i) noexcept { return slots_[(head_ + i) % slots_.size()]; }
  const slot& at(std::size_t i) const noexcept { return slots_[(head_ + i) % slots_.size()]; }

  void settle(slot& s) {
    if (!s.undecided) return;
    s.undecided = false;
    --undecided_;
    const auto it = pending_per_lock_.find(s.lock_row);
    if (it != pending_per_lock_.end() && --it->second == 0) pending_per_lock_.erase(it);
    const auto by_sub = pending_per_sub_.find(s.sub);
    if (by_sub != pending_per_sub_.end() && --by_sub->second == 0) pending_per_sub_.erase(by_sub);
  }

  void settle_oldest_of(const void* lock) {
    for (std::size_t i = 0; i < count_; ++i) {
      slot& s = at(i);
      if (s.undecided && s.lock_row == lock) {
        settle(s);
        return;
      }
    }
  }

  void push(const lock_event& e, bool undecided, std::uint64_t sub, const void* lock) {
    if (count_ == slots_.size()) grow();  // (at most total + 1 slots: release() keeps count_ <= total)
    slot& s = slots_[(head_ + count_) % slots_.size()];
    ++count_;
    s.ev.assign(e);
    s.undecided = undecided;
    s.outlived = false;
    s.sub = sub;
    s.lock_row = lock;
  }

  // Twice the slots, the held ones first in order (each copy points at its own texts).
  void grow() {
    std::vector<slot> bigger(slots_.empty() ? 16 : std::min(slots_.size() * 2, limits_.total + 1));
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = at(i);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  limits limits_;
  std::vector<slot> slots_;  // a ring: count_ slots from head_
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::size_t undecided_ = 0;
  // Undecided events by lock and by subscriber connection.
  std::unordered_map<const void*, std::size_t> pending_per_lock_;
  std::unordered_map<std::uint64_t, std::size_t> pending_per_sub_;
};

}  // namespace lockscope::locks::timeline_detail
