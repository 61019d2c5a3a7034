// `lockscope analyze --format trace`: lock events → Chrome / Perfetto Trace Event Format
// JSON (the "JSON Object Format": {"traceEvents":[...],"displayTimeUnit":"ms",
// "otherData":{...}}), for ui.perfetto.dev and chrome://tracing.
//
//   trace_export t(options, write);   // a lock_event_sink, where lock_report would be
//   ... lock_groups feeds t ...
//   t.finish(end_us);                 // closes what is still open, ends the JSON
//
// Mapping (ts and dur in microseconds since the epoch, as the JSONL's `ts`):
//   process  a lock (`name @server`, ` db N` when not 0); a quorum (`quorum NAME`, a key
//            over several servers) or a MultiLock set (`multilock k1,k2`) is a process
//            of its own. Metadata events (`"ph":"M"`) process_name, process_sort_index
//            (first-seen order), thread_name, thread_sort_index come before the
//            process's / thread's first event.
//   thread   an owner within that process (thread_name = the owner id).
//   "X"      `hold`: acquired → released / expired / force_released (a reentered level,
//            or a shared hold taken again: `reentered`, nested inside, until
//            partially_released); `wait`: the first contended attempt → acquired or
//            gave_up (as their wait_ms says; a gave_up's from its `since`);
//            `quorum` / `multilock`: the
//            group's first try → last. args: the JSONL of the event that closed the
//            span (the `acquired` or `gave_up` for a wait, the release for a hold; the
//            group event).
//            A release with no acquisition seen (the capture began during the hold)
//            spans its held_ms; without held_ms it is an instant. Spans no event
//            closed: waits and holds still open at the end (args {"open_at_end":true}),
//            reentered levels ended by the hold's release (args {"ended_with_hold":true}).
//   "i"      every other event: acquired without a wait, reentered, each contended
//            attempt, renewed, renew_failed, unlock_rejected, subscribed, notified,
//            unsubscribed, anomalies (named by their kind, cat "anomaly", scope "p":
//            about the lock; the others scope "t"). args: the event's JSONL.
// So each JSONL event (`--format jsonl`, append_event_jsonl) is the args of exactly one
// trace event, and a viewer's details pane shows the same fields. Events are written
// as spans close, not sorted by ts overall (the format does not ask for it), but on one
// thread the spans nest and come in start order (longer first at the same start, so a
// viewer takes the outer one as the parent): spans that close inside an open hold of
// their thread (reentered levels) are held back and written after it.
//
// Memory: nothing of an event is kept once written; per (lock, owner) with something
// open, 48 bytes and its map entry (the start of its open hold, reentered levels and
// wait). A waiter that gives up closes its wait by the timeline's gave_up event
// (lock_timeline.hpp says when it comes). Ids are kept per lock and per (lock, owner) under a 64-bit hash
// of the name; past 2 x max_ids of them, the ones with nothing open are forgotten, and a
// lock or owner seen again gets a new id (and metadata naming it again), so a capture of
// millions of locks or owners stays bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

struct trace_options {
  std::string generator = "lockscope analyze";  // otherData.generator
  std::string source;                           // otherData.source: the capture(s) or interface
  std::size_t max_ids = 1u << 16;               // ids remembered: 2 x this (locks + threads)
  std::size_t flush_bytes = 1u << 16;           // output buffered before `write`
};

class trace_export final : public lock_event_sink {
 public:
  // `write` receives output chunks in order; the opening `{"traceEvents":[` comes with
  // the first chunk.
  trace_export(const trace_options& options, std::function<void(std::string_view)> write);
  ~trace_export() override;
  trace_export(const trace_export&) = delete;
  trace_export& operator=(const trace_export&) = delete;

  void on_event(const lock_event& e) override;
  // Closes the holds and waits still open at end_us (holds: "open_at_end":true), writes
  // the closing part of the JSON and flushes. Call once.
  void finish(std::int64_t end_us);
  void flush();

  std::uint64_t events() const noexcept { return events_; }        // lock events received
  std::uint64_t trace_events() const noexcept { return written_; }  // trace events written
  // Locks and (lock, owner) threads whose ids are remembered now: at most 2 x max_ids,
  // or twice what has spans open.
  std::size_t remembered_ids() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::uint64_t events_ = 0;
  std::uint64_t written_ = 0;
};

}  // namespace lockscope::locks
