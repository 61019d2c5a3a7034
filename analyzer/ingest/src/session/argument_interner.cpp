#include "lockscope/ingest/argument_interner.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

namespace lockscope::ingest {

namespace {

// Shared by every interner: an identity names one entry's bytes for the whole process.
std::atomic<std::uint64_t> next_identity{1};

constexpr std::size_t seen_slots = 256;

std::uint64_t word_at(const char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

}  // namespace

argument_interner::argument_interner(limits l) : limits_(l) {
  limits_.min_bytes = std::max<std::size_t>(limits_.min_bytes, 16);  // fingerprint() reads 3 words
  limits_.max_entries = std::max<std::size_t>(limits_.max_entries, 1);
  const std::size_t buckets = std::bit_ceil(limits_.max_entries * 2);
  buckets_.assign(buckets, nullptr);
  bucket_mask_ = buckets - 1;
  seen_.assign(seen_slots, 0);
  storage_.reserve(limits_.max_entries);
}

argument_interner::~argument_interner() = default;

std::uint64_t argument_interner::fingerprint(std::string_view value) noexcept {
  // The length and three words (start, middle, end): scripts that differ elsewhere share
  // a fingerprint, and the byte compare in find() tells them apart.
  const char* p = value.data();
  const std::size_t n = value.size();
  std::uint64_t h = (n + 1) * 0x9e3779b97f4a7c15ull;
  h = (h ^ word_at(p)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ word_at(p + n / 2 - 4)) * 0x94d049bb133111ebull;
  h = (h ^ word_at(p + n - 8)) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  return h | 1;  // 0 marks an empty slot in seen_
}

argument_interner::entry* argument_interner::find(std::string_view value, std::uint64_t fp) const noexcept {
  auto same = [&](const entry* e) {
    return e->fingerprint_ == fp && e->size_ == value.size() && std::memcmp(e->bytes_.get(), value.data(), value.size()) == 0;
  };
  for (entry* e = buckets_[fp & bucket_mask_]; e != nullptr; e = e->next_in_bucket_) {
    if (same(e)) return e;
  }
  return nullptr;
}

argument_interner::entry* argument_interner::acquire(std::string_view value) {
  if (value.size() < limits_.min_bytes || value.size() > limits_.max_bytes_each) return nullptr;
  entry* e = last_;
  // The last entry acquired is usually the one (a client repeats one script): its bytes
  // are compared first, with no fingerprint.
  if (e != nullptr && e->size_ == value.size() && std::memcmp(e->bytes_.get(), value.data(), value.size()) == 0) {
    ++stats_.hits;
    if (e->references_++ == 0) unlink_idle(e);
    return e;
  }
  const std::uint64_t fp = fingerprint(value);
  e = find(value, fp);
  if (e == nullptr) {
    std::uint64_t& seen = seen_[fp % seen_slots];
    if (seen != fp) {  // the first sighting (as far as the table remembers)
      seen = fp;
      return nullptr;
    }
    e = create(value, fp);
    if (e == nullptr) return nullptr;
  } else {
    ++stats_.hits;
  }
  if (e->references_++ == 0) unlink_idle(e);
  last_ = e;
  return e;
}

void argument_interner::release(entry* e) noexcept {
  if (--e->references_ == 0) e->owner_->link_idle(e);
}

argument_interner::entry* argument_interner::create(std::string_view value, std::uint64_t fp) {
  // Room by count and bytes, from the unreferenced entries, least recently released first.
  while (idle_oldest_ != nullptr &&
         (live_ >= limits_.max_entries || bytes_ + value.size() > limits_.max_total_bytes)) {
    evict(idle_oldest_);
  }
  if (live_ >= limits_.max_entries || bytes_ + value.size() > limits_.max_total_bytes) {
    ++stats_.refused;
    return nullptr;
  }
  entry* e;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {
    storage_.push_back(std::make_unique<entry>());
    e = storage_.back().get();
    e->owner_ = this;
  }
  if (e->capacity_ < value.size()) {
    e->bytes_ = std::make_unique_for_overwrite<char[]>(value.size());
    e->capacity_ = value.size();
  }
  std::memcpy(e->bytes_.get(), value.data(), value.size());
  e->size_ = value.size();
  e->fingerprint_ = fp;
  e->identity_ = next_identity.fetch_add(1, std::memory_order_relaxed);
  e->references_ = 0;
  entry*& head = bucket(fp);
  e->next_in_bucket_ = head;
  head = e;
  link_idle(e);  // unreferenced until acquire() counts the caller's reference
  ++live_;
  bytes_ += value.size();
  ++stats_.created;
  return e;
}

void argument_interner::evict(entry* e) noexcept {
  unlink_idle(e);
  for (entry** at = &bucket(e->fingerprint_); *at != nullptr; at = &(*at)->next_in_bucket_) {
    if (*at == e) {
      *at = e->next_in_bucket_;
      break;
    }
  }
  if (last_ == e) last_ = nullptr;
  e->next_in_bucket_ = nullptr;
  e->identity_ = 0;
  bytes_ -= e->size_;
  e->size_ = 0;
  // A large block goes: a free object keeps only an ordinary script's capacity.
  if (e->capacity_ > 4096) {
    e->bytes_.reset();
    e->capacity_ = 0;
  }
  --live_;
  free_.push_back(e);
  ++stats_.evicted;
}

void argument_interner::unlink_idle(entry* e) noexcept {
  (e->idle_older_ != nullptr ? e->idle_older_->idle_newer_ : idle_oldest_) = e->idle_newer_;
  (e->idle_newer_ != nullptr ? e->idle_newer_->idle_older_ : idle_newest_) = e->idle_older_;
  e->idle_older_ = e->idle_newer_ = nullptr;
}

void argument_interner::link_idle(entry* e) noexcept {
  e->idle_older_ = idle_newest_;
  e->idle_newer_ = nullptr;
  (idle_newest_ != nullptr ? idle_newest_->idle_newer_ : idle_oldest_) = e;
  idle_newest_ = e;
}

}  // namespace lockscope::ingest
