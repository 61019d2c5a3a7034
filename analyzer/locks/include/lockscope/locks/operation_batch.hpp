// Holds one thread's lock operations (and the other sink calls) for a moment, then
// makes the same calls on the downstream sink, in order, a window at a time: each
// window is announced through will_handle() first, so that the timeline loads the
// memory of all the window's locks at once instead of stalling on each lock's cache
// misses in turn (a busy port's locks are spread over far more memory than the caches
// hold).
//
//   operation_batch batch(timeline);
//   lock_recognizer recognizer(batch);
//   ... a packet through the ingest pipeline ...;
//   batch.flush();           // before the timeline is read or advanced
//
// Calls are also passed on once `max_bytes` are held. The views an operation carries
// are copied in: they may point into buffers the packet's processing reuses.
#pragma once

#include <cstddef>
#include <vector>

#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::analyzer {

class operation_batch final : public lock_operation_sink {
 public:
  static constexpr std::size_t default_max_bytes = 64 * 1024;

  explicit operation_batch(lock_operation_sink& downstream, std::size_t max_bytes = default_max_bytes);
  operation_batch(const operation_batch&) = delete;
  operation_batch& operator=(const operation_batch&) = delete;

  void on_operation(const lock_operation& op) override;
  void on_session_event(const session_event& ev) override;
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override;

  // Passes on every call held, in order. If the downstream sink throws, the calls not
  // yet made are dropped and the exception propagates.
  void flush();
  bool empty() const noexcept { return filled_ == 0; }

 private:
  struct record_writer;  // writes the calls into buffer_
  friend struct record_writer;
  std::byte* reserve(std::size_t bytes);

  lock_operation_sink& downstream_;
  std::size_t max_bytes_;
  std::vector<std::byte> buffer_;
  std::size_t filled_ = 0;
};

}  // namespace lockscope::analyzer
