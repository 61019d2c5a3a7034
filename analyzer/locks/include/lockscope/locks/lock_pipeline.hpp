// The lock analysis chain, wired once for files, live capture and --replay:
//
//   packets → ingest_pipeline → lock_recognizer → [lock filter] → operation batch or pipe
//           → lock_timeline → lock_groups → set_once_keys → `events` (a report, a trace,
//           the live sinks)
//
//   lock_pipeline pipeline(options, report);
//   pipeline.on_packet(p.ts_us, p.link_type, p.data);  // each packet
//   pipeline.flush();                                  // live: after each turn's packets
//   pipeline.advance_to(clock);                        // live: lease deadlines on the clock
//   pipeline.finish_ingest();  pipeline.finish(end_us);
//
// One thread: an operation_batch hands the operations to the timeline a window at a
// time. Two threads (options.threads >= 2, files only): run_ingest() runs the packets
// through the ingest on a thread of its own while the timeline drains an operation_pipe
// on the calling thread. The events are the same byte for byte; only the wall time
// changes. Nothing here is virtual or allocates per packet besides what the stages do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/locks/operation_batch.hpp"
#include "lockscope/locks/operation_pipe.hpp"
#include "lockscope/locks/set_once_keys.hpp"

namespace lockscope::locks {


struct pipeline_options {
  ingest::ingest_options capture{};     // ports, TCP buffering, flow timeout: as for `decode`
  timeline_options timeline{};  // merge_servers: a lock is its key on any server
  group_options groups{};
  set_once_options set_once{};  // live: hold = false (an acquisition shown when it happens)
  unsigned threads = 1;  // 1: everything on the calling thread; 2 (or more): run_ingest() on two
};

class lock_pipeline {
 public:
  // Called once, while the pipeline is built: where the recognizer's operations go, given
  // where they would go unfiltered (`next`): a filter the caller owns (it outlives the
  // pipeline) in front of `next`, or `next` itself.
  using filter_factory = std::function<lock_operation_sink&(lock_operation_sink& next)>;

  lock_pipeline(const pipeline_options& options, lock_event_sink& events, const filter_factory& filter = {});
  lock_pipeline(const lock_pipeline&) = delete;
  lock_pipeline& operator=(const lock_pipeline&) = delete;

  // Ingest side (with two threads: the thread run_ingest() starts).
  void on_packet(std::int64_t ts_us, int link_type, std::string_view frame) {
    ingest_.on_packet(ts_us, link_type, frame);
  }
  // Ends the ingest (what it still holds becomes operations) and hands everything to the
  // timeline (one thread), or closes the pipe (two).
  void finish_ingest();

  // One thread: the operations held go to the timeline now (before it is read or advanced).
  void flush() { batch_->flush(); }
  // Runs `ingest(stop)`, which feeds packets to on_packet() until they end or stop()
  // returns true, then finish_ingest(): on the calling thread, or with two threads on a
  // thread of its own while the timeline drains the pipe on this one (stop() turns true
  // when the timeline side failed; its exception is rethrown here, as is the ingest's).
  template <class Ingest>
  void run_ingest(Ingest&& ingest) {
    if (!pipe_) {
      ingest([] { return false; });
      finish_ingest();
      return;
    }
    run_on_two_threads([&] { ingest([this] { return pipe_->abandoned(); }); });
  }

  // Timeline side: lease deadlines and group windows pass on the clock even when the
  // traffic stops.
  void advance_to(std::int64_t now_us) {
    timeline_.advance_to(now_us);
    // Not past an event the timeline still holds: its group window stays open for it.
    const std::int64_t held = timeline_.held_from_us();
    groups_.advance_to(held >= 0 && held < now_us ? held : now_us);
  }
  // The timeline, then the groups, end at `end_us` (their last events); the keys found
  // set once and never used again leave the locks.
  void finish(std::int64_t end_us) {
    timeline_.finish(end_us);
    groups_.finish(end_us);
    set_once_.finish();
    for (const set_once_key& k : set_once_.markers()) timeline_.set_aside(k.lock, k.lock_server, k.db, k.shape);
  }
  const set_once_keys& set_once() const noexcept { return set_once_; }

  lock_recognizer& recognizer() noexcept { return recognizer_; }
  const lock_recognizer& recognizer() const noexcept { return recognizer_; }
  const ingest::ingest_pipeline& ingest() const noexcept { return ingest_; }
  const lock_timeline& timeline() const noexcept { return timeline_; }

 private:
  lock_operation_sink& unfiltered_entry() noexcept;
  void run_on_two_threads(const std::function<void()>& ingest);

  set_once_keys set_once_;
  lock_groups groups_;
  lock_timeline timeline_;
  std::optional<operation_pipe> pipe_;    // two threads
  std::optional<operation_batch> batch_;  // one thread: the timeline still gets windows
  lock_recognizer recognizer_;
  ingest::ingest_pipeline ingest_;
};

}  // namespace lockscope::locks
