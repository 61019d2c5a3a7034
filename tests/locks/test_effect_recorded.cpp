// A real lock client lockscope was not built for, recorded against a real redis-server
// with its own log (tests/locks/effect_clients/record.sh): redis-semaphore 5.8.0's Mutex
// (npm) on ioredis, whose refresh and release scripts copy KEYS/ARGV into Lua locals
// and are sent by EVALSHA, then EVAL on NOSCRIPT. Recognised by their effect, every
// acquisition, release, refresh and contended attempt the client logged must be found,
// each matched to the client's own line by lock, owner and time, and nothing false.
#include <fstream>
#include <map>

#include <boost/json.hpp>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

struct truth_line {
  std::int64_t t_us = 0;
  std::string event, lock, owner;
  std::int64_t attempts = 0, reply = -1;
};

std::vector<truth_line> read_truth(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<truth_line> out;
  std::string line;
  while (std::getline(in, line)) {
    const boost::json::object o = boost::json::parse(line).as_object();
    truth_line t;
    t.event = std::string(o.at("event").as_string());
    if (t.event == "recording") continue;
    t.t_us = o.at("t_us").to_number<std::int64_t>();
    t.lock = std::string(o.at("lock").as_string());
    t.owner = std::string(o.at("owner").as_string());
    if (const auto* a = o.if_contains("attempts")) t.attempts = a->to_number<std::int64_t>();
    if (const auto* r = o.if_contains("reply")) t.reply = r->to_number<std::int64_t>();
    out.push_back(std::move(t));
  }
  return out;
}

// The event of `kind` for (lock, owner) nearest before the client's log line (the
// client logs after the reply arrived); nullptr when none is within 100 ms.
const recorded_event* matching(const event_recorder& rec, std::string_view kind, const truth_line& t) {
  const recorded_event* best = nullptr;
  for (const recorded_event& e : rec.events) {
    if (e.event != kind || e.lock != t.lock || e.owner != t.owner) continue;
    if (e.ts_us > t.t_us || t.t_us - e.ts_us > 100'000) continue;
    if (best == nullptr || e.ts_us > best->ts_us) best = &e;
  }
  return best;
}

}  // namespace

TEST_CASE("effect recorded: redis-semaphore's Mutex against its own log", "[effect][recorded]") {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/effect_clients/";
  const std::vector<truth_line> truth = read_truth(dir + "redis_semaphore.truth.jsonl");
  const event_recorder rec = events_of(dir + "redis_semaphore.pcap");
  std::map<std::string, std::size_t> expected;
  for (const truth_line& t : truth) {
    INFO(t.event << " " << t.lock << " " << t.owner << " at " << t.t_us);
    if (t.event == "acquired") {
      ++expected["acquired"];
      expected["contended"] += static_cast<std::size_t>(t.attempts - 1);
      CHECK(matching(rec, "acquired", t) != nullptr);
    } else if (t.event == "released") {
      ++expected["released"];
      CHECK(matching(rec, "released", t) != nullptr);
    } else if (t.event == "refresh" && t.reply == 1) {
      ++expected["renewed"];
      CHECK(matching(rec, "renewed", t) != nullptr);
    }
  }
  REQUIRE(expected["acquired"] >= 20);
  REQUIRE(expected["renewed"] >= 5);
  for (const auto& [kind, n] : expected) {
    INFO(kind);
    CHECK(rec.count(kind) == n);
  }
  CHECK(rec.count("renew_failed") == 0);
  CHECK(rec.count("unlock_rejected") == 0);
  CHECK(rec.count("expired") == 0);
  for (const recorded_event& e : rec.events) {
    INFO(e.event << " " << e.detail);
    CHECK(e.event.rfind("anomaly:", 0) != 0);
  }
}
