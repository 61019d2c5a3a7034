// Stage 3 of `lockscope analyze`: rendering lock events and the per-lock summary.
//
//   lock_report r({.format = report_format::text}, out_string);  // a lock_event_sink
//   ... timeline feeds r ...
//   r.finish(timeline);       // text: the per-lock timelines, then the summary table
//
// A lock is (server, database, name): when a name is seen on several servers or in
// several databases, its locks' headers and summary rows say which (`== red:job
// @127.0.0.1:6381`, `k db 1`); otherwise they are the name alone.
// Text: for each lock (first-seen order), its events' lines (event_text.hpp). The lines
// wait in memory, per lock, up to `text_buffer_bytes` in all; beyond, they go to a
// temporary file as a run sorted by lock, and finish() merges the runs back lock by
// lock: the output is the same, and the memory stays bounded however long the capture.
// Quorum / multilock lines and the quorum anomalies come in a section of their own,
// `== lock groups`, after the locks.
// In live mode (`stream_text`) lines are written as events happen, with the lock name.
// The summary table (threads = 2, tens of thousands of locks) is formatted by two
// threads in alternate batches, written in order; the text is the same either way.
// JSONL: one object per event (event_jsonl.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/display_text.hpp"  // printable and the rest, for users that took them from here
#include "lockscope/locks/event_text.hpp"
#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

enum class report_format : std::uint8_t { text, stream_text, jsonl, summary_only };

struct report_options {
  report_format format = report_format::text;
  std::int64_t start_us = -1;                 // capture start; -1: the first event
  std::vector<std::string> lock_globs;        // empty: every lock
  bool summary = true;                        // text: append the summary table
  // 2: a big summary table (tens of thousands of locks) is formatted on two threads,
  // in the same order; `write` is still called by one thread at a time.
  unsigned threads = 1;
  // Text: event lines held in memory before they go to the temporary file.
  std::size_t text_buffer_bytes = 4u << 20;
  // JSONL: hand each line to `write` at once (live), not in 64 KiB chunks.
  bool line_buffered = false;
  // The summary table: only the `top` highest ranked locks (lock_rank), highest first,
  // then a line with what the others counted; 0: every lock, in first-seen order.
  std::size_t top = 0;
  // Text: times as absolute ISO-8601 stamps (--time abs), in the local zone when
  // local_time (TZ set), else UTC; and a first line naming the capture's start.
  bool absolute_time = false;
  bool local_time = false;
  bool start_line = false;
  // Live text: the lock column's width, so that the columns after it stay aligned; a
  // longer name keeps its first and last characters around a "…" (0: no column).
  std::size_t live_lock_width = 32;
};

// `name` in exactly `width` display columns: padded, or its head and tail around "…"
// (the tail is where keys usually differ: lock:order:12345).
std::string fit_column(std::string_view name, std::size_t width);

// The text output's temporary file could not be created, written or read.
struct report_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class sorted_spool;

class lock_report final : public lock_event_sink {
 public:
  // `write` receives finished output chunks (a line at a time when streaming).
  lock_report(const report_options& options, std::function<void(std::string_view)> write);
  ~lock_report() override;

  // Throws report_error when the text cannot be spilled to the temporary file.
  void on_event(const lock_event& e) override;
  bool selected(std::string_view lock) const noexcept;
  bool selects_locks() const noexcept { return !options_.lock_globs.empty(); }  // --lock given
  // Writes what was buffered (text timelines) and the summary table. Throws
  // report_error when the spilled text cannot be read back.
  void finish(const lock_timeline& timeline);
  // Just the summary table.
  void write_summary(const lock_timeline& timeline);
  void flush();
  // The time text output is relative to (the capture's first packet); only before
  // the first event.
  void set_start_us(std::int64_t us) noexcept {
    if (options_.start_us < 0) options_.start_us = us;
  }
  std::uint64_t events() const noexcept { return events_; }

 private:
  void write_event(const lock_event& e);  // on_event, for the formats that print events
  text_clock clock() const noexcept;
  void write_start_line();  // once, when asked for and the start is known
  // The lock's title: its name, with the server and/or database when another lock
  // seen shares the name (`red:job @127.0.0.1:6381`, `k db 1`).
  std::vector<std::string> titles() const;
  void spill();
  void write_spilled();

  report_options options_;
  std::function<void(std::string_view)> write_;
  std::string out_;
  // Text: per-lock buffered lines, in first-seen order, and each lock's server and
  // database (a lock is (server, database, name); see lock_timeline.hpp).
  std::vector<std::pair<std::string, std::string>> per_lock_;
  std::vector<std::pair<std::string, std::int32_t>> scope_of_;
  std::map<std::string, std::size_t, std::less<>> index_;  // by identity_key
  std::string identity_key_;  // scratch: name, server and database
  // Stream text: whether events came from more than one server / database so far.
  bool several_servers_ = false, several_dbs_ = false, seen_scope_ = false;
  std::string first_server_;
  // Text: quorum / multilock lines and their anomalies, with their times (a line per
  // group attempt: held in memory, unlike the locks' lines).
  std::vector<std::pair<std::int64_t, std::string>> group_lines_;
  std::int32_t first_db_ = 0;
  std::size_t buffered_bytes_ = 0;  // in per_lock_'s lines
  // Text: each lock's latest event time so far, and the locks whose lines came out of
  // time order (sorted by sort_lines_by_time when written; not once spilled).
  std::vector<std::int64_t> last_ts_;
  std::set<std::size_t> unsorted_locks_;
  static void sort_lines_by_time(std::string& lines);
  std::unique_ptr<sorted_spool> spill_;  // once the lines outgrew text_buffer_bytes
  std::uint64_t events_ = 0;
  bool start_line_written_ = false;
};

}  // namespace lockscope::locks
