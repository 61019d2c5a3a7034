// Long command arguments that many commands repeat, kept once per ingest thread.
//
//   argument_interner interner;                       // one per ingest_pipeline (thread)
//   argument_interner::entry* e = interner.acquire(value);   // nullptr: copy it
//   ... e->text() ... e->identity() ...
//   argument_interner::release(e);                    // when the command is done
//
// A lock client sends the same 250-byte Lua script in every EVAL. A session waiting for
// the replies of 64 pipelined commands would otherwise keep 64 copies of it, and the
// recognizer would compare each copy, long out of the cache by reply time, with the
// script it saw last. An entry holds such an argument once: a pending command views the
// entry instead of copying the bytes (the entry is hot: every command compares with it),
// and an entry's identity tells a consumer "the same bytes as before" with no compare.
//
// A value becomes an entry on its second sighting (a fingerprint of its length and a
// few of its words seen before), so values sent once cost a fingerprint and no copy.
// Entries are bounded by count and bytes; one is evicted only when no pending command
// refers to it (reference counts: plain counters, one thread), the least recently
// released first. When every entry is referenced and the bounds are reached, acquire()
// says nullptr and the caller copies as it would without an interner.
//
// Identities come from one process-wide counter: an identity is never given to other
// bytes, not after an eviction and not by another interner (another thread).
//
// Not thread-safe: an interner and every session using it belong to one thread. It
// must outlive every entry reference (the ingest_pipeline declares it before its flows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace lockscope::ingest {

class argument_interner {
 public:
  struct limits {
    std::size_t min_bytes = 64;          // shorter arguments are copied: cheaper than a lookup
    std::size_t max_bytes_each = 16u << 10;
    std::size_t max_entries = 64;
    std::size_t max_total_bytes = 1u << 20;
  };

  class entry {
   public:
    std::string_view text() const noexcept { return {bytes_.get(), size_}; }
    // Unique in the process for these bytes; never 0.
    std::uint64_t identity() const noexcept { return identity_; }

   private:
    friend class argument_interner;
    argument_interner* owner_ = nullptr;
    std::unique_ptr<char[]> bytes_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
    std::uint64_t fingerprint_ = 0;
    std::uint64_t identity_ = 0;
    std::uint32_t references_ = 0;
    entry* next_in_bucket_ = nullptr;
    entry* idle_older_ = nullptr;  // the unreferenced entries, least recently released first
    entry* idle_newer_ = nullptr;
  };

  struct statistics {
    std::uint64_t hits = 0;       // acquire() found an entry
    std::uint64_t created = 0;    // entries made (on a second sighting)
    std::uint64_t evicted = 0;
    std::uint64_t refused = 0;    // repeated, but no room: every entry referenced
  };

  argument_interner() : argument_interner(limits{}) {}
  explicit argument_interner(limits l);
  ~argument_interner();
  argument_interner(const argument_interner&) = delete;
  argument_interner& operator=(const argument_interner&) = delete;

  // The entry whose bytes equal `value`, with a reference added for the caller; nullptr
  // when `value` is shorter than min_bytes or longer than max_bytes_each, was not seen
  // before, or cannot be kept within the limits.
  entry* acquire(std::string_view value);
  // Gives back a reference from acquire(). The entry stays valid while referenced.
  static void release(entry* e) noexcept;
  // A reference from acquire() that gives itself back when destroyed or reset.
  struct releaser {
    void operator()(entry* e) const noexcept { release(e); }
  };
  using reference = std::unique_ptr<entry, releaser>;

  std::size_t min_bytes() const noexcept { return limits_.min_bytes; }
  std::size_t entries() const noexcept { return live_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const statistics& stats() const noexcept { return stats_; }

 private:
  static std::uint64_t fingerprint(std::string_view value) noexcept;
  entry* find(std::string_view value, std::uint64_t fp) const noexcept;
  entry* create(std::string_view value, std::uint64_t fp);
  void unlink_idle(entry* e) noexcept;
  void link_idle(entry* e) noexcept;
  void evict(entry* e) noexcept;
  entry*& bucket(std::uint64_t fp) noexcept { return buckets_[fp & bucket_mask_]; }

  limits limits_;
  std::vector<std::unique_ptr<entry>> storage_;  // every entry object, live or free
  std::vector<entry*> free_;                     // evicted objects, reused
  std::vector<entry*> buckets_;
  std::size_t bucket_mask_ = 0;
  std::vector<std::uint64_t> seen_;              // fingerprints seen once (direct-mapped)
  entry* idle_oldest_ = nullptr;
  entry* idle_newest_ = nullptr;
  entry* last_ = nullptr;                        // the last entry acquired: usually the next one
  std::size_t live_ = 0;
  std::size_t bytes_ = 0;
  statistics stats_;
};

}  // namespace lockscope::ingest
