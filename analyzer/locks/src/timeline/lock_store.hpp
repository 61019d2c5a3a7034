// Every lock's compact row and name, and the pool of current holders.
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "lockscope/locks/lock_timeline.hpp"
#include "huge_pages.hpp"
#include "text_interner.hpp"
#include "unaligned.hpp"

namespace lockscope::locks::timeline_detail {

// A current holder; 44 bytes, since every held lock has one (its times are unaligned,
// so it needs only 4-byte alignment; the long-hold and end-unseen flags share a word
// with the hold count).
struct holder {
  static constexpr std::int64_t clock_resolution_us = 1000;  // Redis's expiry clock (see set_lease)
  unaligned<std::int64_t> since_us = -1;      // -1: before the capture
  unaligned<std::int64_t> deadline_us = -1;   // reply + lease + 1 ms (set_lease); -1: no lease
  unaligned<std::int64_t> last_renew_us = -1;
  std::uint32_t owner = no_id;     // in the pool's free list: the next free slot
  std::uint32_t conn = no_id;      // index into the connection table
  std::uint32_t floor_delta_us = 0;  // deadline - (request + lease): the reply latency + 1 ms
  std::int32_t lease_ms = -1;

  // 0: unknown (held before the capture began). Saturates at 2^30 - 1 reentries
  // (a plain int32 would overflow at 2^31).
  std::int32_t hold_count() const noexcept { return static_cast<std::int32_t>(count_and_flag_ & count_mask); }
  void set_hold_count(std::int32_t n) noexcept {
    count_and_flag_ = (count_and_flag_ & ~count_mask) | (static_cast<std::uint32_t>(n) & count_mask);
  }
  void reenter() noexcept {
    if (hold_count() > 0 && hold_count() < static_cast<std::int32_t>(count_mask)) set_hold_count(hold_count() + 1);
  }
  bool long_hold_reported() const noexcept { return (count_and_flag_ & long_hold_bit) != 0; }
  void set_long_hold_reported() noexcept { count_and_flag_ |= long_hold_bit; }
  // Known only from renewals (lock_operation::ends_unseen): neither its start nor its end
  // is on the wire, and its lease's end is no expiry.
  bool ends_unseen() const noexcept { return (count_and_flag_ & ends_unseen_bit) != 0; }
  void set_ends_unseen() noexcept { count_and_flag_ |= ends_unseen_bit; }

  std::int64_t floor_us() const noexcept { return deadline_us < 0 ? -1 : deadline_us - floor_delta_us; }
  // reply + lease: the time left that the holder was told of (PTTL), by our clock.
  std::int64_t lease_end_us() const noexcept { return deadline_us < 0 ? -1 : deadline_us - clock_resolution_us; }
  // Redis keeps a key until its clock, in whole milliseconds, is past the expiry it set
  // (its clock when the command ran + the lease): a key lives lease to lease + 1 ms after
  // the command ran, and the command ran between request and reply. So the lease runs
  // out after request + lease (the floor), and by reply + lease + 1 ms (the deadline):
  // a renewal its holder sends in between may still find the key.
  void set_lease(const lock_operation& op, std::int64_t at) {
    // Capped (~24 days) so that hostile ARGV values cannot overflow the deadline.
    const std::int64_t lease = std::clamp<std::int64_t>(op.lease_ms, -1, 0x7fffffff);
    lease_ms = static_cast<std::int32_t>(lease);
    deadline_us = at + lease * 1000 + clock_resolution_us;
    floor_delta_us = static_cast<std::uint32_t>(
        std::clamp<std::int64_t>(at - op.request_us + clock_resolution_us, 0, 0xffffffff));
  }

 private:
  static constexpr std::uint32_t count_mask = 0x3fffffffu, ends_unseen_bit = 1u << 30, long_hold_bit = 1u << 31;
  std::uint32_t count_and_flag_ = 0;  // the hold count, bit 30: ends unseen, bit 31: long hold reported
};
static_assert(sizeof(holder) == 44 && alignof(holder) == 4);

// The first holders of held locks, by a 32-bit index. Fixed blocks of 1024 (44 KiB):
// no per-holder allocation, nothing moves, and freed slots are reused first (a free
// list threaded through their owner fields).
class holder_pool {
 public:
  std::uint32_t acquire() {
    if (free_ != no_id) {
      const std::uint32_t i = free_;
      free_ = (*this)[i].owner;
      (*this)[i] = holder{};
      return i;
    }
    if ((size_ & slot_mask) == 0) {
      auto* block = static_cast<holder*>(arena_.allocate(sizeof(holder) * slots_per_block, alignof(holder)));
      std::uninitialized_value_construct_n(block, slots_per_block);
      blocks_.push_back(block);
    }
    return size_++;
  }
  void release(std::uint32_t i) noexcept {
    (*this)[i].owner = free_;
    free_ = i;
  }
  bool empty() const noexcept { return size_ == 0; }
  holder& operator[](std::uint32_t i) noexcept { return blocks_[i >> block_shift][i & slot_mask]; }
  const holder& operator[](std::uint32_t i) const noexcept { return blocks_[i >> block_shift][i & slot_mask]; }

 private:
  static constexpr unsigned block_shift = 10;
  static constexpr std::uint32_t slots_per_block = 1u << block_shift;
  static constexpr std::uint32_t slot_mask = slots_per_block - 1;
  huge_arena arena_;
  std::vector<holder*> blocks_;
  std::uint32_t size_ = 0;    // slots handed out so far
  std::uint32_t free_ = no_id;  // the most recently released slot
};


// A signed 48-bit integer at any address; a value outside its range is stored as
// `spilled` (and the caller keeps the full value elsewhere).
class packed_int48 {
 public:
  static constexpr std::int64_t spilled = -(std::int64_t{1} << 47);
  static constexpr bool fits(std::int64_t v) noexcept { return v > spilled && v < (std::int64_t{1} << 47); }

  packed_int48(std::int64_t v = 0) noexcept { set(v); }  // NOLINT: implicit, as for an int64 field
  std::int64_t get() const noexcept {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes_, sizeof bytes_);  // little-endian: the low 6 bytes
    return static_cast<std::int64_t>(v << 16) >> 16;
  }
  // `v` if it fits, else `spilled`.
  void set(std::int64_t v) noexcept {
    if (!fits(v)) v = spilled;
    std::memcpy(bytes_, &v, sizeof bytes_);
  }

 private:
  static_assert(std::endian::native == std::endian::little);
  unsigned char bytes_[6];
};

// Every lock ever seen: 32 bytes, which is also its summary row (the first hold is
// kept inline: most locks have one), followed by its name in the lock_store. Its
// holder lives in the holder pool while held; waiters, later holds and anomaly counts
// in its side records, only when it has them. Every field is unaligned, so that rows
// and names follow each other without padding.
struct lock_state {
  unaligned<std::int64_t> queued_us = -1;       // the time of its live timer entry; -1 none
  // The first completed hold's length (-1: none yet); one that does not fit 48 bits (a
  // capture whose clock jumped by years) is its side record's first_hold_spilled_us.
  // Read and written through first_hold_of / set_first_hold.
  packed_int48 first_hold_us = -1;
  unaligned<std::uint32_t> side = no_id;        // index into the sides
  unaligned<std::uint32_t> active = no_id;      // index of its first holder in the pool
  unaligned<std::uint32_t> last_expired = no_id;  // owner whose lease ran out last (expired_while_held)
  unaligned<std::uint16_t> acquisitions = 0;    // the 16-bit counters: + the side's carry
  unaligned<std::uint16_t> renewals = 0;
  unaligned<std::uint16_t> expiries = 0;
};
static_assert(sizeof(lock_state) == 32 && alignof(lock_state) == 1);

// Every lock's row and name, together: entries [lock_state][scope, name length: LEB128
// varints][name] back to back in 64 KiB blocks (a longer entry gets a block of its
// own), in first-seen order. A lock's id is its entry's 32-bit reference (block << 16 |
// offset), so finding a lock by name and then updating its row touches one place.
// 65536 blocks: at most 4 GiB, then new locks are refused.
class lock_store {
 public:
  // The new lock's id; no_id when the store is full. `scope` is the lock's (server,
  // database) in the timeline's scope table.
  std::uint32_t add(std::uint32_t scope, std::string_view name) {
    char prefix[15];
    std::size_t prefix_size = put_varint(prefix, scope);
    prefix_size += put_varint(prefix + prefix_size, name.size());
    const std::size_t size = sizeof(lock_state) + prefix_size + name.size();
    if (blocks_.empty() || blocks_.back().used + size > block_bytes) {
      if (blocks_.size() >= max_blocks) return no_id;
      blocks_.push_back(block{static_cast<char*>(arena_.allocate(std::max(size, block_bytes), alignof(lock_state))), 0});
    }
    block& b = blocks_.back();
    const auto id = static_cast<std::uint32_t>(((blocks_.size() - 1) << 16) | b.used);
    char* at = b.bytes + b.used;
    new (at) lock_state{};
    // The varints written again where they go, and the name copied inline: two memcpy
    // calls of a few bytes were a sixth of a new lock's cost here.
    char* text = at + sizeof(lock_state);
    text += put_varint(text, scope);
    text += put_varint(text, name.size());
    ingest::copy_bytes(text, name);
    b.used += size;
    ++count_;
    longest_name_ = std::max(longest_name_, name.size());
    return id;
  }
  lock_state& operator[](std::uint32_t id) noexcept {
    return *std::launder(reinterpret_cast<lock_state*>(blocks_[id >> 16].bytes + (id & 0xffff)));
  }
  const lock_state& operator[](std::uint32_t id) const noexcept {
    return *std::launder(reinterpret_cast<const lock_state*>(blocks_[id >> 16].bytes + (id & 0xffff)));
  }
  std::size_t size() const noexcept { return count_; }
  // Only for a row that lives in the store: its scope and name follow it.
  static std::string_view name_of(const lock_state& l) noexcept { return identity_of(l).name; }
  static std::uint32_t scope_of(const lock_state& l) noexcept {
    const char* p = reinterpret_cast<const char*>(&l) + sizeof(lock_state);
    return static_cast<std::uint32_t>(get_varint(p));
  }
  struct identity {
    std::uint32_t scope;
    std::string_view name;
  };
  // Both, read in one pass.
  static identity identity_of(const lock_state& l) noexcept {
    const char* p = reinterpret_cast<const char*>(&l) + sizeof(lock_state);
    const auto scope = static_cast<std::uint32_t>(get_varint(p));
    const std::size_t size = get_varint(p);
    return {scope, {p, size}};
  }
  // In first-seen order.
  template <class F>
  void for_each(F&& f) const {
    for_each(0, 1, f);
  }
  // Run `part` of `parts`: the blocks cut into consecutive runs of about equal size.
  template <class F>
  void for_each(std::size_t part, std::size_t parts, F&& f) const {
    const std::size_t first = blocks_.size() * part / parts;
    const std::size_t last = blocks_.size() * (part + 1) / parts;
    for (std::size_t i = first; i < last; ++i) {
      const block& b = blocks_[i];
      const char* const end = b.bytes + b.used;
      for (const char* at = b.bytes; at != end;) {
        const lock_state& l = *std::launder(reinterpret_cast<const lock_state*>(at));
        const std::string_view name = name_of(l);
        f(l, name);
        at = name.data() + name.size();
      }
    }
  }
  // In first-seen order, with each lock's id and its row writable.
  template <class F>
  void for_each_with_id(F&& f) {
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const block& b = blocks_[i];
      for (std::size_t at = 0; at != b.used;) {
        lock_state& l = *std::launder(reinterpret_cast<lock_state*>(b.bytes + at));
        const std::string_view name = name_of(l);
        f(static_cast<std::uint32_t>((i << 16) | at), l, name);
        at = static_cast<std::size_t>(name.data() + name.size() - b.bytes);
      }
    }
  }
  std::size_t longest_name() const noexcept { return longest_name_; }
  void swap(lock_store& o) noexcept {
    arena_.swap(o.arena_);
    blocks_.swap(o.blocks_);
    std::swap(count_, o.count_);
    std::swap(longest_name_, o.longest_name_);
  }

 private:
  // LEB128: 7 bits a byte, low first.
  static std::size_t put_varint(char* out, std::uint64_t v) noexcept {
    std::size_t n = 0;
    for (;; v >>= 7) {
      out[n++] = static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80) return n;
    }
  }
  static std::uint64_t get_varint(const char*& p) noexcept {
    // One byte: a scope index below 128, a name shorter than 128 bytes (nearly every lock).
    if (const auto first = static_cast<unsigned char>(*p); first < 0x80) {
      ++p;
      return first;
    }
    std::uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      const auto byte = static_cast<unsigned char>(*p++);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) return v;
    }
  }
  static constexpr std::size_t block_bytes = 1u << 16;
  static constexpr std::size_t max_blocks = 1u << 16;
  struct block {
    char* bytes;  // in arena_
    std::size_t used = 0;
  };
  huge_arena arena_;
  std::vector<block> blocks_;
  std::size_t count_ = 0;
  std::size_t longest_name_ = 0;
};

}  // namespace lockscope::locks::timeline_detail
