#include "lockscope/locks/lock_pipeline.hpp"

#include <exception>
#include <thread>


namespace lockscope::locks {

lock_pipeline::lock_pipeline(const pipeline_options& options, lock_event_sink& events, const filter_factory& filter)
    : set_once_(options.set_once, events),
      groups_(options.groups, set_once_),
      timeline_(options.timeline, groups_),
      pipe_(options.threads >= 2 ? std::optional<operation_pipe>(std::in_place) : std::nullopt),
      batch_(options.threads >= 2 ? std::nullopt : std::optional<operation_batch>(std::in_place, timeline_)),
      recognizer_(filter ? filter(unfiltered_entry()) : unfiltered_entry()),
      ingest_(options.capture, recognizer_, &recognizer_) {}

lock_operation_sink& lock_pipeline::unfiltered_entry() noexcept {
  return pipe_ ? static_cast<lock_operation_sink&>(*pipe_) : *batch_;
}

void lock_pipeline::finish_ingest() {
  recognizer_.on_connection_end(capture_ends_connection, 0);  // the ends that follow close no connection
  ingest_.finish();
  if (pipe_) pipe_->close();
  else batch_->flush();
}

void lock_pipeline::run_on_two_threads(const std::function<void()>& ingest) {
  // Ingest on a second thread; the timeline and the report stay on this one (their
  // memory then comes from the main malloc arena, and `write` is called here).
  std::exception_ptr ingest_error;
  std::thread producer([&] {
    try {
      ingest();
      recognizer_.on_connection_end(capture_ends_connection, 0);
      ingest_.finish();
    } catch (...) {
      ingest_error = std::current_exception();
    }
    pipe_->close();
  });
  try {
    pipe_->drain(timeline_);
  } catch (...) {
    producer.join();  // it stops at its next packet: the pipe is abandoned
    throw;
  }
  producer.join();
  if (ingest_error) std::rethrow_exception(ingest_error);
}

}  // namespace lockscope::locks
