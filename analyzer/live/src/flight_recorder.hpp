// --save-anomalies, the flight recorder: the last --save-window of packets in a ring
// (packet_ring), the connections each lock's events concern (lock_connections, in the
// event chain), and on an anomaly, once --save-after has passed, its connections'
// packets and the event written to DIR by a thread of its own (a slow disk costs saved
// files, counted, never packets); DIR kept under --save-max-mb. recorder_hooks drives it.
#pragma once

#include <cstdint>
#include <memory>

#include "lockscope/live/recorder_hooks.hpp"

namespace lockscope::live {

class flight_recorder {
 public:
  // Checks DIR (as this process's user: it creates and removes a file) and starts the
  // writer thread; throws std::runtime_error saying why DIR will not do.
  flight_recorder(const char* command, const recorder_options& o);
  ~flight_recorder();  // saves what is due and waits for the writer
  flight_recorder(const flight_recorder&) = delete;
  flight_recorder& operator=(const flight_recorder&) = delete;

  // The events pass through the recorder's connection index on their way to `next`.
  lock_event_sink& chain(lock_event_sink& next);
  // Every captured packet, in order (into the ring).
  void on_packet(const captured_packet& p);
  // Saves the anomalies whose --save-after has passed on the loop's clock (all of them
  // at the end: `now_us` < 0).
  void save_due(std::int64_t now_us);
  // Final once print_summary() has returned (it stops the writer thread).
  recorder_stats stats() const;
  // Stops the writer (everything due is saved first) and prints what it did.
  void print_summary();

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace lockscope::live
