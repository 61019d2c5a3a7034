// A RESP message kept as a flat, reusable list of nodes plus one text buffer.
//
// The session fills one message per command and per reply from the decoder's node
// stream. Clearing keeps the capacity, so steady-state decoding allocates nothing.
// Bulk pieces and streamed-string chunks are joined into one node; `stream_end`
// markers are dropped (children are found by depth, not by count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/resp/format.hpp"
#include "lockscope/resp/types.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::ingest {

// Starts loading the cache lines of [p, p + bytes): for what a later stage reads cold
// (a pending command when its reply arrives).
inline void prefetch_lines(const void* p, std::size_t bytes) noexcept {
  const char* c = static_cast<const char*>(p);
  for (std::size_t at = 0; at < bytes; at += 64) __builtin_prefetch(c + at);
}

struct message_node {
  resp::type type = resp::type::null;
  std::uint8_t flags = 0;      // resp::node_flags as received
  std::uint32_t depth = 0;
  std::uint64_t length = 0;    // as on the wire (see resp::node::length)
  std::int64_t integer = 0;
  std::uint32_t text_offset = 0;
  std::uint32_t text_size = 0;
};

class message {
 public:
  // Appends a decoder node. Text beyond `max_text` bytes per message is dropped and
  // counted in truncated_bytes(); so are the nodes after the first max_text / 16 (an
  // LRANGE or KEYS reply of millions of elements would otherwise take 40 bytes each),
  // counted in dropped_nodes(): the message keeps the first elements, and its reply
  // still ends where the wire's does.
  void add(const resp::node& n, std::size_t max_text);
  static constexpr std::size_t bytes_per_kept_node = 16;
  // add(n, max_text) for the message's one node: an empty message, and a whole node with
  // no parts (no aggregate, attribute or stream) whose text is within max_text.
  void add_whole(const resp::node& n) {
    if (!n.value.empty()) text_.assign(n.value.data(), n.value.size());
    nodes_.push_back(message_node{n.type, n.flags, n.depth, n.length, n.integer, 0, static_cast<std::uint32_t>(n.value.size())});
  }
  // A one-node message (used for replication preamble lines).
  void set_single(resp::type t, std::string_view text);
  // Node `index`'s text becomes `text` (redaction: a copy of a reply with its secrets
  // masked). The old text stays in the buffer, unreferenced.
  void replace_text(std::size_t index, std::string_view text);
  void clear() noexcept {
    nodes_.clear();
    text_.clear();
    truncated_ = 0;
    dropped_nodes_ = 0;
    bulk_open_ = false;
    dropping_ = false;
  }
  // clear(), and each buffer's memory released when it exceeds `keep` bytes; the bytes freed.
  std::size_t clear_and_trim(std::size_t keep);
  // Neither buffer exceeds `keep` bytes: clear_and_trim(keep) would free nothing.
  bool holds_at_most(std::size_t keep) const noexcept {
    return text_.capacity() <= keep && nodes_.capacity() * sizeof(message_node) <= keep;
  }
  // Bytes this message holds (nodes and text), as counted against memory caps.
  std::size_t footprint() const noexcept { return nodes_.size() * sizeof(message_node) + text_.size(); }
  // Heap bytes held (in use or kept for the next message).
  std::size_t capacity_bytes() const noexcept { return nodes_.capacity() * sizeof(message_node) + text_.capacity(); }

  bool empty() const noexcept { return nodes_.empty(); }
  std::span<const message_node> nodes() const noexcept { return nodes_; }
  std::string_view text(const message_node& n) const noexcept {
    return std::string_view(text_).substr(n.text_offset, n.text_size);
  }
  std::uint64_t truncated_bytes() const noexcept { return truncated_; }
  std::uint64_t dropped_nodes() const noexcept { return dropped_nodes_; }
  // Starts loading the first `max_bytes` of its nodes and of its text into the cache: a
  // pipelined command waits long for its reply, and is long evicted when it comes.
  void prefetch(std::size_t max_bytes = 512) const noexcept;

  // Index of the top-level value, after any leading attribute; npos when empty.
  std::size_t root() const noexcept {
    if (!nodes_.empty() && nodes_.front().type != resp::type::attribute) return 0;
    return root_after_attributes();
  }
  const message_node* root_node() const noexcept {
    const std::size_t r = root();
    return r == npos ? nullptr : &nodes_[r];
  }
  // Direct children of node `index` (attributes and their pairs skipped), in order.
  // Calls f(const message_node&) for each; stops early when f returns false.
  template <class F>
  void for_each_child(std::size_t index, F&& f) const {
    const std::uint32_t child_depth = nodes_[index].depth + 1;
    for (std::size_t i = index + 1; i < nodes_.size() && nodes_[i].depth >= child_depth; ++i) {
      if (nodes_[i].depth != child_depth) continue;
      if (nodes_[i].type == resp::type::attribute) {
        i = skip_subtree(i) - 1;
        continue;
      }
      if (!f(nodes_[i])) return;
    }
  }
  // One past the last node of the subtree rooted at `index`.
  std::size_t skip_subtree(std::size_t index) const noexcept;

  // The command's arguments when this message is an array of strings (request side).
  // Fills `out` (cleared first); false when the root is not an array.
  bool arguments(std::vector<std::string_view>& out) const;

  // A value tree (allocates; for output and tests, not the hot path).
  resp::value to_value() const;

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  resp::value value_at(std::size_t& index) const;
  std::size_t root_after_attributes() const noexcept;

  std::vector<message_node> nodes_;
  std::string text_;
  std::uint64_t truncated_ = 0;
  std::uint64_t dropped_nodes_ = 0;
  bool bulk_open_ = false;  // the last node is a bulk still receiving pieces
  bool dropping_ = false;   // the node cap was reached: the rest of the message is dropped
};

// JSON for a message: strings as JSON strings (bytes that are not valid UTF-8 as
// \u00XX), integers as numbers, null, true/false, finite doubles as numbers and
// inf/nan as strings, big numbers as strings, errors as their text, arrays/sets/pushes
// as arrays, maps as objects keyed by the key's text. Attributes are left out.
void append_json(std::string& out, const message& m);
// A JSON string literal with the escaping above.
void append_json_string(std::string& out, std::string_view s);
// The length of the valid UTF-8 sequence at s[i] (2 to 4 bytes), or 0 (ASCII, or not
// valid: append_json_string writes such a byte as \u00XX).
using resp::utf8_sequence;

// The reply as redis-cli writes it, on one line: `(integer) 1`, `"v"`, `(nil)`,
// `1) "message" 2) "ch" 3) "0"`.
std::string to_cli_line(const message& m);

}  // namespace lockscope::ingest
