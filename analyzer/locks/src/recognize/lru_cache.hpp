// A string-keyed cache that forgets its least recently used entries beyond a number
// of entries and of key bytes. Private to the recognizer (the script and SHA1
// caches).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace lockscope::locks::recognizer_detail {

template <class V>
class lru_cache {
 public:
  struct entry {
    std::string key;
    V value;
  };

  lru_cache(std::size_t max_entries, std::size_t max_key_bytes)
      : max_entries_(max_entries), max_key_bytes_(max_key_bytes) {}
  lru_cache(const lru_cache&) = delete;
  lru_cache& operator=(const lru_cache&) = delete;

  // The entry, now the most recently used; nullptr when absent. Valid until an
  // insert() evicts it.
  entry* find(std::string_view key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &*it->second;
  }
  // Sets the value (inserting the entry when absent), then evicts the least recently
  // used entries over the caps; the new entry itself always stays.
  entry& insert(std::string_view key, V value) {
    if (entry* e = find(key)) {
      e->value = std::move(value);
      return *e;
    }
    order_.push_front(entry{std::string(key), std::move(value)});
    index_.emplace(order_.front().key, order_.begin());
    key_bytes_ += key.size();
    while (order_.size() > 1 && (order_.size() > max_entries_ || key_bytes_ > max_key_bytes_)) {
      const entry& oldest = order_.back();
      key_bytes_ -= oldest.key.size();
      index_.erase(oldest.key);
      order_.pop_back();
      ++evictions_;
    }
    return order_.front();
  }

  // Drops every entry `drop(entry)` answers true for (not counted as evictions).
  template <class Pred>
  void erase_if(Pred drop) {
    for (auto it = order_.begin(); it != order_.end();) {
      if (!drop(static_cast<const entry&>(*it))) {
        ++it;
        continue;
      }
      key_bytes_ -= it->key.size();
      index_.erase(it->key);
      it = order_.erase(it);
    }
  }

  std::size_t size() const noexcept { return order_.size(); }
  std::size_t key_bytes() const noexcept { return key_bytes_; }
  std::uint64_t evictions() const noexcept { return evictions_; }

 private:
  struct view_hash {
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::size_t max_entries_;
  std::size_t max_key_bytes_;
  std::list<entry> order_;  // most recently used first; nodes never move
  std::unordered_map<std::string_view, typename std::list<entry>::iterator, view_hash> index_;  // keys: views of the nodes' keys
  std::size_t key_bytes_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace lockscope::locks::recognizer_detail
