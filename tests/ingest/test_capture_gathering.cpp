// capture_gathering: how long a live capture out of immediate mode lets packets gather,
// fed with wake-up times and byte counts (no socket, no clock).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>

#include "lockscope/ingest/capture_gathering.hpp"

using lockscope::ingest::capture_gathering;

namespace {

constexpr std::uint64_t gather_mib = 1u << 20;
constexpr std::int64_t gather_max_wait = 250'000;

// Wake-ups `every_us` apart, each having taken what `bytes_per_s` brings in that time;
// the wait the last one got.
std::int64_t steady_wakes(capture_gathering& g, std::int64_t& now, double bytes_per_s, std::int64_t every_us, int wakes) {
  std::int64_t wait = 0;
  for (int i = 0; i < wakes; ++i) {
    now += every_us;
    wait = g.wait_us(now, static_cast<std::uint64_t>(bytes_per_s * static_cast<double>(every_us) / 1e6), false);
  }
  return wait;
}

}  // namespace

TEST_CASE("capture_gathering: no rate known, a short wait that measures one", "[capture][gathering]") {
  capture_gathering g(32 * gather_mib, gather_max_wait);
  CHECK(g.wait_us(1'000'000, 123456, false) == gather_max_wait / 16);  // the first wake-up
  CHECK(g.peak_rate() == 0);
  std::int64_t now = 1'000'000;
  steady_wakes(g, now, 10e6, 100'000, 5);
  CHECK(g.peak_rate() > 0);
  // After an idle spell (a poll timed out with nothing) the old rate says nothing of the new.
  CHECK(g.wait_us(now + 5'000'000, 1000, true) == gather_max_wait / 16);
  CHECK(g.peak_rate() == 0);
  // A clock stepped back: no rate either.
  CHECK(g.wait_us(now, 1000, false) == gather_max_wait / 16);
}

TEST_CASE("capture_gathering: a steady load waits until a quarter of the buffer would fill, at most max_wait",
          "[capture][gathering]") {
  struct load {
    double bytes_per_s;
    std::int64_t expected_us;
  };
  // 32 MiB buffer: a quarter is 8 MiB.
  const load loads[] = {
      {1e6, gather_max_wait},                                   // light: the cap
      {45e6, static_cast<std::int64_t>(8.0 * gather_mib / 45e6 * 1e6)},  // the keep-up load: ~186 ms
      {400e6, static_cast<std::int64_t>(8.0 * gather_mib / 400e6 * 1e6)},  // ~21 ms
  };
  for (const load& l : loads) {
    INFO(l.bytes_per_s << " B/s");
    capture_gathering g(32 * gather_mib, gather_max_wait);
    std::int64_t now = 0;
    g.wait_us(now, 0, false);
    const std::int64_t wait = steady_wakes(g, now, l.bytes_per_s, 200'000, 20);
    CHECK(wait == Approx(l.expected_us).epsilon(0.01));
  }
  // A larger buffer lets the same load gather longer; a smaller one shorter.
  capture_gathering big(128 * gather_mib, 10'000'000), small(4 * gather_mib, 10'000'000);
  std::int64_t a = 0, b = 0;
  big.wait_us(0, 0, false);
  small.wait_us(0, 0, false);
  CHECK(steady_wakes(big, a, 45e6, 200'000, 20) == Approx(32.0 * gather_mib / 45e6 * 1e6).epsilon(0.01));
  CHECK(steady_wakes(small, b, 45e6, 200'000, 20) == Approx(1.0 * gather_mib / 45e6 * 1e6).epsilon(0.01));
}

TEST_CASE("capture_gathering: a burst shortens the wait at once, a lull lengthens it only as the peak decays",
          "[capture][gathering]") {
  capture_gathering g(32 * gather_mib, gather_max_wait);
  std::int64_t now = 0;
  g.wait_us(now, 0, false);
  const std::int64_t calm = steady_wakes(g, now, 40e6, 200'000, 20);  // ~210 ms: under the cap
  CHECK(calm < gather_max_wait);
  // Ten times the rate for one round: the next wait is cut to a tenth.
  now += 100'000;
  const std::int64_t burst = g.wait_us(now, static_cast<std::uint64_t>(400e6 * 0.1), false);
  CHECK(burst == Approx(static_cast<double>(calm) / 10.0).epsilon(0.02));
  // Back to the calm rate: the peak halves per second, so the wait grows back gradually.
  now += 250'000;
  const std::int64_t after_quarter_second = g.wait_us(now, static_cast<std::uint64_t>(40e6 * 0.25), false);
  CHECK(after_quarter_second < calm / 5);
  const std::int64_t later = steady_wakes(g, now, 40e6, 250'000, 20);  // five seconds on
  CHECK(later == Approx(static_cast<double>(calm)).epsilon(0.01));
}

TEST_CASE("capture_gathering: whatever the wake-ups, the traffic of a wait at the peak rate fits in a quarter of the buffer",
          "[capture][gathering]") {
  std::mt19937_64 random(7);
  for (int run = 0; run < 50; ++run) {
    const std::uint64_t buffer = (1 + random() % 64) * gather_mib;
    capture_gathering g(buffer, gather_max_wait);
    std::int64_t now = 1'000'000;
    for (int i = 0; i < 200; ++i) {
      now += 1000 + static_cast<std::int64_t>(random() % 400'000);
      const std::uint64_t bytes = random() % (64 * gather_mib);
      const std::int64_t wait = g.wait_us(now, bytes, random() % 10 == 0);
      REQUIRE(wait >= 0);
      REQUIRE(wait <= gather_max_wait);
      if (g.peak_rate() > 0) {
        REQUIRE(static_cast<double>(wait) / 1e6 * g.peak_rate() <= static_cast<double>(buffer / 4) * 1.0001);
      }
      now += wait;
    }
  }
}

TEST_CASE("capture_gathering: a zero gather_max_wait turns it off", "[capture][gathering]") {
  capture_gathering g(32 * gather_mib, 0);
  std::int64_t now = 0;
  CHECK(g.wait_us(now, 0, false) == 0);
  CHECK(steady_wakes(g, now, 1e6, 200'000, 10) == 0);
}
