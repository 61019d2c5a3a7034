// trace_export (--format trace) fed lock events directly: the spans and instants it
// makes of reentrant holds, waits that end in a give-up, MultiLock groups and holds
// still open at the end, and that its id maps stay bounded. The bundled captures are
// checked end to end (schema, JSONL) by tests/trace/check_trace.py.
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/trace_export.hpp"

namespace {

using lockscope::locks::lock_event;
using lockscope::locks::lock_event_kind;
using lockscope::locks::trace_export;
using lockscope::locks::trace_options;
using lockscope::locks::wait_end;

constexpr std::int64_t s = 1'000'000;

lock_event ev(std::int64_t ts, lock_event_kind k, std::string_view lock = "L", std::string_view owner = "o1") {
  lock_event e;
  e.ts_us = ts;
  e.event = k;
  e.lock = lock;
  e.owner = owner;
  e.client = "10.0.0.1:5000";
  e.server = "10.0.0.9:6379";
  e.lock_server = "10.0.0.9:6379";
  return e;
}

// A release of a hold taken held_us earlier (the timeline's held_ms).
lock_event release(std::int64_t ts, std::int64_t held_us, lock_event_kind k = lock_event_kind::released,
                   std::string_view lock = "L", std::string_view owner = "o1") {
  auto e = ev(ts, k, lock, owner);
  e.held_us = held_us;
  return e;
}

struct run {
  std::string text;
  trace_export t;
  explicit run(trace_options o = {}) : t(o, [this](std::string_view c) { text += c; }) {}
  boost::json::array finish(std::int64_t end_us) {
    t.finish(end_us);
    return boost::json::parse(text).as_object().at("traceEvents").as_array();
  }
};

std::vector<boost::json::object> named(const boost::json::array& events, std::string_view ph, std::string_view name) {
  std::vector<boost::json::object> r;
  for (const auto& v : events) {
    const auto& o = v.as_object();
    if (o.at("ph").as_string() == ph && o.at("name").as_string() == name) r.push_back(o);
  }
  return r;
}

// Where the first X event of that name is in the output.
std::size_t position(const boost::json::array& events, std::string_view name) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& o = events[i].as_object();
    if (o.at("ph").as_string() == "X" && o.at("name").as_string() == name) return i;
  }
  return events.size();
}

}  // namespace

TEST_CASE("trace_export: a reentrant hold is a hold span with the reentered level nested inside") {
  run r;
  auto a = ev(1 * s, lock_event_kind::acquired);
  a.hold_count = 1;
  r.t.on_event(a);
  r.t.on_event(ev(2 * s, lock_event_kind::reentered));
  r.t.on_event(ev(3 * s, lock_event_kind::partially_released));
  r.t.on_event(release(4 * s, 3 * s));
  const auto events = r.finish(5 * s);
  const auto holds = named(events, "X", "hold");
  const auto inner = named(events, "X", "reentered");
  REQUIRE(holds.size() == 1);
  REQUIRE(inner.size() == 1);
  CHECK(holds[0].at("ts").as_int64() == 1 * s);
  CHECK(holds[0].at("dur").as_int64() == 3 * s);
  CHECK(holds[0].at("args").at("event").as_string() == "released");
  CHECK(named(events, "i", "acquired").size() == 1);  // no wait: the acquisition is an instant
  CHECK(named(events, "i", "reentered").size() == 1);
  CHECK(inner[0].at("ts").as_int64() == 2 * s);
  CHECK(inner[0].at("dur").as_int64() == 1 * s);
  CHECK(inner[0].at("tid") == holds[0].at("tid"));
  CHECK(inner[0].at("args").at("event").as_string() == "partially_released");
  // The inner level closed first but is written after its hold: a thread's spans in start order.
  CHECK(position(events, "hold") < position(events, "reentered"));
  CHECK(named(events, "M", "process_name")[0].at("args").at("name").as_string() == "L @10.0.0.9:6379");
  CHECK(named(events, "M", "thread_name")[0].at("args").at("name").as_string() == "o1");
}

TEST_CASE("trace_export: a waiter that gave up is closed by its gave_up, as the timeline measured its wait") {
  run r;
  auto c1 = ev(10 * s, lock_event_kind::contended, "L", "w");
  c1.ttl_ms = 1000;
  auto c2 = c1;
  c2.ts_us = 11 * s;
  r.t.on_event(c1);
  r.t.on_event(c2);
  r.t.on_event(ev(15 * s, lock_event_kind::renewed, "other", "x"));  // no span closes by the clock
  r.t.flush();
  CHECK(r.text.find("\"wait\"") == std::string::npos);
  auto g = ev(14 * s, lock_event_kind::gave_up, "L", "w");  // known at its TTL + margin
  g.interval_start_us = 10 * s - 200;                          // its first attempt's request
  g.interval_us = g.wait_us = 1 * s + 200;                     // to its last attempt
  g.wait_at_least = true;
  g.wait_ended = wait_end::last_attempt;
  r.t.on_event(g);
  r.t.flush();
  CHECK(r.text.find("\"wait\"") != std::string::npos);
  const auto events = r.finish(16 * s);
  const auto waits = named(events, "X", "wait");
  REQUIRE(waits.size() == 1);
  CHECK(waits[0].at("ts").as_int64() == 10 * s - 200);
  CHECK(waits[0].at("dur").as_int64() == 1 * s + 200);
  CHECK(waits[0].at("args").at("event").as_string() == "gave_up");
  CHECK(waits[0].at("args").at("ended").as_string() == "last_attempt");
  CHECK(named(events, "i", "contended").size() == 2);  // each attempt
}

TEST_CASE("trace_export: a wait still open when the capture ends is drawn to the end, open") {
  run r;
  auto c1 = ev(10 * s, lock_event_kind::contended, "L", "w");
  c1.ttl_ms = 1000;
  r.t.on_event(c1);
  const auto events = r.finish(16 * s);
  const auto waits = named(events, "X", "wait");
  REQUIRE(waits.size() == 1);
  CHECK(waits[0].at("dur").as_int64() == 6 * s);
  CHECK(waits[0].at("args").at("open_at_end").as_bool());
}

TEST_CASE("trace_export: a MultiLock set is a process of its own with the group's span") {
  run r;
  std::vector<std::string_view> keys = {"a", "b"};
  lockscope::locks::lock_group g;
  g.start_us = 5 * s;
  g.end_us = 5 * s + 700;
  g.total = 2;
  g.acquired = 2;
  g.needed = 2;
  g.succeeded = true;
  g.acquired_on = keys;
  g.tried = keys;
  auto e = ev(g.end_us, lock_event_kind::multilock, "a", "m");
  e.server = "";
  e.group = &g;
  r.t.on_event(e);
  const auto events = r.finish(6 * s);
  const auto sets = named(events, "X", "multilock");
  REQUIRE(sets.size() == 1);
  CHECK(sets[0].at("ts").as_int64() == 5 * s);
  CHECK(sets[0].at("dur").as_int64() == 700);
  CHECK(sets[0].at("args").at("outcome").as_string() == "acquired");
  CHECK(named(events, "M", "process_name")[0].at("args").at("name").as_string() == "multilock a,b");
}

TEST_CASE("trace_export: a release ends the reentered levels inside the hold too") {
  run r;
  r.t.on_event(ev(1 * s, lock_event_kind::acquired));
  r.t.on_event(ev(2 * s, lock_event_kind::reentered));
  r.t.on_event(release(4 * s, 3 * s, lock_event_kind::force_released));
  const auto events = r.finish(5 * s);
  const auto inner = named(events, "X", "reentered");
  REQUIRE(inner.size() == 1);
  CHECK(inner[0].at("dur").as_int64() == 2 * s);
  CHECK(inner[0].at("args").at("ended_with_hold").as_bool());  // the release is the hold's args, once
  CHECK(position(events, "hold") < position(events, "reentered"));
  CHECK(named(events, "X", "hold")[0].at("args").at("event").as_string() == "force_released");
}

TEST_CASE("trace_export: holds still open at the end span to it, and no event still makes valid JSON") {
  run r;
  r.t.on_event(ev(1 * s, lock_event_kind::acquired));
  const auto events = r.finish(9 * s);
  const auto holds = named(events, "X", "hold");
  REQUIRE(holds.size() == 1);
  CHECK(holds[0].at("dur").as_int64() == 8 * s);
  CHECK(holds[0].at("args").at("open_at_end").as_bool());
  run empty;
  CHECK(empty.finish(0).empty());
  CHECK(boost::json::parse(empty.text).as_object().at("displayTimeUnit").as_string() == "ms");
}

TEST_CASE("trace_export: ids of locks and owners with nothing open are forgotten past max_ids") {
  trace_options o;
  o.max_ids = 64;
  run r(o);
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("lock" + std::to_string(i));
  for (int i = 0; i < 5000; ++i) {
    r.t.on_event(ev(i * 1000, lock_event_kind::acquired, names[i], names[i]));
    r.t.on_event(release(i * 1000 + 500, 500, lock_event_kind::released, names[i], names[i]));
    CHECK(r.t.remembered_ids() <= 2 * o.max_ids + 2);
  }
  const auto events = r.finish(6 * s);
  CHECK(named(events, "X", "hold").size() == 5000);
  CHECK(named(events, "M", "process_name").size() == 5000);
}
