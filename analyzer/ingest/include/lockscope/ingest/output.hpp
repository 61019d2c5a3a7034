// Rendering exchanges for `lockscope decode`: one text line or one JSON object each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lockscope/ingest/resp_session.hpp"

namespace lockscope::ingest {

struct text_options {
  std::size_t max_argument = 40;  // arguments longer than this end in "…"
  bool shorten_owner_ids = true;  // 80e6bb0b-…:12 as 80e6…:12
};

// `2026-11-21 05:34:25.123456 10.0.0.1:52000 → 10.0.0.2:6379 EVAL "if (redis…" 1 myLock
// 6000 80e6…:12 ⇒ (nil) [71 µs]`; a push: `… 10.0.0.1:52000 ← 10.0.0.2:6379 push: message
// redisson_lock__channel:{myLock} 0`. No trailing newline.
void append_text_line(std::string& out, const exchange& e, const text_options& options = {});

// One JSON object (no trailing newline) with exactly these fields:
//   ts          epoch seconds with microseconds (the command's time; a push's arrival)
//   client      "ip:port"
//   server      "ip:port"
//   command     array of strings, passwords redacted ([] for a push)
//   reply_type  simple_string error integer bulk_string array null boolean double
//               big_number bulk_error verbatim_string map set push none
//   reply       the value as JSON (see append_json), null when none
//   latency_us  integer, null without a reply
//   kind        "exchange" or "push"
void append_jsonl(std::string& out, const exchange& e);

// "2026-11-21 05:34:25.123456" (UTC).
void append_timestamp(std::string& out, std::int64_t ts_us);

}  // namespace lockscope::ingest
