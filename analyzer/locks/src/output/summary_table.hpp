// The summary table of `lockscope analyze`: a row per selected lock (acquisitions,
// contention, hold and wait p50/p99/max, renewals, expiries, anomalies), in first-seen
// order or, with options.top, the highest ranked locks first; then a line on what the
// rows do not show (forgotten locks, the others of --top).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

// Uses options.lock_globs, top and threads. Text goes to `out` (handed to `write`
// whenever it is flushed; empty on return) and, for the rows, straight to `write`.
void write_summary_table(const lock_timeline& timeline, const report_options& options, std::string& out,
                         const std::function<void(std::string_view)>& write);

}  // namespace lockscope::locks
