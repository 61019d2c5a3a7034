// Equality and copies of the short texts handled per exchange or event (endpoints,
// owner ids, lock names: tens of bytes), inline and eight bytes at a time: a call to
// memcmp/memcpy costs more than the work at these sizes. Same results as
// `a == b` and std::memcpy (tests/locks/test_fast_paths.cpp compares them).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace lockscope::ingest {

namespace short_bytes_detail {
inline std::uint64_t load8(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load4(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
}  // namespace short_bytes_detail

// a == b. Reads only the bytes of a and b. Always inlined: a call is the cost it saves
// (the compiler once left it out of line in the groups' event path, 1% of analyze).
[[gnu::always_inline]] inline bool same_bytes(std::string_view a, std::string_view b) noexcept {
  using namespace short_bytes_detail;
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
      if (load8(x + i) != load8(y + i)) return false;
    }
    return load8(x + n - 8) == load8(y + n - 8);  // the last 8 (overlapping what was compared)
  }
  if (n >= 4) return load4(x) == load4(y) && load4(x + n - 4) == load4(y + n - 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

// std::memcpy(to, from.data(), from.size()); returns to + from.size(). Reads only the
// bytes of `from`, writes only [to, to + from.size()). Up to 128 bytes inline: a
// profile-guided build expands a memcpy of unknown size into `rep movsq`, whose start-up
// cost outweighs a short copy (half of the pairing's samples under the keep-up load);
// longer texts go to memcpy.
inline char* copy_bytes(char* to, std::string_view from) noexcept {
  using namespace short_bytes_detail;
  const std::size_t n = from.size();
  const char* p = from.data();
  if (n > 128) {
    std::memcpy(to, p, n);
  } else if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const std::uint64_t v = load8(p + i);
      std::memcpy(to + i, &v, 8);
    }
    const std::uint64_t last = load8(p + n - 8);
    std::memcpy(to + n - 8, &last, 8);
  } else if (n >= 4) {
    const std::uint32_t first = load4(p), last = load4(p + n - 4);
    std::memcpy(to, &first, 4);
    std::memcpy(to + n - 4, &last, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) to[i] = p[i];
  }
  return to + n;
}

}  // namespace lockscope::ingest
