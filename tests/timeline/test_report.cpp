// Rendering: jsonl fields and escaping, text lines, the summary table, --lock globs.
#include "helpers.hpp"
#include "lockscope/analyzer/lock_report.hpp"

using namespace lockscope;
using namespace lockscope::analyzer;

TEST_CASE("report: jsonl has the documented fields, only where they apply, escaped", "[report]") {
  lock_event e;
  e.ts_us = 1717209303010120;
  e.event = lock_event_kind::anomaly;
  e.kind = anomaly_kind::late_renewal;
  e.lock = "a\"b\\c\n";
  e.owner = "o";
  e.client = "10.0.0.1:5";
  e.server = "10.0.0.2:6379";
  e.inferred = true;
  std::string out;
  append_event_jsonl(out, e);
  CHECK(out ==
        "{\"ts\":1717209303.010120,\"lock\":\"a\\\"b\\\\c\\n\",\"event\":\"anomaly\",\"owner\":\"o\",\"client\":"
        "\"10.0.0.1:5\",\"server\":\"10.0.0.2:6379\",\"kind\":\"late_renewal\",\"inferred\":true}");
  lock_event r;
  r.ts_us = 5;
  r.event = lock_event_kind::released;
  r.lock = "L";
  r.hold_count = 0;
  r.held_us = 1234567;
  r.wait_us = 7;
  r.lease_ms = 30000;
  r.ttl_ms = 12;
  out.clear();
  append_event_jsonl(out, r);
  CHECK(out ==
        "{\"ts\":0.000005,\"lock\":\"L\",\"event\":\"released\",\"owner\":\"\",\"client\":\"\",\"server\":\"\","
        "\"hold_count\":0,\"lease_ms\":30000,\"ttl_ms\":12,\"wait_ms\":0.007,\"held_ms\":1234.567}");
}

TEST_CASE("report: short owners, durations and globs", "[report]") {
  CHECK(short_owner("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12") == "80e6…:12");
  CHECK(short_owner("token-a") == "token-a");
  CHECK(short_owner("0123456789abcdef0123") == "01234567…");
  CHECK(format_duration(850) == "850µs");
  CHECK(format_duration(12345) == "12.3ms");
  CHECK(format_duration(2900000) == "2.900s");
  CHECK(glob_match("myLock", "myLock"));
  CHECK_FALSE(glob_match("myLock", "myLock2"));
  CHECK(glob_match("orders:*", "orders:42"));
  CHECK(glob_match("orders:?2", "orders:42"));
  CHECK(glob_match("*:[0-9]*", "orders:42"));
  CHECK_FALSE(glob_match("*:[!0-9]*", "orders:42"));
  CHECK(glob_match("*", ""));
  CHECK_FALSE(glob_match("a*b", "ac"));
}

TEST_CASE("report: --lock filters text output and the summary", "[report]") {
  report_options o;
  o.format = report_format::text;
  o.lock_globs = {"keep*"};
  std::string out;
  lock_report report(o, [&](std::string_view s) { out += s; });
  lock_timeline timeline({}, report);
  for (const char* name : {"keep:1", "drop:1"}) {
    lock_operation op;
    op.kind = lock_op_kind::acquire;
    op.outcome = op_outcome::ok;
    op.lock = name;
    op.owner = "o";
    op.request_us = 1'000'000;
    op.reply_us = 1'000'100;
    op.lease_ms = 1000;
    timeline.on_operation(op);
  }
  timeline.finish(3'000'000);
  report.finish(timeline);
  CHECK(out.find("== keep:1") != std::string::npos);
  CHECK(out.find("drop:1") == std::string::npos);
  CHECK(out.find("expired") != std::string::npos);
  CHECK(out.find("keep:1       1") != std::string::npos);  // the summary row
}
