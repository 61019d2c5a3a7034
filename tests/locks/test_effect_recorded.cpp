// Real lock clients lockscope was not built for, recorded against a real redis-server
// with their own logs (tests/locks/effect_clients/record.sh): redis-semaphore 5.8.0's
// Mutex (npm, on ioredis) and simple-redis-mutex 3.0.0 (npm, on node-redis 5). Their
// scripts are recognised by their effect; every acquisition, release, refresh and
// contended attempt the clients logged must be found, each matched to the client's own
// line by lock, owner and time, and nothing false.
#include <algorithm>
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

// The waits the client's log shows, for each acquisition: from the process's first
// refused attempt since its previous acquisition or give-up to the reply of its acquiring
// one. The log bounds when each reached the wire: not before it was sent (sent_us, where
// logged), not after its reply's line (t_us); a busy event loop put up to 50 ms between
// the two. So the wait lies in [acquiring sent - first logged, acquiring logged - first
// sent] (one value for a client that logs no send time). {-1, -1}: it acquired at its
// first attempt; std::nullopt: the log does not tell (only a count of attempts).
struct logged_wait {
  std::int64_t lo = -1, hi = -1;
};
std::vector<std::pair<const truth_line*, std::optional<logged_wait>>> logged_waits(const std::vector<truth_line>& truth) {
  std::vector<std::pair<const truth_line*, std::optional<logged_wait>>> out;
  std::map<std::pair<std::string, std::string>, const truth_line*> first_refused, acquiring;  // (proc, lock)
  bool logs_attempts = false;
  for (const truth_line& t : truth) logs_attempts = logs_attempts || t.event == "attempt";
  const auto sent = [](const truth_line* t) { return t->sent_us >= 0 ? t->sent_us : t->t_us; };
  for (const truth_line& t : truth) {
    const auto key = std::make_pair(t.proc, t.lock);
    if (t.event == "attempt" && t.reply_text != "OK") {
      first_refused.try_emplace(key, &t);
    } else if (t.event == "attempt") {
      acquiring[key] = &t;
    } else if (t.event == "gave_up") {
      first_refused.erase(key);  // its next wait begins afresh
    } else if (t.event == "acquired") {
      const auto it = first_refused.find(key);
      const auto won = acquiring.find(key);
      if (!logs_attempts) {
        out.emplace_back(&t, std::nullopt);
      } else if (it == first_refused.end()) {
        out.emplace_back(&t, logged_wait{});
      } else {
        const truth_line* ok = won != acquiring.end() ? won->second : &t;
        out.emplace_back(&t, logged_wait{sent(ok) - it->second->t_us, ok->t_us - sent(it->second)});
      }
      if (it != first_refused.end()) first_refused.erase(it);
    }
  }
  return out;
}

// Each acquisition after refused attempts is `acquired` with a wait within 10% (at
// least 2 ms) of what the client's log says, whatever value each attempt sent; one at
// the first attempt has no wait.
void check_waits(const std::vector<truth_line>& truth, const event_recorder& rec) {
  for (const auto& [t, logged] : logged_waits(truth)) {
    const recorded_event* e = matching(rec, "acquired", *t);
    if (e == nullptr || !logged) continue;  // counted missing above
    INFO("acquired " << t->lock << " by " << t->proc << " at " << t->t_us << ": logged wait " << logged->lo << ".."
                     << logged->hi << " us, lockscope " << e->wait_us << " us");
    if (logged->hi < 0) {
      CHECK(e->wait_us < 0);
      continue;
    }
    const std::int64_t slack = std::max<std::int64_t>((logged->lo + logged->hi) / 20, 2'000);
    CHECK(e->wait_us >= logged->lo - slack);
    CHECK(e->wait_us <= logged->hi + slack);
  }
}

// Each give-up the client logged is a gave_up of that lock whose wait began at the
// process's first refused attempt (a process's attempts carry no owner lockscope could
// match: each one's value is new), and there are no others.
void check_give_ups(const std::vector<truth_line>& truth, const event_recorder& rec) {
  std::map<std::pair<std::string, std::string>, const truth_line*> first_refused;
  std::vector<bool> used(rec.events.size(), false);
  std::size_t logged = 0;
  for (const truth_line& t : truth) {
    const auto key = std::make_pair(t.proc, t.lock);
    if (t.event == "attempt" && t.reply_text != "OK") first_refused.try_emplace(key, &t);
    if (t.event == "attempt" && t.reply_text == "OK") first_refused.erase(key);
    if (t.event != "gave_up") continue;
    ++logged;
    const auto began = first_refused.find(key);
    REQUIRE(began != first_refused.end());
    // Its first attempt reached the wire after it was sent and before its reply's line.
    const std::int64_t from = began->second->sent_us >= 0 ? began->second->sent_us : began->second->t_us;
    const std::int64_t to = began->second->t_us;
    INFO("gave up " << t.lock << " by " << t.proc << " at " << t.t_us << ", waiting since " << from << ".." << to);
    bool found = false;
    for (std::size_t i = 0; i < rec.events.size() && !found; ++i) {
      const recorded_event& e = rec.events[i];
      if (used[i] || e.event != "gave_up" || e.lock != t.lock) continue;
      if (e.interval_start_us < from - 2'000 || e.interval_start_us > to + 2'000) continue;
      // Its wait ended at its last attempt, before the client's line (after the reply),
      // or when its connection closed, as the process exited after its last give-up.
      CHECK(e.interval_start_us + e.wait_us <= t.t_us + 100'000);
      CHECK(e.interval_start_us + e.wait_us >= from);
      used[i] = found = true;
    }
    CHECK(found);
    first_refused.erase(began);
  }
  CHECK(rec.count("gave_up") == logged);
}

// The lock was free (between a release or expiry the client logged and its next
// acquisition) where each idle_with_waiters says, and a process was waiting then.
void check_idle_stretches(const std::vector<truth_line>& truth, const event_recorder& rec) {
  for (const recorded_event& e : rec.events) {
    if (e.event != "anomaly:idle_with_waiters") continue;
    INFO(e.lock << " free from " << e.interval_start_us << " for " << e.interval_us << " us");
    std::int64_t freed = -1, next_acquired = -1;
    for (const truth_line& t : truth) {
      if (t.lock != e.lock) continue;
      const std::int64_t at = t.sent_us >= 0 ? t.sent_us : t.t_us;
      if ((t.event == "released" || t.event == "expired") && at <= e.interval_start_us + 30'000) freed = at;
      if (t.event == "acquired" && freed >= 0 && t.t_us > freed && t.t_us <= e.interval_start_us) freed = -1;
      if (t.event == "acquired" && t.t_us > e.interval_start_us && next_acquired < 0) next_acquired = t.t_us;
    }
    CHECK(freed >= 0);
    CHECK(std::abs(freed - e.interval_start_us) <= 30'000);
    CHECK(e.interval_start_us + e.interval_us <= next_acquired + 2'000);
  }
}

// Every acquisition, release, refresh, expiry, give-up and refused attempt the client
// logged is found (matched by lock, owner and time), the totals agree, and nothing false
// is reported: no anomaly but those the client's design makes true (`allowed`: a plain
// DEL release is unchecked_release) and the lock standing free while a process waited.
void check_recording(const std::string& name, std::size_t min_acquired, std::size_t min_renewed,
                     std::vector<std::string> allowed = {}) {
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
    } else if ((t.event == "refresh" && t.reply == 1) || (t.event == "extended" && (t.reply == 1 || t.reply_text == "OK"))) {
      ++expected["renewed"];
      CHECK(matching(rec, "renewed", t) != nullptr);
    } else if (t.event == "expired") {
      ++expected["expired"];  // logged at the lease's end by the client's clock
      bool found = false;
      for (const recorded_event& e : rec.events) {
        found = found || (e.event == "expired" && e.lock == t.lock && e.owner == t.owner &&
                          std::abs(e.ts_us - t.t_us) <= 100'000);
      }
      CHECK(found);
    }
  }
  check_waits(truth, rec);
  check_give_ups(truth, rec);
  check_idle_stretches(truth, rec);
  REQUIRE(expected["acquired"] >= min_acquired);
  REQUIRE(expected["renewed"] >= min_renewed);
  for (const auto& [kind, n] : expected) {
    INFO(kind);
    CHECK(rec.count(kind) == n);
  }
  CHECK(rec.count("renew_failed") == 0);
  CHECK(rec.count("unlock_rejected") == 0);
  CHECK(rec.count("expired") == expected["expired"]);
  allowed.push_back("anomaly:idle_with_waiters");
  for (const recorded_event& e : rec.events) {
    INFO(e.event << " " << e.detail);
    CHECK((e.event.rfind("anomaly:", 0) != 0 || std::find(allowed.begin(), allowed.end(), e.event) != allowed.end()));
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

TEST_CASE("effect recorded: redis-lock, a poller with a fresh timestamp value per attempt, against its own log",
          "[effect][recorded][fresh]") {
  // SET NX PX every 50 ms, each with the lease's end as its value; a plain DEL release
  // (unchecked_release: by design); one hold in six outlives its lease and expires.
  check_recording("redis_lock", 60, 0, {"anomaly:unchecked_release"});
}

TEST_CASE("effect recorded: node-redis-warlock, a poller with a fresh id per attempt that gives up, against its own log",
          "[effect][recorded][fresh]") {
  // 20 attempts 60 ms apart, each with a new id; a Lua-local release; touch with the TTL
  // and the id as KEYS, loaded by SCRIPT LOAD after NOSCRIPT.
  check_recording("warlock", 30, 10);
}

TEST_CASE("effect recorded: ioredfour, an owner the acquire script draws and answers in a list, against its own log",
          "[effect][recorded][fresh]") {
  // The owner is an index from a counter, answered in {1, index, ttl}; a refusal
  // ({0, -1, pttl}) names no owner, so a process's attempts are its connection's wait;
  // waiters wake on one release channel for every lock, or when the TTL runs out.
  check_recording("ioredfour", 30, 10);
}
