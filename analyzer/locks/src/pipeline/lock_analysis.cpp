#include "lockscope/locks/lock_analysis.hpp"

#include <exception>
#include <optional>
#include <thread>

#include "lockscope/locks/operation_batch.hpp"
#include "lockscope/locks/operation_pipe.hpp"

namespace lockscope::locks {

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

// Drops operations on locks `select` refuses before the timeline.
class predicate_filter final : public lock_operation_sink {
 public:
  predicate_filter(const std::function<bool(std::string_view)>& select, lock_operation_sink& next) noexcept
      : select_(select), next_(next) {}
  void on_operation(const lock_operation& op) override {
    if (op.kind == lock_op_kind::cluster_link || select_(op.lock)) next_.on_operation(op);
  }
  void on_session_event(const session_event& ev) override { next_.on_session_event(ev); }
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override {
    next_.on_connection_end(connection, at_us);
  }

 private:
  const std::function<bool(std::string_view)>& select_;
  lock_operation_sink& next_;
};

// The pipeline from the files to `sink`; `entry(next)` gives where the recognizer's
// operations go (a filter in front of `next`, or `next` itself).
template <class Entry>
analysis_result run_pipeline(const std::vector<std::string>& files, const analysis_options& options,
                             lock_event_sink& sink, Entry&& entry,
                             const std::function<void(std::int64_t first_us)>& started,
                             const std::function<void(const lock_timeline&)>& finished,
                             offline_capture::warning_handler warn, offline_capture::warning_handler error) {
  const offline_capture::warning_handler recognizer_warn = warn;
  offline_capture source(files, std::move(warn), std::move(error));
  lock_groups groups(options.groups, sink);
  lock_timeline timeline(options.timeline, groups);
  captured_packet p;
  const bool more = source.next(p);
  const std::int64_t first = more ? p.ts_us : -1;
  if (more && started) started(p.ts_us);
  std::optional<operation_pipe> pipe;
  std::optional<operation_batch> batch;  // one thread: the timeline still gets windows
  if (options.threads >= 2) pipe.emplace();
  else batch.emplace(timeline);
  lock_operation_sink& after_filter = pipe ? static_cast<lock_operation_sink&>(*pipe) : *batch;
  auto&& filter = entry(after_filter);
  lock_recognizer recognizer(filter.entry());
  if (recognizer_warn) recognizer.set_warning_handler(recognizer_warn);
  ingest_pipeline a(options.capture, recognizer, &recognizer);
  std::int64_t last = -1;
  if (!pipe) {
    last = ingest(source, p, more, a, [] { return false; });
    batch->flush();
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
  if (finished) finished(timeline);
  analysis_result r;
  r.capture = a.stats();
  r.recognizer = recognizer.stats();
  r.locks = timeline.lock_count();
  r.changed_files = source.changed_files();
  r.failed_files = source.failed_files();
  r.recorded_drops = source.recorded_drops();
  r.first_packet_us = first;
  r.last_packet_us = last;
  return r;
}

// Gives the predicate filter the `entry()` of lock_operation_filter.
struct optional_predicate_filter {
  std::optional<predicate_filter> filter;
  lock_operation_sink* next;
  lock_operation_sink& entry() noexcept { return filter ? static_cast<lock_operation_sink&>(*filter) : *next; }
};

}  // namespace

analysis_result analyze_files(const std::vector<std::string>& files, const analysis_options& options,
                              const std::function<void(std::string_view)>& write,
                              offline_capture::warning_handler warn, offline_capture::warning_handler error) {
  report_options with_threads = options.report;
  with_threads.threads = options.threads;  // the summary table too, once the timeline is done
  lock_report report(with_threads, write);
  lock_event_sink& sink = options.events_to != nullptr ? *options.events_to : report;
  std::optional<lock_operation_filter> filter;
  auto r = run_pipeline(
      files, options, sink,
      [&](lock_operation_sink& next) -> lock_operation_filter& { return filter.emplace(report, next); },
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
                                   offline_capture::warning_handler warn, offline_capture::warning_handler error) {
  std::optional<optional_predicate_filter> filter;
  return run_pipeline(
      files, options, sink,
      [&](lock_operation_sink& next) -> optional_predicate_filter& {
        auto& f = filter.emplace(optional_predicate_filter{std::nullopt, &next});
        if (select) f.filter.emplace(select, next);
        return f;
      },
      {}, finished, std::move(warn), std::move(error));
}

}  // namespace lockscope::locks
