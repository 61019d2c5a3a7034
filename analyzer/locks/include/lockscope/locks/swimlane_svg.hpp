// Swimlanes → SVG: the one layout of both the HTML and the SVG reports (sans-I/O).
//
//   swimlane_geometry g{.start_us = first, .end_us = last};
//   for (const swimlane_block& blk : builder.blocks()) {
//     const block_svg svg = layout_block(blk, g);   // lanes, marks, coarse layer
//     ...
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockscope/locks/swimlane.hpp"

namespace lockscope::locks {

// The x axis of a drawing: [start_us, end_us] over [left, left + width] pixels.
struct swimlane_geometry {
  std::int64_t start_us = 0, end_us = 1;
  double left = 180, width = 1000;
  double lane_height = 18, lane_gap = 4, top = 4;
  // Marks beyond this many in a block: a coarse layer (per lane, how busy each slice of
  // time was) is drawn, and the marks are kept aside (`fine`) until zoomed in.
  std::size_t fine_limit = 3000;
  std::size_t coarse_bins = 300;
};

struct block_svg {
  std::string lanes;   // lane labels and guides
  std::string marks;   // every mark (drawn, or kept aside when `coarse` is not empty)
  std::string coarse;  // the coarse layer (empty: the block is drawn in full)
  double height = 0;
};

// The block's marks as SVG elements, each with class `m <kind>`, data-lock,
// data-owner, data-event (JSONL values), data-anomaly (anomalies), data-i (the event's
// index) and data-t0/data-t1 (µs from geometry.start_us) so that a viewer can move
// them along the time axis. The one layout of both the HTML and the SVG reports.
block_svg layout_block(const swimlane_block& b, const swimlane_geometry& g);

// The owner's colour class (c0 … c6 in swimlane.css), the same in every report.
inline constexpr int owner_colours = 7;
int owner_colour(std::string_view owner) noexcept;

// Escapes & < > " ' for HTML/XML text and attributes.
void append_xml_escaped(std::string& out, std::string_view s);
// A time axis tick step for `span_us` over about `ticks` ticks, and a label
// ("250µs", "1.5ms", "2s") of `t_us` at that step.
std::int64_t axis_step(std::int64_t span_us, int ticks) noexcept;
std::string axis_label(std::int64_t t_us, std::int64_t step_us);

}  // namespace lockscope::locks
