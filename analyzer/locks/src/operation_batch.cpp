#include "lockscope/locks/operation_batch.hpp"

#include "operation_records.hpp"

namespace lockscope::analyzer {

struct operation_batch::record_writer final : records::writer {
  explicit record_writer(operation_batch& b) noexcept : batch(b) {}
  std::byte* reserve(std::size_t bytes) override { return batch.reserve(bytes); }
  void commit(std::size_t bytes) noexcept override { batch.filled_ += bytes; }
  operation_batch& batch;
};

operation_batch::operation_batch(lock_operation_sink& downstream, std::size_t max_bytes)
    : downstream_(downstream), max_bytes_(max_bytes) {}

void operation_batch::on_operation(const lock_operation& op) {
  record_writer out(*this);
  records::write_operation(out, op);
}

void operation_batch::on_session_event(const session_event& ev) {
  record_writer out(*this);
  records::write_session_event(out, ev);
}

void operation_batch::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  record_writer out(*this);
  records::write_connection_end(out, connection, at_us);
}

std::byte* operation_batch::reserve(std::size_t bytes) {
  if (filled_ > 0 && filled_ + bytes > max_bytes_) flush();
  if (buffer_.size() < filled_ + bytes) buffer_.resize(std::max(filled_ + bytes, max_bytes_));
  return buffer_.data() + filled_;
}

void operation_batch::flush() {
  const std::size_t used = filled_;
  filled_ = 0;  // a throwing downstream drops the rest
  if (used > 0) records::deliver(buffer_.data(), used, downstream_);
}

}  // namespace lockscope::analyzer
