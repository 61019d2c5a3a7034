// A count and its noun in agreement ("1 lock", "2 locks", "1 push"), for the summaries
// and messages people read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace lockscope::ingest {

// `plural` when the noun does not just take an s ("push", "pushes"; "reply", "replies").
inline std::string counted(std::uint64_t n, std::string_view singular, std::string_view plural = {}) {
  if (n == 1) return fmt::format("1 {}", singular);
  if (plural.empty()) return fmt::format("{} {}s", n, singular);
  return fmt::format("{} {}", n, plural);
}

}  // namespace lockscope::ingest
