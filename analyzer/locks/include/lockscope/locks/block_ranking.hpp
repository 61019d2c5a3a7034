// Which locks the HTML / SVG reports draw (pass 1 of `lockscope analyze --format
// html|svg`): a lock_event_sink counting anomalies, then the timeline's per-lock
// statistics once it finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

// Pass 1: which blocks (name, database) to draw, from the timeline's per-lock
// statistics once it finished (so it holds nothing per lock itself), and the anomalies
// by kind. The most active: contention + anomalies first, then acquisitions, renewals
// and expiries, then first seen; a name on several servers counts as its busiest.
class block_ranking final : public lock_event_sink {
 public:
  // `glob`: also collect the blocks whose name matches it (--format svg --lock).
  explicit block_ranking(std::size_t max_blocks, std::string glob = {});
  void on_event(const lock_event& e) override;
  // `select` (--lock): only the locks it takes are ranked and counted.
  void add_stats(const lock_timeline& timeline, const std::function<bool(std::string_view)>& select = {});
  // One lock (add_stats calls it for each).
  void consider(std::string_view name, std::int32_t db, std::uint64_t trouble, std::uint64_t activity);
  // The top blocks' keys (block_key()), most active first.
  std::vector<std::string> top() const;
  // The blocks `glob` matched, at most max_matches + 1.
  static constexpr std::size_t max_matches = 10;
  const std::vector<std::string>& matching() const noexcept { return matching_; }
  std::size_t blocks() const noexcept { return blocks_; }  // in the capture
  const std::uint64_t* anomalies() const noexcept { return anomalies_; }

 private:
  struct candidate {
    std::uint64_t trouble = 0, activity = 0, seen = 0;
    std::string key;
  };
  static bool more_active(const candidate& a, const candidate& b) noexcept;
  std::size_t max_blocks_, capacity_;
  std::string glob_;
  std::vector<candidate> heap_;  // the least active on top, at most capacity_
  std::uint64_t seen_ = 0;
  std::size_t blocks_ = 0;
  std::vector<std::string> matching_;
  std::map<std::string, std::uint64_t, std::less<>> group_anomalies_;  // quorum_lost, split_quorum by block
  std::uint64_t anomalies_[anomaly_kind_count] = {};
};

}  // namespace lockscope::locks
