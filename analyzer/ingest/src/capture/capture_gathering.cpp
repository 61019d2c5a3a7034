#include "lockscope/ingest/capture_gathering.hpp"

#include <algorithm>
#include <cmath>

namespace lockscope::ingest {

std::int64_t capture_gathering::wait_us(std::int64_t now_us, std::uint64_t bytes, bool after_idle) noexcept {
  if (max_wait_us_ == 0) return 0;
  const std::int64_t previous = last_wake_us_;
  last_wake_us_ = now_us;
  // No rate to go by: the first wake-up, the first after an idle spell (the time since
  // the previous one says nothing of the rate now), or a clock that stepped back.
  if (previous < 0 || after_idle || now_us <= previous) {
    peak_bytes_per_s_ = 0;
    return max_wait_us_ / 16;
  }
  const double seconds = static_cast<double>(now_us - previous) / 1e6;
  const double rate = static_cast<double>(bytes) / seconds;
  peak_bytes_per_s_ = std::max(rate, peak_bytes_per_s_ * std::exp2(-seconds));
  if (peak_bytes_per_s_ <= 0) return max_wait_us_ / 16;
  const double fill_us = static_cast<double>(quarter_buffer_) / peak_bytes_per_s_ * 1e6;
  return fill_us >= static_cast<double>(max_wait_us_) ? max_wait_us_ : static_cast<std::int64_t>(fill_us);
}

}  // namespace lockscope::ingest
