// Checks of numeric option values, for CLI11's ->check().
//
// CLI11's own Range lets NaN through (every comparison with it is false), and its
// PositiveNumber, refusing a value, names its limit as DBL_MAX written out in 309 digits.
// These refuse NaN and infinities, and say what the value must be:
//   --long-hold: must be a number more than 0 and at most 1e+09 (got nan)
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace lockscope::cli {

// A finite number above `low` (or at least `low`, when `low_inclusive`) and at most `high`.
// Durations are turned into int64 microseconds: `high` keeps them far from overflowing.
inline CLI::Validator number_check(double low, bool low_inclusive, double high = 1e9) {
  const std::string rule =
      fmt::format("a number {} {} and at most {}", low_inclusive ? "at least" : "more than", low, high);
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(input, v) || !std::isfinite(v) || v > high || (low_inclusive ? v < low : v <= low)) {
          return fmt::format("must be {} (got {})", rule, input);
        }
        return {};
      },
      rule);
}

inline CLI::Validator more_than_zero(double high = 1e9) { return number_check(0, false, high); }
inline CLI::Validator zero_or_more(double high = 1e9) { return number_check(0, true, high); }

// A value that may not be empty: `-Z ""` would mean "no -Z" and `--metrics-listen ""`
// "no metrics", silently. `what` says what it must be.
inline CLI::Validator not_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& input) -> std::string { return input.empty() ? "must be " + what + ", not empty" : ""; },
      "");
}

}  // namespace lockscope::cli
