#include "lockscope/locks/lock_analysis.hpp"

#include <exception>
#include <optional>
#include <thread>

#include "lockscope/locks/operation_pipe.hpp"

namespace lockscope::analyzer {

namespace {

// capture → ingest_pipeline (→ recognizer → filter → ...); returns the last packet's
// time (-1: none). Stops early when `stop` says so.
template <class Stop>
std::int64_t ingest(offline_capture& source, captured_packet& p, bool more, ingest_pipeline& a, Stop&& stop) {
  std::int64_t last = -1;
  for (; more && !stop(); more = source.next(p)) {
    last = p.ts_us;
    a.on_packet(p.ts_us, p.link_type, p.data);
  }
  a.finish();
  return last;
}

}  // namespace

analysis_result analyze_files(const std::vector<std::string>& files, const analysis_options& options,
                              const std::function<void(std::string_view)>& write,
                              offline_capture::warning_handler warn, offline_capture::warning_handler error) {
  offline_capture source(files, std::move(warn), std::move(error));
  report_options with_threads = options.report;
  with_threads.threads = options.threads;  // the summary table too, once the timeline is done
  lock_report report(with_threads, write);
  lock_groups groups(options.groups, options.events_to != nullptr ? *options.events_to : report);
  lock_timeline timeline(options.timeline, groups);
  captured_packet p;
  const bool more = source.next(p);
  if (more) report.set_start_us(p.ts_us);  // text times are relative to the first packet
  std::optional<operation_pipe> pipe;
  if (options.threads >= 2) pipe.emplace();
  lock_operation_filter filter(report, pipe ? static_cast<lock_operation_sink&>(*pipe) : timeline);
  lock_recognizer recognizer(filter.entry());
  ingest_pipeline a(options.capture, recognizer, &recognizer);
  std::int64_t last = -1;
  if (!pipe) {
    last = ingest(source, p, more, a, [] { return false; });
  } else {
    // Ingest on a second thread; the timeline and the report stay on this one (their
    // memory then comes from the main malloc arena, and `write` is called here).
    std::exception_ptr ingest_error;
    std::thread producer([&] {
      try {
        last = ingest(source, p, more, a, [&] { return pipe->abandoned(); });
      } catch (...) {
        ingest_error = std::current_exception();
      }
      pipe->close();
    });
    try {
      pipe->drain(timeline);
    } catch (...) {
      producer.join();  // it stops at its next packet: the pipe is abandoned
      throw;
    }
    producer.join();
    if (ingest_error) std::rethrow_exception(ingest_error);
  }
  timeline.finish(last);
  groups.finish(last);
  if (options.events_to == nullptr) report.finish(timeline);
  analysis_result r;
  r.end_us = last;
  r.capture = a.stats();
  r.recognizer = recognizer.stats();
  r.locks = timeline.lock_count();
  r.events = report.events();
  r.changed_files = source.changed_files();
  return r;
}

}  // namespace lockscope::analyzer
