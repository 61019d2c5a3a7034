// The byte records operation_pipe and operation_batch carry sink calls in: every
// field of an operation, session event or connection end, texts included, so that the
// calls can be made again later (another thread, or after the packet's buffers went)
// exactly as received. Private to the locks library.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockscope/locks/lock_recognizer.hpp"

namespace lockscope::locks::records {

// Where records are written: reserve(n) gives room for n bytes, commit(n) keeps them.
class writer {
 public:
  virtual std::byte* reserve(std::size_t bytes) = 0;
  virtual void commit(std::size_t bytes) noexcept = 0;

 protected:
  ~writer() = default;
};

void write_operation(writer& out, const lock_operation& op);
void write_session_event(writer& out, const session_event& ev);
void write_connection_end(writer& out, std::uint64_t connection, std::int64_t at_us);

// Makes the calls recorded in [p, p + used) on `downstream`, in order. Operations go in
// windows announced through will_handle() first.
void deliver(const std::byte* p, std::size_t used, lock_operation_sink& downstream);

}  // namespace lockscope::locks::records
