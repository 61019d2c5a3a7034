// The summary's figures from the per-lock state machine fed operations directly: hold
// percentiles (exact, then from the histogram), durations as format_duration prints them,
// and columns that stay aligned whatever the lock names.
#include <algorithm>
#include <cmath>
#include <deque>
#include <sstream>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_report.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::link_confidence;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

TEST_CASE("timeline: hold percentiles are exact up to the limit, then from the histogram", "[timeline][summary]") {
  const std::size_t limit = locks::duration_exact_limit;
  for (const std::size_t holds : {limit - 56, limit + 44}) {
    fixture f;
    for (std::size_t i = 1; i <= holds; ++i) {
      const double start = static_cast<double>(i) * 1000;  // hold i lasts i ms
      f.acquire("A", start, 30000);
      f.unlock("A", start + static_cast<double>(i), op_outcome::ok);
    }
    bool seen = false;
    f.timeline.for_each_lock([&](std::string_view, const locks::lock_stats& s) {
      seen = true;
      CHECK(s.hold.count == holds);
      CHECK(s.hold.max == static_cast<std::int64_t>(holds) * ms);  // always exact
      const auto p50 = static_cast<double>((holds + 1) / 2 * ms);  // nearest rank
      const auto p99 = static_cast<double>((holds * 99 + 99) / 100 * ms);
      if (holds <= limit) {
        CHECK(s.hold.exact);
        CHECK(s.hold.p50 == static_cast<std::int64_t>(p50));
        CHECK(s.hold.p99 == static_cast<std::int64_t>(p99));
        CHECK(s.hold_us.size() == holds);
      } else {
        CHECK_FALSE(s.hold.exact);
        CHECK(std::abs(static_cast<double>(s.hold.p50) - p50) <= p50 / 128);
        CHECK(std::abs(static_cast<double>(s.hold.p99) - p99) <= p99 / 128);
        CHECK(s.hold.p99 <= s.hold.max);
        CHECK(s.hold_us.empty());
      }
    });
    CHECK(seen);
  }
}

TEST_CASE("timeline: the histogram counts durations below and above its first ones", "[timeline][summary]") {
  // The histogram keeps buckets only from its lowest duration up: the first hold (kept
  // outside it), holds shorter than every earlier one, and a long one must all count.
  std::vector<std::int64_t> durations_ms{1};  // the first hold, the shortest
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(locks::duration_exact_limit) + 50; ++i) durations_ms.push_back(100 + i);
  durations_ms.insert(durations_ms.end(), {3, 2, 90'000, 5});
  fixture f;
  double at = 1000;
  for (std::int64_t d : durations_ms) {
    f.acquire("A", at, 1'000'000);
    f.unlock("A", at + static_cast<double>(d), op_outcome::ok);
    at += static_cast<double>(d) + 1000;
  }
  std::vector<std::int64_t> sorted = durations_ms;
  std::sort(sorted.begin(), sorted.end());
  auto nearest_rank = [&](double q) {
    const auto r = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return static_cast<double>(sorted[r - 1] * ms);
  };
  bool seen = false;
  f.timeline.for_each_lock([&](std::string_view, const locks::lock_stats& s) {
    seen = true;
    CHECK(s.hold.count == durations_ms.size());
    CHECK_FALSE(s.hold.exact);
    CHECK(s.hold.max == 90'000 * ms);
    CHECK(std::abs(static_cast<double>(s.hold.p50) - nearest_rank(0.50)) <= nearest_rank(0.50) / 128);
    CHECK(std::abs(static_cast<double>(s.hold.p99) - nearest_rank(0.99)) <= nearest_rank(0.99) / 128);
  });
  CHECK(seen);
}

TEST_CASE("timeline: the summary prints durations exactly as format_duration does", "[timeline][summary]") {
  // Includes exact ties (x.xxx5 s, x.x5 ms), which the table's fast path leaves to fmt.
  const std::int64_t durations[] = {0,       999,       1000,      12'350,     12'351,        99'950,
                                    999'949, 999'950,   999'960,   1'000'000,  2'999'500,     2'999'501,
                                    42'758'000, 3'600'000'500, 86'400'000'499};
  fixture f;
  std::deque<std::string> names;
  std::vector<std::string> expected;
  for (std::int64_t d : durations) {
    names.push_back("lock-" + std::to_string(d));
    auto acquire = f.op(lock_op_kind::acquire, op_outcome::ok, "A", 0);
    acquire.lock = names.back();
    acquire.lease_ms = 1'000'000'000;
    f.timeline.on_operation(acquire);
    auto unlock = f.op(lock_op_kind::unlock, op_outcome::ok, "A", 0);
    unlock.lock = names.back();
    unlock.request_us = acquire.reply_us + d - 100;
    unlock.reply_us = acquire.reply_us + d;
    f.timeline.on_operation(unlock);
    const std::string one = locks::format_duration(d);
    expected.push_back(names.back() + " " + one + "/" + one + "/" + one);
  }
  std::string out;
  locks::report_options o;
  o.format = locks::report_format::summary_only;
  locks::lock_report r(o, [&](std::string_view s) { out += s; });
  r.write_summary(f.timeline);
  std::istringstream lines(out);
  std::string line;
  std::getline(lines, line);  // the header
  for (const std::string& want : expected) {
    REQUIRE(std::getline(lines, line));
    std::istringstream fields(line);
    std::string name, acq, contended, hold;
    fields >> name >> acq >> contended >> hold;
    CHECK(name + " " + hold == want);
  }
}

TEST_CASE("timeline: summary columns stay aligned for non-ASCII and control-byte names", "[timeline][summary]") {
  fixture f;
  const std::string names[] = {"plain", "verrou-\xc3\xa9t\xc3\xa9", std::string("bad\x01name"),
                               std::string("raw\x87" "bytes\xc3")};
  for (const std::string& name : names) {
    auto acquire = f.op(lock_op_kind::acquire, op_outcome::ok, "A", 0);
    acquire.lock = name;
    acquire.lease_ms = 30000;
    f.timeline.on_operation(acquire);
    auto unlock = f.op(lock_op_kind::unlock, op_outcome::ok, "A", 1.5);
    unlock.lock = name;
    f.timeline.on_operation(unlock);
  }
  std::string out;
  locks::report_options o;
  o.format = locks::report_format::summary_only;
  locks::lock_report r(o, [&](std::string_view s) { out += s; });
  r.write_summary(f.timeline);
  // The '%' of the contended column sits at the same display column on every row.
  auto column_of_percent = [](std::string_view line) {
    std::size_t columns = 0;
    for (char c : line.substr(0, line.find('%'))) columns += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    return columns;
  };
  std::istringstream lines(out);
  std::string line;
  std::getline(lines, line);  // the header
  std::vector<std::size_t> columns;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) {
    rows.push_back(line);
    columns.push_back(column_of_percent(line));
  }
  REQUIRE(rows.size() == 4);
  CHECK(rows[1].rfind("verrou-\xc3\xa9t\xc3\xa9 ", 0) == 0);
  CHECK(rows[2].rfind("bad?name ", 0) == 0);  // control bytes are shown as '?'
  CHECK(rows[3].rfind("raw?bytes? ", 0) == 0);  // and so are bytes that are not UTF-8
  CHECK(columns[0] == columns[1]);
  CHECK(columns[0] == columns[2]);
  CHECK(columns[0] == columns[3]);
  CHECK(rows[1].find("1.5ms/1.5ms/1.5ms") != std::string::npos);
}

TEST_CASE("timeline: a first hold too long for the row's 48 bits is kept whole beside it", "[timeline][summary]") {
  // A row keeps its first hold's length in 48 bits (±4.4 years of microseconds); a
  // longer one (a capture whose clock jumped) goes to the lock's side record. Either
  // way the summary must give back the exact length, and later holds stay apart.
  constexpr std::int64_t limit = std::int64_t{1} << 47;
  const std::int64_t durations[] = {limit - 1, limit, limit + 12'345, std::int64_t{1} << 52};
  fixture f;
  std::deque<std::string> names;
  std::int64_t now_us = f.op(lock_op_kind::acquire, op_outcome::ok, "A", 0).request_us;  // in time order throughout
  for (std::int64_t d : durations) {
    names.push_back("long-" + std::to_string(d));
    for (int hold = 0; hold < 2; ++hold) {  // the second hold, 10 s after the first: 1 ms
      auto acquire = f.op(lock_op_kind::acquire, op_outcome::ok, "A", 0);
      acquire.lock = names.back();
      acquire.lease_ms = -1;  // no lease: nothing expires in those years
      acquire.request_us = now_us;
      acquire.reply_us = now_us + 100;
      f.timeline.on_operation(acquire);
      auto unlock = f.op(lock_op_kind::unlock, op_outcome::ok, "A", 0);
      unlock.lock = names.back();
      unlock.reply_us = acquire.reply_us + (hold == 0 ? d : 1000);
      unlock.request_us = unlock.reply_us - 100;
      f.timeline.on_operation(unlock);
      now_us = unlock.reply_us + 10'000'000;
    }
  }
  std::size_t seen = 0;
  f.timeline.for_each_lock([&](std::string_view name, const locks::lock_stats& s) {
    const std::int64_t d = durations[seen++];
    INFO(name);
    CHECK(s.hold.count == 2);
    CHECK(s.hold.max == d);
    REQUIRE(s.hold_us.size() == 2);
    CHECK(s.hold_us[0] == d);
    CHECK(s.hold_us[1] == 1000);
  });
  CHECK(seen == std::size(durations));
}
