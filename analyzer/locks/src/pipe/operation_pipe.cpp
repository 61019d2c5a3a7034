#include "lockscope/locks/operation_pipe.hpp"

#include "operation_records.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <cstdint>
#include <cstring>

namespace lockscope::locks {

operation_pipe::operation_pipe(std::size_t chunk_bytes, std::size_t chunks)
    : chunk_bytes_(std::max<std::size_t>(chunk_bytes, 4096)) {
  filling_.resize(chunk_bytes_);
  for (std::size_t i = 1; i < std::max<std::size_t>(chunks, 2); ++i) free_.emplace_back(chunk_bytes_);
}

struct operation_pipe::record_writer final : records::writer {
  explicit record_writer(operation_pipe& p) noexcept : pipe(p) {}
  std::byte* reserve(std::size_t bytes) override { return pipe.reserve(bytes); }
  void commit(std::size_t bytes) noexcept override { pipe.filled_ += bytes; }
  operation_pipe& pipe;
};

void operation_pipe::on_operation(const lock_operation& op) {
  record_writer out(*this);
  if (!abandoned()) records::write_operation(out, op);
}

void operation_pipe::on_session_event(const session_event& ev) {
  record_writer out(*this);
  if (!abandoned()) records::write_session_event(out, ev);
}

void operation_pipe::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  record_writer out(*this);
  if (!abandoned()) records::write_connection_end(out, connection, at_us);
}

std::byte* operation_pipe::reserve(std::size_t bytes) {
  if (closed_) throw std::logic_error("operation_pipe: written after close()");
  if (filled_ + bytes > filling_.size()) {
    if (filled_ > 0) hand_over();
    if (bytes > filling_.size()) filling_.resize(bytes);
  }
  return filling_.data() + filled_;
}

void operation_pipe::hand_over() {
  std::unique_lock lock(mutex_);
  if (abandoned()) {  // nobody reads any more: drop what was written
    filled_ = 0;
    return;
  }
  ready_.emplace_back(std::move(filling_), filled_);
  ready_cv_.notify_one();
  free_cv_.wait(lock, [this] { return !free_.empty() || abandoned(); });
  if (free_.empty()) filling_.resize(chunk_bytes_);  // abandoned while waiting
  else {
    filling_ = std::move(free_.back());
    free_.pop_back();
  }
  filled_ = 0;
}

void operation_pipe::close() {
  if (closed_) return;
  closed_ = true;
  {
    std::lock_guard lock(mutex_);
    if (filled_ > 0 && !abandoned()) ready_.emplace_back(std::move(filling_), filled_);
    filled_ = 0;
    closing_ = true;
  }
  ready_cv_.notify_one();
}

void operation_pipe::drain(lock_operation_sink& downstream) {
  for (;;) {
    std::pair<chunk, std::size_t> next;
    {
      std::unique_lock lock(mutex_);
      ready_cv_.wait(lock, [this] { return !ready_.empty() || closing_; });
      if (ready_.empty()) return;  // closed, and everything delivered
      next = std::move(ready_.front());
      ready_.pop_front();
    }
    try {
      records::deliver(next.first.data(), next.second, downstream);
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        abandoned_.store(true, std::memory_order_relaxed);
        ready_.clear();
      }
      free_cv_.notify_one();
      throw;
    }
    chunk& c = next.first;
    if (c.size() != chunk_bytes_) {  // a big record's chunk: back to the usual size
      c.resize(chunk_bytes_);
      c.shrink_to_fit();
    }
    {
      std::lock_guard lock(mutex_);
      free_.push_back(std::move(c));
    }
    free_cv_.notify_one();
  }
}

}  // namespace lockscope::locks
