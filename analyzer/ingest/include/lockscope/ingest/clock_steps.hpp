// Where a capture's clock was stepped. Packet times are the capturing host's wall clock
// (CLOCK_REALTIME), which NTP, an operator or a VM's migration can step. lockscope
// keeps the times as captured, as tcpdump and tshark do, so a span across a step (a
// wait, a hold, a lease) is measured wrong by the step; a step forward ends every lease
// at once, as it does for a Redis server on the same host, whose key expiry follows the
// wall clock. These say where it happened, so that the user knows which spans to doubt.
#pragma once

#include <cstdint>
#include <limits>

namespace lockscope::ingest {

// Steps shorter than this are not reported: multi-queue capture reorders packets by
// microseconds, and NTP corrects small offsets by slewing (at most 0.5 ms a second).
inline constexpr std::int64_t min_clock_step_us = 1'000'000;

// Packets in capture order whose time is min_step_us or more before the previous
// packet's: the clock stepped back (a step forward cannot be told from a quiet spell).
class packet_clock_watch {
 public:
  explicit packet_clock_watch(std::int64_t min_step_us = min_clock_step_us) noexcept : min_step_us_(min_step_us) {}
  // How far (µs, > 0) `ts_us` is before the previous packet's time when that is a step
  // back; 0 otherwise.
  std::int64_t on_packet(std::int64_t ts_us) noexcept {
    const std::int64_t previous = previous_;
    previous_ = ts_us;
    if (previous == std::numeric_limits<std::int64_t>::min() || ts_us >= previous) return 0;
    const std::int64_t back = previous - ts_us;
    return back >= min_step_us_ ? back : 0;
  }

 private:
  std::int64_t min_step_us_;
  std::int64_t previous_ = std::numeric_limits<std::int64_t>::min();
};

// The wall clock read together with a monotonic one: a step either way shows as the
// wall clock moving min_step_us more (or less) than the monotonic clock between two
// reads. A slew never adds up to a step: each read is compared with the one before.
class wall_clock_watch {
 public:
  explicit wall_clock_watch(std::int64_t min_step_us = min_clock_step_us) noexcept : min_step_us_(min_step_us) {}
  // The step (µs; > 0 forward, < 0 back) since the previous call; 0 when none.
  std::int64_t on_tick(std::int64_t wall_us, std::int64_t monotonic_us) noexcept {
    const std::int64_t offset = wall_us - monotonic_us;
    const bool first = !started_;
    started_ = true;
    const std::int64_t step = offset - offset_;
    offset_ = offset;
    if (first || (step < min_step_us_ && step > -min_step_us_)) return 0;
    return step;
  }

 private:
  std::int64_t min_step_us_;
  std::int64_t offset_ = 0;
  bool started_ = false;
};

}  // namespace lockscope::ingest
