// The bundled captures (captures/): each is rebuilt byte for byte from scenarios.cpp,
// analysed, and compared with its golden timeline (text and jsonl). The seed
// reconstruction is checked step by step against the documented flow, and each
// crafted capture shows its anomaly.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "helpers.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "scenarios.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

const std::filesystem::path captures_dir = LOCKSCOPE_CAPTURES_DIR;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string pcap_of(std::string_view name) { return (captures_dir / (std::string(name) + ".pcap")).string(); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("captures: every bundled synthetic capture is reproducible and matches its goldens", "[captures][golden]") {
  const auto tmp = std::filesystem::temp_directory_path() / ("lockscope-timeline-" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  for (const scenario& s : scenarios()) {
    INFO(s.name);
    capture_builder b;
    s.build(b);
    const auto rebuilt = tmp / "x.pcap";
    b.write(rebuilt.string());
    REQUIRE(std::filesystem::exists(pcap_of(s.name)));
    CHECK(read_file(rebuilt) == read_file(pcap_of(s.name)));
    CHECK(std::filesystem::file_size(pcap_of(s.name)) < 2u << 20);
    const auto base = captures_dir / s.name;
    CHECK(report_of(pcap_of(s.name), locks::report_format::text) == read_file(base.string() + ".timeline.txt"));
    const std::string jsonl = report_of(pcap_of(s.name), locks::report_format::jsonl);
    CHECK(jsonl == read_file(base.string() + ".jsonl"));
    CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::event_line_errors) == "");
  }
  std::filesystem::remove_all(tmp);
}

TEST_CASE("captures: the seed reconstruction follows the documented flow step by step", "[captures][seed]") {
  const auto rec = events_of(pcap_of("seed-redisson"));
  REQUIRE(rec.names() == std::vector<std::string>{"acquired", "contended", "subscribed", "renewed", "released",
                                                   "notified", "acquired", "unsubscribed",
                                                   "anomaly:holder_connection_closed"});
  const auto& e = rec.events;
  // [1][2] ClientA acquires myLock.
  CHECK(e[0].owner == owner_a);
  CHECK(e[0].client == "192.168.1.21:50001");
  CHECK(e[0].hold_count == 1);
  CHECK(e[0].lease_ms == 6000);
  // [3][4] ClientB fails: the holder's remaining ttl.
  CHECK(e[1].owner == owner_b);
  CHECK(e[1].client == "192.168.1.22:50002");
  CHECK(e[1].ttl_ms == 5760);
  // [5] ClientB subscribes on its pub/sub connection, linked to its waiter: certain, as
  // it opened beside ClientB's command connection (their SYNs are in the capture).
  CHECK(e[2].client == "192.168.1.22:50003");
  CHECK(e[2].owner == owner_b);
  CHECK(e[2].confidence == locks::link_confidence::certain);
  // The watchdog renews at lease/3.
  CHECK(e[3].owner == owner_a);
  CHECK(e[3].lease_ms == 6000);
  CHECK(e[3].ts_us - e[0].ts_us == 2000 * 1000);
  // [6][7] ClientA unlocks (and publishes).
  CHECK(e[4].owner == owner_a);
  CHECK(e[4].hold_count == 0);
  CHECK(e[4].held_us == 2990 * 1000);
  // [8] the message reaches ClientB's subscriber connection.
  CHECK(e[5].client == "192.168.1.22:50003");
  CHECK(e[5].owner == owner_b);
  CHECK(e[5].ts_us > e[4].ts_us);
  // [9] ClientB acquires, having waited since its failed attempt, then unsubscribes.
  CHECK(e[6].owner == owner_b);
  CHECK(e[6].client == "192.168.1.22:50002");
  CHECK(e[6].wait_us == 3000400 + 120 - 250000);
  CHECK(e[7].client == "192.168.1.22:50003");
  // ClientB's command connection ends (QUIT) while it holds the lock: said at that moment.
  CHECK(e[8].owner == owner_b);
  CHECK(e[8].client == "192.168.1.22:50002");
  for (const auto& ev : e) CHECK_FALSE(ev.inferred);

  // The same in the jsonl form, with its fields.
  const auto lines = lines_of(report_of(pcap_of("seed-redisson"), locks::report_format::jsonl));
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] ==
        "{\"ts\":1717209303.010120,\"lock\":\"myLock\",\"event\":\"acquired\",\"owner\":\"80e6bb0b-b3bb-4ce0-b120-"
        "9c7ce917b767:12\",\"client\":\"192.168.1.21:50001\",\"server\":\"192.168.1.10:16379\",\"db\":0,\"hold_count\":1,"
        "\"lease_ms\":6000}");
  CHECK(lines[1].find("\"event\":\"contended\"") != std::string::npos);
  CHECK(lines[1].find("\"ttl_ms\":5760") != std::string::npos);
  CHECK(lines[6].find("\"wait_ms\":2750.520") != std::string::npos);
  CHECK(lines[4].find("\"held_ms\":2990.000") != std::string::npos);
}

TEST_CASE("captures: the anomaly reference's line of every anomaly kind is what analyze prints on its capture",
          "[captures][anomaly][readme]") {
  const std::string readme = read_file(captures_dir.parent_path() / "docs/reference/anomalies.md");
  const std::size_t marker = readme.find("<!-- anomaly examples: tests/locks/test_captures.cpp -->");
  REQUIRE(marker != std::string::npos);
  const std::size_t begin = readme.find("```\n", marker) + 4;
  const std::size_t end = readme.find("```", begin);
  REQUIRE(end != std::string::npos);
  std::istringstream block(readme.substr(begin, end - begin));
  std::string output;
  std::set<std::string> kinds;
  for (std::string line; std::getline(block, line);) {
    if (line.rfind("$ lockscope analyze ", 0) == 0) {
      const std::string pcap = (captures_dir.parent_path() / line.substr(20)).string();
      INFO(pcap);
      REQUIRE(std::filesystem::exists(pcap));
      output = "\n" + report_of(pcap, locks::report_format::text);
      continue;
    }
    INFO(line);
    CHECK(output.find("\n" + line + "\n") != std::string::npos);
    const std::size_t at = line.find("ANOMALY ");
    REQUIRE(at != std::string::npos);
    kinds.insert(line.substr(at + 8, line.find(' ', at + 8) - at - 8));
  }
  // Every kind the analyzer knows is shown (none = 0 is not a kind).
  for (std::size_t k = 1; k < locks::anomaly_kind_count; ++k) {
    const std::string kind(to_string(static_cast<locks::anomaly_kind>(k)));
    INFO(kind);
    CHECK(kinds.count(kind) == 1);
  }
}

TEST_CASE("captures: each crafted capture shows its anomaly", "[captures][anomaly]") {
  struct expectation {
    const char* capture;
    const char* anomaly;
  };
  for (const auto& [capture, anomaly] : {
           expectation{"crafted/expired_while_held", "anomaly:expired_while_held"},
           expectation{"crafted/overlapping_holders", "anomaly:overlapping_holders"},
           expectation{"crafted/unlock_by_non_owner", "anomaly:unlock_by_non_owner"},
           expectation{"crafted/idle_with_waiters", "anomaly:idle_with_waiters"},
           expectation{"crafted/woken_by_timeout", "anomaly:woken_by_timeout"},
           expectation{"crafted/late_renewal", "anomaly:late_renewal"},
           expectation{"crafted/long_hold", "anomaly:long_hold"},
           expectation{"crafted/non_atomic_acquire", "anomaly:non_atomic_acquire"},
           expectation{"crafted/subscription_lost", "anomaly:subscription_lost"},
       }) {
    INFO(capture);
    const auto rec = events_of(pcap_of(capture));
    CHECK(rec.count(anomaly) == 1);
  }
  // The lost subscription: the idleness and the timer, found at B's retry, with the
  // interval from the unheard release; the UNSUBSCRIBE while not subscribed is no event.
  const auto lost = events_of(pcap_of("crafted/subscription_lost"));
  CHECK(lost.count("unsubscribed") == 1);
  for (const char* kind : {"anomaly:idle_with_waiters", "anomaly:subscription_lost", "anomaly:woken_by_timeout"}) {
    INFO(kind);
    REQUIRE(lost.count(kind) == 1);
    CHECK(lost.first(kind)->ts_us == lost.first("released")->ts_us + 5'011'000);
  }
  CHECK(lost.first("anomaly:idle_with_waiters")->interval_start_us == lost.first("released")->ts_us);
  CHECK(lost.first("anomaly:subscription_lost")->interval_us == 5'011'000);
  // The anomaly reference shows this capture's timeline and JSONL lines: they are its output.
  const std::string readme = read_file((captures_dir.parent_path() / "docs/reference/anomalies.md").string());
  for (const char* golden : {".timeline.txt", ".jsonl"}) {
    const std::string text = read_file((captures_dir / "crafted/subscription_lost").string() + golden);
    for (const char* kind : {"subscription_lost"}) {
      const std::size_t at = text.find(kind);
      REQUIRE(at != std::string::npos);
      const std::size_t begin = text.rfind('\n', at) + 1;
      const std::string line = text.substr(begin, text.find('\n', at) - begin);
      INFO(line);
      CHECK(readme.find(line) != std::string::npos);
    }
  }
  // No false alarms in the documented flow. Its holder's connection ends (QUIT) while it
  // holds the lock with 5.8 s of lease left: that is said, and is the only finding.
  for (const auto& e : events_of(pcap_of("seed-redisson")).events) {
    if (e.event != "anomaly:holder_connection_closed") CHECK(e.event.rfind("anomaly", 0) != 0);
  }
}

TEST_CASE("captures: the anomalies come with the right surrounding events", "[captures][anomaly]") {
  auto rec = events_of(pcap_of("crafted/expired_while_held"));
  CHECK(rec.names() == std::vector<std::string>{"acquired", "expired", "unlock_rejected", "anomaly:expired_while_held"});
  rec = events_of(pcap_of("crafted/idle_with_waiters"));
  CHECK(rec.count("anomaly:idle_with_waiters") == 1);
  CHECK(rec.count("anomaly:woken_by_timeout") == 1);  // it woke by its ttl, not by the lost message
  CHECK(rec.first("anomaly:idle_with_waiters")->owner == owner_b);
  rec = events_of(pcap_of("crafted/woken_by_timeout"));
  CHECK(rec.count("expired") == 1);
  CHECK(rec.count("anomaly:idle_with_waiters") == 0);
  rec = events_of(pcap_of("crafted/non_atomic_acquire"));
  // The waiter that failed once left when its connection closed.
  // Its EXPIRE is the acquisition's second half, not a renewal.
  CHECK(rec.names() == std::vector<std::string>{"acquired", "anomaly:non_atomic_acquire", "contended", "released",
                                                "anomaly:unchecked_release", "gave_up"});
}

TEST_CASE("captures: EVALSHA-only captures give the seed timeline, unknown SHA1s marked inferred",
          "[captures][evalsha]") {
  const std::vector<std::string> flow{"acquired", "contended", "subscribed", "renewed", "released",
                                      "notified", "acquired", "unsubscribed"};
  auto known = events_of(pcap_of("crafted/evalsha_known"));
  auto names = known.names();
  REQUIRE(names.size() == 9);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 8) == flow);
  CHECK(names[8] == "force_released");
  for (const auto& e : known.events) CHECK_FALSE(e.inferred);

  auto inferred = events_of(pcap_of("crafted/evalsha_inferred"));
  names = inferred.names();
  REQUIRE(names.size() == 9);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 8) == flow);
  CHECK(names[8] == "released");
  for (const auto& e : inferred.events) {
    const bool from_script = e.event != "subscribed" && e.event != "notified" && e.event != "unsubscribed";
    CHECK(e.inferred == from_script);
  }
  CHECK(inferred.events[6].wait_us > 0);
}

TEST_CASE("captures: lockscope analyze prints the golden timeline of the seed reconstruction", "[captures][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  auto run = [&](const std::string& options, int& status) {
    return command_output(cli + " analyze" + options + " " + pcap_of("seed-redisson") + " 2>/dev/null", status);
  };
  for (const char* options : {"", " --threads 1", " --threads 2"}) {
    INFO("options:" << options);
    int status = -1;
    // The CLI's text begins with the capture's start (its first packet, as tcpdump -tt reads it: 1717209303.000000).
    CHECK(run(options, status) == "capture start 2024-06-01T02:35:03.000000Z; times are seconds after it\n" +
                                      read_file(captures_dir / "seed-redisson.timeline.txt"));
    CHECK(status == 0);
  }
  int status = 0;
  CHECK(run(" --threads 3", status).empty());
  CHECK(status != 0);
}

TEST_CASE("captures: one thread and two give the same events on every bundled capture", "[captures][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  std::vector<std::filesystem::path> pcaps;
  for (const auto& e : std::filesystem::recursive_directory_iterator(captures_dir)) {
    if (e.path().extension() == ".pcap" || e.path().extension() == ".pcapng") pcaps.push_back(e.path());
  }
  std::sort(pcaps.begin(), pcaps.end());
  REQUIRE(pcaps.size() >= 20);
  for (const auto& pcap : pcaps) {
    INFO(pcap.string());
    int status = -1;
    const std::string one = command_output(cli + " analyze --format jsonl --threads 1 " + pcap.string() + " 2>/dev/null", status);
    CHECK(status == 0);
    const std::string two = command_output(cli + " analyze --format jsonl --threads 2 " + pcap.string() + " 2>/dev/null", status);
    CHECK(status == 0);
    CHECK(occurrences(one, "\n") > 0);
    CHECK(one == two);
  }
}

namespace {

// Command names in a capture (to check what a recording contains).
std::map<std::string, int> command_counts(const std::string& pcap) {
  struct counter final : ingest::exchange_sink {
    std::map<std::string, int> counts;
    void on_exchange(const ingest::exchange& e) override {
      if (!e.command.empty()) ++counts[std::string(e.command[0])];
    }
  } sink;
  ingest::ingest_pipeline a({}, sink);
  ingest::offline_capture source({pcap});
  ingest::captured_packet p;
  while (source.next(p)) a.on_packet(p.ts_us, p.link_type, p.data);
  a.finish();
  return sink.counts;
}

std::set<std::string> owners_of(const event_recorder& rec, std::string_view event) {
  std::set<std::string> out;
  for (const auto& e : rec.events) {
    if (e.event == event) out.insert(e.owner);
  }
  return out;
}

}  // namespace

TEST_CASE("captures: real recordings match their goldens", "[captures][golden][recorded]") {
  for (const char* name : {"contend", "expiry", "resp3", "evalsha", "stress", "fair", "fenced", "rwlock", "redlock"}) {
    INFO(name);
    const std::string base = (captures_dir / "recorded" / name).string();
    REQUIRE(std::filesystem::exists(base + ".pcap"));
    CHECK(std::filesystem::file_size(base + ".pcap") < 2u << 20);
    CHECK(report_of(base + ".pcap", locks::report_format::text) == read_file(base + ".timeline.txt"));
    const std::string jsonl = report_of(base + ".pcap", locks::report_format::jsonl);
    CHECK(jsonl == read_file(base + ".jsonl"));
    CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::event_line_errors) == "");
  }
}

TEST_CASE("captures: 3 clients contending with reentrancy and the watchdog", "[captures][recorded]") {
  const auto rec = events_of((captures_dir / "recorded/contend.pcap").string());
  CHECK(owners_of(rec, "acquired").size() == 3);
  CHECK(rec.count("acquired") == 6);
  CHECK(rec.count("reentered") == 6);
  CHECK(rec.count("partially_released") == 6);
  CHECK(rec.count("released") == 6);
  CHECK(rec.count("renewed") >= 6);
  CHECK(rec.count("notified") >= 2);
  for (const auto& e : rec.events) CHECK(e.event.rfind("anomaly", 0) != 0);
  // Every subscription was linked to the waiter that subscribed.
  for (const auto& e : rec.events) {
    if (e.event == "subscribed") CHECK_FALSE(e.owner.empty());
  }
}

TEST_CASE("captures: a lease running out without renewal", "[captures][recorded][anomaly]") {
  const auto rec = events_of((captures_dir / "recorded/expiry.pcap").string());
  CHECK(rec.count("expired") == 1);
  CHECK(rec.count("anomaly:expired_while_held") == 1);
  // The waiter's timer woke it as the lease ran out (Redis publishes nothing on an
  // expiry), while the lock was still held: it learned on time, no woken_by_timeout.
  CHECK(rec.count("anomaly:woken_by_timeout") == 0);
  CHECK(rec.count("renewed") == 0);
  const auto* expired = rec.first("expired");
  REQUIRE(expired != nullptr);
  CHECK(expired->lease_ms == 300);
  CHECK(rec.first("anomaly:expired_while_held")->owner == expired->owner);
  CHECK(rec.first("anomaly:expired_while_held")->ts_us > expired->ts_us);
}

TEST_CASE("captures: a RESP3 client", "[captures][recorded]") {
  const std::string pcap = (captures_dir / "recorded/resp3.pcap").string();
  CHECK(command_counts(pcap)["HELLO"] >= 3);
  const auto rec = events_of(pcap);
  CHECK(rec.count("acquired") == 3);
  CHECK(rec.count("notified") >= 1);
  CHECK(rec.count("released") == 3);
}

TEST_CASE("captures: EVALSHA mode with scripts loaded before the recording", "[captures][recorded][evalsha]") {
  const std::string pcap = (captures_dir / "recorded/evalsha.pcap").string();
  auto counts = command_counts(pcap);
  CHECK(counts["EVALSHA"] > 0);
  CHECK(counts["EVAL"] == 0);
  CHECK(counts["SCRIPT"] == 0);
  const auto rec = events_of(pcap);
  CHECK(rec.count("acquired") == 3);
  CHECK(rec.count("released") == 3);
  CHECK(rec.count("renewed") >= 3);
  for (const auto& e : rec.events) CHECK_FALSE(e.inferred);  // built-in SHA1s
}

TEST_CASE("captures: the mutual-exclusion stress run shows zero overlapping_holders", "[captures][recorded]") {
  const auto rec = events_of((captures_dir / "recorded/stress.pcap").string());
  CHECK(rec.count("acquired") == 160);
  CHECK(rec.count("released") == 160);
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("expired") == 0);
  // Holds never overlap: each acquisition follows the previous release.
  std::int64_t last_release = 0;
  bool held = false;
  for (const auto& e : rec.events) {
    if (e.event == "acquired") {
      CHECK_FALSE(held);
      CHECK(e.ts_us >= last_release);
      held = true;
    } else if (e.event == "released") {
      held = false;
      last_release = e.ts_us;
    }
  }
}

namespace {

// What record_lock_traffic printed while recording NAME: one line per event it saw
// returned, split in words.
std::vector<std::vector<std::string>> driver_log(std::string_view name) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& line : lines_of(read_file(captures_dir / "recorded" / (std::string(name) + ".driver.txt")))) {
    std::istringstream words(line);
    out.emplace_back();
    for (std::string w; words >> w;) out.back().push_back(w);
  }
  return out;
}

std::vector<std::string> acquirers(const event_recorder& rec) {
  std::vector<std::string> out;
  for (const auto& e : rec.events) {
    if (e.event == "acquired") out.push_back(e.owner);
  }
  return out;
}

// Replays acquired/released per server; returns the owners that held when another acquired.
std::vector<std::string> overlaps_per_server(const event_recorder& rec) {
  std::map<std::string, std::set<std::string>> holding;  // server -> owners
  std::vector<std::string> out;
  for (const auto& e : rec.events) {
    auto& held = holding[e.server];
    if (e.event == "acquired") {
      for (const auto& o : held) out.push_back(o + " while " + e.owner + " acquired on " + e.server);
      held.insert(e.owner);
    } else if (e.event == "released" || e.event == "expired" || e.event == "force_released") {
      held.erase(e.owner);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("captures: the fair lock's acquisition order is the order the clients queued in",
          "[captures][recorded][fair]") {
  const auto log = driver_log("fair");
  REQUIRE(log.size() == 4);
  std::vector<std::string> logged;
  for (const auto& l : log) logged.push_back(l.at(1));
  const auto rec = events_of((captures_dir / "recorded/fair.pcap").string());
  CHECK(acquirers(rec) == logged);
  // The three waiters queued in the order they started (each contended before the next).
  std::vector<std::string> first_contended;
  for (const auto& e : rec.events) {
    if (e.event == "contended" && std::find(first_contended.begin(), first_contended.end(), e.owner) == first_contended.end())
      first_contended.push_back(e.owner);
  }
  CHECK(first_contended == std::vector<std::string>(logged.begin() + 1, logged.end()));
  CHECK(rec.count("released") == 4);
  CHECK(overlaps_per_server(rec).empty());
  for (const auto& e : rec.events) CHECK(e.event.rfind("anomaly", 0) != 0);
}

TEST_CASE("captures: fenced tokens strictly increase and match what the clients were given",
          "[captures][recorded][fenced]") {
  const auto log = driver_log("fenced");
  REQUIRE(log.size() == 6);
  const auto rec = events_of((captures_dir / "recorded/fenced.pcap").string());
  std::vector<std::pair<std::string, std::int64_t>> seen, logged;
  for (const auto& e : rec.events) {
    if (e.event == "acquired") seen.emplace_back(e.owner, e.token);
  }
  for (const auto& l : log) logged.emplace_back(l.at(1), std::stoll(l.at(2)));
  CHECK(seen == logged);
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i].second > seen[i - 1].second);
  CHECK(overlaps_per_server(rec).empty());
  for (const auto& e : rec.events) CHECK(e.event.rfind("anomaly", 0) != 0);
}

TEST_CASE("captures: readers overlap, the writer overlaps nobody", "[captures][recorded][rwlock]") {
  const auto log = driver_log("rwlock");
  REQUIRE(log.size() == 8);
  std::set<std::string> readers;
  std::string writer;
  for (const auto& l : log) {
    if (l.at(0) == "read") readers.insert(l.at(2));
    else writer = l.at(2);
  }
  REQUIRE(readers.size() == 3);
  const auto rec = events_of((captures_dir / "recorded/rwlock.pcap").string());
  // The write lock's owner on the wire is Redisson's "<owner>:write".
  std::set<std::string> holding;
  std::size_t most_readers = 0;
  for (const auto& e : rec.events) {
    if (e.event == "acquired") {
      if (e.owner == writer + ":write") CHECK(holding.empty());
      else CHECK(holding.count(writer + ":write") == 0);
      holding.insert(e.owner);
      if (readers.count(e.owner) != 0) most_readers = std::max(most_readers, holding.size());
    } else if (e.event == "released") {
      CHECK(holding.erase(e.owner) == 1);
    }
  }
  CHECK(most_readers == 2);  // the first two readers held together
  CHECK(holding.empty());
  CHECK(rec.count("acquired") == 4);
  CHECK(rec.count("released") == 4);
  for (const auto& e : rec.events) CHECK(e.event.rfind("anomaly", 0) != 0);
}

// A lock is (server, database, key): each server's red:job is its own lock (see also
// test_lock_groups.cpp for the groups against the driver's log).
TEST_CASE("captures: a RedLock over three servers, each server's acquisitions appear", "[captures][recorded][redlock]") {
  const auto log = driver_log("redlock");
  REQUIRE(log.size() == 6);
  const auto rec = events_of((captures_dir / "recorded/redlock.pcap").string());
  std::map<std::string, std::string> server_of;  // owner -> server
  std::map<std::string, int> acquisitions;       // owner -> count
  for (const auto& e : rec.events) {
    if (e.event != "acquired") continue;
    server_of[e.owner] = e.server;
    ++acquisitions[e.owner];
  }
  std::set<std::string> servers;
  for (const auto& [owner, server] : server_of) servers.insert(server);
  CHECK(servers.size() == 3);
  // Each logged hold had a majority: every owner of a handle acquired on its own server,
  // at least as often as a majority of the holds needs.
  std::map<std::string, int> holds;  // first owner -> holds
  for (const auto& l : log) {
    REQUIRE(l.size() == 4);
    ++holds[l[1]];
    for (std::size_t i = 1; i < 4; ++i) CHECK(server_of.count(l[i]) == 1);
  }
  for (const auto& l : log) {
    int granted = 0;
    for (std::size_t i = 1; i < 4; ++i) granted += acquisitions[l[i]] >= holds[l[1]] ? 1 : 0;
    CHECK(granted >= 2);
    std::set<std::string> on;
    for (std::size_t i = 1; i < 4; ++i) on.insert(server_of[l[i]]);
    CHECK(on.size() == 3);  // one handle per server
  }
  CHECK(overlaps_per_server(rec).empty());
  CHECK(rec.count("unlock_rejected") == 0);
}

TEST_CASE("captures: RedLock over three servers: each server's lock apart, groups as the driver logged",
          "[identity][groups][captures][recorded]") {
  const auto log = driver_log("redlock");
  REQUIRE(log.size() == 6);
  const auto rec = events_of((captures_dir / "recorded/redlock.pcap").string());
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("reentered") == 0);
  // Each acquisition is on its own server's lock.
  std::map<std::string, std::string> server_of;  // owner -> lock server
  for (const auto& e : rec.events) {
    if (e.event != "acquired") continue;
    CHECK(e.lock_server == e.server);
    server_of[e.owner] = e.lock_server;
  }
  // The successful groups, in order, are the driver's holds: the same three owners.
  std::vector<std::set<std::string>> groups;
  for (const auto& e : rec.events) {
    if (e.event != "quorum") continue;
    CHECK(e.total == 3);
    CHECK(e.needed == 2);
    if (e.succeeded) groups.emplace_back(e.owners.begin(), e.owners.end());
  }
  std::vector<std::set<std::string>> logged;
  for (const auto& l : log) {
    REQUIRE(l.size() == 4);
    logged.emplace_back(l.begin() + 1, l.end());
    std::set<std::string> servers;
    for (std::size_t i = 1; i < 4; ++i) servers.insert(server_of.at(l[i]));
    CHECK(servers.size() == 3);
  }
  CHECK(groups == logged);
  for (const auto& e : rec.events) {
    if (e.event == "quorum" && e.succeeded) CHECK(e.acquired == 3);
  }
  // The pipeline design document's example lines are the golden's.
  const std::string readme = read_file(captures_dir.parent_path() / "docs/design/pipeline.md");
  const std::string golden = read_file(captures_dir / "recorded/redlock.timeline.txt");
  const std::size_t from = readme.find("```\n== lock groups\n");
  REQUIRE(from != std::string::npos);
  const std::size_t to = readme.find("```", from + 3);
  std::size_t lines = 0;
  for (const std::string& line : lines_of(readme.substr(from + 4, to - from - 4))) {
    CHECK(golden.find(line + "\n") != std::string::npos);
    ++lines;
  }
  CHECK(lines == 5);
  const std::string jsonl = read_file(captures_dir / "recorded/redlock.jsonl");
  const std::size_t q = readme.find("{\"ts\":1795377705.007104,\"lock\":\"red:job\",\"event\":\"quorum\"");
  REQUIRE(q != std::string::npos);
  CHECK(jsonl.find(readme.substr(q, readme.find('\n', q) - q + 1)) != std::string::npos);
}

TEST_CASE("lockscope analyze --merge-servers and --lock on the RedLock recording", "[identity][cli][recorded]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  auto run = [&](const std::string& options) {
    int status = -1;
    std::string out = command_output(
        cli + " analyze" + options + " " + (captures_dir / "recorded/redlock.pcap").string() + " 2>/dev/null", status);
    CHECK(status == 0);
    return out;
  };
  auto count = [](const std::string& text, std::string_view what) { return occurrences(text, what); };
  // Per server: three locks, three rows, no overlaps.
  const std::string apart = run(" --summary --lock 'red:*'");
  CHECK(count(apart, "\nred:job @127.0.0.1:") == 3);
  CHECK(count(apart, "overlapping_holders") == 0);
  // Merged: one lock, whose three per-server holders overlap.
  const std::string merged = run(" --summary --merge-servers");
  CHECK(count(merged, "\nred:job ") == 1);
  CHECK(count(merged, "@") == 0);
  CHECK(count(merged, "overlapping_holders=12") == 1);
  // The groups section is the same either way: it reads each event's own server.
  const std::string merged_text = run(" --merge-servers");
  CHECK(count(merged_text, "acquired on 3/3 servers, quorum 2") == 6);
}

TEST_CASE("every event of every bundled capture carries its connection's addresses, as its texts spell them",
          "[captures][endpoints]") {
  // The stages after the timeline (live flight recorder, groups) read the addresses, never
  // the texts: an event whose address is missing or disagrees with its text would send
  // the recorder to the wrong connection.
  struct address_check final : locks::lock_event_sink {
    std::size_t events = 0, with_client = 0, mismatches = 0, groups = 0;
    std::string first_mismatch;
    void on_event(const locks::lock_event& e) override {
      ++events;
      if (e.group != nullptr) ++groups;
      check(e, e.client, e.client_endpoint, "client");
      check(e, e.server, e.server_endpoint, "server");
      if (e.client_endpoint != nullptr) ++with_client;
    }
    void check(const locks::lock_event& e, std::string_view text, const ingest::endpoint* address, const char* side) {
      const bool ok = text.empty() ? address == nullptr : address != nullptr && address->to_string() == text;
      if (ok) return;
      if (++mismatches == 1) {
        first_mismatch = std::string(locks::to_string(e.event)) + " " + side + " text '" + std::string(text) + "' address " +
                         (address != nullptr ? address->to_string() : std::string("none"));
      }
    }
  };
  std::vector<std::filesystem::path> pcaps;
  for (const auto& f : std::filesystem::recursive_directory_iterator(captures_dir)) {
    if (f.path().extension() == ".pcap" || f.path().extension() == ".pcapng") pcaps.push_back(f.path());
  }
  std::sort(pcaps.begin(), pcaps.end());
  REQUIRE(pcaps.size() >= 20);
  std::size_t total_groups = 0;
  for (const auto& pcap : pcaps) {
    for (const unsigned threads : {1u, 2u}) {
      INFO(pcap.string() << " --threads " << threads);
      address_check sink;
      locks::analysis_options o;
      o.threads = threads;
      o.events_to = &sink;
      locks::analyze_files_into({pcap.string()}, o, sink, {}, {});
      CHECK(sink.mismatches == 0);
      if (sink.mismatches != 0) FAIL_CHECK(sink.first_mismatch);
      if (sink.events > 0) CHECK(sink.with_client > 0);
      if (threads == 1) total_groups += sink.groups;
    }
  }
  CHECK(total_groups > 0);  // the bundled RedLock/MultiLock recordings make group events
}
