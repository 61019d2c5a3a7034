// RESP2/RESP3 value types and the node record the decoder emits.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace lockscope::resp {

// Every type a RESP2 or RESP3 peer can send, plus the two markers that streamed
// forms need. Wire prefixes are in the comments.
enum class type : std::uint8_t {
  simple_string,          // +
  simple_error,           // -
  integer,                // :
  bulk_string,            // $  (also the head of a streamed string `$?`)
  array,                  // *
  null,                   // _  (and RESP2 `$-1` / `*-1`, see node_flags)
  boolean,                // #
  double_,                // ,
  big_number,             // (
  bulk_error,             // !
  verbatim_string,        // =
  map,                    // %
  set,                    // ~
  attribute,              // |
  push,                   // >
  streamed_string_part,   // ;  a chunk of a `$?` string; the `;0` chunk ends it
  stream_end,             // .  ends a `*?`, `~?` or `%?` aggregate
};

// The lowercase name used in JSON output and messages ("simple_string", "double", ...).
std::string_view to_string(type t) noexcept;

// True for array, map, set, attribute and push: nodes that are followed by children.
constexpr bool is_aggregate(type t) noexcept {
  return t == type::array || t == type::map || t == type::set || t == type::attribute ||
         t == type::push;
}

// Types whose payload is a length-prefixed body and may therefore arrive in pieces.
constexpr bool is_bulk(type t) noexcept {
  return t == type::bulk_string || t == type::bulk_error || t == type::verbatim_string ||
         t == type::streamed_string_part;
}

namespace node_flags {
// More pieces of this same bulk value follow; `value` is only the bytes fed so far.
inline constexpr std::uint8_t partial = 1u << 0;
// A streamed form: `$?` string or `*?`/`~?`/`%?` aggregate. Its length is unknown.
inline constexpr std::uint8_t streamed = 1u << 1;
// This node completes a top-level message (after its last child, if any).
inline constexpr std::uint8_t ends_message = 1u << 2;
// A RESP2 null sent as `$-1` (null bulk string).
inline constexpr std::uint8_t null_bulk = 1u << 3;
// A RESP2 null sent as `*-1` (null array).
inline constexpr std::uint8_t null_array = 1u << 4;
// An array built from an inline command line (request direction only).
inline constexpr std::uint8_t inline_command = 1u << 5;
// An inline line with an unbalanced quote, split on blanks as typed (quotes kept):
// redis-server answers it with a protocol error (decoder_options::unbalanced_as_command).
inline constexpr std::uint8_t unbalanced_quotes = 1u << 6;
}  // namespace node_flags

inline constexpr std::uint64_t unknown_length = std::numeric_limits<std::uint64_t>::max();

// One node of the pre-order stream. `value` is a view into the buffer passed to
// decoder::feed (or into the decoder's small line buffer when a line was split
// across feeds); it is valid only during the handler call.
struct node {
  resp::type type{};
  std::uint8_t flags = 0;
  // 0 for a top-level value; children of an aggregate are one deeper. An attribute's
  // annotated value has the same depth as the attribute.
  std::uint32_t depth = 0;
  // Aggregates: the count on the wire (pairs for map and attribute). Bulk types: the
  // total body length. Streamed heads: unknown_length. Others: the length of `value`.
  std::uint64_t length = 0;
  // The payload: text for simple types, digits for integers, bytes for bulk types.
  std::string_view value;
  // For a bulk delivered in pieces: where `value` starts within the whole body.
  std::uint64_t value_offset = 0;
  // The parsed number for type::integer.
  std::int64_t integer = 0;

  bool has(std::uint8_t flag) const noexcept { return (flags & flag) != 0; }
  bool is_partial() const noexcept { return has(node_flags::partial); }
  bool ends_message() const noexcept { return has(node_flags::ends_message); }
  bool boolean() const noexcept { return value == "t"; }
};

}  // namespace lockscope::resp
