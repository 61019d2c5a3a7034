// A convenience value tree built from the node stream, for clients and tests.
// Hot paths should consume nodes directly; this allocates.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/types.hpp"

namespace lockscope::resp {

struct value {
  resp::type type = resp::type::null;
  // node_flags::streamed, null_bulk, null_array or inline_command, as received.
  std::uint8_t flags = 0;
  // Strings, errors, verbatim ("txt:..." whole), big numbers and doubles as sent,
  // the digits of an integer, "t"/"f" for booleans.
  std::string text;
  std::int64_t integer = 0;
  // Aggregates, maps flattened as key, value, key, value. The chunks of a streamed
  // string, as streamed_string_part values.
  std::vector<value> elements;
  // Key, value pairs of the attribute that preceded this value, flattened.
  std::vector<value> attributes;

  bool operator==(const value&) const = default;

  bool is_null() const noexcept { return type == resp::type::null; }
  bool is_error() const noexcept {
    return type == resp::type::simple_error || type == resp::type::bulk_error;
  }
  bool is_string() const noexcept {
    return type == resp::type::simple_string || type == resp::type::bulk_string ||
           type == resp::type::verbatim_string;
  }
  bool boolean() const noexcept { return text == "t"; }
  // The double a `,` value denotes (inf, -inf and nan included).
  double as_double() const;
  // A verbatim string's three-byte format and its text.
  std::string_view verbatim_format() const;
  std::string_view verbatim_text() const;

  // Shorthands for building values in tests and clients.
  static value simple(std::string_view s) { return make(resp::type::simple_string, s); }
  static value bulk(std::string_view s) { return make(resp::type::bulk_string, s); }
  static value error(std::string_view s) { return make(resp::type::simple_error, s); }
  static value number(std::int64_t i);
  static value nil() { return value{}; }
  static value aggregate(resp::type t, std::vector<value> elements);
  static value make(resp::type t, std::string_view text);
};

// Builds complete top-level values from nodes and appends them to values().
class value_builder final : public handler {
 public:
  void on_node(const node& n) override;
  std::vector<value>& values() noexcept { return values_; }

 private:
  struct frame {
    value* target;
    std::uint64_t remaining;
    bool streamed;
    bool attribute;
    std::uint32_t depth;
  };
  value& new_slot(std::uint32_t depth);
  void value_done();

  std::vector<value> values_;
  value top_;
  std::vector<frame> frames_;
  std::deque<value> attribute_store_;           // by depth; a deque keeps pointers valid
  std::deque<std::vector<value>> pending_attributes_;
  std::vector<bool> has_pending_attributes_;
  value* bulk_ = nullptr;                        // the bulk value whose pieces are arriving
};

// Decodes every complete message in `bytes`. On a decode error, `ec` is set and the
// values before it are returned; `error_offset`, when given, receives its offset.
// Bytes of an incomplete trailing message are left undecoded; no error is set for them.
std::vector<value> parse(std::string_view bytes, std::error_code& ec,
                         const decoder_options& options = {},
                         std::uint64_t* error_offset = nullptr);

}  // namespace lockscope::resp
