#include "number.hpp"

namespace lockscope::resp {

namespace {
bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

bool iequals(std::string_view a, std::string_view lower) noexcept {
  if (a.size() != lower.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}
}  // namespace

errc parse_int64(std::string_view s, std::int64_t& out) noexcept {
  std::size_t i = 0;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return errc::invalid_integer;
  // Accumulate the magnitude unsigned; INT64_MIN's magnitude is INT64_MAX + 1.
  const std::uint64_t limit = negative ? 9223372036854775808ull : 9223372036854775807ull;
  std::uint64_t magnitude = 0;
  bool overflow = false;
  for (; i < s.size(); ++i) {
    if (!is_digit(s[i])) return errc::invalid_integer;
    const unsigned digit = static_cast<unsigned>(s[i] - '0');
    if (magnitude > (limit - digit) / 10) overflow = true;
    else magnitude = magnitude * 10 + digit;
  }
  if (overflow) return errc::integer_overflow;
  out = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return errc{};
}

parsed_length parse_length(std::string_view s, bool allow_null) noexcept {
  parsed_length r;
  if (s.empty()) {
    r.error = errc::invalid_length;
    return r;
  }
  if (s[0] == '-') {
    if (s == "-1" && allow_null) r.is_null = true;
    else r.error = errc::invalid_length;
    return r;
  }
  std::uint64_t value = 0;
  for (char c : s) {
    if (!is_digit(c)) {
      r.error = errc::invalid_length;
      return r;
    }
    const unsigned digit = static_cast<unsigned>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      r.error = errc::length_overflow;
      return r;
    }
    value = value * 10 + digit;
  }
  r.value = value;
  return r;
}

bool is_valid_double(std::string_view s) noexcept {
  std::size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) i = 1;
  const std::string_view rest = s.substr(i);
  if (iequals(rest, "inf") || iequals(rest, "infinity") || iequals(rest, "nan")) return true;
  std::size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    std::size_t exponent_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == s.size();
}

bool is_valid_big_number(std::string_view s) noexcept {
  std::size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) i = 1;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!is_digit(s[i])) return false;
  }
  return true;
}

}  // namespace lockscope::resp
