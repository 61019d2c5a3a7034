// Shared helpers for the resp test suite: a recording handler, normalisation of
// partial bulk pieces, and decoding one input under several split strategies.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/error.hpp"
#include "lockscope/resp/types.hpp"
#include "lockscope/resp/value.hpp"
#include "lockscope/test/splitmix64.hpp"

// Readable Catch2 output for the library's enums and values. They live in the
// library's namespace so that argument-dependent lookup finds them.
namespace lockscope::resp {

inline std::string_view errc_name(errc e) {
  switch (e) {
    case errc::unknown_type: return "unknown_type";
    case errc::invalid_integer: return "invalid_integer";
    case errc::integer_overflow: return "integer_overflow";
    case errc::invalid_length: return "invalid_length";
    case errc::length_overflow: return "length_overflow";
    case errc::bulk_too_long: return "bulk_too_long";
    case errc::too_many_elements: return "too_many_elements";
    case errc::nesting_too_deep: return "nesting_too_deep";
    case errc::invalid_double: return "invalid_double";
    case errc::invalid_boolean: return "invalid_boolean";
    case errc::invalid_null: return "invalid_null";
    case errc::invalid_big_number: return "invalid_big_number";
    case errc::invalid_verbatim: return "invalid_verbatim";
    case errc::missing_crlf: return "missing_crlf";
    case errc::invalid_simple_string: return "invalid_simple_string";
    case errc::line_too_long: return "line_too_long";
    case errc::unbalanced_quotes: return "unbalanced_quotes";
    case errc::push_not_top_level: return "push_not_top_level";
    case errc::invalid_stream_chunk: return "invalid_stream_chunk";
    case errc::unexpected_stream_end: return "unexpected_stream_end";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& os, errc e) { return os << errc_name(e); }
inline std::ostream& operator<<(std::ostream& os, type t) { return os << to_string(t); }

}  // namespace lockscope::resp

namespace resp_test {

namespace resp = lockscope::resp;

// Bytes as a C-escaped string, for failure messages.
inline std::string printable(std::string_view s, std::size_t max = 200) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

// A node with its value copied out of the decoder's buffer.
struct recorded_node {
  resp::type kind{};
  std::uint8_t flags = 0;
  std::uint32_t depth = 0;
  std::uint64_t length = 0;
  std::string value;
  std::uint64_t value_offset = 0;
  std::int64_t integer = 0;

  bool operator==(const recorded_node&) const = default;
  bool has(std::uint8_t flag) const { return (flags & flag) != 0; }
};

inline std::ostream& operator<<(std::ostream& os, const recorded_node& n) {
  os << "{" << n.kind << " depth=" << n.depth << " length=";
  if (n.length == resp::unknown_length) os << "?";
  else os << n.length;
  os << " value=\"" << printable(n.value, 40) << "\"";
  if (n.value_offset != 0) os << " at=" << n.value_offset;
  if (n.integer != 0) os << " int=" << n.integer;
  if (n.flags != 0) {
    os << " flags=";
    if (n.has(resp::node_flags::partial)) os << "P";
    if (n.has(resp::node_flags::streamed)) os << "S";
    if (n.has(resp::node_flags::ends_message)) os << "E";
    if (n.has(resp::node_flags::null_bulk)) os << "B";
    if (n.has(resp::node_flags::null_array)) os << "A";
    if (n.has(resp::node_flags::inline_command)) os << "I";
  }
  return os << "}";
}

inline recorded_node record(const resp::node& n) {
  return recorded_node{n.type, n.flags, n.depth, n.length, std::string(n.value), n.value_offset, n.integer};
}

// Shorthand for an expected (normalised) node.
inline recorded_node nd(resp::type t, std::uint32_t depth, std::uint64_t length, std::string_view value = {},
                        std::uint8_t flags = 0, std::int64_t integer = 0) {
  return recorded_node{t, flags, depth, length, std::string(value), 0, integer};
}

inline constexpr std::uint8_t kEnd = lockscope::resp::node_flags::ends_message;
inline constexpr std::uint8_t kStreamed = lockscope::resp::node_flags::streamed;

class recorder : public resp::handler {
 public:
  void on_node(const resp::node& n) override { nodes.push_back(record(n)); }
  std::vector<recorded_node> nodes;
};

// Merges the partial pieces of each bulk into the node that completes it. Pieces of a
// bulk that never completed (input cut short, or an error) are dropped, so that every
// split strategy yields the same list. `contiguous` turns false if a piece's
// value_offset does not continue where the previous piece ended.
inline std::vector<recorded_node> normalize(const std::vector<recorded_node>& raw, bool& contiguous) {
  std::vector<recorded_node> out;
  contiguous = true;
  std::string pending;
  const recorded_node* first_piece = nullptr;
  for (const recorded_node& n : raw) {
    if (n.has(resp::node_flags::partial)) {
      if (!resp::is_bulk(n.kind)) contiguous = false;
      if (first_piece == nullptr) {
        first_piece = &n;
        if (n.value_offset != 0) contiguous = false;
      } else if (n.value_offset != pending.size() || n.kind != first_piece->kind ||
                 n.depth != first_piece->depth || n.length != first_piece->length) {
        contiguous = false;
      }
      pending += n.value;
      continue;
    }
    recorded_node merged = n;
    if (first_piece != nullptr) {
      if (n.value_offset != pending.size() || n.kind != first_piece->kind || n.depth != first_piece->depth ||
          n.length != first_piece->length) {
        contiguous = false;
      }
      merged.value = pending + n.value;
      merged.value_offset = 0;
      pending.clear();
      first_piece = nullptr;
    } else if (n.value_offset != 0) {
      contiguous = false;
    }
    out.push_back(std::move(merged));
  }
  return out;
}

using rng = lockscope::test::splitmix64;

enum class split { whole, byte_by_byte, mss_1460, chunks_16k, random };

inline const char* split_name(split s) {
  switch (s) {
    case split::whole: return "whole";
    case split::byte_by_byte: return "byte by byte";
    case split::mss_1460: return "1460-byte chunks";
    case split::chunks_16k: return "16 KiB chunks";
    case split::random: return "random chunks";
  }
  return "?";
}

inline constexpr split all_splits[] = {split::whole, split::byte_by_byte, split::mss_1460, split::chunks_16k,
                                       split::random};

// Chunk sizes that cover `size` bytes according to the strategy.
inline std::vector<std::size_t> chunk_sizes(std::size_t size, split how, std::uint64_t seed = 1) {
  std::vector<std::size_t> sizes;
  std::size_t fixed = 0;
  switch (how) {
    case split::whole: fixed = size; break;
    case split::byte_by_byte: fixed = 1; break;
    case split::mss_1460: fixed = 1460; break;
    case split::chunks_16k: fixed = 16 * 1024; break;
    case split::random: break;
  }
  rng r(seed);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = fixed;
    if (how == split::random) n = r.chance(10) ? r.between(1, 3000) : r.between(1, 24);
    if (n == 0 || n > size - done) n = size - done;
    sizes.push_back(n);
    done += n;
  }
  return sizes;
}

struct outcome {
  std::vector<recorded_node> nodes;  // normalised
  std::error_code error;
  std::uint64_t error_offset = 0;
  std::uint64_t consumed = 0;  // decoder::offset() at the end
  bool at_boundary = false;
  bool contiguous = true;
};

// Feeds `input` in chunks, each copied into its own short-lived buffer so that a view
// kept past its feed() call would be caught by ASan.
inline outcome decode(std::string_view input, split how, const resp::decoder_options& options = {},
                      std::uint64_t seed = 1) {
  resp::decoder d(options);
  recorder rec;
  std::size_t at = 0;
  for (std::size_t n : chunk_sizes(input.size(), how, seed)) {
    auto chunk = std::make_unique<char[]>(n);
    std::copy_n(input.data() + at, n, chunk.get());
    const std::size_t used = d.feed(std::string_view(chunk.get(), n), rec);
    at += n;
    if (d.error()) break;
    // Without an error or a pause the decoder must take every byte.
    REQUIRE(used == n);
  }
  outcome o;
  o.nodes = normalize(rec.nodes, o.contiguous);
  o.error = d.error();
  o.error_offset = d.error_offset();
  o.consumed = d.offset();
  o.at_boundary = d.at_message_boundary();
  return o;
}

// Decodes `input` under every split strategy (and several random seeds), checks that
// they agree on the nodes, the verdict and the error offset, and returns the result
// of the whole-buffer decode.
inline outcome decode_every_way(std::string_view input, const resp::decoder_options& options = {}) {
  INFO("input: \"" << printable(input) << "\"");
  const outcome whole = decode(input, split::whole, options);
  CHECK(whole.contiguous);
  for (split how : all_splits) {
    const int seeds = how == split::random ? 4 : 1;
    for (int seed = 1; seed <= seeds; ++seed) {
      if (how == split::whole) continue;
      INFO("split: " << split_name(how) << " seed " << seed);
      const outcome o = decode(input, how, options, static_cast<std::uint64_t>(seed));
      CHECK(o.contiguous);
      CHECK(o.nodes == whole.nodes);
      CHECK(o.error == whole.error);
      CHECK(o.error_offset == whole.error_offset);
      CHECK(o.at_boundary == whole.at_boundary);
      if (!whole.error) CHECK(o.consumed == input.size());
    }
  }
  return whole;
}

// Decodes a complete, valid input every way and returns its nodes.
inline std::vector<recorded_node> nodes_of(std::string_view input, const resp::decoder_options& options = {}) {
  const outcome o = decode_every_way(input, options);
  INFO("input: \"" << printable(input) << "\"");
  CHECK_FALSE(o.error);
  CHECK(o.at_boundary);
  return o.nodes;
}

struct failure {
  resp::errc error{};
  std::uint64_t offset = 0;
  bool operator==(const failure&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const failure& f) {
  return os << f.error << " at " << f.offset;
}

// Decodes a bad input every way and returns its error (errc{} if there is none).
inline failure failure_of(std::string_view input, const resp::decoder_options& options = {}) {
  const outcome o = decode_every_way(input, options);
  if (!o.error) return failure{};
  CHECK(o.error.category() == resp::category());
  return failure{static_cast<resp::errc>(o.error.value()), o.error_offset};
}

inline failure fails(resp::errc e, std::uint64_t offset) { return failure{e, offset}; }

// Values decoded from a whole buffer; the input must be error-free.
inline std::vector<resp::value> values_of(std::string_view input, const resp::decoder_options& options = {}) {
  std::error_code ec;
  std::vector<resp::value> values = resp::parse(input, ec, options);
  INFO("input: \"" << printable(input) << "\"");
  CHECK_FALSE(ec);
  return values;
}

// A structural dump of a value for failure messages.
inline void dump(std::ostream& os, const resp::value& v) {
  if (!v.attributes.empty()) {
    os << "|{";
    for (const auto& a : v.attributes) {
      dump(os, a);
      os << ' ';
    }
    os << "}";
  }
  os << v.type;
  if (v.flags != 0) os << "/f" << int(v.flags);
  if (!v.text.empty()) os << " \"" << printable(v.text, 60) << "\"";
  if (v.integer != 0) os << " i=" << v.integer;
  if (!v.elements.empty()) {
    os << " [";
    for (const auto& e : v.elements) {
      dump(os, e);
      os << ", ";
    }
    os << "]";
  }
}

}  // namespace resp_test

namespace lockscope::resp {
inline std::ostream& operator<<(std::ostream& os, const value& v) {
  resp_test::dump(os, v);
  return os;
}
}  // namespace lockscope::resp
