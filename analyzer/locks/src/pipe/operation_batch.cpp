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
      max_text_bytes_(max_text_bytes) {
  // Never more held than this: the operations' pointers into addresses_ stay put.
  operations_.reserve(max_operations_);
  addresses_.reserve(max_operations_);
}

void operation_batch::on_operation(const lock_operation& op) {
  std::size_t total = 0;
  for_each_operation_text(op, [&](const std::string_view& f) { total += f.size(); });
  if (text_size_ + total > text_capacity_) make_room(total);
  lock_operation& held = operations_.emplace_back(op);
  // Viewed where they are copied to: text_ does not move while they are held.
  char* out = text_.get() + text_size_;
  for_each_operation_text(held, [&](std::string_view& f) {
    // Most of the fields are empty (an acquire names no channel, message, redirect or
    // client name): viewed in place as a copy would view them, without the copy's tests.
    if (f.empty()) {
      f = std::string_view(out, 0);
      return;
    }
    const char* at = out;
    out = ingest::copy_bytes(out, f);
    f = std::string_view(at, f.size());
  });
  text_size_ += total;
  addresses& a = addresses_.emplace_back();
  if (held.client != nullptr) {
    a.client = *held.client;
    held.client = &a.client;
  }
  if (held.server != nullptr) {
    a.server = *held.server;
    held.server = &a.server;
  }
  order_.push_back(call::operation);
  if (operations_.size() >= max_operations_ || text_size_ >= max_text_bytes_) flush();
}

void operation_batch::make_room(std::size_t more) {
  flush();  // what is held views the buffer as it is
  if (more > text_capacity_) {
    text_capacity_ = std::max({more, max_text_bytes_ + max_text_bytes_ / 4, std::size_t{4096}});
    text_ = std::make_unique_for_overwrite<char[]>(text_capacity_);
  }
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
  // The events' pointers into their own copies, now that events_ does not move.
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
