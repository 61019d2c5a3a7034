// The lock values (SET tokens, node-redlock values) seen recently, one record per
// (server, key, value): which script carried the value first, whether it held the lock
// there, and whether a release of it was refused. Private to the recognizer, which
// uses it to tell an unseen acquire script from an extend script of the same shape (a
// fresh value's first script is its acquire) and to recognise the clean-up releases of
// a failed attempt.
//
// Fixed capacity, least recently used forgotten first, nothing allocated after
// construction: records are found by a 64-bit hash of the three texts (a collision
// between two live values, ~n²/2^65, would merge their records).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_patterns.hpp"

namespace lockscope::locks::recognizer_detail {

struct value_record {
  std::array<std::uint8_t, 20> first_sha{};  // the script that carried it first (binary SHA1)
  bool first_is_sha = false;                 // else it came first in a SET NX / SETNX
  bool first_voted = false;                  // the first script got its acquire vote
  script_op first_role = script_op::none;    // the role given to that first script call
  bool held = false;                         // an operation showed it holding the lock here
  bool release_refused = false;              // a release of it answered 0 / -1
  // A candidate value: an item of an unseen script's list reply (first_sha), at this
  // 1-based position (0: none), kept until an argument of a later call shows it to be
  // a holder's value (value_tracking.cpp); that reply's first item (when an integer in
  // -127..127, else reply_first_unknown) and the caller's lone number argument
  // (1-based over KEYS[2..] then ARGV; 0: none), taken for the lease.
  std::uint8_t reply_position = 0;
  std::int8_t reply_first = -128;
  std::uint8_t reply_lease_arg = 0;
  // The connection its last success came over (its id's low 32 bits: ids count up, and
  // the record keeps within its 56 bytes).
  std::uint32_t holder_connection = 0;
  std::int64_t deadline_us = -1;             // when its last lease (if known) runs out
};
inline constexpr std::int8_t reply_first_unknown = -128;

inline std::uint64_t value_key(std::string_view server, std::string_view key, std::string_view value) noexcept {
  const std::hash<std::string_view> h;
  std::uint64_t x = h(value);
  x ^= h(key) * 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
  x ^= h(server) * 0xc2b2ae3d27d4eb4full + (x << 6) + (x >> 2);
  return x;
}

class value_flow {
 public:
  // The table is allocated at the first insert: Redisson-only traffic never needs it.
  explicit value_flow(std::size_t capacity) : capacity_(capacity) {}

  // The record, now the most recently used; nullptr when absent.
  value_record* find(std::uint64_t key) noexcept {
    if (slots_.empty()) return nullptr;
    const std::size_t s = slot_of(key);
    if (slots_[s] == empty) return nullptr;
    const std::uint32_t n = slots_[s];
    unlink(n);
    push_front(n);
    return &nodes_[n].record;
  }
  // A fresh record for `key` (which must be absent), forgetting the least recently used
  // one when full.
  value_record& insert(std::uint64_t key) {
    if (slots_.empty()) allocate();
    if (free_ == empty) {
      const std::uint32_t oldest = tail_;
      erase(nodes_[oldest].key);
      ++evictions_;
    }
    const std::uint32_t n = free_;
    free_ = nodes_[n].next;
    nodes_[n].key = key;
    nodes_[n].record = value_record{};
    slots_[slot_of(key)] = n;
    push_front(n);
    ++size_;
    return nodes_[n].record;
  }
  void erase(std::uint64_t key) noexcept {
    if (slots_.empty()) return;
    std::size_t s = slot_of(key);
    const std::uint32_t n = slots_[s];
    if (n == empty) return;
    unlink(n);
    nodes_[n].next = free_;
    free_ = n;
    --size_;
    // Backward-shift deletion keeps every probe sequence unbroken.
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t j = (s + 1) & mask;; j = (j + 1) & mask) {
      if (slots_[j] == empty) break;
      const std::size_t home = static_cast<std::size_t>(nodes_[slots_[j]].key) & mask;
      const bool between = s <= j ? (s < home && home <= j) : (s < home || home <= j);
      if (between) continue;
      slots_[s] = slots_[j];
      s = j;
    }
    slots_[s] = empty;
  }

  std::size_t size() const noexcept { return size_; }
  std::uint64_t evictions() const noexcept { return evictions_; }

 private:
  static constexpr std::uint32_t empty = 0xffffffffu;
  struct node {
    std::uint64_t key = 0;
    value_record record;
    std::uint32_t prev = empty, next = empty;
  };
  void allocate() {
    nodes_.resize(capacity_);
    std::size_t slots = 1;
    while (slots < capacity_ * 2) slots <<= 1;
    slots_.assign(slots, empty);
    for (std::size_t i = 0; i < capacity_; ++i) nodes_[i].next = i + 1 < capacity_ ? static_cast<std::uint32_t>(i + 1) : empty;
    free_ = capacity_ > 0 ? 0 : empty;
  }
  // The slot holding `key`, or the empty slot where it would go.
  std::size_t slot_of(std::uint64_t key) const noexcept {
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = static_cast<std::size_t>(key) & mask;
    while (slots_[s] != empty && nodes_[slots_[s]].key != key) s = (s + 1) & mask;
    return s;
  }
  void unlink(std::uint32_t n) noexcept {
    node& x = nodes_[n];
    if (x.prev != empty) nodes_[x.prev].next = x.next;
    else head_ = x.next;
    if (x.next != empty) nodes_[x.next].prev = x.prev;
    else tail_ = x.prev;
    x.prev = x.next = empty;
  }
  void push_front(std::uint32_t n) noexcept {
    nodes_[n].prev = empty;
    nodes_[n].next = head_;
    if (head_ != empty) nodes_[head_].prev = n;
    head_ = n;
    if (tail_ == empty) tail_ = n;
  }

  static_assert(sizeof(node) <= 56);  // ~260 KiB for 4,096 values with the slots (README)
  std::size_t capacity_;
  std::vector<node> nodes_;
  std::vector<std::uint32_t> slots_;
  std::uint32_t head_ = empty, tail_ = empty, free_ = empty;
  std::size_t size_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace lockscope::locks::recognizer_detail
