// `lockscope analyze`'s --write (tcpdump -w with -C/-G rotation) and --save-anomalies
// (the flight recorder) around the live loop, and the options of both. The sans-I/O
// parts are packet_ring, lock_connections and rotating_pcap_writer; the flight recorder
// (src/flight_recorder.hpp) wires them to the disk and a thread, and this class to the
// live loop. No CLI11 here: the command-line side is the CLI's recorder.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

class flight_recorder;  // --save-anomalies
class packet_writer;    // --write

struct recorder_options {
  std::string replay;              // --replay FILE
  double replay_speed = 1;         // --replay-speed X (0: as fast as possible)
  std::string write;               // --write FILE
  double rotate_mb = 0;            // -C: millions of bytes per --write file
  double rotate_s = 0;             // -G: seconds per --write file name
  std::string save_dir;            // --save-anomalies DIR
  double save_window_s = 30;       // --save-window
  double save_after_s = 5;         // --save-after
  std::uint64_t save_buffer = 64u << 20;  // --save-buffer
  double save_max_mb = 1024;       // --save-max-mb
};

// What the flight recorder did (all zero without --save-anomalies).
struct recorder_stats {
  std::uint64_t saved = 0;         // anomalies written (.pcap and .json)
  std::uint64_t rate_limited = 0;  // one per lock and kind per --save-window
  std::uint64_t dropped = 0;       // the queue to the writer was full
  std::uint64_t write_errors = 0;
  std::uint64_t deleted = 0;       // files deleted for --save-max-mb
  std::uint64_t ring_passes = 0;   // batches of due saves, each one or two scans of the ring
  std::uint64_t ring_scans = 0;    // scans of the packet ring: a batch's copy, and the sizes of
                                   // its files not sized before (a file that waits keeps its size)
  std::uint64_t passes_put_off = 0;  // passes not run: the writer's queue was more than half full
};

// --write and --save-anomalies around the live loop:
//   recorder_hooks hooks("analyze", o.recorder, source.now_us());  // checks DIR and --write; prints why not
//   if (!hooks.ready()) return 2;
//   lock_groups groups(go, hooks.chain(report));        // the lock events pass through
//   ... hooks.on_loop(got_packet ? &p : nullptr, source.now_us()) every turn, before the analysis ...
//   hooks.finish();                                     // waits for the writer, prints its summary
// Constructed after the capture is opened and privileges are dropped, so DIR and the
// --write file are checked as the user that will write to them. `now_us` is the loop's
// clock at the start: with -G, the first file's name comes from it.
class recorder_hooks {
 public:
  recorder_hooks(const char* command, const recorder_options& o, std::int64_t now_us = 0);
  ~recorder_hooks();
  recorder_hooks(const recorder_hooks&) = delete;
  recorder_hooks& operator=(const recorder_hooks&) = delete;

  bool ready() const noexcept { return ready_; }
  // Whether on_loop() has anything to do (--write or --save-anomalies given): the loop
  // then needs the clock's time per packet, else not.
  bool active() const noexcept { return recorder_ != nullptr || writer_ != nullptr; }
  lock_event_sink& chain(lock_event_sink& next);
  // Every loop turn, before the analysis sees the packet (`p`: nullptr on a timeout).
  // A --write error is printed once and ends the writing, not the analysis.
  void on_loop(const captured_packet* p, std::int64_t now_us);
  // Waits for the writer, prints what was written (and a --write error again: it may be
  // far up in the output).
  void finish();
  // Once finish() has returned: --write failed (its files lack packets), or the flight
  // recorder could not write an anomaly's files. Either is exit status 1: what the user
  // asked to be kept on disk is not all there.
  bool write_failed() const { return !write_error_.empty() || stats().write_errors > 0; }
  // Final once finish() has returned (it stops the writer thread).
  recorder_stats stats() const;

 private:
  const char* command_;
  bool ready_ = true;
  std::unique_ptr<flight_recorder> recorder_;
  std::unique_ptr<packet_writer> writer_;
  std::string write_error_;  // the first; writing stopped there
};

}  // namespace lockscope::live
