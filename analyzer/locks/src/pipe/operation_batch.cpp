#include "lockscope/locks/operation_batch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "lockscope/ingest/short_bytes.hpp"
#include "operation_texts.hpp"

namespace lockscope::locks {

operation_batch::operation_batch(lock_operation_sink& downstream, std::size_t max_operations,
                                 std::size_t max_text_bytes)
    : downstream_(downstream),
      max_operations_(std::max<std::size_t>(max_operations, 1)),
      max_text_bytes_(max_text_bytes) {}

void operation_batch::on_operation(const lock_operation& op) {
  lock_operation& held = operations_.emplace_back(op);
  std::size_t total = 0;
  for_each_operation_text(held, [&](const std::string_view& f) { total += f.size(); });
  char* out = reserve_text(total) + text_size_;
  text_starts_.push_back(static_cast<std::uint32_t>(text_size_));
  for_each_operation_text(held, [&](const std::string_view& f) { out = ingest::copy_bytes(out, f); });
  text_size_ += total;
  addresses_.push_back({op.client != nullptr ? *op.client : endpoint{}, op.server != nullptr ? *op.server : endpoint{}});
  order_.push_back(call::operation);
  if (operations_.size() >= max_operations_ || text_size_ >= max_text_bytes_) flush();
}

char* operation_batch::reserve_text(std::size_t more) {
  if (text_size_ + more > text_capacity_) {
    const std::size_t capacity = std::max({text_size_ + more, 2 * text_capacity_, std::size_t{4096}});
    auto grown = std::make_unique_for_overwrite<char[]>(capacity);
    if (text_size_ > 0) std::memcpy(grown.get(), text_.get(), text_size_);
    text_ = std::move(grown);
    text_capacity_ = capacity;
  }
  return text_.get();
}

void operation_batch::on_session_event(const session_event& ev) {
  held_event& held = events_.emplace_back();
  held.event = ev;
  if (ev.from != nullptr) held.from = *ev.from;
  if (ev.to != nullptr) held.to = *ev.to;
  order_.push_back(call::session_event);
}

void operation_batch::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  ends_.push_back(held_end{connection, at_us});
  order_.push_back(call::connection_end);
}

void operation_batch::flush() {
  if (order_.empty()) return;
  // Emptied however delivery ends: a throwing downstream drops the rest.
  struct empty_after {
    operation_batch& batch;
    ~empty_after() {
      batch.order_.clear();
      batch.operations_.clear();
      batch.text_starts_.clear();
      batch.addresses_.clear();
      batch.events_.clear();
      batch.ends_.clear();
      batch.text_size_ = 0;
    }
  } emptied{*this};
  deliver();
}

void operation_batch::announce(std::size_t first) {
  if (first >= operations_.size()) return;
  const std::size_t count = std::min(window, operations_.size() - first);
  downstream_.will_handle(std::span<const lock_operation>(&operations_[first], count));
}

void operation_batch::deliver() {
  // The views and pointers into this batch's own copies, now that nothing moves.
  for (std::size_t k = 0; k < operations_.size(); ++k) {
    lock_operation& op = operations_[k];
    const char* at = text_.get() + text_starts_[k];
    for_each_operation_text(op, [&](std::string_view& f) {
      f = std::string_view(at, f.size());
      at += f.size();
    });
    if (op.client != nullptr) op.client = &addresses_[k].client;
    if (op.server != nullptr) op.server = &addresses_[k].server;
  }
  for (held_event& e : events_) {
    if (e.event.from != nullptr) e.event.from = &e.from;
    if (e.event.to != nullptr) e.event.to = &e.to;
  }
  std::size_t next_operation = 0, next_event = 0, next_end = 0;
  for (const call c : order_) {
    switch (c) {
      case call::operation: {
        // A window ahead: the next window is announced as this one starts, so that the
        // timeline's staged loads for its first operations begin while it handles this
        // one's last (the first window, alone, with the second).
        if (next_operation % window == 0) {
          if (next_operation == 0 && operations_.size() > 1) announce(0);
          announce(next_operation + window);
        }
        downstream_.on_operation(operations_[next_operation++]);
        break;
      }
      case call::session_event:
        downstream_.on_session_event(events_[next_event++].event);
        break;
      case call::connection_end: {
        const held_end& e = ends_[next_end++];
        downstream_.on_connection_end(e.connection, e.at_us);
        break;
      }
    }
  }
}

}  // namespace lockscope::locks
