// Whether a text is a UUID (8-4-4-4-12 hex digits): the timeline asks it of every
// contended attempt's owner, twice (client_key, waiter_of_fresh_value), and a byte at a
// time it was the anomaly storm's costliest function (260 instructions a call). Here the
// 36 bytes are checked sixteen at a time (SSE2), or else eight digits at a time.
// Answers what lockscope::lock::is_uuid answers.
// Beside it, the key of the client a UUID names (client_key).
// Private to lock_timeline.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lockscope::locks::timeline_detail {

// Whether each of the 8 bytes of `v` is an ASCII hex digit (either case).
inline bool all_hex_digits(std::uint64_t v) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
  if ((v & high) != 0) return false;  // below 0x80 from here: no carry crosses a byte
  const std::uint64_t digit = v ^ (0x30 * ones);  // '0'..'9' -> 0..9
  const std::uint64_t is_digit = ~(digit + 0x76 * ones);  // high bit set where digit < 10
  const std::uint64_t letter = (v | (0x20 * ones)) ^ (0x60 * ones);  // 'a'..'f', 'A'..'F' -> 1..6
  const std::uint64_t is_letter = (letter + 0x7f * ones) & ~(letter + 0x79 * ones);  // 1 <= letter < 7
  return ((is_digit | is_letter) & high) == high;
}

#if defined(__SSE2__)
// 16 bytes of `v` as they should be: '-' where `dash` has 0xff, a hex digit elsewhere.
inline bool hex_or_dash_at(__m128i v, __m128i dash) noexcept {
  const __m128i zero = _mm_setzero_si128();
  // Unsigned "at most": a saturating subtract of the bound leaves 0.
  const __m128i digit = _mm_cmpeq_epi8(_mm_subs_epu8(_mm_sub_epi8(v, _mm_set1_epi8('0')), _mm_set1_epi8(9)), zero);
  const __m128i letter = _mm_cmpeq_epi8(
      _mm_subs_epu8(_mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a')), _mm_set1_epi8(5)), zero);
  const __m128i is_dash = _mm_cmpeq_epi8(v, _mm_set1_epi8('-'));
  const __m128i ok = _mm_or_si128(_mm_and_si128(dash, is_dash), _mm_andnot_si128(dash, _mm_or_si128(digit, letter)));
  return _mm_movemask_epi8(ok) == 0xffff;
}
#endif

inline bool is_uuid_text(std::string_view s) noexcept {
  if (s.size() != 36) return false;
  const char* p = s.data();
#if defined(__SSE2__)
  // Three loads of 16 (bytes 0-15, 16-31, 20-35), each checked whole: ~40 instructions
  // where eight digits a word took ~100 (a storm asks it of every fresh owner).
  const auto load = [](const char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
  constexpr char d = static_cast<char>(0xff);
  return hex_or_dash_at(load(p), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, d, 0, 0, 0, 0, d, 0, 0)) &&
         hex_or_dash_at(load(p + 16), _mm_setr_epi8(0, 0, d, 0, 0, 0, 0, d, 0, 0, 0, 0, 0, 0, 0, 0)) &&
         hex_or_dash_at(load(p + 20), _mm_setr_epi8(0, 0, 0, d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
#else
  if (s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-') return false;
  std::uint64_t a, b, c, d;
  std::uint32_t lo, hi;
  std::memcpy(&a, p, 8);  // 8 digits
  std::memcpy(&lo, p + 9, 4);  // 4 + 4
  std::memcpy(&hi, p + 14, 4);
  b = lo | (std::uint64_t{hi} << 32);
  std::memcpy(&lo, p + 19, 4);  // 4 + the first 4 of 12
  std::memcpy(&hi, p + 24, 4);
  c = lo | (std::uint64_t{hi} << 32);
  std::memcpy(&d, p + 28, 8);  // the last 8
  return all_hex_digits(a) && all_hex_digits(b) && all_hex_digits(c) && all_hex_digits(d);
#endif
}

// The key of the client a Redisson-style owner's UUID names (`uuid`: a text is_uuid_text
// accepts), top bit set: its 36 bytes as four words and a half, each mixed by a multiply
// (std::hash of the text was 100 instructions, asked of every refused attempt's owner).
inline std::uint64_t uuid_client_key(std::string_view uuid) noexcept {
  const char* p = uuid.data();
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 4; ++i) {
    std::uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  std::uint32_t tail;
  std::memcpy(&tail, p + 32, 4);
  h = (h ^ tail) * 0x94d049bb133111ebull;
  h ^= h >> 29;
  return h | (std::uint64_t{1} << 63);
}

}  // namespace lockscope::locks::timeline_detail
