// The live analysis (`lockscope analyze -i IFACE`, and `--replay FILE` through the same
// code): packets from a packet_source through the lock_pipeline, the timeline's clock
// advanced as the capture's time passes (lease deadlines fire even when a lock's
// traffic stops), the flight recorder and --write fed every packet, the metrics server
// polled every turn.
//
//   live_options o;  o.pipeline = ...;  o.stop_requested = [&] { return stop.requested(); };
//   recorder_hooks recorder("analyze", ro, source.now_us());
//   const live_result r = run_live(o, {source, recorder, metrics.get()}, report);
//
// The events reach `output` (a report, a trace) through the metrics (when served) and
// the flight recorder (when saving anomalies); everything runs on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/live/metrics_server.hpp"
#include "lockscope/live/recorder_hooks.hpp"
#include "lockscope/live/vocabulary.hpp"
#include "lockscope/locks/lock_pipeline.hpp"

namespace lockscope::live {

struct live_options {
  locks::pipeline_options pipeline{};  // threads is not used: the live loop runs on one thread
  // The capture hands packets over as they come (events printed as they happen); else it
  // lets a burst gather for its timeout, which the clock must then lag behind.
  bool immediate = false;
  std::function<bool()> stop_requested;          // asked every turn (a signal, say)
  std::function<void(bool got_packet)> on_turn;  // every turn, after the clock moved
  locks::lock_recognizer::warning_handler warn;         // the recognizer's warnings
};

// The parts around the analysis, which the caller opens (and which print why not).
struct live_parts {
  ingest::packet_source& source;
  recorder_hooks& recorder;
  metrics_server* metrics = nullptr;  // --metrics-listen
};

struct live_result {
  ingest::ingest_stats capture;
  locks::recognizer_stats recognizer;
  std::size_t locks = 0;
};

// Runs until the source ends or stop_requested(), then finishes the analysis at the
// clock's time; `finished` sees the timeline once it and the groups are finished.
// `filter` as for lock_pipeline.
live_result run_live(const live_options& options, const live_parts& parts, lock_event_sink& output,
                     const locks::lock_pipeline::filter_factory& filter = {},
                     const std::function<void(const locks::lock_timeline&)>& finished = {});

}  // namespace lockscope::live
