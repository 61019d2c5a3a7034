// A lock event as a line of text (the text outputs, live and at the end), and a lock's
// title where several locks share a name.
//   `  +2.000123  10.0.0.2:50012  80e6…:12  released  held 1.900 s`
// (time relative to the capture start, [lock,] client, short owner id, event, details).
// Quorum / multilock events and the quorum anomalies have a line of their own:
//   `  +0.014421  red:job: 497b…:1,d646…:1 acquired on 3/3 servers, quorum 2 in 730µs`
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

// How the text outputs write times: relative to the capture's start ("+12.000345", the
// default), or absolute (--time abs) to line them up with application logs: UTC
// ("2026-11-29T06:47:21.350418Z"), or in the local zone with its offset
// ("2026-11-29T07:47:21.350418+01:00") when `local` (TZ is set).
struct text_clock {
  text_clock() = default;
  text_clock(std::int64_t start) noexcept : start_us(start) {}  // NOLINT: relative to start, as before
  std::int64_t start_us = 0;
  bool absolute = false;
  bool local = false;
  // A line's time or a time named in its details.
  std::string stamp(std::int64_t us) const;
};

// ISO-8601 with microseconds: UTC with 'Z', or (local) the local zone's offset.
std::string iso_time(std::int64_t epoch_us, bool local);

// The text output's first line: "capture start 2026-11-29T06:47:21.350418Z (…+01:00 local);
// times are seconds after it" (`local_zone`: TZ is set; its time shown when it differs
// from UTC), or with absolute times, which zone they are in.
std::string capture_start_line(std::int64_t start_us, bool absolute, bool local_zone);

// Quorum / multilock events and their anomalies (lock_groups.hpp): shown apart.
bool is_group_event(const lock_event& e) noexcept;

// Appends the event's line, ending with '\n'. `lock_title`: printed instead of the
// lock's name (with_lock) when not empty.
void append_event_text(std::string& out, const lock_event& e, const text_clock& clock, bool with_lock,
                       std::string_view lock_title = {});

// A group event's line (is_group_event; a group anomaly as append_event_text with the lock).
void append_group_text(std::string& out, const lock_event& e, const text_clock& clock);

// `name`, then ` @server` and/or ` db N` (the parts that tell it apart from other locks
// of the same name: a lock is (server, database, name)).
std::string lock_title(std::string_view name, std::string_view server, std::int32_t db, bool with_server,
                       bool with_db);

}  // namespace lockscope::locks
