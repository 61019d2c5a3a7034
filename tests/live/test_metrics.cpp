// lock_metrics without sockets: histogram bucket edges, _sum/_count, the fold into
// lock="_other", label escaping, counters that never decrease while locks enter and
// leave the labelled set, and the rendered text passing `promtool check metrics`.
#include <random>

#include "helpers.hpp"
#include "lockscope/live/lock_metrics.hpp"
#include "metrics_text.hpp"

using namespace lockscope;
using namespace lockscope::ingest;
using namespace lockscope::locks;
using namespace lockscope::live;

namespace {

lock_event make(lock_event_kind k, std::string_view lock, std::int64_t ts_us) {
  lock_event e;
  e.event = k;
  e.lock = lock;
  e.ts_us = ts_us;
  return e;
}

void acquire(lock_metrics& m, std::string_view lock, std::int64_t ts_us, std::int64_t wait_us = -1) {
  lock_event e = make(lock_event_kind::acquired, lock, ts_us);
  e.wait_us = wait_us;
  m.on_event(e);
}

void release(lock_metrics& m, std::string_view lock, std::int64_t ts_us, std::int64_t held_us) {
  lock_event e = make(lock_event_kind::released, lock, ts_us);
  e.held_us = held_us;
  m.on_event(e);
}

std::string rendered(lock_metrics& m, const capture_gauges& g = {}) {
  std::string out;
  m.render(out, g);
  return out;
}

std::string bucket(std::string_view name, std::string_view lock, std::string_view le) {
  return "lockscope_" + std::string(name) + "_bucket{lock=\"" + std::string(lock) + "\",le=\"" + std::string(le) + "\"}";
}

}  // namespace

TEST_CASE("metrics: histogram bucket edges are inclusive, _sum and _count exact", "[metrics]") {
  lock_metrics m;
  acquire(m, "L", 1, 100);          // exactly 100 µs: le=0.0001
  acquire(m, "L", 2, 101);          // just above: le=0.00025
  acquire(m, "L", 3, 60'000'000);   // exactly 60 s: le=60
  acquire(m, "L", 4, 60'000'001);   // above every bound: +Inf only
  acquire(m, "L", 5);               // no wait: counted as an acquisition only
  release(m, "L", 6, 2'500'000);
  const auto s = test::parse_samples(rendered(m));
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"L\"}", -1) == 5);
  CHECK(test::sample_or(s, bucket("lock_wait_seconds", "L", "0.0001"), -1) == 1);
  CHECK(test::sample_or(s, bucket("lock_wait_seconds", "L", "0.00025"), -1) == 2);
  CHECK(test::sample_or(s, bucket("lock_wait_seconds", "L", "30"), -1) == 2);
  CHECK(test::sample_or(s, bucket("lock_wait_seconds", "L", "60"), -1) == 3);
  CHECK(test::sample_or(s, bucket("lock_wait_seconds", "L", "+Inf"), -1) == 4);
  CHECK(test::sample_or(s, "lockscope_lock_wait_seconds_count{lock=\"L\"}", -1) == 4);
  CHECK(test::sample_or(s, "lockscope_lock_wait_seconds_sum{lock=\"L\"}", -1) == Approx(120.000202).epsilon(1e-12));
  CHECK(test::sample_or(s, bucket("lock_hold_seconds", "L", "1"), -1) == 0);
  CHECK(test::sample_or(s, bucket("lock_hold_seconds", "L", "2.5"), -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_hold_seconds_count{lock=\"L\"}", -1) == 1);
  // The text itself: microseconds, no float rounding.
  CHECK(rendered(m).find("lockscope_lock_wait_seconds_sum{lock=\"L\"} 120.000202\n") != std::string::npos);
}

TEST_CASE("metrics: events count where the report counts them", "[metrics]") {
  lock_metrics m;
  m.on_event(make(lock_event_kind::contended, "L", 1));
  m.on_event(make(lock_event_kind::contended, "L", 2));
  lock_event x = make(lock_event_kind::expired, "L", 3);
  x.held_us = 400'000;
  m.on_event(x);
  lock_event a = make(lock_event_kind::anomaly, "L", 4);
  a.kind = anomaly_kind::expired_while_held;
  m.on_event(a);
  m.on_event(make(lock_event_kind::reentered, "L", 5));  // not an acquisition
  m.on_event(make(lock_event_kind::renewed, "M", 6));    // counts nothing, takes no label
  lock_event g = make(lock_event_kind::gave_up, "L", 7);
  g.wait_us = 1'000'000;  // a wait given up is no acquisition's wait
  m.on_event(g);
  const std::string text = rendered(m);
  const auto s = test::parse_samples(text);
  CHECK(test::sample_or(s, "lockscope_lock_contended_total{lock=\"L\"}", -1) == 2);
  CHECK(test::sample_or(s, "lockscope_lock_gave_up_total{lock=\"L\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_wait_seconds_count{lock=\"L\"}", -1) == 0);
  if (test::promtool_available()) CHECK(test::promtool_check(text).status == 0);
  CHECK(test::sample_or(s, "lockscope_lock_expired_total{lock=\"L\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_hold_seconds_count{lock=\"L\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_anomalies_total{lock=\"L\",kind=\"expired_while_held\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"L\"}", -1) == 0);
  CHECK(s.count("lockscope_lock_acquisitions_total{lock=\"M\"}") == 0);
  CHECK(m.labelled_locks() == 1);
}

TEST_CASE("metrics: beyond max_locks the rest is summed under _other, and HELP says so", "[metrics]") {
  metrics_options o;
  o.max_locks = 2;
  lock_metrics m(o);
  for (std::string_view lock : {"a", "b", "c", "d", "a", "c"}) acquire(m, lock, 10, 1000);
  const std::string text = rendered(m);
  const auto s = test::parse_samples(text);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"a\"}", -1) == 2);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"b\"}", -1) == 1);
  CHECK(s.count("lockscope_lock_acquisitions_total{lock=\"c\"}") == 0);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"_other\"}", -1) == 3);
  CHECK(test::sample_or(s, "lockscope_lock_wait_seconds_count{lock=\"_other\"}", -1) == 3);
  CHECK(text.find("At most 2 locks (--metrics-max-locks) have a label of their own, the most recently active; the "
                  "others are summed under lock=\"_other\"") != std::string::npos);
  if (test::promtool_available()) {
    const auto r = test::promtool_check(text);
    INFO(r.output);
    CHECK(r.status == 0);
  }
}

TEST_CASE("metrics: label values escaped per the format, bad UTF-8 and _other never collide", "[metrics]") {
  std::string out;
  append_label_value(out, "a\"b\\c\nd");
  CHECK(out == "a\\\"b\\\\c\\nd");
  out.clear();
  append_label_value(out, "caf\xC3\xA9 \xE2\x9C\x93");  // valid UTF-8 stays as is
  CHECK(out == "caf\xC3\xA9 \xE2\x9C\x93");
  out.clear();
  append_label_value(out, std::string_view("k\xFF\xC3(\xED\xA0\x80", 7));  // bad byte, cut sequence, surrogate
  CHECK(out == "k\\\\xFF\\\\xC3(\\\\xED\\\\xA0\\\\x80");
  out.clear();
  // Controls would reach the terminal of whoever curls the endpoint: ESC, BEL, DEL, tab,
  // and CSI as a C1 control in UTF-8 (U+009B), each byte a '?' as in analyze's text.
  append_label_value(out, "t\x1b]0;x\a d\x7f c\xC2\x9B" "31m \t.");
  CHECK(out == "t?]0;x? d? c??31m ?.");

  lock_metrics m;
  acquire(m, "q\"uote", 1);
  acquire(m, std::string_view("bin\xFF", 4), 2);
  acquire(m, "bin\\xFF", 3);   // reads like the one above once escaped: _other
  acquire(m, "_other", 4);     // the reserved name: _other
  acquire(m, "line\nbreak", 5);
  acquire(m, "esc\x1b[31m", 6);
  acquire(m, "esc?[31m", 7);  // reads like the one above once shown: _other
  const std::string text = rendered(m);
  std::vector<std::string> duplicates;
  const auto s = test::parse_samples(text, &duplicates);
  CHECK(duplicates.empty());
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"q\\\"uote\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"bin\\\\xFF\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"line\\nbreak\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"esc?[31m\"}", -1) == 1);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"_other\"}", -1) == 3);
  if (test::promtool_available()) {
    const auto r = test::promtool_check(text);
    INFO(text);
    INFO(r.output);
    CHECK(r.status == 0);
    // The linter can fail: the same text with a raw invalid byte does.
    std::string broken = text;
    broken.replace(broken.find("bin\\\\xFF"), 8, "bin\xFF");
    CHECK(test::promtool_check(broken).status != 0);
  }
}

TEST_CASE("metrics: counters never decrease while locks enter and leave the labelled set", "[metrics]") {
  metrics_options o;
  o.max_locks = 3;
  o.retire_after_us = 1000;
  o.retired_memory = 16;  // more than the locks used: none is ever forgotten
  lock_metrics m(o);
  std::mt19937 rng(14);
  const std::vector<std::string> locks = {"a", "b", "c", "d", "e", "f", "g", "h"};
  std::map<std::string, double> highest;  // every series' highest value so far
  std::map<std::string, std::uint64_t> events;  // acquisitions per lock, the truth
  std::int64_t now = 0;
  std::size_t reappeared = 0;
  std::map<std::string, std::size_t> absent_since;
  capture_gauges g;
  for (int step = 0; step < 600; ++step) {
    now += std::uniform_int_distribution<int>(0, 400)(rng);
    // Locks a..c are busy; the others come and go, so labels move between them.
    const std::size_t i = std::uniform_int_distribution<int>(0, 9)(rng) < 6 ? rng() % 3 : 3 + rng() % 5;
    acquire(m, locks[i], now, rng() % 2000);
    ++events[locks[i]];
    g.packets += rng() % 3;
    const auto s = test::parse_samples(rendered(m, g));
    for (const auto& [series, value] : s) {
      if (series.rfind("lockscope_flows_open", 0) == 0 || series.rfind("lockscope_store_", 0) == 0 ||
          series.rfind("lockscope_buffered_bytes", 0) == 0 ||
          series.rfind("lockscope_process_", 0) == 0) {
        continue;  // gauges
      }
      const auto it = highest.find(series);
      if (it != highest.end()) {
        if (value < it->second) FAIL(series << " went from " << it->second << " to " << value << " at step " << step);
        if (absent_since.erase(series) > 0) ++reappeared;
        it->second = value;
      } else {
        highest.emplace(series, value);
      }
    }
    for (const auto& [series, value] : highest) {
      if (s.count(series) == 0) absent_since.emplace(series, step);
    }
    CHECK(m.labelled_locks() <= 3);
  }
  CHECK(reappeared > 0);  // locks did leave the set and come back, continuing their counts
  // Every acquisition counted once: in its lock's series (labelled or retired) or _other.
  double total = 0;
  for (const auto& [series, value] : highest) {
    if (series.rfind("lockscope_lock_acquisitions_total{", 0) == 0) total += value;
  }
  std::uint64_t truth = 0;
  for (const auto& [lock, n] : events) truth += n;
  CHECK(total == static_cast<double>(truth));  // rendered after every event: each series' last value is its total
}

TEST_CASE("metrics: a busy lock keeps its label, an idle one gives it up", "[metrics]") {
  metrics_options o;
  o.max_locks = 1;
  o.retire_after_us = 1'000'000;
  o.retired_memory = 0;  // a retired lock is forgotten at once: it starts again from zero
  lock_metrics m(o);
  acquire(m, "busy", 0);
  acquire(m, "new", 500'000);   // busy was active 0.5 s ago: no slot
  acquire(m, "busy", 900'000);
  acquire(m, "new", 1'800'000);  // busy idle 0.9 s: still no slot
  auto s = test::parse_samples(rendered(m));
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"busy\"}", -1) == 2);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"_other\"}", -1) == 2);
  acquire(m, "new", 1'900'001);  // busy idle 1 s: new takes the slot
  s = test::parse_samples(rendered(m));
  CHECK(s.count("lockscope_lock_acquisitions_total{lock=\"busy\"}") == 0);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"new\"}", -1) == 1);
  CHECK(test::sample_or(s, "lockscope_lock_acquisitions_total{lock=\"_other\"}", -1) == 2);  // busy's 2 not folded in
}

TEST_CASE("metrics: capture counters are clamped, never rendered smaller", "[metrics]") {
  lock_metrics m;
  capture_gauges g;
  g.kernel_drops = 500;
  g.packets = 10;
  auto s = test::parse_samples(rendered(m, g));
  CHECK(test::sample_or(s, "lockscope_capture_kernel_drops_total", -1) == 500);
  g.kernel_drops = 3;  // a wrapped 32-bit kernel counter
  s = test::parse_samples(rendered(m, g));
  CHECK(test::sample_or(s, "lockscope_capture_kernel_drops_total", -1) == 500);
  CHECK(test::sample_or(s, "lockscope_capture_packets_total", -1) == 10);
  CHECK(test::sample_or(s, "lockscope_store_capacity{store=\"labelled_locks\"}", -1) == 100);
  // No --max-locks (0): the locks store has no cap to show.
  CHECK(test::sample_or(s, "lockscope_store_capacity{store=\"locks\"}", -1) == -1);
  g.locks_cap = 5000;
  g.locks_forgotten = 42;
  s = test::parse_samples(rendered(m, g));
  CHECK(test::sample_or(s, "lockscope_store_capacity{store=\"locks\"}", -1) == 5000);
  CHECK(test::sample_or(s, "lockscope_locks_forgotten_total", -1) == 42);
}

TEST_CASE("metrics: what connections buffer is a gauge, the times they gave it back a counter that never decreases",
          "[metrics]") {
  lock_metrics m(metrics_options{});
  capture_gauges g;
  g.buffered_bytes = 12345;
  g.buffer_sheds = 7;
  auto s = test::parse_samples(rendered(m, g));
  CHECK(test::sample_or(s, "lockscope_buffered_bytes", -1) == 12345);
  CHECK(test::sample_or(s, "lockscope_buffer_sheds_total", -1) == 7);
  g.buffered_bytes = 0;
  g.buffer_sheds = 5;  // a source that went back: the counter holds
  s = test::parse_samples(rendered(m, g));
  CHECK(test::sample_or(s, "lockscope_buffered_bytes", -1) == 0);
  CHECK(test::sample_or(s, "lockscope_buffer_sheds_total", -1) == 7);
}
