// RESP2/RESP3 encoder: appends to a caller-owned std::string without allocating per
// element (only when the string itself must grow).
//
//   std::string out;
//   lockscope::resp::append_command(out, "EVAL", script, 1, "myLock", 30000, owner);
//   lockscope::resp::writer(out).push(3).bulk_string("message").bulk_string(ch).bulk_string("0");
//
// Misuse (CR/LF inside a simple string, a malformed verbatim format) throws
// std::invalid_argument: it is a bug in the caller, not bad input from a peer.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockscope/resp/types.hpp"

namespace lockscope::resp {

struct value;

class writer {
 public:
  explicit writer(std::string& out) noexcept : out_(out) {}

  writer& simple_string(std::string_view s);
  writer& simple_error(std::string_view s);
  writer& integer(std::int64_t i);
  writer& bulk_string(std::string_view s);
  writer& bulk_error(std::string_view s);
  writer& verbatim_string(std::string_view format, std::string_view text);
  writer& null();        // RESP3 `_`
  writer& null_bulk();   // RESP2 `$-1`
  writer& null_array();  // RESP2 `*-1`
  writer& boolean(bool b);
  writer& double_(double d);               // shortest round-trip form; inf, -inf, nan
  writer& double_text(std::string_view s); // a `,` value written as given (validated)
  writer& big_number(std::string_view digits);
  writer& array(std::uint64_t count);
  writer& map(std::uint64_t pairs);
  writer& set(std::uint64_t count);
  writer& attribute(std::uint64_t pairs);  // annotates the value written next
  writer& push(std::uint64_t count);
  // Streamed forms: `$?` + `;n` chunks + `;0`, and `*?`/`~?`/`%?` ... `.`.
  writer& streamed_string_begin();
  writer& streamed_string_chunk(std::string_view chunk);  // must not be empty
  writer& streamed_string_end();
  writer& streamed_aggregate_begin(type kind);            // array, set or map
  writer& stream_end();

 private:
  void header(char prefix, std::uint64_t n);
  void line(char prefix, std::string_view s);
  void body(char prefix, std::string_view s);
  std::string& out_;
};

// One command argument: a view, or a number rendered in decimal.
class argument {
 public:
  argument(std::string_view s) noexcept : text_(s) {}
  argument(const char* s) noexcept : text_(s) {}
  argument(const std::string& s) noexcept : text_(s) {}
  template <std::integral I>
  argument(I i) noexcept : text_(buffer_, static_cast<std::size_t>(
                                              std::to_chars(buffer_, buffer_ + sizeof buffer_, i).ptr - buffer_)) {}
  argument(double d) noexcept;
  argument(const argument&) = delete;
  argument& operator=(const argument&) = delete;
  std::string_view text() const noexcept { return text_; }

 private:
  char buffer_[32];
  std::string_view text_;
};

// Appends a command as an array of bulk strings.
void append_command(std::string& out, std::initializer_list<std::string_view> args);
template <class... Args>
void append_command(std::string& out, const Args&... args) {
  const argument converted[] = {argument(args)...};
  writer w(out);
  w.array(sizeof...(Args));
  for (const argument& a : converted) w.bulk_string(a.text());
}

// Appends a whole value tree, attributes and streamed forms included, so that decoding
// the output yields an equal value.
void encode(std::string& out, const value& v);

}  // namespace lockscope::resp
