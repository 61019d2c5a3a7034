#include "operation_records.hpp"

#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

namespace lockscope::locks::records {

namespace {

enum class record_type : std::uint8_t { operation, session_event, connection_end };

// A record is its header, then the header's texts back to back. Headers are copied in
// and out with memcpy: records are not aligned.
struct operation_header {
  std::uint64_t size = 0;  // the whole record
  record_type type = record_type::operation;
  lock_op_kind kind{};
  lock_family family{};
  op_outcome outcome{};
  bool inferred = false;
  bool shared = false;
  bool lease_added = false;
  bool server_dropped = false;
  bool has_client = false;
  bool has_server = false;
  cluster_reply redirect{};
  bool asking = false;
  std::int32_t db = 0;
  std::int32_t slot = -1;
  std::uint64_t lengths[8] = {};  // lock, owner, channel, message, client_text, server_text, redirect_to, client_name
  std::int64_t lease_ms = -1;
  std::int64_t ttl_ms = -1;
  std::int64_t token = -1;
  std::int64_t sub_count = -1;
  std::int64_t permits = -1;
  std::int64_t limit = -1;
  std::int64_t caller_now_ms = -1;
  std::uint64_t connection = 0;
  std::int64_t request_us = 0;
  std::int64_t reply_us = -1;
  std::int64_t opened_us = -1;
  endpoint client{};
  endpoint server{};
};
static_assert(std::is_trivially_copyable_v<operation_header>);
// A field added to lock_operation must be carried here too (sub_count once was not, and
// two threads then reported what one did not): this size says when to look.
static_assert(sizeof(lock_operation) == 256, "lock_operation changed: carry the new field through the pipe");

struct event_header {
  std::uint64_t size = sizeof(event_header);
  record_type type = record_type::session_event;
  session_event_kind kind{};
  bool from_client = false;
  bool has_from = false;
  bool has_to = false;
  int error_value = 0;
  const std::error_category* error_category = nullptr;  // static objects: safe to share
  std::uint64_t connection = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  endpoint from{};
  endpoint to{};
};
static_assert(std::is_trivially_copyable_v<event_header>);

struct end_header {
  std::uint64_t size = sizeof(end_header);
  record_type type = record_type::connection_end;
  std::uint64_t connection = 0;
  std::int64_t at_us = 0;
};
static_assert(std::is_trivially_copyable_v<end_header>);

// The operation record at `p` (whose type is operation) as a view; `ends` holds its
// endpoints. Returns the next record.
struct operation_endpoints {
  endpoint client, server;
};
const std::byte* read_operation(const std::byte* p, lock_operation& op, operation_endpoints& ends) {
  operation_header h;
  std::memcpy(&h, p, sizeof h);
  const char* text = reinterpret_cast<const char*>(p + sizeof h);
  std::string_view texts[8];
  for (int i = 0; i < 8; ++i) {
    texts[i] = std::string_view(text, h.lengths[i]);
    text += h.lengths[i];
  }
  op = lock_operation{};
  op.kind = h.kind;
  op.family = h.family;
  op.outcome = h.outcome;
  op.inferred = h.inferred;
  op.shared = h.shared;
  op.db = h.db;
  op.lease_added = h.lease_added;
  op.lock = texts[0];
  op.owner = texts[1];
  op.channel = texts[2];
  op.message = texts[3];
  op.client_text = texts[4];
  op.server_text = texts[5];
  op.redirect_to = texts[6];
  op.client_name = texts[7];
  op.redirect = h.redirect;
  op.asking = h.asking;
  op.slot = h.slot;
  op.lease_ms = h.lease_ms;
  op.ttl_ms = h.ttl_ms;
  op.token = h.token;
  op.sub_count = h.sub_count;
  op.permits = h.permits;
  op.limit = h.limit;
  op.caller_now_ms = h.caller_now_ms;
  op.server_dropped = h.server_dropped;
  op.connection = h.connection;
  ends.client = h.client;
  ends.server = h.server;
  op.client = h.has_client ? &ends.client : nullptr;
  op.server = h.has_server ? &ends.server : nullptr;
  op.request_us = h.request_us;
  op.reply_us = h.reply_us;
  op.opened_us = h.opened_us;
  return p + h.size;
}

record_type type_at(const std::byte* p) noexcept {
  record_type type;
  std::memcpy(&type, p + offsetof(operation_header, type), sizeof type);
  static_assert(offsetof(operation_header, type) == offsetof(event_header, type));
  static_assert(offsetof(operation_header, type) == offsetof(end_header, type));
  return type;
}

std::uint64_t size_at(const std::byte* p) noexcept {
  std::uint64_t size;
  std::memcpy(&size, p, sizeof size);
  static_assert(offsetof(operation_header, size) == 0 && offsetof(event_header, size) == 0 &&
                offsetof(end_header, size) == 0);
  return size;
}

}  // namespace

void write_operation(writer& out, const lock_operation& op) {
  const std::string_view texts[8] = {op.lock,        op.owner,       op.channel,     op.message,
                                     op.client_text, op.server_text, op.redirect_to, op.client_name};
  operation_header h;
  h.size = sizeof h;
  for (int i = 0; i < 8; ++i) {
    h.lengths[i] = texts[i].size();
    h.size += texts[i].size();
  }
  h.kind = op.kind;
  h.family = op.family;
  h.outcome = op.outcome;
  h.inferred = op.inferred;
  h.shared = op.shared;
  h.db = op.db;
  h.lease_added = op.lease_added;
  h.redirect = op.redirect;
  h.asking = op.asking;
  h.slot = op.slot;
  h.has_client = op.client != nullptr;
  if (op.client != nullptr) h.client = *op.client;
  h.has_server = op.server != nullptr;
  if (op.server != nullptr) h.server = *op.server;
  h.lease_ms = op.lease_ms;
  h.ttl_ms = op.ttl_ms;
  h.token = op.token;
  h.sub_count = op.sub_count;
  h.permits = op.permits;
  h.limit = op.limit;
  h.caller_now_ms = op.caller_now_ms;
  h.server_dropped = op.server_dropped;
  h.connection = op.connection;
  h.request_us = op.request_us;
  h.reply_us = op.reply_us;
  h.opened_us = op.opened_us;
  std::byte* p = out.reserve(h.size);
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  for (std::string_view t : texts) {
    if (!t.empty()) std::memcpy(p, t.data(), t.size());
    p += t.size();
  }
  out.commit(h.size);
}

void write_session_event(writer& out, const session_event& ev) {
  event_header h;
  h.kind = ev.kind;
  h.from_client = ev.from_client;
  h.has_from = ev.from != nullptr;
  h.has_to = ev.to != nullptr;
  if (ev.from != nullptr) h.from = *ev.from;
  if (ev.to != nullptr) h.to = *ev.to;
  h.error_value = ev.error.value();
  h.error_category = &ev.error.category();
  h.connection = ev.connection;
  h.offset = ev.offset;
  h.bytes = ev.bytes;
  std::memcpy(out.reserve(h.size), &h, sizeof h);
  out.commit(h.size);
}

void write_connection_end(writer& out, std::uint64_t connection, std::int64_t at_us) {
  end_header h;
  h.connection = connection;
  h.at_us = at_us;
  std::memcpy(out.reserve(h.size), &h, sizeof h);
  out.commit(h.size);
}

void deliver(const std::byte* p, std::size_t used, lock_operation_sink& downstream) {
  // In windows: the window's operations are announced (will_handle) before the first
  // is delivered, so that the downstream's memory loads for all of them overlap.
  constexpr std::size_t window = 16;
  lock_operation ops[window];
  operation_endpoints ends[window];
  const std::byte* const end = p + used;
  while (p < end) {
    std::size_t count = 0;
    const std::byte* q = p;
    for (; q < end && count < window; q += size_at(q)) {
      if (type_at(q) == record_type::operation) {
        read_operation(q, ops[count], ends[count]);
        ++count;
      }
    }
    if (count > 1) downstream.will_handle(std::span<const lock_operation>(ops, count));
    std::size_t next = 0;
    for (; p < q; p += size_at(p)) {
      const record_type type = type_at(p);
      if (type == record_type::operation) {
        downstream.on_operation(ops[next++]);
      } else if (type == record_type::connection_end) {
        end_header h;
        std::memcpy(&h, p, sizeof h);
        downstream.on_connection_end(h.connection, h.at_us);
      } else {
        event_header h;
        std::memcpy(&h, p, sizeof h);
        session_event ev;
        ev.kind = h.kind;
        ev.connection = h.connection;
        ev.from = h.has_from ? &h.from : nullptr;
        ev.to = h.has_to ? &h.to : nullptr;
        ev.from_client = h.from_client;
        ev.offset = h.offset;
        ev.bytes = h.bytes;
        ev.error = std::error_code(h.error_value, *h.error_category);
        downstream.on_session_event(ev);
      }
    }
  }
}

}  // namespace lockscope::locks::records
