// Interned texts (owners, "ip:port"): an arena that never moves them, and an
// open-addressing table of dense 32-bit ids.
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace lockscope::analyzer::timeline_detail {

constexpr std::uint32_t no_id = 0xffffffffu;

// Stable storage for interned text: blocks never move, so views stay valid.
class text_arena {
 public:
  std::string_view store(std::string_view s) {
    std::string& b = block_for(s.size());
    const std::size_t at = b.size();
    b.append(s);
    return std::string_view(b).substr(at, s.size());
  }
 private:
  // The current block, or a new one when `size` more bytes do not fit (blocks never
  // grow: that would move the texts).
  std::string& block_for(std::size_t size) {
    if (blocks_.empty() || blocks_.back().capacity() - blocks_.back().size() < size) {
      blocks_.emplace_back();
      blocks_.back().reserve(std::max<std::size_t>(size, 1u << 16));
    }
    return blocks_.back();
  }
  std::deque<std::string> blocks_;
};

std::uint32_t hash_text(std::string_view s) noexcept {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

// An open-addressing table of 32-bit ids (any value but no_id) keyed by text that
// lives elsewhere: 8 bytes a slot (id and hash), so a probe touches the text only when
// the hashes agree.
class id_table {
 public:
  template <class TextOf>
  std::uint32_t find(std::string_view s, std::uint32_t h, TextOf&& text_of) const {
    if (slots_.empty()) return no_id;
    for (std::size_t i = start(h);; i = next(i)) {
      const slot& e = slots_[i];
      if (e.id == no_id) return no_id;
      if (e.hash == h && text_of(e.id) == s) return e.id;
    }
  }
  void insert(std::uint32_t id, std::uint32_t h) {
    // At most 4/5 full, growing by a quarter: 8 bytes a slot, 10-13 bytes an id.
    if ((++count_) * 5 > slots_.size() * 4) grow();
    place(id, h);
  }

 private:
  struct slot {
    std::uint32_t id = no_id;
    std::uint32_t hash = 0;
  };
  std::size_t start(std::uint32_t h) const noexcept {
    h ^= h >> 16;  // murmur3's finalizer: the range reduction below uses the high bits
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return static_cast<std::size_t>((std::uint64_t{h} * slots_.size()) >> 32);
  }
  std::size_t next(std::size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void place(std::uint32_t id, std::uint32_t h) {
    std::size_t i = start(h);
    while (slots_[i].id != no_id) i = next(i);
    slots_[i] = slot{id, h};
  }
  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(64, old.size() + old.size() / 4), slot{});
    for (const slot& e : old) {
      if (e.id != no_id) place(e.id, e.hash);
    }
  }
  std::vector<slot> slots_;
  std::size_t count_ = 0;
};

// Interns strings as dense ids (owners, "ip:port" texts).
class interner {
 public:
  explicit interner(text_arena& arena) : arena_(arena) {}
  std::uint32_t id(std::string_view s) {
    if (last_ != no_id && texts_[last_] == s) return last_;  // the same owner again: common
    last_ = lookup(s);
    return last_;
  }
  std::string_view text(std::uint32_t id) const { return id == no_id ? std::string_view() : texts_[id]; }

 private:
  std::uint32_t lookup(std::string_view s) {
    const std::uint32_t h = hash_text(s);
    const std::uint32_t found = table_.find(s, h, [this](std::uint32_t id) { return texts_[id]; });
    if (found != no_id) return found;
    const auto id = static_cast<std::uint32_t>(texts_.size());
    texts_.push_back(arena_.store(s));
    table_.insert(id, h);
    return id;
  }

  text_arena& arena_;
  std::uint32_t last_ = no_id;
  id_table table_;
  std::deque<std::string_view> texts_;
};

}  // namespace lockscope::analyzer::timeline_detail
