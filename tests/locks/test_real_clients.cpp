// A real third-party client against a real redis-server, recorded with tcpdump, checked
// against the client's own log: redis-py's Lock (Debian python3-redis) with script
// variants no table knows, so that its extend, reacquire and release EVALSHAs are
// inferred (the value flow from its SET NX), and seed 004's DEL of someone else's lock.
#include <fstream>
#include <map>
#include <set>

#include <boost/json.hpp>

#include "lockscope/test/real_capture.hpp"
#include "helpers.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
namespace atest = lockscope::test;
using atest::on_path;
namespace ltest = lockscope::test;

namespace {

constexpr const char* debian_python = "/usr/bin/python3";
const std::filesystem::path python_client =
    std::filesystem::path(LOCKSCOPE_CAPTURES_DIR).parent_path() / "tests" / "locks" / "clients" / "redis_py_locks.py";

bool redis_py_available() {
  return std::filesystem::exists(debian_python) &&
         std::system((std::string(debian_python) + " -c 'import redis' >/dev/null 2>&1").c_str()) == 0;
}

// The client's log: one {"event", "owner", ...} a line, in order.
std::vector<std::map<std::string, std::string>> read_truth(const std::filesystem::path& file) {
  std::vector<std::map<std::string, std::string>> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::map<std::string, std::string> fields;
    for (const char* name : {"event", "owner", "deleted_owner"}) {
      const std::string key = std::string("\"") + name + "\": \"";
      const std::size_t p = line.find(key);
      if (p == std::string::npos) continue;
      const std::size_t start = p + key.size();
      fields[name] = line.substr(start, line.find('"', start) - start);
    }
    out.push_back(fields);
  }
  return out;
}

}  // namespace

TEST_CASE("real redis-py Lock with unseen scripts, and seed 004's DEL, against the client's own log",
          "[real][clients][value-flow]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  if (!redis_py_available()) {
    WARN("Debian's python3-redis is not installed (scripts/install-deps): skipping");
    return;
  }
  ltest::redis_server server;
  atest::temp_dir dir;
  const auto pcap = dir / "redis_py.pcap";
  const auto truth_file = dir / "truth.jsonl";
  const std::string run_client = std::string(debian_python) + " " + python_client.string() + " ";
  const std::string port = std::to_string(server.port());
  REQUIRE(atest::run(run_client + "load " + port) == 0);
  {
    atest::tcpdump_recording rec(pcap, server.port());
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo (needs CAP_NET_RAW): skipping");
      return;
    }
    REQUIRE(atest::run(run_client + "run " + port + " > " + truth_file.string()) == 0);
  }
  const auto truth = read_truth(truth_file);
  REQUIRE(truth.size() == 10);
  const auto events = events_of(pcap.string());

  std::vector<const recorded_event*> py, del;
  for (const auto& e : events.events) (e.lock == "job:py" ? py : del).push_back(&e);
  // redis-py: what the client says it did, in order (its failed polls are the contended).
  std::vector<std::string> ours, theirs;
  for (const auto* e : py) {
    if (e->event != "contended" && e->event != "gave_up") ours.push_back(e->event + " " + e->owner);
  }
  CHECK(events.count("gave_up") == 1);  // B's poll that ran out (its token is not logged)
  for (std::size_t i = 0; i < 7; ++i) {
    const auto& t = truth[i];
    if (t.at("event") == "gave_up") continue;
    theirs.push_back((t.at("event") == "extended" ? "renewed" : t.at("event")) + " " + t.at("owner"));
  }
  CHECK(ours == theirs);
  CHECK(events.count("contended") >= 2);  // B polled every 50 ms for 300 ms
  for (const auto* e : py) {
    if (e->event == "renewed" || e->event == "released") CHECK(e->inferred);  // the variants' SHA1s are unknown
  }
  // Seed 004: c1's DEL removed b's lock.
  std::vector<std::string> del_names;
  for (const auto* e : del) del_names.push_back(e->event);
  CHECK(del_names == std::vector<std::string>{"acquired", "expired", "acquired", "released",
                                              "anomaly:released_other_owner", "anomaly:unchecked_release"});
  const auto* other = events.first("anomaly:released_other_owner");
  REQUIRE(other != nullptr);
  CHECK(other->owner == truth[9].at("owner"));
  CHECK(events.first("released") != nullptr);
  CHECK(del.size() >= 4);
  CHECK(del[3]->owner == truth[9].at("deleted_owner"));
  CHECK(del[3]->client == del[0]->client);  // from c1's connection
  CHECK(events.count("anomaly:unlock_by_non_owner") == 0);
  CHECK(events.count("anomaly:expired_while_held") == 0);
  CHECK(events.count("renew_failed") == 0);
}

// The thirdparty recordings (captures/thirdparty/, with the clients' own truth logs),
// when present.
namespace {

const std::filesystem::path thirdparty = std::filesystem::path(LOCKSCOPE_CAPTURES_DIR) / "thirdparty";

std::vector<boost::json::object> truth_lines(const std::filesystem::path& file) {
  std::vector<boost::json::object> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(boost::json::parse(line).as_object());
  }
  return out;
}

std::string text_of(const boost::json::value& v) { return std::string(v.as_string()); }

}  // namespace

TEST_CASE("thirdparty node-redlock over three servers, its scripts made unseen: value flow against the servers' replies",
          "[clients][value-flow][thirdparty]") {
  const auto pcap = thirdparty / "redlock.pcap";
  if (!std::filesystem::exists(pcap)) {
    WARN("captures/thirdparty/redlock.pcap is not there: skipping");
    return;
  }
  // Every EVALSHA names a SHA1 no table knows: the built-in node-redlock SHA1s are
  // replaced (same length, so the TCP framing is unchanged).
  std::string bytes;
  {
    std::ifstream in(pcap, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::size_t replaced = 0;
  for (std::string_view name : {"node-redlock 5.0.0-beta.2 acquire", "node-redlock 5.0.0-beta.2 extend",
                                "node-redlock 5.0.0-beta.2 release"}) {
    std::string text;
    for (const auto& s : locks::client_scripts()) {
      if (s.name == name) text = s.text;
    }
    const std::string known = lock::sha1_hex(text), unseen = lock::sha1_hex(text + "-- unseen");
    for (std::size_t p = bytes.find(known); p != std::string::npos; p = bytes.find(known, p + 40)) {
      bytes.replace(p, 40, unseen);
      ++replaced;
    }
  }
  REQUIRE(replaced > 100);
  atest::temp_dir dir;
  const auto unseen_pcap = dir / "redlock-unseen.pcap";
  std::ofstream(unseen_pcap, std::ios::binary) << bytes;
  const auto events = events_of(unseen_pcap.string());
  const auto known = events_of(pcap.string());  // the built-in SHA1s: no inference needed

  const auto truth = truth_lines(thirdparty / "redlock.truth.jsonl");
  REQUIRE(!truth.empty());
  // The window the pcap itself covers (its first and last lock operation).
  REQUIRE(!events.events.empty());
  std::int64_t start = events.events.front().ts_us, stop = start;
  for (const auto& e : events.events) {
    start = std::min(start, e.ts_us);
    stop = std::max(stop, e.ts_us);
  }
  start -= 2000;  // the request went out before its reply
  // What each server answered, per script, as the client logged it (within the capture).
  std::map<std::string, std::size_t> replies;
  for (const auto& t : truth) {
    if (text_of(t.at("event")) != "server_reply") continue;
    const std::int64_t sent = t.at("sent_us").to_number<std::int64_t>();
    if (sent < start || sent > stop) continue;
    ++replies[text_of(t.at("script")) + " " + std::to_string(t.at("reply").to_number<int>())];
  }
  INFO("acquire 1: " << replies["acquire 1"] << ", acquire 0: " << replies["acquire 0"]
                     << ", extend 1: " << replies["extend 1"]);
  std::size_t acquired = 0;
  for (const auto& e : events.events) {
    if (e.event == "acquired" || e.event == "reentered") ++acquired;
  }
  // Each server's acquisition, counted once (a few ms of slack at the capture's edges).
  CHECK(acquired + 2 >= replies["acquire 1"]);
  CHECK(acquired <= replies["acquire 1"] + 2);
  CHECK(events.count("renewed") + 2 >= replies["extend 1"]);
  CHECK(events.count("renewed") <= replies["extend 1"] + 2);
  CHECK(events.count("renew_failed") == replies["extend 0"]);
  // Resolved by the built-in SHA1s: the same counts, and never a re-entry (node-redlock
  // cannot re-enter: its acquire fails while the key exists).
  CHECK(known.count("acquired") == acquired);
  CHECK(known.count("reentered") == 0);
  CHECK(known.count("renewed") == events.count("renewed"));
  CHECK(known.count("contended") == events.count("contended"));
  CHECK(events.count("contended") <= replies["acquire 0"] + 2);
  CHECK(events.count("contended") + 2 >= replies["acquire 0"]);
}

TEST_CASE("thirdparty redis-py DEL scenario: released_other_owner exactly where the client's log says",
          "[clients][thirdparty]") {
  const auto pcap = thirdparty / "del_other.pcap";
  if (!std::filesystem::exists(pcap)) {
    WARN("captures/thirdparty/del_other.pcap is not there: skipping");
    return;
  }
  const auto events = events_of(pcap.string());
  std::size_t other = 0, locks = 0;
  std::set<std::string> names;
  for (const auto& t : truth_lines(thirdparty / "del_other.truth.jsonl")) {
    if (t.contains("lock")) names.insert(text_of(t.at("lock")));
    if (t.contains("released_other_owner") && t.at("released_other_owner").as_bool()) {
      ++other;
      const auto* e = events.first("anomaly:released_other_owner");
      REQUIRE(e != nullptr);
      CHECK(e->owner == text_of(t.at("owner")));
      CHECK(e->lock == text_of(t.at("lock")));
    }
  }
  locks = names.size();
  CHECK(other >= 1);
  CHECK(events.count("anomaly:released_other_owner") == other);
  CHECK(events.count("anomaly:unchecked_release") == locks);
}
