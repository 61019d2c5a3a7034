// A capture file fed to the live loop at capture speed: `lockscope analyze --replay FILE`.
//
//   replay_capture replay({"soak.pcap"}, 10.0);   // 10× faster than captured; 0: no pacing
//   while (replay.next(p) != packet_source::result::end) ... replay.now_us() ...
//
// The clock (now_us) is the replayed time, never the wall clock: it is the first
// packet's time at the start, runs at `speed` × wall time while waiting for the next
// packet, and never passes that packet's time. So whatever the speed and the machine's
// load, the loop sees the same packets with the same clock values at the points that
// matter (deadlines up to a packet's time fire before it), and prints the same events.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include "lockscope/ingest/capture.hpp"

namespace lockscope::ingest {

class replay_capture final : public packet_source {
 public:
  // `speed`: 1 = as captured, X = X times faster, 0 = as fast as possible. Throws
  // capture_error for a file that cannot be opened; `warn` as for offline_capture.
  replay_capture(const std::vector<std::string>& files, double speed, offline_capture::warning_handler warn = {},
                 offline_capture::warning_handler error = {}, std::chrono::milliseconds max_wait = std::chrono::milliseconds(100));

  result next(captured_packet& out) override;
  // At full speed (0) over regular files, up to `max_packets` a turn, as a live capture's
  // ring hands over a saturated port's packets; else one (each waits for its time, or a
  // pipe's reader for its writer: what was read is analysed before it waits).
  result dispatch(int max_packets, packet_callback on_packet) override;
  void stop() noexcept override;
  // received: packets delivered so far; dropped: what the files record the capturing
  // tool dropped (pcapng interface statistics, known once read), else 0.
  drop_stats stats() const override;
  std::int64_t now_us() const override { return now_us_; }
  // Files that changed while being read (see offline_capture).
  std::size_t changed_files() const noexcept { return files_.changed_files(); }
  // Files that ended early on an error (see offline_capture::failed_files).
  std::size_t failed_files() const noexcept { return files_.failed_files(); }

 private:
  bool fetch();

  offline_capture files_;
  double speed_;
  bool turns_of_packets_ = false;  // see dispatch()
  std::chrono::steady_clock::duration max_wait_;
  captured_packet pending_;  // read, not yet delivered (its view stays valid until fetch())
  bool has_pending_ = false;
  bool at_end_ = false;
  std::int64_t first_us_ = -1;
  std::int64_t now_us_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::uint64_t delivered_ = 0;
  volatile std::sig_atomic_t stopped_ = 0;
};

}  // namespace lockscope::ingest
