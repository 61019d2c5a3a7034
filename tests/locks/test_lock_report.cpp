// Rendering: jsonl fields and escaping, text lines, the summary table, --lock globs.
#include "helpers.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/event_jsonl.hpp"
#include "lockscope/locks/lock_globs.hpp"
#include "lockscope/locks/lock_report.hpp"

using namespace lockscope;
using namespace lockscope::ingest;
using namespace lockscope::locks;

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
        "\"10.0.0.1:5\",\"server\":\"10.0.0.2:6379\",\"db\":0,\"kind\":\"late_renewal\",\"inferred\":true}");
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
        "\"db\":0,\"hold_count\":0,\"lease_ms\":30000,\"ttl_ms\":12,\"wait_ms\":0.007,\"held_ms\":1234.567}");
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

namespace {

// A timeline of `locks` locks with varied rows: some held once, some twice, some
// contended, some renewed, some expired, names of several lengths.
void fill(lock_timeline& timeline, int locks) {
  for (int i = 0; i < locks; ++i) {
    const std::string name = "order:" + std::string(static_cast<std::size_t>(i % 7), 'x') + std::to_string(i);
    const std::int64_t t = 1'000'000 + i * 10;
    lock_operation op;
    op.kind = lock_op_kind::acquire;
    op.outcome = op_outcome::ok;
    op.lock = name;
    op.owner = i % 3 == 0 ? "a:1" : "b:2";
    op.request_us = t;
    op.reply_us = t + 5;
    op.lease_ms = 30'000;
    timeline.on_operation(op);
    if (i % 4 == 0) {
      op.kind = lock_op_kind::unlock;
      op.request_us = t + 7;
      op.reply_us = t + 8 + i % 13;
      timeline.on_operation(op);
    }
  }
  timeline.finish(1'000'000 + std::int64_t{locks} * 10 + 60'000'000);
}

std::string summary_of(int locks, unsigned threads, std::vector<std::string> globs = {}) {
  report_options o;
  o.format = report_format::summary_only;
  o.threads = threads;
  o.lock_globs = std::move(globs);
  std::string out;
  lock_report report(o, [&](std::string_view s) { out += s; });
  lock_timeline timeline({}, report);
  fill(timeline, locks);
  report.finish(timeline);
  return out;
}

}  // namespace

TEST_CASE("report: a big summary table is the same whether one thread formats it or two", "[report][pipe]") {
  for (int locks : {19'999, 20'000, 61'234}) {
    INFO(locks << " locks");
    const std::string one = summary_of(locks, 1);
    CHECK(std::count(one.begin(), one.end(), '\n') == locks + 1);  // the header, then a row per lock
    CHECK(summary_of(locks, 2) == one);
    CHECK(summary_of(locks, 2, {"order:x*"}) == summary_of(locks, 1, {"order:x*"}));
  }
}

TEST_CASE("report: a write failure in either summary thread is rethrown, and nothing hangs", "[report][pipe]") {
  for (int failing_write : {2, 3, 30}) {  // the header is write 1; then the batches, alternating threads
    INFO("write " << failing_write);
    report_options o;
    o.format = report_format::summary_only;
    o.threads = 2;
    int writes = 0;
    lock_report report(o, [&](std::string_view) {
      if (++writes == failing_write) throw std::runtime_error("EPIPE");
    });
    lock_timeline timeline({}, report);
    fill(timeline, 100'000);
    CHECK_THROWS_WITH(report.finish(timeline), "EPIPE");
    CHECK(writes == failing_write);
  }
}

TEST_CASE("timeline: for_each_lock by parts visits every lock once, in order", "[report][pipe]") {
  report_options o;
  std::string unused;
  lock_report report(o, [&](std::string_view s) { unused += s; });
  lock_timeline timeline({}, report);
  fill(timeline, 30'000);
  std::vector<std::string> whole;
  timeline.for_each_lock([&](std::string_view lock, const lock_stats&) { whole.emplace_back(lock); });
  REQUIRE(whole.size() == 30'000);
  for (std::size_t parts : {1u, 2u, 7u, 1000u}) {
    std::vector<std::string> pieced;
    for (std::size_t part = 0; part < parts; ++part) {
      timeline.for_each_lock(part, parts, [&](std::string_view lock, const lock_stats&) { pieced.emplace_back(lock); });
    }
    CHECK(pieced == whole);
  }
  CHECK(timeline.longest_lock_name() == std::string("order:xxxxxx29999").size());
  CHECK_THROWS_AS(timeline.for_each_lock(3, 3, [](std::string_view, const lock_stats&) {}), std::invalid_argument);
}
