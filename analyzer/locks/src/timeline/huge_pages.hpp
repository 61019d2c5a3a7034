// Memory for the timeline's large tables (the lock rows, the holders, the lock id
// table), advised into 2 MiB transparent huge pages. A busy port's locks are spread
// over more memory than the TLB maps in 4 KiB pages, so without them nearly every
// lookup also walks the page tables. Where the kernel gives no huge pages (THP off,
// or `never`), this is ordinary anonymous memory. Private to lock_timeline.cpp.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace lockscope::locks::timeline_detail {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

inline std::size_t round_to_huge_pages(std::size_t bytes) noexcept {
  return (bytes + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOCKSCOPE_HUGE_PAGES_FROM_HEAP 1  // the sanitizers check heap blocks, not mappings
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define LOCKSCOPE_HUGE_PAGES_FROM_HEAP 1
#endif
#endif

// `bytes` rounded up to whole huge pages, aligned to one, zero-filled; throws
// std::bad_alloc when the mapping fails. Unless `advise` is false, advised into huge
// pages (else it gets 4 KiB pages as it is touched, until collapse_to_huge_pages()).
inline void* map_huge(std::size_t bytes, bool advise = true) {
#ifdef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
  static_cast<void>(advise);
  void* p = ::operator new(bytes, std::align_val_t{4096});  // just the bytes asked for: overflows are caught
  std::memset(p, 0, bytes);
  return p;
#else
  const std::size_t size = round_to_huge_pages(bytes);
  // Mapped one page too long, then trimmed, so that the start is aligned.
  void* raw = ::mmap(nullptr, size + huge_page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t end = start + size + huge_page_bytes;
  if (end > aligned + size) ::munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  if (advise) ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advice: failure is harmless
  return reinterpret_cast<void*>(aligned);
#endif
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1
#endif

// Faults in [p, p + bytes) (4 KiB-aligned) for writing in one call rather than a page
// fault a page. Failure (an older kernel) is harmless: the pages fault in when touched.
inline void populate(void* p, std::size_t bytes) noexcept {
#ifndef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
  ::madvise(p, bytes, MADV_POPULATE_WRITE);
#else
  static_cast<void>(p);
  static_cast<void>(bytes);
#endif
}

// A filled huge-page-aligned chunk of 4 KiB pages made one huge page now (the kernel
// copies it), or where it cannot (a kernel before 6.1, no free huge page) advised so
// that khugepaged may later. Its contents stay as they were.
inline void collapse_to_huge_pages(void* chunk) noexcept {
#ifndef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
  ::madvise(chunk, huge_page_bytes, MADV_HUGEPAGE);
  ::madvise(chunk, huge_page_bytes, MADV_COLLAPSE);
#else
  static_cast<void>(chunk);
#endif
}

inline void unmap_huge(void* p, std::size_t bytes) noexcept {
#ifdef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
  ::operator delete(p, std::align_val_t{4096});
  static_cast<void>(bytes);
#else
  if (p != nullptr) ::munmap(p, round_to_huge_pages(bytes));
#endif
}

// Hands out blocks that live as long as the arena. The first `heap_bytes` come from the
// heap (a small capture's few locks need no 2 MiB page), the rest are carved from
// huge-page chunks (a block larger than half a chunk gets a mapping of its own).
// Nothing is freed before the arena goes.
//
// The chunk being carved is in 4 KiB pages, faulted in `populate_bytes` at a time
// ahead of the blocks, and becomes one huge page when the next chunk begins: a huge
// page is 2 MiB resident from its first touch, so the last chunk of every arena, on
// average half used, cost 1 MiB of memory nothing was in (lock.pcap's rows and holders:
// 3.3 MiB of its peak). Only the newest 2 MiB go without huge pages' TLB reach.
class huge_arena {
 public:
  static constexpr std::size_t heap_bytes = std::size_t{1} << 20;
  static constexpr std::size_t populate_bytes = std::size_t{256} << 10;

  huge_arena() = default;
  huge_arena(const huge_arena&) = delete;
  huge_arena& operator=(const huge_arena&) = delete;
  ~huge_arena() {
    for (const auto& [p, size] : mappings_) unmap_huge(p, size);
    for (void* p : heap_blocks_) ::operator delete(p, std::align_val_t{4096});
  }
  // `bytes` zero-filled bytes aligned to `align` (a power of two, at most 4096).
  void* allocate(std::size_t bytes, std::size_t align) {
#ifdef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
    static_cast<void>(align);
    void* block = map_huge(bytes);  // a heap block each
    mappings_.emplace_back(block, bytes);
    return block;
#else
    if (mappings_.empty() && from_heap_ + bytes <= heap_bytes) {  // until the first mapping
      void* block = ::operator new(bytes, std::align_val_t{4096});
      heap_blocks_.push_back(block);
      from_heap_ += bytes;
      std::memset(block, 0, bytes);
      return block;
    }
    std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (next_ == nullptr || at + bytes > huge_page_bytes) {
      if (bytes > huge_page_bytes / 2) {  // a big block: its own mapping, the chunk kept
        void* own = map_huge(bytes);
        mappings_.emplace_back(own, bytes);
        return own;
      }
      if (next_ != nullptr) collapse_to_huge_pages(next_);  // filled as far as it goes
      next_ = static_cast<char*>(map_huge(huge_page_bytes, false));
      mappings_.emplace_back(next_, huge_page_bytes);
      at = 0;
      populated_ = 0;
    }
    used_ = at + bytes;
    if (used_ > populated_) {
      const std::size_t to = std::min(huge_page_bytes, (used_ + populate_bytes - 1) & ~(populate_bytes - 1));
      populate(next_ + populated_, to - populated_);
      populated_ = to;
    }
    return next_ + at;
#endif
  }
  void swap(huge_arena& o) noexcept {
    mappings_.swap(o.mappings_);
    heap_blocks_.swap(o.heap_blocks_);
    std::swap(from_heap_, o.from_heap_);
    std::swap(next_, o.next_);
    std::swap(used_, o.used_);
    std::swap(populated_, o.populated_);
  }
  // The memory taken so far (heap blocks and mappings).
  std::size_t mapped_bytes() const noexcept {
    std::size_t n = from_heap_;
    for (const auto& m : mappings_) n += round_to_huge_pages(m.second);
    return n;
  }

 private:
  std::vector<std::pair<void*, std::size_t>> mappings_;
  std::vector<void*> heap_blocks_;
  std::size_t from_heap_ = 0;
  char* next_ = nullptr;  // the chunk being carved
  std::size_t used_ = 0;
  std::size_t populated_ = 0;  // next_'s bytes faulted in
};

// A std::allocator that maps big arrays (half a huge page or more) as huge pages.
template <class T>
struct huge_page_allocator {
  using value_type = T;
  huge_page_allocator() noexcept = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}
  static bool big(std::size_t n) noexcept { return n * sizeof(T) >= huge_page_bytes / 2; }
  T* allocate(std::size_t n) {
    if (big(n)) return static_cast<T*>(map_huge(n * sizeof(T)));
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (big(n)) unmap_huge(p, n * sizeof(T));
    else ::operator delete(p, std::align_val_t{alignof(T)});
  }
  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace lockscope::locks::timeline_detail
