// Carries lock operations from one thread to another, so that `lockscope analyze`
// decodes packets on one core while the timeline runs on another.
//
//   operation_pipe pipe;
//   std::thread ingest([&] {                 // producer: packets → ... → pipe
//     lock_recognizer recognizer(pipe);  ... packets ...;  pipe.close();
//   });
//   pipe.drain(timeline);                    // consumer: delivers until close()
//   ingest.join();
//
// The downstream sink sees exactly the calls the pipe received, in the same order:
// every field of every operation, session event and connection end is copied into a chunk, and the
// downstream call gets views into that chunk (valid during the call, as usual).
// Memory is bounded: `chunks` buffers of `chunk_bytes` (a record bigger than a chunk
// gets a chunk of its own size, given back to the default size when recycled); the
// producer waits while they are all in flight.
//
// If the downstream sink throws, drain() marks the pipe abandoned and rethrows:
// later writes are dropped without blocking, and the producer should check
// abandoned() and stop early.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::locks {

class operation_pipe final : public lock_operation_sink {
 public:
  static constexpr std::size_t default_chunk_bytes = 128 * 1024;
  static constexpr std::size_t default_chunks = 4;

  explicit operation_pipe(std::size_t chunk_bytes = default_chunk_bytes, std::size_t chunks = default_chunks);
  operation_pipe(const operation_pipe&) = delete;
  operation_pipe& operator=(const operation_pipe&) = delete;

  // Producer side (one thread).
  void on_operation(const lock_operation& op) override;
  void on_session_event(const session_event& ev) override;
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override;
  // No more writes (they throw std::logic_error); drain() returns once it has
  // delivered everything before this. Idempotent.
  void close();
  bool abandoned() const noexcept { return abandoned_.load(std::memory_order_relaxed); }

  // Consumer side (one other thread): delivers to `downstream` until close().
  void drain(lock_operation_sink& downstream);

 private:
  using chunk = std::vector<std::byte>;
  struct record_writer;  // writes the calls into the chunk being filled
  friend struct record_writer;
  // Room for `bytes` more in the chunk being filled (handing it over when full).
  std::byte* reserve(std::size_t bytes);
  void hand_over();

  // The producer's own fields, then (a cache line apart, so that the consumer's
  // writes do not evict them) what both threads share.
  std::size_t chunk_bytes_;
  chunk filling_;
  std::size_t filled_ = 0;
  bool closed_ = false;

  alignas(64) std::mutex mutex_;
  std::condition_variable ready_cv_;  // the consumer waits for a full chunk or the end
  std::condition_variable free_cv_;   // the producer waits for an empty chunk
  std::deque<std::pair<chunk, std::size_t>> ready_;  // chunk, bytes used
  std::vector<chunk> free_;
  bool closing_ = false;
  std::atomic<bool> abandoned_{false};
};

}  // namespace lockscope::locks
