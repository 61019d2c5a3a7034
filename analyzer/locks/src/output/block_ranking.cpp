#include "lockscope/locks/block_ranking.hpp"

#include <algorithm>

#include "lockscope/locks/lock_globs.hpp"
#include "lockscope/locks/swimlane.hpp"

namespace lockscope::locks {

block_ranking::block_ranking(std::size_t max_blocks, std::string glob)
    : max_blocks_(max_blocks), capacity_(max_blocks), glob_(std::move(glob)) {}

void block_ranking::on_event(const lock_event& e) {
  if (e.event != lock_event_kind::anomaly) return;
  ++anomalies_[static_cast<std::size_t>(e.kind)];
  // The timeline's statistics count its own anomalies, not lock_groups'.
  if (e.kind == anomaly_kind::quorum_lost || e.kind == anomaly_kind::split_quorum) {
    ++group_anomalies_[block_key(e.lock, e.db)];
  }
}

bool block_ranking::more_active(const candidate& a, const candidate& b) noexcept {
  if (a.trouble != b.trouble) return a.trouble > b.trouble;
  if (a.activity != b.activity) return a.activity > b.activity;
  return a.seen < b.seen;
}

void block_ranking::consider(std::string_view name, std::int32_t db, std::uint64_t trouble, std::uint64_t activity) {
  candidate c{trouble, activity, seen_++, {}};
  if (heap_.size() >= capacity_ && (capacity_ == 0 || !more_active(c, heap_.front()))) return;
  c.key = block_key(name, db);
  heap_.push_back(std::move(c));
  std::push_heap(heap_.begin(), heap_.end(), more_active);
  if (heap_.size() > capacity_) {
    std::pop_heap(heap_.begin(), heap_.end(), more_active);
    heap_.pop_back();
  }
}

void block_ranking::add_stats(const lock_timeline& timeline, const std::function<bool(std::string_view)>& select) {
  // A name on several servers is one block: keep enough locks to fill max_blocks.
  capacity_ = max_blocks_ * std::min<std::size_t>(std::max<std::size_t>(1, timeline.scope_count()), 8);
  std::map<std::string, int, std::less<>> distinct;  // only when names can repeat
  const bool repeats = timeline.scope_count() > 1;
  std::size_t considered = 0;
  timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
    if (select && !select(lock)) return;
    ++considered;
    lock_rank rank(s);
    if (!group_anomalies_.empty()) {
      auto g = group_anomalies_.find(block_key(lock, s.db));
      if (g != group_anomalies_.end()) rank.trouble += g->second;
    }
    consider(lock, s.db, rank.trouble, rank.activity);
    if (repeats) distinct.emplace(block_key(lock, s.db), 0);
    if (!glob_.empty() && matching_.size() <= max_matches && glob_match(glob_, lock)) {
      auto key = block_key(lock, s.db);
      if (std::find(matching_.begin(), matching_.end(), key) == matching_.end()) matching_.push_back(std::move(key));
    }
  });
  blocks_ = repeats ? distinct.size() : select ? considered : timeline.lock_count();
}

std::vector<std::string> block_ranking::top() const {
  std::vector<candidate> all = heap_;
  std::sort(all.begin(), all.end(), more_active);
  std::vector<std::string> keys;
  for (auto& c : all) {
    if (keys.size() >= max_blocks_) break;
    if (std::find(keys.begin(), keys.end(), c.key) == keys.end()) keys.push_back(std::move(c.key));
  }
  return keys;
}

}  // namespace lockscope::locks
