#include "operation_records.hpp"

#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "operation_texts.hpp"

namespace lockscope::locks::records {

namespace {

enum class record_type : std::uint8_t { operation, session_event, connection_end };

// A record is its header, then what the header says follows. Headers are copied in and
// out with memcpy: records are not aligned.
//
// An operation's record is the lock_operation itself, byte for byte (one copy: writing it
// field by field into a header of its own cost the ingest thread 250-340 instructions an
// operation), its two endpoints, then its texts back to back; the reader re-points the
// views and endpoint pointers into the record and leaves every other field as written.
struct operation_header {
  std::uint64_t size = 0;  // the whole record
  record_type type = record_type::operation;
};
static_assert(std::is_trivially_copyable_v<lock_operation> && std::is_trivially_copyable_v<endpoint>);
// The fields that point elsewhere (texts and endpoints) are the ones re-pointed below, in
// the order for_each_operation_text() lists them: a pointer or view added to
// lock_operation must be added there too, else the reader would get the producer's
// dangling one. This size says when to look.
static_assert(sizeof(lock_operation) == 256, "lock_operation changed: re-point any new view or pointer in the pipe");
constexpr std::size_t operation_at = 16;  // the lock_operation's offset in its record
static_assert(sizeof(operation_header) <= operation_at);
constexpr std::size_t endpoints_at = operation_at + sizeof(lock_operation);
constexpr std::size_t operation_texts_at = endpoints_at + 2 * sizeof(endpoint);


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

// The operation record at `p` (whose type is operation) into `op`; `ends` holds its
// endpoints. Its texts stay in the record.
struct operation_endpoints {
  endpoint client, server;
};
void read_operation(const std::byte* p, lock_operation& op, operation_endpoints& ends) {
  std::memcpy(static_cast<void*>(&op), p + operation_at, sizeof op);
  std::memcpy(static_cast<void*>(&ends), p + endpoints_at, sizeof ends);
  static_assert(sizeof(operation_endpoints) == 2 * sizeof(endpoint));
  const char* text = reinterpret_cast<const char*>(p + operation_texts_at);
  for_each_operation_text(op, [&](std::string_view& t) {
    t = std::string_view(text, t.size());
    text += t.size();
  });
  if (op.client != nullptr) op.client = &ends.client;
  if (op.server != nullptr) op.server = &ends.server;
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
  std::size_t texts = 0;
  for_each_operation_text(op, [&](std::string_view t) { texts += t.size(); });
  operation_header h;
  h.size = operation_texts_at + texts;
  std::byte* const record = out.reserve(h.size);
  std::memcpy(record, &h, sizeof h);
  std::memcpy(record + operation_at, static_cast<const void*>(&op), sizeof op);
  const endpoint none{};
  std::memcpy(record + endpoints_at, op.client != nullptr ? op.client : &none, sizeof(endpoint));
  std::memcpy(record + endpoints_at + sizeof(endpoint), op.server != nullptr ? op.server : &none, sizeof(endpoint));
  std::byte* p = record + operation_texts_at;
  for_each_operation_text(op, [&](std::string_view t) {
    if (!t.empty()) std::memcpy(p, t.data(), t.size());
    p += t.size();
  });
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
