// Incremental, zero-copy RESP2/RESP3 push decoder.
//
//   struct printer : lockscope::resp::handler {
//     void on_node(const lockscope::resp::node& n) override { ... }
//   } h;
//   lockscope::resp::decoder d;
//   d.feed(chunk, h);            // any chunking: one byte, a segment, a read
//   if (d.error()) report(d.error(), d.error_offset());
//
// The decoder emits a pre-order stream of nodes. It keeps no copy of the input
// except a partial header line (bounded by max_line_length); bulk bodies that span
// feeds are delivered in pieces flagged node_flags::partial, so memory stays
// bounded whatever the value size. Work is O(1) per byte: consumed bytes are never
// scanned again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/resp/error.hpp"
#include "lockscope/resp/types.hpp"

namespace lockscope::resp {

struct limits {
  std::uint32_t max_depth = 128;                          // nesting levels below the top
  std::uint64_t max_aggregate_elements = 0xFFFFFFFFull;   // 2^32-1
  std::uint64_t max_bulk_length = 512ull * 1024 * 1024;   // like proto-max-bulk-len
  std::size_t max_line_length = 64 * 1024;                // inline commands and header lines
};

struct decoder_options {
  resp::limits limits{};
  // Accept redis-server's inline command syntax (`SET k v\r\n`). Only requests use it.
  bool allow_inline = false;
  // With allow_inline: an inline line with an unbalanced quote is not an error but a
  // command flagged node_flags::unbalanced_quotes, its words split on blanks as typed
  // (what an observer shows; redis-server replies with a protocol error and closes).
  bool unbalanced_as_command = false;
};

// Receives the node stream. Views in the node are valid only during the call.
class handler {
 public:
  virtual ~handler() = default;
  virtual void on_node(const node& n) = 0;

  // A cheaper delivery for the commonest request, offered only to a handler that asked
  // for it with want_bulk_arrays(true): a whole top-level array of 1 to
  // max_bulk_array_elements bulk strings (no nulls) found complete in one feed, with
  // nothing pending before it. `frame` is its bytes on the wire, `elements` the bulk
  // bodies (views into `frame`); both are valid during the call only. Return true when
  // taken: the decoder then moves past the frame as if it had delivered the array's
  // nodes (a pause() inside the call stops feed() right after the frame). Return false
  // to decline: the frame is then delivered node by node, exactly as to any handler.
  virtual bool on_bulk_array(std::string_view frame, std::span<const std::string_view> elements) {
    (void)frame;
    (void)elements;
    return false;
  }
  bool wants_bulk_arrays() const noexcept { return wants_bulk_arrays_; }
  void want_bulk_arrays(bool on) noexcept { wants_bulk_arrays_ = on; }

 private:
  bool wants_bulk_arrays_ = false;
};

// The largest array offered to handler::on_bulk_array (longer ones come as nodes).
inline constexpr std::size_t max_bulk_array_elements = 64;

class decoder {
 public:
  decoder() : decoder(decoder_options{}) {}
  explicit decoder(const decoder_options& options);

  // Decodes as much of `bytes` as possible and returns how many bytes were consumed.
  // That is all of them unless an error occurs or the handler calls pause(); bytes of
  // an incomplete header line are consumed into an internal buffer.
  std::size_t feed(std::string_view bytes, handler& h);

  // Called from within on_node: feed() returns right after the current node, so the
  // caller can change how the rest of the stream is read (e.g. a replication stream).
  void pause() noexcept { paused_ = true; }

  // The sticky error, if any; feed() consumes nothing until reset().
  std::error_code error() const noexcept { return error_; }
  // Offset in the whole stream (bytes since construction or reset) of the bad byte.
  std::uint64_t error_offset() const noexcept { return error_offset_; }
  // Bytes consumed since construction or reset.
  std::uint64_t offset() const noexcept { return consumed_; }
  // True between messages: no partial value is pending.
  bool at_message_boundary() const noexcept;

  void reset() noexcept;

  const decoder_options& options() const noexcept { return options_; }

 private:
  struct frame {
    type kind;
    bool streamed;
    std::uint64_t remaining;  // children still to come (unused when streamed)
    std::uint64_t seen;       // children seen (a streamed map must end after a value)
    bool attribute_pending = false;  // an attribute here awaits the value it annotates
  };
  enum class state : std::uint8_t { header, bulk_body, bulk_crlf };

  bool try_fast_header(std::string_view bytes, std::size_t& pos, handler& h);
  bool try_bulk_array(std::string_view bytes, std::size_t& pos, handler& h);
  bool take_line(std::string_view bytes, std::size_t& pos, std::string_view& line,
                 std::uint64_t& line_offset);
  void parse_line(std::string_view line, std::uint64_t at, handler& h);
  void parse_inline(std::string_view line, std::uint64_t at, handler& h);
  void unbalanced_inline(std::string_view line, std::uint64_t bad_at, handler& h);
  void emit_inline(std::uint8_t flags, handler& h);
  void open_aggregate(type kind, std::string_view content, std::uint64_t at, handler& h);
  void open_bulk(type kind, std::string_view content, std::uint64_t at, handler& h);
  void start_bulk(type kind, std::uint64_t length);
  void read_bulk_body(std::string_view bytes, std::size_t& pos, handler& h);
  void read_bulk_crlf(std::string_view bytes, std::size_t& pos, handler& h);
  void emit_leaf(node& n, std::uint64_t at, handler& h);
  void emit_bulk_piece(std::string_view piece, bool last, handler& h);
  bool check_value_position(type kind, std::uint64_t at);
  bool push_frame(type kind, bool streamed, std::uint64_t remaining, std::uint64_t at);
  void value_completed(node& n) noexcept;
  // value_completed for a leaf, with a top-level reply (the common case) done inline.
  void scalar_completed(node& n) noexcept {
    if (stack_.empty() && !top_attribute_pending_) {
      n.flags |= node_flags::ends_message;
      return;
    }
    value_completed(n);
  }
  void mark_attribute_done() noexcept;
  std::uint32_t depth() const noexcept { return static_cast<std::uint32_t>(stack_.size()); }
  bool fail(errc e, std::uint64_t at) noexcept;

  decoder_options options_;
  std::vector<frame> stack_;  // grows to the deepest nesting seen, then no allocation per message
  std::string line_;          // a header line split across feeds
  std::string inline_scratch_;
  std::vector<std::string_view> inline_args_;
  std::vector<std::string_view> array_elements_;  // try_bulk_array's scratch
  std::uint64_t line_start_ = 0;
  bool line_pending_ = false;
  bool top_attribute_pending_ = false;  // a top-level attribute awaits its value
  state state_ = state::header;
  bool paused_ = false;
  type bulk_type_ = type::bulk_string;
  std::uint32_t bulk_depth_ = 0;
  std::uint64_t bulk_length_ = 0;
  std::uint64_t bulk_done_ = 0;
  std::uint8_t crlf_seen_ = 0;
  std::uint64_t base_ = 0;      // stream offset of the current feed's first byte
  std::uint64_t consumed_ = 0;
  std::error_code error_;
  std::uint64_t error_offset_ = 0;
};

}  // namespace lockscope::resp
