// Real lock clients lockscope was not built for, recorded against a real redis-server
// with their own logs (tests/locks/effect_clients/record.sh): redis-semaphore 5.8.0's
// Mutex (npm, on ioredis) and simple-redis-mutex 3.0.0 (npm, on node-redis 5). Their
// scripts are recognised by their effect; every acquisition, release, refresh and
// contended attempt the clients logged must be found, each matched to the client's own
// line by lock, owner and time, and nothing false.
#include <fstream>
#include <map>
#include <optional>

#include <boost/json.hpp>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

struct truth_line {
  std::int64_t t_us = 0;
  std::string event, lock, owner, proc;
  std::int64_t attempts = 0, reply = -1;
  std::int64_t sent_us = -1;  // a call: when it was handed to the client (-1: not logged)
  std::string reply_text;  // a string reply ("OK"); empty for nil
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
    if (const auto* p = o.if_contains("proc")) t.proc = std::string(p->as_string());
    if (const auto* a = o.if_contains("attempts")) t.attempts = a->to_number<std::int64_t>();
    if (const auto* s = o.if_contains("sent_us")) t.sent_us = s->to_number<std::int64_t>();
    if (const auto* r = o.if_contains("reply")) {
      if (r->is_number()) t.reply = r->to_number<std::int64_t>();
      else if (r->is_string()) t.reply_text = std::string(r->as_string());
    }
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

// The waits the client's log shows: for each acquisition, from the process's first
// refused attempt since its previous acquisition to its acquiring one, each taken when
// it was sent where the client logged that (a reply's callback may run tens of ms late
// on a busy event loop), else when it was logged (a client that logs its attempts); -1
// when it acquired at its first attempt. std::nullopt: the log does not tell (a client
// that logs only a count of attempts).
std::vector<std::pair<const truth_line*, std::optional<std::int64_t>>> logged_waits(const std::vector<truth_line>& truth) {
  std::vector<std::pair<const truth_line*, std::optional<std::int64_t>>> out;
  std::map<std::pair<std::string, std::string>, std::int64_t> first_refused;  // (proc, lock) -> t_us
  std::map<std::pair<std::string, std::string>, std::int64_t> acquiring;      // its OK attempt
  bool logs_attempts = false;
  for (const truth_line& t : truth) logs_attempts = logs_attempts || t.event == "attempt";
  for (const truth_line& t : truth) {
    const auto key = std::make_pair(t.proc, t.lock);
    const std::int64_t sent = t.sent_us >= 0 ? t.sent_us : t.t_us;
    if (t.event == "attempt" && t.reply_text != "OK") {
      first_refused.try_emplace(key, sent);
    } else if (t.event == "attempt") {
      acquiring[key] = sent;
    } else if (t.event == "acquired") {
      const auto it = first_refused.find(key);
      const auto won = acquiring.find(key);
      const std::int64_t acquired_us = won != acquiring.end() ? won->second : t.t_us;
      if (!logs_attempts) out.emplace_back(&t, std::nullopt);
      else out.emplace_back(&t, it == first_refused.end() ? -1 : acquired_us - it->second);
      if (it != first_refused.end()) first_refused.erase(it);
    }
  }
  return out;
}

// Each acquisition after refused attempts is `acquired` with a wait within 10% of the
// one the client logged (at least 2 ms: the client logs each reply after it arrived,
// lockscope counts from the first attempt's request), whatever value each attempt
// sent; one at the first attempt has no wait.
void check_waits(const std::vector<truth_line>& truth, const event_recorder& rec) {
  std::size_t waits = 0;
  for (const auto& [t, logged] : logged_waits(truth)) {
    const recorded_event* e = matching(rec, "acquired", *t);
    if (e == nullptr || !logged) continue;  // counted missing above
    INFO("acquired " << t->lock << " by " << t->proc << " at " << t->t_us << ": logged wait " << *logged
                     << " us, lockscope " << e->wait_us << " us");
    if (*logged < 0) {
      CHECK(e->wait_us < 0);
      continue;
    }
    ++waits;
    CHECK(std::abs(e->wait_us - *logged) <= std::max<std::int64_t>(*logged / 10, 2'000));
  }
  INFO("waits logged by the client: " << waits);
  CHECK((waits == 0 || rec.count("gave_up") == 0));
}

// Every acquisition, release, refresh and refused attempt the client logged is found
// (matched by lock, owner and time), the totals agree, and nothing false is reported.
void check_recording(const std::string& name, std::size_t min_acquired, std::size_t min_renewed) {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/effect_clients/";
  const std::vector<truth_line> truth = read_truth(dir + name + ".truth.jsonl");
  const event_recorder rec = events_of(dir + name + ".pcap");
  std::map<std::string, std::size_t> expected;
  for (const truth_line& t : truth) {
    INFO(t.event << " " << t.lock << " " << t.owner << " at " << t.t_us);
    if (t.event == "acquired") {
      ++expected["acquired"];
      if (t.attempts > 0) expected["contended"] += static_cast<std::size_t>(t.attempts - 1);
      CHECK(matching(rec, "acquired", t) != nullptr);
    } else if (t.event == "attempt" && t.reply_text != "OK") {
      ++expected["contended"];  // one SET NX with its own fresh value, refused
      CHECK(matching(rec, "contended", t) != nullptr);
    } else if (t.event == "released") {
      ++expected["released"];
      CHECK(matching(rec, "released", t) != nullptr);
    } else if (t.event == "refresh" && t.reply == 1) {
      ++expected["renewed"];
      CHECK(matching(rec, "renewed", t) != nullptr);
    }
  }
  check_waits(truth, rec);
  REQUIRE(expected["acquired"] >= min_acquired);
  REQUIRE(expected["renewed"] >= min_renewed);
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

}  // namespace

TEST_CASE("effect recorded: redis-semaphore's Mutex against its own log", "[effect][recorded]") {
  // Refresh and release scripts with Lua locals; EVALSHA, EVAL on NOSCRIPT.
  check_recording("redis_semaphore", 20, 5);
}

TEST_CASE("effect recorded: simple-redis-mutex against its own log", "[effect][recorded]") {
  // A fresh random value on every attempt; a release by SCRIPT LOAD + EVALSHA that
  // answers nil whatever it did (decided by the value's history) and PUBLISHes.
  check_recording("simple_redis_mutex", 20, 0);
}
