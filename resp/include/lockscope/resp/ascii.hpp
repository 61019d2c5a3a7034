// ASCII case folding for Redis command names, keywords and hex digests. Redis
// compares command names byte-wise after ASCII folding (not locale-aware), and so
// does every lockscope component.
#pragma once

#include <cstddef>
#include <string_view>

namespace lockscope::resp {

constexpr char ascii_lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// True when a and b are equal after ASCII folding.
constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

}  // namespace lockscope::resp
