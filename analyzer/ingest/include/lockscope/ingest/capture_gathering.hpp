// How long a live capture out of immediate mode lets packets gather in the kernel's
// buffer before it takes them. Sans-I/O: fed with wake-up times and byte counts.
//
//   capture_gathering g(buffer_bytes, 250'000);
//   // poll() says packets are waiting:
//   sleep_for(g.wait_us(now_us, bytes_taken_since_the_previous_wake_up));
//   // then take every packet waiting
//
// Why: out of immediate mode the kernel hands packets over a block (256 KiB) at a time,
// so a steady load wakes the process once per block (the keep-up load, 45 MB/s on lo:
// about 130 times a second), and each wake-up finds its caches cold, the Redis server
// and its clients having run on the same cores in between. Waiting until more has
// arrived serves many blocks per wake-up with warm caches: the keep-up load cost 0.80
// µs per exchange at once, 0.69 after 100 ms and 0.62 after 200 ms.
//
// The wait never risks the buffer: it lasts at most max_wait_us, and at most as long as
// a quarter of the buffer takes to fill at the highest rate seen lately (a rate decays
// by half each second it is not seen again). A capture that falls behind never waits
// (it finds packets waiting, never an empty ring). The first wake-up, and the first
// after an idle spell (the ring stayed empty for a whole poll timeout), know no rate
// yet: they wait a sixteenth of max_wait_us, which measures one.
#pragma once

#include <cstdint>

namespace lockscope::ingest {

class capture_gathering {
 public:
  capture_gathering(std::uint64_t buffer_bytes, std::int64_t max_wait_us) noexcept
      : quarter_buffer_(buffer_bytes / 4), max_wait_us_(max_wait_us < 0 ? 0 : max_wait_us) {}

  // A wake-up at `now_us` found packets waiting after the ring had run empty; `bytes`
  // (as the buffer holds them: packets and their headers) were taken since the previous
  // wake-up; `after_idle`: a poll timed out with nothing since then. How long to wait
  // before taking the packets, in microseconds.
  std::int64_t wait_us(std::int64_t now_us, std::uint64_t bytes, bool after_idle) noexcept;

  // Bytes per second: the highest rate seen lately, decayed (0 until a rate is known).
  double peak_rate() const noexcept { return peak_bytes_per_s_; }

 private:
  std::uint64_t quarter_buffer_;
  std::int64_t max_wait_us_;
  std::int64_t last_wake_us_ = -1;
  double peak_bytes_per_s_ = 0;
};

}  // namespace lockscope::ingest
