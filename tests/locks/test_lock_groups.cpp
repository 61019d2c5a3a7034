// Lock groups (lock_groups.cpp): the group stage fed lock events directly (RedLock
// quorums, MultiLock sets, their anomalies), node-redlock's recording against its own
// log, and the report's group lines.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <deque>
#include <set>

#include <boost/json.hpp>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_event_kind;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

// The group stage fed lock events directly.
class group_fixture {
 public:
  explicit group_fixture(locks::group_options o = {}) : groups(o, events) {}

  void event(lock_event_kind kind, std::string_view owner, double at_ms, std::string_view server,
             std::string_view lock = "rl:payment", std::string_view client = "10.0.0.1:50000") {
    groups.on_event(lock_event_of(kind, t0 + static_cast<std::int64_t>(at_ms * 1000), lock, owner, client, server));
  }
  std::vector<const recorded_event*> all(std::string_view name) const { return events.all(name); }

  event_recorder events;
  locks::lock_groups groups;
};

}  // namespace

TEST_CASE("lock_groups: one token acquiring on 3 of 3 servers is a 3/3 group with quorum 2", "[groups]") {
  group_fixture f;
  f.event(lock_event_kind::acquired, "R1", 1.0, s1);
  f.event(lock_event_kind::acquired, "R1", 1.2, s2);
  f.event(lock_event_kind::acquired, "R1", 1.5, s3);
  CHECK(f.events.count("quorum") == 0);  // the servers the key has are not known yet
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::released, "R1", 40, s);
  REQUIRE(f.events.count("quorum") == 1);
  const recorded_event& q = *f.all("quorum")[0];
  CHECK(q.total == 3);
  CHECK(q.acquired == 3);
  CHECK(q.needed == 2);
  CHECK(q.succeeded);
  CHECK(q.ts_us == t0 + 1500);  // the attempt's last vote
  CHECK(q.owners == std::vector<std::string>{"R1", "R1", "R1"});
  CHECK(q.acquired_on == std::vector<std::string>{s1, s2, s3});
  // The events themselves pass unchanged, before the group.
  CHECK(f.events.count("acquired") == 3);
  CHECK(f.events.count("released") == 3);
  // The next round is reported as soon as every known server answered.
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::acquired, "R2", 100, s);
  CHECK(f.events.count("quorum") == 2);
  f.groups.finish(t0 + 200'000);
  CHECK(f.events.count("quorum") == 2);
  CHECK(f.events.count("multilock") == 0);
}

TEST_CASE("lock_groups: 1 of 3 is a failed quorum, then released on every server", "[groups]") {
  group_fixture f;
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::acquired, "X", 0, s);  // learn the servers
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::released, "X", 10, s);
  f.event(lock_event_kind::acquired, "R1", 20, s1);
  f.event(lock_event_kind::contended, "R1", 20.1, s2);
  f.event(lock_event_kind::contended, "R1", 20.2, s3);
  f.event(lock_event_kind::released, "R1", 21, s1);
  f.event(lock_event_kind::unlock_rejected, "R1", 21, s2);
  f.event(lock_event_kind::unlock_rejected, "R1", 21, s3);
  f.groups.finish(t0 + 100'000);
  const auto q = f.all("quorum");
  REQUIRE(q.size() == 2);
  CHECK(q[1]->owner == "R1");
  CHECK(q[1]->acquired == 1);
  CHECK(q[1]->total == 3);
  CHECK_FALSE(q[1]->succeeded);
  CHECK(q[1]->acquired_on == std::vector<std::string>{s1});
  CHECK(f.events.count("anomaly:quorum_lost") == 0);
}

TEST_CASE("lock_groups: a single server's lock is no group: the window ends an attempt", "[groups]") {
  group_fixture f;
  f.event(lock_event_kind::acquired, "R1", 0, s1);
  f.event(lock_event_kind::released, "R1", 5, s1);
  f.event(lock_event_kind::acquired, "R1", 6, s1);
  f.groups.finish(t0 + 10'000);
  CHECK(f.events.count("quorum") == 0);
  // Tries more than the window apart are different attempts, one server each.
  locks::group_options o;
  o.window_us = 50'000;
  group_fixture g(o);
  g.event(lock_event_kind::acquired, "R1", 0, s1);
  g.event(lock_event_kind::acquired, "R1", 80, s2);
  g.groups.finish(t0 + 100'000);
  CHECK(g.events.count("quorum") == 0);
}

// Re-entries and the other events that are neither tries nor news of a hold take a short
// path of their own (most of an uncontended load's events): it still moves the groups'
// clock, so what the window ended is reported before the event, not after it.
TEST_CASE("lock_groups: an event that is neither a try nor news of a hold still ends what the window closed", "[groups]") {
  locks::group_options o;
  o.window_us = 50'000;
  group_fixture f(o);
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::acquired, "X", 0, s);  // learn the servers
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::released, "X", 1, s);
  f.event(lock_event_kind::acquired, "R1", 10, s1);
  f.event(lock_event_kind::acquired, "R1", 10.5, s2);  // 2 of 3 answered: the attempt stays open
  const std::size_t before = f.events.events.size();
  f.event(lock_event_kind::reentered, "Y", 200, s1, "other");  // past the window
  REQUIRE(f.events.events.size() >= before + 2);
  const recorded_event& closed = f.events.events[before];
  CHECK(closed.event == "quorum");
  CHECK(closed.owner == "R1");
  CHECK(closed.acquired == 2);
  CHECK(closed.total == 3);
  CHECK(f.events.events.back().event == "reentered");
  CHECK(f.events.events.back().lock == "other");
}

TEST_CASE("lock_groups: Redisson owners (one UUID per server's client) group by client IP and thread", "[groups]") {
  group_fixture f;
  f.event(lock_event_kind::acquired, "497be9fd-4504-4456-ab1c-5208f3f327a0:1", 0, s1, "red:job", "127.0.0.1:1");
  f.event(lock_event_kind::acquired, "d646a8fc-2915-49c3-8104-243096b8707a:1", 0.1, s2, "red:job", "127.0.0.1:2");
  f.event(lock_event_kind::contended, "5c03ea3c-fa15-4fa7-a7ea-126145ef1970:2", 0.2, s1, "red:job", "127.0.0.1:3");
  f.event(lock_event_kind::acquired, "bf036c0b-5f87-4c73-9e0a-48d5fc03fe44:1", 0.3, s3, "red:job", "127.0.0.1:4");
  f.groups.finish(t0 + 10'000);
  const auto q = f.all("quorum");
  REQUIRE(q.size() == 1);  // thread 2's single try is no group
  CHECK(q[0]->acquired == 3);
  CHECK(q[0]->owners.size() == 3);
}

TEST_CASE("lock_groups: quorum_lost when 2 of 3 leases run out while the holder extends the third", "[groups]") {
  group_fixture f;
  for (const char* s : {s1, s2, s3}) f.event(lock_event_kind::acquired, "R1", 0, s);
  f.event(lock_event_kind::renewed, "R1", 500, s1);  // ends the attempt: 3/3
  f.event(lock_event_kind::renewed, "R1", 500, s2);
  f.event(lock_event_kind::renewed, "R1", 500, s3);
  CHECK(f.events.count("quorum") == 1);
  f.event(lock_event_kind::expired, "R1", 1500, s1);
  CHECK(f.events.count("anomaly:quorum_lost") == 0);  // 2/3: still a quorum
  f.event(lock_event_kind::expired, "R1", 1500, s2);
  CHECK(f.events.count("anomaly:quorum_lost") == 0);  // below, but it has not acted since
  f.event(lock_event_kind::renewed, "R1", 1600, s3);
  REQUIRE(f.events.count("anomaly:quorum_lost") == 1);
  const recorded_event& a = *f.events.first("anomaly:quorum_lost");
  CHECK(a.owner == "R1");
  CHECK(a.ts_us == t0 + 1'600'000);
  CHECK(a.detail.find("1/3") != std::string::npos);
  f.event(lock_event_kind::renewed, "R1", 1700, s3);
  CHECK(f.events.count("anomaly:quorum_lost") == 1);  // once per holding

  // Refused renewals in the same round as a successful one: lost at once.
  group_fixture g;
  for (const char* s : {s1, s2, s3}) g.event(lock_event_kind::acquired, "R2", 0, s);
  g.event(lock_event_kind::renewed, "R2", 900, s1);
  g.event(lock_event_kind::renew_failed, "R2", 900.2, s2);
  CHECK(g.events.count("anomaly:quorum_lost") == 0);
  g.event(lock_event_kind::renew_failed, "R2", 900.3, s3);
  CHECK(g.events.count("anomaly:quorum_lost") == 1);

  // Released while it still had its quorum: given back, not lost.
  group_fixture h;
  for (const char* s : {s1, s2, s3}) h.event(lock_event_kind::acquired, "R3", 0, s);
  h.event(lock_event_kind::expired, "R3", 1000, s1);
  h.event(lock_event_kind::released, "R3", 1100, s2);
  h.event(lock_event_kind::released, "R3", 1100, s3);
  h.groups.finish(t0 + 2'000'000);
  CHECK(h.events.count("anomaly:quorum_lost") == 0);

  // A stalled holder: every lease ran out, then it releases (refused, or accepted where a
  // lease was left): it worked on past its quorum, unprotected. Whichever server answers
  // first, once.
  for (const auto first : {lock_event_kind::unlock_rejected, lock_event_kind::released}) {
    group_fixture k;
    for (const char* s : {s1, s2, s3}) k.event(lock_event_kind::acquired, "R4", 0, s);
    k.event(lock_event_kind::expired, "R4", 1000, s1);
    k.event(lock_event_kind::expired, "R4", 1000, s2);
    k.event(first, "R4", 1700, s3);
    k.event(lock_event_kind::unlock_rejected, "R4", 1700.1, s1);
    k.event(lock_event_kind::unlock_rejected, "R4", 1700.2, s2);
    k.groups.finish(t0 + 3'000'000);
    REQUIRE(k.events.count("anomaly:quorum_lost") == 1);
    CHECK(k.events.first("anomaly:quorum_lost")->ts_us == t0 + 1'700'000);
  }
}

TEST_CASE("lock_groups: split_quorum when two owners each hold a majority at once", "[groups]") {
  group_fixture f;
  f.event(lock_event_kind::acquired, "A", 0, s1);
  f.event(lock_event_kind::acquired, "A", 0.1, s2);
  f.event(lock_event_kind::contended, "A", 0.2, s3);
  f.event(lock_event_kind::renewed, "A", 300, s1);  // A's attempt over: 2/3
  CHECK(f.events.count("quorum") == 1);
  CHECK(f.events.count("anomaly:split_quorum") == 0);
  // s2 lost A's key (a failover): B gets s2 and s3.
  f.event(lock_event_kind::contended, "B", 400, s1);
  f.event(lock_event_kind::acquired, "B", 400.1, s2);
  f.event(lock_event_kind::acquired, "B", 400.2, s3);
  REQUIRE(f.events.count("quorum") == 2);
  REQUIRE(f.events.count("anomaly:split_quorum") == 1);
  CHECK(f.events.first("anomaly:split_quorum")->owner == "B");
  CHECK(f.events.first("anomaly:split_quorum")->detail.find("A holds 2/3") != std::string::npos);

  // After A's holds ran out, B's majority is no split.
  group_fixture g;
  g.event(lock_event_kind::acquired, "A", 0, s1);
  g.event(lock_event_kind::acquired, "A", 0.1, s2);
  g.event(lock_event_kind::contended, "A", 0.2, s3);
  g.event(lock_event_kind::expired, "A", 1000, s1);
  g.event(lock_event_kind::expired, "A", 1000, s2);
  g.event(lock_event_kind::acquired, "B", 1100, s1);
  g.event(lock_event_kind::acquired, "B", 1100.1, s2);
  g.event(lock_event_kind::acquired, "B", 1100.2, s3);
  CHECK(g.events.count("quorum") == 2);
  CHECK(g.events.count("anomaly:split_quorum") == 0);
}

TEST_CASE("lock_groups: a MultiLock's keys and its all-or-nothing outcome", "[groups]") {
  group_fixture f;
  const char* owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
  f.event(lock_event_kind::acquired, owner, 0, s1, "a");
  f.event(lock_event_kind::acquired, owner, 0.5, s1, "b");
  f.event(lock_event_kind::acquired, owner, 1, s1, "c");
  f.event(lock_event_kind::released, owner, 50, s1, "a");
  CHECK(f.events.count("multilock") == 0);  // not yet: b and c are still held
  f.event(lock_event_kind::released, owner, 50.2, s1, "b");
  f.event(lock_event_kind::released, owner, 50.4, s1, "c");
  REQUIRE(f.events.count("multilock") == 1);
  const recorded_event& all = *f.all("multilock")[0];
  CHECK(all.tried == std::vector<std::string>{"a", "b", "c"});
  CHECK(all.acquired == 3);
  CHECK(all.succeeded);
  // Failed: a acquired, b held by someone else, a given back.
  f.event(lock_event_kind::acquired, owner, 100, s1, "a");
  f.event(lock_event_kind::contended, owner, 100.5, s1, "b");
  f.event(lock_event_kind::released, owner, 101, s1, "a");
  REQUIRE(f.events.count("multilock") == 2);
  const recorded_event& failed = *f.all("multilock")[1];
  CHECK(failed.tried == std::vector<std::string>{"a", "b"});
  CHECK(failed.acquired_on == std::vector<std::string>{"a"});
  CHECK_FALSE(failed.succeeded);
  CHECK(failed.released);
  // Another connection's lock is not part of the set.
  group_fixture g;
  g.event(lock_event_kind::acquired, owner, 0, s1, "a", "10.0.0.1:1");
  g.event(lock_event_kind::acquired, owner, 0.5, s1, "b", "10.0.0.1:2");
  g.groups.finish(t0 + 10'000);
  CHECK(g.events.count("multilock") == 0);
}

TEST_CASE("lock_groups: a key whose lease ran out before the owner took the next is not held with it", "[groups]") {
  // One owner: x (a 200 ms lease) expires, y is taken 300 ms later. Never held together.
  group_fixture f;
  const char* owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
  f.event(lock_event_kind::acquired, owner, 0, s1, "x");
  f.event(lock_event_kind::expired, owner, 200, s1, "x");
  f.event(lock_event_kind::acquired, owner, 500, s1, "y");
  f.event(lock_event_kind::released, owner, 510, s1, "y");
  f.groups.finish(t0 + 10'000'000);
  CHECK(f.events.count("multilock") == 0);
  // Held together, then both run out (the holder died): a MultiLock of both.
  group_fixture g;
  g.event(lock_event_kind::acquired, owner, 0, s1, "x");
  g.event(lock_event_kind::acquired, owner, 0.5, s1, "y");
  g.event(lock_event_kind::expired, owner, 200, s1, "x");
  g.event(lock_event_kind::expired, owner, 200.5, s1, "y");
  g.groups.finish(t0 + 10'000'000);
  REQUIRE(g.events.count("multilock") == 1);
  CHECK(g.all("multilock")[0]->tried == std::vector<std::string>{"x", "y"});
}

TEST_CASE("lock_groups: a client taking lock after lock (more than max_set_keys at once) is no MultiLock",
          "[groups]") {
  group_fixture f;
  const char* owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
  // 40 keys, one a millisecond, none released (leases left to expire), over two windows.
  for (int i = 0; i < 40; ++i) {
    f.event(lock_event_kind::acquired, owner, 60.0 * i, s1, "job:" + std::to_string(i));
  }
  f.groups.finish(t0 + 10'000'000);
  CHECK(f.events.count("multilock") == 0);
  // A MultiLock by the same owner once the stream has stopped for a window is reported.
  f.event(lock_event_kind::acquired, owner, 6000, s1, "a");
  f.event(lock_event_kind::acquired, owner, 6000.5, s1, "b");
  f.event(lock_event_kind::released, owner, 6050, s1, "a");
  f.event(lock_event_kind::released, owner, 6050.2, s1, "b");
  CHECK(f.events.count("multilock") == 1);
}

// The thirdparty recording (captures/thirdparty/, with node-redlock's own log of each
// acquisition and the servers that voted for it), when present.
TEST_CASE("thirdparty node-redlock over three servers: a lock per server, groups as the client logged them",
          "[identity][groups][thirdparty]") {
  const auto dir = std::filesystem::path(LOCKSCOPE_CAPTURES_DIR) / "thirdparty";
  if (!std::filesystem::exists(dir / "redlock.pcap")) {
    WARN("captures/thirdparty/redlock.pcap is not there: skipped");
    return;
  }
  struct logged {
    std::string lock, owner;
    std::set<std::string> acquired_on;
  };
  std::vector<logged> truth;
  std::int64_t start_us = 0, stop_us = 0;
  std::ifstream in(dir / "redlock.truth.jsonl");
  for (std::string line; std::getline(in, line);) {
    const boost::json::object o = boost::json::parse(line).as_object();
    const std::string_view event = o.at("event").as_string();
    if (event == "recording") {
      start_us = o.at("capture_start_us").to_number<std::int64_t>();
      stop_us = o.at("capture_stop_us").to_number<std::int64_t>();
      continue;
    }
    const std::int64_t t = o.at("t_us").to_number<std::int64_t>();
    if (event != "acquired" || t < start_us || t > stop_us) continue;
    logged l{std::string(o.at("lock").as_string()), std::string(o.at("owner").as_string()), {}};
    for (const auto& s : o.at("acquired_on").as_array()) l.acquired_on.insert(std::string(s.as_string()));
    truth.push_back(std::move(l));
  }
  REQUIRE(truth.size() >= 10);
  const auto rec = events_of((dir / "redlock.pcap").string());
  CHECK(rec.count("reentered") == 0);
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  std::size_t acquired = 0;
  for (const auto& e : rec.events) {
    if (e.event != "acquired") continue;
    ++acquired;
    CHECK(e.lock_server == e.server);  // each server's acquisition is its own lock
  }
  CHECK(acquired >= 2 * truth.size());
  std::set<std::string> logged_owners;
  for (const logged& l : truth) {
    INFO(l.lock << " " << l.owner);
    logged_owners.insert(l.owner);
    std::size_t found = 0;
    for (const auto& e : rec.events) {
      if (e.event != "quorum" || !e.succeeded || e.lock != l.lock ||
          std::find(e.owners.begin(), e.owners.end(), l.owner) == e.owners.end()) {
        continue;
      }
      ++found;
      CHECK(std::set<std::string>(e.acquired_on.begin(), e.acquired_on.end()) == l.acquired_on);
      CHECK(e.total == 3);
      CHECK(e.needed == 2);
    }
    CHECK(found == 1);
  }
  for (const auto& e : rec.events) {
    if (e.event == "quorum" && e.succeeded) CHECK(logged_owners.count(e.owners.front()) == 1);
  }
  CHECK(rec.count("anomaly:split_quorum") == 0);
}

TEST_CASE("report: group lines in text (a section of their own) and live text (as they come)", "[groups][report]") {
  auto render = [](locks::report_format format) {
    std::string out;
    locks::report_options ro;
    ro.format = format;
    ro.start_us = t0;
    locks::lock_report report(ro, [&](std::string_view s) { out += s; });
    locks::lock_groups groups({}, report);
    locks::lock_timeline timeline({}, groups);
    std::deque<std::string> texts;
    auto op = [&](lock_op_kind kind, op_outcome outcome, std::string_view lock, std::string_view owner, double at_ms,
                  const char* server, std::uint64_t connection) {
      locks::lock_operation o;
      o.kind = kind;
      o.family = lock_family::set_based;
      o.outcome = outcome;
      o.lock = lock;
      o.owner = owner;
      o.lease_ms = 1000;
      o.server_text = server;
      o.client_text = texts.emplace_back("10.0.0.1:" + std::to_string(50000 + connection));
      o.connection = connection;
      o.request_us = t0 + static_cast<std::int64_t>(at_ms * 1000);
      o.reply_us = o.request_us + 100;
      timeline.on_operation(with_addresses(o));
    };
    std::uint64_t c = 1;
    for (const char* s : {s1, s2, s3}) op(lock_op_kind::acquire, op_outcome::ok, "rl:payment", "R1", 1, s, c++);
    c = 1;
    for (const char* s : {s1, s2, s3}) op(lock_op_kind::unlock, op_outcome::ok, "rl:payment", "R1", 5, s, c++);
    op(lock_op_kind::acquire, op_outcome::ok, "rl:payment", "R2", 10, s1, 4);
    op(lock_op_kind::acquire, op_outcome::contended, "rl:payment", "R2", 10.2, s2, 5);
    op(lock_op_kind::acquire, op_outcome::contended, "rl:payment", "R2", 10.4, s3, 6);
    op(lock_op_kind::unlock, op_outcome::ok, "rl:payment", "R2", 11, s1, 4);
    op(lock_op_kind::acquire, op_outcome::ok, "a", "M", 20, s1, 7);
    op(lock_op_kind::acquire, op_outcome::ok, "b", "M", 20.5, s1, 7);
    op(lock_op_kind::unlock, op_outcome::ok, "a", "M", 30, s1, 7);
    op(lock_op_kind::unlock, op_outcome::ok, "b", "M", 30.2, s1, 7);
    timeline.finish(t0 + 2'000'000);
    groups.finish(t0 + 2'000'000);
    report.finish(timeline);
    return out;
  };
  const std::string text = render(locks::report_format::text);
  const std::size_t section = text.find("== lock groups\n");
  REQUIRE(section != std::string::npos);
  CHECK(text.find("    +0.001100  rl:payment: R1 acquired on 3/3 servers, quorum 2 in 0µs\n", section) != std::string::npos);
  CHECK(text.find("    +0.010500  rl:payment: R2 acquired on 1/3 servers, quorum 2: failed, released in 400µs\n",
                  section) != std::string::npos);
  CHECK(text.find("    +0.020600  a+b: M acquired 2/2 keys together (MultiLock) in 500µs\n", section) !=
        std::string::npos);
  CHECK(text.find("== rl:payment @10.0.0.9:6380\n") < section);
  const std::string live = render(locks::report_format::stream_text);
  CHECK(live.find("rl:payment: R1 acquired on 3/3 servers, quorum 2") != std::string::npos);
  CHECK(live.find("== lock groups") == std::string::npos);
  // A live line names its server, in the lock column (32 wide: padded).
  CHECK(live.find("rl:payment @10.0.0.9:6381         10.0.0.1:50003") != std::string::npos);
}

TEST_CASE("lock_groups: random event sequences over three servers keep every group sane and bounded",
          "[groups][property]") {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&](std::uint64_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state % n;
  };
  const lock_event_kind kinds[] = {lock_event_kind::acquired,       lock_event_kind::contended,
                                   lock_event_kind::released,       lock_event_kind::unlock_rejected,
                                   lock_event_kind::expired,        lock_event_kind::renewed,
                                   lock_event_kind::renew_failed,   lock_event_kind::partially_released,
                                   lock_event_kind::force_released, lock_event_kind::reentered};
  const char* servers[] = {s1, s2, s3};
  const char* owners[] = {"R1", "R2", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12",
                          "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:12", ""};
  for (int round = 0; round < 10; ++round) {
    locks::group_options o;
    o.max_open = 64;  // small, so the bound is exercised
    group_fixture f(o);
    double t = 0;
    for (int i = 0; i < 3000; ++i) {
      t += static_cast<double>(next(300)) / 10.0;
      const std::string lock = "k" + std::to_string(next(round < 5 ? 3 : 200));
      f.event(kinds[next(10)], owners[next(5)], t, servers[next(3)], lock,
              next(2) == 0 ? "10.0.0.1:50000" : "10.0.0.2:50001");
      if (next(100) == 0) f.groups.advance_to(t0 + static_cast<std::int64_t>(t * 1000) + 2'000'000);
    }
    f.groups.finish(t0 + static_cast<std::int64_t>(t * 1000) + 10'000'000);
    std::size_t groups = 0;
    for (const auto& e : f.events.events) {
      if (e.event != "quorum" && e.event != "multilock") continue;
      ++groups;
      INFO(e.event << " " << e.lock << " acquired " << e.acquired << "/" << e.total << " needed " << e.needed);
      CHECK(e.acquired <= e.total);
      CHECK(e.acquired_on.size() == e.acquired);
      if (e.event == "quorum") {
        CHECK(e.total >= 2);
        CHECK(e.total <= 3);  // three servers exist
        CHECK(e.needed == e.total / 2 + 1);
        CHECK(e.succeeded == (e.acquired >= e.needed));
        CHECK(e.owners.size() == e.acquired);
      } else {
        CHECK(e.tried.size() == e.total);
        CHECK(e.tried.size() <= o.max_set_keys);
        CHECK(e.succeeded == (e.acquired == e.total));
      }
    }
    CHECK(groups > 0);
  }
}
