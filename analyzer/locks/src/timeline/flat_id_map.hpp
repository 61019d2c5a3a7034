// A map from 32-bit ids (owners) to small values, flat: open addressing with linear
// probing in one array sized to the entries live (at most 3/4 full, a power of two),
// erase by backward shift (no tombstones, so a map whose entries come and go for
// hours does not degrade). For the timeline's per-lock indexes of waiters and readers,
// which std::unordered_map served with a node per entry and a division per probe (the
// anomaly storm spent 13% in its find). The subset of std::unordered_map's interface
// they use: find / end / erase(iterator) / emplace (keeps an existing entry) / clear.
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "timeline/unaligned.hpp"

namespace lockscope::locks::timeline_detail {

template <class V>
class flat_id_map {
 public:
  // A slot: the key and its value, packed (a 64-bit value: 12 bytes, not 16).
  struct value_type {
    std::uint32_t first;
    std::conditional_t<std::is_arithmetic_v<V>, unaligned<V>, V> second;
  };
  using iterator = value_type*;

  iterator end() noexcept { return nullptr; }
  iterator find(std::uint32_t key) noexcept {
    if (key == empty_key) return has_empty_key_ ? &empty_key_entry_ : nullptr;
    if (count_ == 0) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      value_type& s = slots_[i];
      if (s.first == key) return &s;
      if (s.first == empty_key) return nullptr;
    }
  }
  // Adds key -> value unless key is there already (as std::unordered_map::emplace).
  void emplace(std::uint32_t key, V value) {
    if (key == empty_key) {
      if (!has_empty_key_) empty_key_entry_ = {key, value};
      has_empty_key_ = true;
      return;
    }
    if ((count_ + 1) * 4 > slots_.size() * 3) resize(slots_.empty() ? 16 : slots_.size() * 2);
    std::size_t i = home(key);
    for (; slots_[i].first != empty_key; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return;
    }
    slots_[i] = {key, value};
    ++count_;
  }
  // Sets key -> value, added or replaced (as std::unordered_map::insert_or_assign).
  void insert_or_assign(std::uint32_t key, V value) {
    if (iterator it = find(key); it != nullptr) {
      it->second = value;
      return;
    }
    emplace(key, value);
  }
  void erase(iterator it) noexcept {
    if (it == &empty_key_entry_) {
      has_empty_key_ = false;
      return;
    }
    std::size_t hole = static_cast<std::size_t>(it - slots_.data());
    --count_;
    // Backward shift: move up every later entry of the run whose home slot is not
    // cyclically between the hole and itself.
    for (std::size_t i = (hole + 1) & mask_;; i = (i + 1) & mask_) {
      const value_type& s = slots_[i];
      if (s.first == empty_key) break;
      const std::size_t h = home(s.first);
      const bool stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (stays) continue;
      slots_[hole] = s;
      hole = i;
    }
    slots_[hole].first = empty_key;
    // Sized to the entries live: a herd that has left gives its memory back.
    if (slots_.size() > 64 && count_ * 8 < slots_.size()) resize(slots_.size() / 2);
  }
  // Empties it, keeping its slots (it is refilled at once: the indexes are rebuilt).
  void clear() noexcept {
    has_empty_key_ = false;
    count_ = 0;
    for (value_type& s : slots_) s.first = empty_key;
  }
  std::size_t size() const noexcept { return count_ + (has_empty_key_ ? 1 : 0); }

 private:
  static constexpr std::uint32_t empty_key = 0xffffffffu;
  std::size_t home(std::uint32_t key) const noexcept {
    // Fibonacci hashing: the top bits of the product (64-bit, so that a shift of 32 is defined).
    return static_cast<std::size_t>(std::uint64_t{static_cast<std::uint32_t>(key * 0x9e3779b1u)} >> shift_);
  }
  void resize(std::size_t size) {
    std::vector<value_type> old = std::move(slots_);
    slots_.assign(size, value_type{empty_key, V{}});
    mask_ = size - 1;
    shift_ = 32;
    for (std::size_t n = size; n > 1; n >>= 1) --shift_;
    for (const value_type& s : old) {
      if (s.first == empty_key) continue;
      std::size_t i = home(s.first);
      while (slots_[i].first != empty_key) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<value_type> slots_;
  std::size_t count_ = 0;
  std::size_t mask_ = 0;
  unsigned shift_ = 32;
  bool has_empty_key_ = false;  // the one key that marks empty slots, kept apart
  value_type empty_key_entry_{empty_key, V{}};
};

// Keeps the first listing of each id in `ids`, in order (a connection's waits: a lock
// once per waiter, each lock visited once when it ends). A long list goes through a set
// of the ids seen, flat and sized to the list: one probe or two a listing. Sorting
// (lock, place) pairs cost 200 instructions a listing, 2% of an anomaly storm's run at
// its capture's end, where each of 20 connections lists 1,700 waits.
inline void keep_first_listings(std::vector<std::uint32_t>& ids) {
  if (ids.size() <= 16) {  // a look back is cheaper than a set
    std::size_t kept = ids.empty() ? 0 : 1;
    for (std::size_t i = 1; i < ids.size(); ++i) {
      const auto seen = ids.begin() + static_cast<std::ptrdiff_t>(kept);
      if (std::find(ids.begin(), seen, ids[i]) == seen) ids[kept++] = ids[i];
    }
    ids.resize(kept);
    return;
  }
  // Slots hold id + 1 (0: empty), at most half full.
  const std::size_t size = std::bit_ceil(ids.size() * 2);
  const unsigned shift = 64 - static_cast<unsigned>(std::countr_zero(size));
  std::vector<std::uint64_t> seen(size, 0);
  std::size_t kept = 0;
  for (const std::uint32_t id : ids) {
    const std::uint64_t key = std::uint64_t{id} + 1;
    std::size_t i = static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> shift);
    while (seen[i] != 0 && seen[i] != key) i = (i + 1) & (size - 1);
    if (seen[i] == key) continue;
    seen[i] = key;
    ids[kept++] = id;
  }
  ids.resize(kept);
}

}  // namespace lockscope::locks::timeline_detail
