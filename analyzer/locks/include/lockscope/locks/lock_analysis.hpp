// The whole `lockscope analyze` over capture files, for the CLI and tests: the files,
// merged by time, through lock_pipeline (capture → ingest → lock_recognizer → lock filter
// → lock_timeline → lock_groups) into a lock_report.
// With threads = 2 an operation_pipe sits between the filter and the timeline: the
// ingest runs on a second thread (the warning handler is called there), the timeline
// and the report on the calling thread. The output is the same byte for byte; only
// the wall time changes.
//
//   analysis_options o;  o.report.format = report_format::jsonl;
//   analyze_files({"captures/seed-redisson.pcap"}, o, [](std::string_view s) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_pipeline.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

struct analysis_options {
  ingest::ingest_options capture{};  // ports, TCP buffering, flow timeout: as for `decode`
  timeline_options timeline{};  // merge_servers: a lock is its key on any server
  group_options groups{};
  report_options report{};
  unsigned threads = 2;  // 1: everything on the calling thread; 2 (or more): two threads
  // Not null: the events go here instead of the report (which then only selects locks
  // and writes nothing); the caller finishes it, at analysis_result::last_packet_us.
  lock_event_sink* events_to = nullptr;
};

struct analysis_result {
  ingest::ingest_stats capture;
  recognizer_stats recognizer;
  std::size_t locks = 0;
  std::uint64_t events = 0;
  std::size_t changed_files = 0;  // files that shrank while being read (each sent to `error`)
  // Files that ended early on an error: changed_files, and reads that failed (EIO).
  std::size_t failed_files = 0;
  // Drops the capturing tool recorded in the files (offline_capture::recorded_drops).
  std::optional<std::uint64_t> recorded_drops;
  std::int64_t first_packet_us = -1, last_packet_us = -1;  // -1: no packet
};

// Reads the files (merged by time), writes the report through `write`. Throws
// capture_error when a file cannot be opened. `warn` and `error` as for offline_capture.
analysis_result analyze_files(const std::vector<std::string>& files, const analysis_options& options,
                              const std::function<void(std::string_view)>& write,
                              ingest::offline_capture::warning_handler warn = {},
                              ingest::offline_capture::warning_handler error = {});

// The same pipeline with `sink` in place of the report (options.report is not used):
// operations on locks `select` refuses (when given) are dropped before the timeline;
// `finished` sees the timeline once it and the groups are finished.
analysis_result analyze_files_into(const std::vector<std::string>& files, const analysis_options& options,
                                   lock_event_sink& sink, const std::function<bool(std::string_view)>& select,
                                   const std::function<void(const lock_timeline&)>& finished,
                                   ingest::offline_capture::warning_handler warn = {},
                                   ingest::offline_capture::warning_handler error = {});

}  // namespace lockscope::locks
