#include "lockscope/locks/lock_analysis.hpp"

#include <optional>

#include "lockscope/locks/event_selection.hpp"
#include "lockscope/locks/lock_pipeline.hpp"

namespace lockscope::locks {

namespace {

// The chain from the files to `sink`; `filter` as for lock_pipeline.
analysis_result run_pipeline(const std::vector<std::string>& files, const analysis_options& options,
                             lock_event_sink& sink, const lock_pipeline::filter_factory& filter,
                             const std::function<void(std::int64_t first_us)>& started,
                             const std::function<void(const lock_timeline&)>& finished,
                             ingest::offline_capture::warning_handler warn, ingest::offline_capture::warning_handler error) {
  const ingest::offline_capture::warning_handler recognizer_warn = warn;
  ingest::offline_capture source(files, std::move(warn), std::move(error));
  ingest::captured_packet p;
  bool more = source.next(p);
  const std::int64_t first = more ? p.ts_us : -1;
  if (more && started) started(p.ts_us);
  pipeline_options po;
  po.capture = options.capture;
  po.timeline = options.timeline;
  if (po.timeline.capture_start_us < 0) po.timeline.capture_start_us = first;  // holds begun before it
  po.groups = options.groups;
  po.threads = options.threads;
  lock_pipeline pipeline(po, sink, filter);
  if (recognizer_warn) pipeline.recognizer().set_warning_handler(recognizer_warn);
  std::int64_t last = -1;  // the last packet's time (-1: none)
  pipeline.run_ingest([&](auto&& stop) {
    for (; more && !stop(); more = source.next(p)) {
      last = p.ts_us;
      pipeline.on_packet(p.ts_us, p.link_type, p.data);
    }
  });
  pipeline.finish(last);
  if (finished) finished(pipeline.timeline());
  analysis_result r;
  r.capture = pipeline.ingest().stats();
  r.recognizer = pipeline.recognizer().stats();
  r.locks = pipeline.timeline().lock_count();
  r.changed_files = source.changed_files();
  r.failed_files = source.failed_files();
  r.recorded_drops = source.recorded_drops();
  r.first_packet_us = first;
  r.last_packet_us = last;
  return r;
}

}  // namespace

analysis_result analyze_files(const std::vector<std::string>& files, const analysis_options& options,
                              const std::function<void(std::string_view)>& write,
                              ingest::offline_capture::warning_handler warn, ingest::offline_capture::warning_handler error) {
  report_options with_threads = options.report;
  with_threads.threads = options.threads;  // the summary table too, once the timeline is done
  lock_report report(with_threads, write);
  lock_event_sink& sink = options.events_to != nullptr ? *options.events_to : report;
  // A trace is chosen here; the report chooses its own (event_selection.hpp).
  std::optional<selected_events> chosen;
  if (options.events_to != nullptr && report.selects_locks()) {
    chosen.emplace([&report](std::string_view lock) { return report.selected(lock); }, sink);
  }
  auto r = run_pipeline(
      files, options, chosen ? static_cast<lock_event_sink&>(*chosen) : sink, {},
      [&](std::int64_t first_us) { report.set_start_us(first_us); },  // text times: from the first packet
      [&](const lock_timeline& timeline) {
        if (options.events_to == nullptr) report.finish(timeline);
      },
      std::move(warn), std::move(error));
  r.events = report.events();
  return r;
}

analysis_result analyze_files_into(const std::vector<std::string>& files, const analysis_options& options,
                                   lock_event_sink& sink, const std::function<bool(std::string_view)>& select,
                                   const std::function<void(const lock_timeline&)>& finished,
                                   ingest::offline_capture::warning_handler warn, ingest::offline_capture::warning_handler error) {
  selected_events chosen(select, sink);
  return run_pipeline(files, options, chosen, {}, {}, finished, std::move(warn), std::move(error));
}

}  // namespace lockscope::locks
