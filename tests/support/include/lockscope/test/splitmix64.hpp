// splitmix64: a tiny PRNG whose sequence is the same on every standard library (the
// std distributions are not), so that a seed printed by a failing test, a fuzzer or
// a benchmark reproduces anywhere. Header-only: tests, bench/ and fuzz/ share it.
#pragma once

#include <cstdint>

namespace lockscope::test {

class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, bound) for tests (bound > 0).
  std::uint64_t below(std::uint64_t bound) noexcept { return next() % bound; }
  // In [lo, hi].
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept { return lo + next() % (hi - lo + 1); }
  bool chance(unsigned percent) noexcept { return next() % 100 < percent; }

 private:
  std::uint64_t state_;
};

}  // namespace lockscope::test
