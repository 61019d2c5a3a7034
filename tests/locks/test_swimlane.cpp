// The HTML/SVG report's drawing model (swimlane_builder, layout_block) fed with events,
// and `lockscope analyze --format html|svg` on the bundled captures.
#include <cstdio>
#include <filesystem>
#include <regex>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/locks/block_ranking.hpp"
#include "lockscope/locks/report_page.hpp"
#include "lockscope/locks/swimlane.hpp"
#include "lockscope/locks/swimlane_svg.hpp"

using namespace lockscope;
using namespace lockscope::ingest;
using namespace lockscope::locks;

namespace {

constexpr std::int64_t t0 = 1'700'000'000'000'000;

lock_event ev(std::int64_t ms, lock_event_kind k, std::string_view owner, std::string_view lock = "L") {
  lock_event e;
  e.ts_us = t0 + ms * 1000;
  e.event = k;
  e.lock = lock;
  e.owner = owner;
  e.client = "10.0.0.1:5000";
  e.server = "10.0.0.9:6379";
  e.lock_server = e.server;
  return e;
}

std::vector<const swimlane_mark*> marks_of(const swimlane_block& b, mark_kind k) {
  std::vector<const swimlane_mark*> out;
  for (const auto& m : b.marks) {
    if (m.kind == k) out.push_back(&m);
  }
  return out;
}

std::size_t count(const std::string& s, const std::string& what) { return timeline_test::occurrences(s, what); }

std::string run_cli(const std::string& args, int& status) {
  return timeline_test::command_output(std::string(LOCKSCOPE_CLI_PATH) + " analyze " + args, status);
}

}  // namespace

TEST_CASE("swimlane: holds, waits, retries, leases, reentry, notification arrows", "[swimlane]") {
  swimlane_builder b({}, {block_key("L", 0)});
  auto a = ev(0, lock_event_kind::acquired, "A");
  a.lease_ms = 3000;
  b.on_event(a);
  auto c1 = ev(10, lock_event_kind::contended, "B");
  c1.ttl_ms = 2990;
  b.on_event(c1);
  b.on_event(ev(12, lock_event_kind::subscribed, "B"));
  auto r = ev(20, lock_event_kind::reentered, "A");
  r.hold_count = 2;
  b.on_event(r);
  auto pr = ev(30, lock_event_kind::partially_released, "A");
  pr.hold_count = 1;
  b.on_event(pr);
  auto rn = ev(1000, lock_event_kind::renewed, "A");
  rn.lease_ms = 3000;
  b.on_event(rn);
  b.on_event(ev(2000, lock_event_kind::released, "A"));
  b.on_event(ev(2001, lock_event_kind::notified, "B"));
  b.on_event(ev(2002, lock_event_kind::acquired, "B"));
  b.on_event(ev(2003, lock_event_kind::unsubscribed, "B"));
  b.on_event(ev(2500, lock_event_kind::acquired, "X", "not drawn"));
  b.finish(t0 + 5'000'000);
  REQUIRE(b.blocks().size() == 1);
  const auto& blk = b.blocks()[0];
  CHECK(blk.events.size() == 10);  // "not drawn" is not a selected block
  REQUIRE(blk.lanes.size() == 2);
  CHECK(blk.lanes[0].owner == "A");
  const auto holds = marks_of(blk, mark_kind::hold);
  REQUIRE(holds.size() == 2);
  CHECK(holds[0]->t0_us == t0);
  CHECK(holds[0]->t1_us == t0 + 2'000'000);
  CHECK(!holds[0]->open);
  CHECK(holds[1]->t1_us == t0 + 5'000'000);  // still held at the end
  CHECK(holds[1]->open);
  const auto reenters = marks_of(blk, mark_kind::reenter);
  REQUIRE(reenters.size() == 1);
  CHECK(reenters[0]->depth == 2);
  CHECK(reenters[0]->t1_us == t0 + 30'000);
  const auto leases = marks_of(blk, mark_kind::lease);
  REQUIRE(leases.size() == 2);
  CHECK(leases[1]->t1_us == t0 + 4'000'000);  // renewed at 1 s for 3 s
  const auto waits = marks_of(blk, mark_kind::wait);
  REQUIRE(waits.size() == 1);
  CHECK(waits[0]->t0_us == t0 + 10'000);
  CHECK(waits[0]->t1_us == t0 + 2'002'000);
  const auto arrows = marks_of(blk, mark_kind::notification);
  REQUIRE(arrows.size() == 1);
  CHECK(arrows[0]->t0_us == t0 + 2'000'000);  // from the release
  CHECK(arrows[0]->from_lane == 0);
  CHECK(arrows[0]->lane == 1);
  const auto subs = marks_of(blk, mark_kind::subscription);
  REQUIRE(subs.size() == 1);
  CHECK(subs[0]->t1_us == t0 + 2'003'000);
  CHECK(blk.json(blk.events[arrows[0]->event]).find("\"event\":\"notified\"") != std::string_view::npos);
}

TEST_CASE("swimlane: a waiter silent past its TTL + 2 s gave up, and anomalies span their interval", "[swimlane]") {
  swimlane_builder b({}, {block_key("L", 0)});
  auto c = ev(0, lock_event_kind::contended, "B");
  c.ttl_ms = 1000;
  b.on_event(c);
  c = ev(2900, lock_event_kind::contended, "B");  // within 1 s + 2 s: the same wait
  c.ttl_ms = 1000;
  b.on_event(c);
  c = ev(7000, lock_event_kind::contended, "B");  // 4.1 s later: a new wait
  b.on_event(c);
  auto an = ev(8000, lock_event_kind::anomaly, "B");
  an.kind = anomaly_kind::idle_with_waiters;
  an.interval_start_us = t0 + 7'500'000;
  an.interval_us = 400'000;
  b.on_event(an);
  b.finish(t0 + 9'000'000);
  const auto& blk = b.blocks()[0];
  const auto waits = marks_of(blk, mark_kind::wait);
  REQUIRE(waits.size() == 2);
  CHECK(waits[0]->t1_us == t0 + 2'900'000);  // its last attempt
  CHECK(waits[1]->t0_us == t0 + 7'000'000);
  CHECK(marks_of(blk, mark_kind::retry).size() == 3);
  const auto anomalies = marks_of(blk, mark_kind::anomaly);
  REQUIRE(anomalies.size() == 1);
  CHECK(anomalies[0]->t0_us == t0 + 7'500'000);
  CHECK(anomalies[0]->t1_us == t0 + 7'900'000);
  CHECK(marks_of(blk, mark_kind::anomaly_band).size() == 1);
}

TEST_CASE("swimlane: bounded per block and per lane, and the SVG carries the JSONL values", "[swimlane]") {
  swimlane_options o;
  o.max_block_events = 100;
  o.max_lanes = 4;
  swimlane_builder b(o, {block_key("L<&>\"", 0)});
  std::vector<std::string> owners;
  for (int i = 0; i < 300; ++i) owners.push_back("owner-" + std::to_string(i % 10));
  for (int i = 0; i < 300; ++i) {
    const auto& owner = owners[static_cast<std::size_t>(i / 2 * 2)];
    auto e = ev(i * 10, i % 2 ? lock_event_kind::released : lock_event_kind::acquired, owner, "L<&>\"");
    b.on_event(e);
  }
  b.finish(t0 + 4'000'000);
  const auto& blk = b.blocks()[0];
  CHECK(blk.events.size() == 100);
  CHECK(blk.events_seen == 300);
  CHECK(blk.events_dropped == 200);
  CHECK(blk.lanes.size() == 5);  // 4 owners, then one lane for the others
  // The events kept are shared out over the blocks.
  swimlane_options shared;
  shared.max_total_events = 1000;
  shared.min_block_events = 50;
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back(block_key("k" + std::to_string(i), 0));
  swimlane_builder many(shared, keys);
  for (int i = 0; i < 100; ++i) many.on_event(ev(i, lock_event_kind::contended, "A", "k7"));
  CHECK(many.blocks()[7].events.size() == 50);  // 1000 / 40 = 25, at least 50
  CHECK(many.blocks()[7].events_dropped == 50);
  CHECK(blk.lanes.back().owner == "(other owners)");
  swimlane_geometry g;
  g.start_us = t0;
  g.end_us = t0 + 4'000'000;
  auto svg = layout_block(blk, g);
  CHECK(svg.coarse.empty());
  CHECK(count(svg.marks, "class=\"m hold") == 50);
  CHECK(count(svg.marks, "data-lock=\"L&lt;&amp;&gt;&quot;\"") == 100);  // holds and releases
  CHECK(svg.marks.find("data-owner=\"owner-8\"") != std::string::npos);  // the JSONL owner, not the lane's
  g.fine_limit = 10;
  svg = layout_block(blk, g);
  CHECK(!svg.coarse.empty());
  CHECK(count(svg.coarse, "data-event=\"coarse\"") > 0);
}

TEST_CASE("swimlane: data-* values read as the JSONL's strings", "[swimlane]") {
  std::string out;
  append_xml_escaped(out, std::string_view("a\xff\xc3\xa9<\"&'\x01\n", 10));
  // \xff is not UTF-8: the JSONL writes \u00ff, which reads as U+00FF (C3 BF).
  CHECK(out == "a\xc3\xbf\xc3\xa9&lt;&quot;&amp;&#39;\xef\xbf\xbd&#10;");
}

TEST_CASE("swimlane: axis steps and labels follow the zoom's unit", "[swimlane]") {
  CHECK(axis_step(10'000'000, 10) == 1'000'000);
  CHECK(axis_label(3'000'000, 1'000'000) == "3s");
  CHECK(axis_label(2'500'000, 500'000) == "2.5s");
  CHECK(axis_step(10'000, 10) == 1000);
  CHECK(axis_label(4000, 1000) == "4ms");
  CHECK(axis_label(4500, 500) == "4.5ms");
  CHECK(axis_label(1'250'000, 250'000) == "1.25s");
  CHECK(axis_label(250'050, 50) == "250050µs");
  CHECK(axis_label(50'000, 10'000) == "50ms");
}

TEST_CASE("swimlane: ranking puts contention and anomalies first", "[swimlane]") {
  block_ranking r(2);
  r.consider("quiet", 0, 0, 1);
  r.consider("busy", 0, 0, 50);
  r.consider("broken", 0, 1, 2);
  r.consider("quiet too", 0, 0, 1);
  r.consider("busy", 1, 0, 60);  // another database: another block
  const auto top = r.top();
  REQUIRE(top.size() == 2);
  CHECK(top[0] == block_key("broken", 0));
  CHECK(top[1] == block_key("busy", 1));
  auto an = ev(11, lock_event_kind::anomaly, "A", "broken");
  an.kind = anomaly_kind::long_hold;
  r.on_event(an);
  CHECK(r.anomalies()[static_cast<std::size_t>(anomaly_kind::long_hold)] == 1);
  block_ranking none(0);
  none.consider("x", 0, 5, 5);
  CHECK(none.top().empty());
}

TEST_CASE("swimlane: lockscope analyze --format html and svg", "[swimlane][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  const std::string capture = std::string(LOCKSCOPE_CAPTURES_DIR) + "/thirdparty/redisson.pcap";
  int status = -1;
  const std::string jsonl = run_cli(capture + " --format jsonl 2>/dev/null", status);
  REQUIRE(status == 0);
  const std::string html = run_cli(capture + " --format html 2>/dev/null", status);
  REQUIRE(status == 0);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("Content-Security-Policy\" content=\"default-src 'none'") != std::string::npos);
  CHECK(html.find("src=\"http") == std::string::npos);
  CHECK(count(html, "<section class=\"block\"") == 3);  // res:alpha, res:beta, res:gamma
  // A hold per acquisition, and one from the capture's start per holder that held before it.
  CHECK(count(html, " before\"") == 2);
  CHECK(count(html, "class=\"m hold") == count(jsonl, "\"event\":\"acquired\"") + count(html, " before\""));
  CHECK(count(html, "class=\"m anomaly ") == count(jsonl, "\"event\":\"anomaly\""));

  const std::string svg = run_cli(capture + " --format svg --lock res:alpha 2>/dev/null", status);
  REQUIRE(status == 0);
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("<script") == std::string::npos);
  std::size_t alpha_acquired = 0;
  for (auto at = jsonl.find("\"lock\":\"res:alpha\",\"event\":\"acquired\""); at != std::string::npos;
       at = jsonl.find("\"lock\":\"res:alpha\",\"event\":\"acquired\"", at + 1)) {
    ++alpha_acquired;
  }
  CHECK(alpha_acquired > 0);
  CHECK(count(svg, "class=\"m hold") == alpha_acquired + count(svg, " before\""));

  const std::string none = run_cli(capture + " --format svg --lock nope 2>&1", status);
  CHECK(status != 0);
  CHECK(none.find("--lock nope: no lock of that name") != std::string::npos);
  const std::string several = run_cli(capture + " --format svg --lock 'res:*' 2>&1", status);
  CHECK(status != 0);
  CHECK(several.find("--lock res:* matches 3 locks") != std::string::npos);
  const std::string bad_output = run_cli(capture + " --format html -o /nonexistent/dir/r.html 2>&1", status);
  CHECK(status != 0);
  CHECK(bad_output.find("cannot write /nonexistent/dir/r.html: No such file or directory") != std::string::npos);

  // --html-max-locks: the most active lock alone, and the others said to be left out.
  const std::string one = run_cli(capture + " --format html --html-max-locks 1 2>/dev/null", status);
  CHECK(count(one, "<section class=\"block\"") == 1);
  CHECK(one.find("data-left-out=\"2\"") != std::string::npos);
}

TEST_CASE("swimlane: svg's matching lock names reach stderr without terminal escapes", "[swimlane][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  // Lock names are the wire's: an OSC title change ended by BEL, and CSI as a C1 control
  // written in UTF-8 (U+009B), which some terminals act on.
  timeline_test::capture_builder b;
  const int a = b.connect("10.0.0.1", 50001, "10.0.0.9", 6379, t0);
  const int c = b.connect("10.0.0.2", 50002, "10.0.0.9", 6379, t0 + 100);
  b.command(a, t0 + 1000, {"SET", "evil\x1b]0;pwned\a", "token-a", "NX", "PX", "30000"}, timeline_test::resp_ok);
  b.command(c, t0 + 2000, {"SET", "csi\xc2\x9b" "31m", "token-b", "NX", "PX", "30000"}, timeline_test::resp_ok);
  const auto path = std::filesystem::temp_directory_path() / ("lockscope-evil-" + std::to_string(::getpid()) + ".pcap");
  b.write(path.string());
  int status = -1;
  const std::string err = run_cli("--format svg --lock '*' " + path.string() + " 2>&1 >/dev/null", status);
  std::filesystem::remove(path);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(err.find("--lock * matches 2 locks (") != std::string::npos);
  CHECK(err.find("evil?]0;pwned?") != std::string::npos);  // as analyze's text output shows them
  CHECK(err.find("csi??31m") != std::string::npos);
  CHECK(err.find('\x1b') == std::string::npos);
  CHECK(err.find('\a') == std::string::npos);
  CHECK(err.find("\xc2\x9b") == std::string::npos);
}
