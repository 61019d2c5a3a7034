#include "lockscope/analyzer/lock_analysis.hpp"

namespace lockscope::analyzer {

analysis_result analyze_files(const std::vector<std::string>& files, const analysis_options& options,
                              const std::function<void(std::string_view)>& write,
                              offline_capture::warning_handler warn) {
  offline_capture source(files, std::move(warn));
  lock_report report(options.report, write);
  lock_timeline timeline(options.timeline, report);
  lock_operation_filter filter(report, timeline, !options.report.lock_globs.empty());
  lock_recognizer recognizer(filter);
  analyzer a(options.capture, recognizer);
  captured_packet p;
  std::int64_t last = -1;
  bool first = true;
  while (source.next(p)) {
    if (first) {
      report.set_start_us(p.ts_us);  // text times are relative to the first packet
      first = false;
    }
    last = p.ts_us;
    a.on_packet(p.ts_us, p.link_type, p.data);
  }
  a.finish();
  timeline.finish(last);
  report.finish(timeline);
  analysis_result r;
  r.capture = a.stats();
  r.recognizer = recognizer.stats();
  r.locks = timeline.lock_count();
  r.events = report.events();
  return r;
}

}  // namespace lockscope::analyzer
