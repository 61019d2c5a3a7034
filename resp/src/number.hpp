// Strict number grammar shared by the decoder and the value helpers.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockscope/resp/error.hpp"

namespace lockscope::resp {

// `:` payloads: an optional sign and 1+ digits, within int64.
errc parse_int64(std::string_view s, std::int64_t& out) noexcept;

struct parsed_length {
  errc error{};
  bool is_null = false;  // "-1", accepted only where the caller allows nulls
  std::uint64_t value = 0;
};
// Length and count headers: 1+ digits, or "-1" where allow_null.
parsed_length parse_length(std::string_view s, bool allow_null) noexcept;

// `,` payloads: a decimal with optional fraction and exponent, or inf/infinity/nan in
// any case and with an optional sign (older servers print "-nan", "NAN", "INF").
bool is_valid_double(std::string_view s) noexcept;

// `(` payloads: an optional sign and 1+ digits, of any length.
bool is_valid_big_number(std::string_view s) noexcept;

}  // namespace lockscope::resp
