// Decoder errors as std::error_code values of a registered category.
#pragma once

#include <system_error>

namespace lockscope::resp {

enum class errc {
  unknown_type = 1,          // a type byte RESP2/RESP3 does not define
  invalid_integer,           // `:` or a length: bad sign or a non-digit
  integer_overflow,          // `:` outside [INT64_MIN, INT64_MAX]
  invalid_length,            // a length below -1 or with junk, or -1 where nulls are not allowed
  length_overflow,           // a length that does not fit in 64 bits
  bulk_too_long,             // a bulk length above limits::max_bulk_length
  too_many_elements,         // an aggregate count above limits::max_aggregate_elements
  nesting_too_deep,          // deeper than limits::max_depth
  invalid_double,            // `,` that is not a decimal, inf, -inf or nan
  invalid_boolean,           // `#` other than t or f
  invalid_null,              // `_` with a payload
  invalid_big_number,        // `(` that is not an optionally signed run of digits
  invalid_verbatim,          // `=` without a three-byte format and ':'
  missing_crlf,              // a header line or bulk body not followed by CRLF
  invalid_simple_string,     // a CR or LF inside `+`/`-` text
  line_too_long,             // a header, simple string or inline line above limits::max_line_length
  unbalanced_quotes,         // an inline command with an unterminated or misplaced quote
  push_not_top_level,        // `>` inside an aggregate
  invalid_stream_chunk,      // inside `$?`, something other than a `;n` chunk
  unexpected_stream_end,     // `.` outside a streamed aggregate, or after a map key
};

const std::error_category& category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace lockscope::resp

template <>
struct std::is_error_code_enum<lockscope::resp::errc> : std::true_type {};
