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
// to[0, 16) = p[0, 16), through one 16-byte value (a vector register).
inline void copy16(char* to, const char* p) noexcept {
  struct block {
    char bytes[16];
  };
  block b;
  std::memcpy(&b, p, 16);
  std::memcpy(to, &b, 16);
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
  // Sixteen bytes a step, their two words' differences or'ed into one test; the last
  // step (or the last 8) overlapping what was compared.
  if (n >= 16) {
    for (std::size_t i = 0; i + 16 <= n; i += 16) {
      if (((load8(x + i) ^ load8(y + i)) | (load8(x + i + 8) ^ load8(y + i + 8))) != 0) return false;
    }
    return ((load8(x + n - 16) ^ load8(y + n - 16)) | (load8(x + n - 8) ^ load8(y + n - 8))) == 0;
  }
  if (n >= 8) return ((load8(x) ^ load8(y)) | (load8(x + n - 8) ^ load8(y + n - 8))) == 0;
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
  } else if (n >= 16) {
    // Sixteen bytes a step (one vector load and store each), the last step overlapping
    // what was copied: an owner id or a lock name takes two or three steps.
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) copy16(to + i, p + i);
    copy16(to + n - 16, p + n - 16);
  } else if (n >= 8) {
    const std::uint64_t first = load8(p), last = load8(p + n - 8);
    std::memcpy(to, &first, 8);
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
