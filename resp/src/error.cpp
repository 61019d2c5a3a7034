#include "lockscope/resp/error.hpp"

#include <string>

#include "lockscope/resp/types.hpp"

namespace lockscope::resp {

namespace {

class resp_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "lockscope.resp"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::unknown_type: return "unknown RESP type byte";
      case errc::invalid_integer: return "invalid integer: expected an optional sign and digits";
      case errc::integer_overflow: return "integer out of the 64-bit signed range";
      case errc::invalid_length: return "invalid length or count";
      case errc::length_overflow: return "length or count does not fit in 64 bits";
      case errc::bulk_too_long: return "bulk length above the configured limit";
      case errc::too_many_elements: return "aggregate count above the configured limit";
      case errc::nesting_too_deep: return "aggregates nested deeper than the configured limit";
      case errc::invalid_double: return "invalid double";
      case errc::invalid_boolean: return "invalid boolean: expected t or f";
      case errc::invalid_null: return "null with a payload";
      case errc::invalid_big_number: return "invalid big number";
      case errc::invalid_verbatim: return "verbatim string without a 3-byte format and ':'";
      case errc::missing_crlf: return "expected CRLF";
      case errc::invalid_simple_string: return "CR or LF inside a simple string";
      case errc::line_too_long: return "line above the configured length limit";
      case errc::unbalanced_quotes: return "unbalanced quotes in inline command";
      case errc::push_not_top_level: return "push inside an aggregate";
      case errc::invalid_stream_chunk: return "expected a ;<length> chunk inside a streamed string";
      case errc::unexpected_stream_end: return "stream end marker outside a streamed aggregate";
    }
    return "unknown lockscope.resp error";
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const resp_category instance;
  return instance;
}

std::string_view to_string(type t) noexcept {
  switch (t) {
    case type::simple_string: return "simple_string";
    case type::simple_error: return "error";
    case type::integer: return "integer";
    case type::bulk_string: return "bulk_string";
    case type::array: return "array";
    case type::null: return "null";
    case type::boolean: return "boolean";
    case type::double_: return "double";
    case type::big_number: return "big_number";
    case type::bulk_error: return "bulk_error";
    case type::verbatim_string: return "verbatim_string";
    case type::map: return "map";
    case type::set: return "set";
    case type::attribute: return "attribute";
    case type::push: return "push";
    case type::streamed_string_part: return "streamed_string_part";
    case type::stream_end: return "stream_end";
  }
  return "unknown";
}

}  // namespace lockscope::resp
