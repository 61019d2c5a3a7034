// The HTML page and the standalone SVG of `lockscope analyze --format html|svg`
// (sans-I/O: strings out through `write`).
//
//   block_ranking rank;                      // pass 1: a lock_event_sink
//   ... analyze into rank ...; rank.add_stats(timeline);
//   auto keys = rank.top(500);               // block_key()s, most active first
//   swimlane_builder b({}, keys);            // pass 2, only those locks
//   ... analyze into b ...; b.finish(end);
//   page_info info = ...;                    // the capture's figures, summary rows
//   write_html_page(info, b.blocks(), geometry, write);
//
// The page is one file: its CSS and JavaScript inline (analyzer/locks/report/, embedded
// at build time), a Content-Security-Policy that allows nothing remote. The swimlanes
// are the SVG of layout_block(); the script only moves marks along the time axis
// (zoom, pan), loads a coarse block's marks when zoomed in, sorts and filters the
// summary table and shows an event's JSONL fields on hover (pinned on click).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/locks/swimlane.hpp"

namespace lockscope::analyzer {

// Pass 1: per block (name, database), how active it was, and the anomalies by kind.
class block_ranking final : public lock_event_sink {
 public:
  void on_event(const lock_event& e) override;
  // Contended acquisitions from the timeline's per-lock statistics.
  void add_stats(const lock_timeline& timeline);
  // The `n` most active blocks' keys: contention + anomalies first, then events, then
  // first seen.
  std::vector<std::string> top(std::size_t n) const;
  // The blocks whose name matches `glob`.
  std::vector<std::string> matching(std::string_view glob) const;
  std::size_t blocks() const noexcept { return order_.size(); }
  const std::uint64_t* anomalies() const noexcept { return anomalies_; }

 private:
  struct activity {
    std::uint64_t trouble = 0;  // contended acquisitions + anomalies
    std::uint64_t events = 0;
    std::size_t first_seen = 0;
  };
  std::map<std::string, activity, std::less<>> by_block_;
  std::vector<std::string> order_;
  std::uint64_t anomalies_[anomaly_kind_count] = {};
  std::string key_;
};

// One row of the summary table (a lock: name, server, database).
struct summary_row {
  std::string title;      // as in the text summary
  std::string block_key;  // the block it is drawn in
  lock_stats stats;       // spans are not kept
};

struct page_info {
  std::vector<std::string> files;
  std::int64_t start_us = 0, end_us = 0;
  ingest_stats capture{};
  std::string kernel_drops = "n/a (file)";
  std::uint64_t anomalies[anomaly_kind_count] = {};  // every lock's
  std::size_t blocks_total = 0;                      // blocks in the capture
  std::size_t max_blocks = 0;                        // --html-max-locks
  std::vector<summary_row> rows;                     // the drawn locks'
};

// The summary rows of the locks drawn (their names in `blocks`), in first-seen order.
std::vector<summary_row> summary_rows(const lock_timeline& timeline, const std::vector<swimlane_block>& blocks);

void write_html_page(const page_info& info, const std::vector<swimlane_block>& blocks, const swimlane_geometry& g,
                     const std::function<void(std::string_view)>& write);
// One block as a standalone SVG (styles inline, its own time axis, no script).
void write_svg_page(const page_info& info, const swimlane_block& block, const swimlane_geometry& g,
                    const std::function<void(std::string_view)>& write);

}  // namespace lockscope::analyzer
