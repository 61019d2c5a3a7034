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
// The texts an operation views are copied in: they may point into buffers the packet's
// processing reuses. The copy is viewed where it lies: the text buffer never moves while
// operations view it (an operation that would not fit passes on those held first).
// Steady state allocates nothing (the buffers keep their capacity).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::locks {

class operation_batch final : public lock_operation_sink {
 public:
  static constexpr std::size_t default_max_operations = 1024;
  static constexpr std::size_t default_max_text_bytes = 64 * 1024;

  // Calls are passed on once `max_operations` operations or `max_text_bytes` of their
  // texts are held (whichever comes first), and at flush().
  explicit operation_batch(lock_operation_sink& downstream, std::size_t max_operations = default_max_operations,
                           std::size_t max_text_bytes = default_max_text_bytes);
  operation_batch(const operation_batch&) = delete;
  operation_batch& operator=(const operation_batch&) = delete;

  void on_operation(const lock_operation& op) override;
  void on_session_event(const session_event& ev) override;
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override;

  // Passes on every call held, in order. If the downstream sink throws, the calls not
  // yet made are dropped and the exception propagates.
  void flush();
  bool empty() const noexcept { return order_.empty(); }

  // Operations announced together, a window ahead of their delivery (the timeline
  // loads their memory in stages as the operations before them are handled).
  static constexpr std::size_t window = 16;

 private:
  enum class call : std::uint8_t { operation, session_event, connection_end };
  struct held_event {
    session_event event;
    endpoint from, to;
  };
  struct held_end {
    std::uint64_t connection;
    std::int64_t at_us;
  };
  void deliver();
  // Announces the window of operations that starts at `first` (none past the end).
  void announce(std::size_t first);
  // Passes on what is held, then makes the text buffer hold at least `more` bytes.
  void make_room(std::size_t more);

  lock_operation_sink& downstream_;
  std::size_t max_operations_;
  std::size_t max_text_bytes_;
  // Held in arrival order per kind; order_ says how they interleave. The operations are
  // contiguous, so that a window of them is announced as it is. Their texts are copied
  // into text_ and their endpoints into addresses_, where they view them.
  std::vector<call> order_;
  std::vector<lock_operation> operations_;
  struct addresses {
    endpoint client, server;
  };
  std::vector<addresses> addresses_;  // one per operation (each used when op's pointer was set)
  std::vector<held_event> events_;
  std::vector<held_end> ends_;
  std::unique_ptr<char[]> text_;  // not zero-filled as it grows, unlike a std::string
  std::size_t text_size_ = 0;
  std::size_t text_capacity_ = 0;
};

}  // namespace lockscope::locks
