// The HTML page and the standalone SVG of `lockscope analyze --format html|svg`
// (sans-I/O: strings out through `write`).
//
//   block_ranking rank(500);                 // pass 1: a lock_event_sink (block_ranking.hpp)
//   ... analyze into rank ...; rank.add_stats(timeline);
//   auto keys = rank.top();                  // block_key()s, most active first
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
#include "lockscope/locks/swimlane_svg.hpp"

namespace lockscope::locks {

// One row of the summary table (a lock: name, server, database).
struct summary_row {
  std::string title;      // as in the text summary
  std::string block_key;  // the block it is drawn in
  lock_stats stats;       // without its views (server, samples)
};

struct page_info {
  std::vector<std::string> files;
  std::int64_t start_us = 0, end_us = 0;
  ingest::ingest_stats capture{};
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

}  // namespace lockscope::locks
