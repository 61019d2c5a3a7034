// Semaphores and latches (several holders): recognised by the catalogue's roles and by
// what other releases' texts do, and their timeline checked against real Redisson's
// own log (tests/redisson/permits-<release>.pcap and .log.jsonl, recorded by
// tests/redisson/record_permits.sh running RedissonPermitsDriver.java; -resp3: with
// PROTOCOL=RESP3, `_` nulls and `>` pushes), whole and joined mid-run.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/locks/permit_text.hpp"
#include "lockscope/test/real_capture.hpp"

namespace lockscope::timeline_test {

namespace {

struct permit_event {
  std::int64_t ts_us = 0;
  std::string event, lock, owner;
  std::int64_t permits = -1, in_use = -1, limit = -1, held_us = -1;
  bool latch = false, inferred = false;
  std::int64_t wait_us = -1;
};

class permit_recorder final : public locks::lock_event_sink {
 public:
  void on_event(const locks::lock_event& e) override {
    std::string name(to_string(e.event));
    if (e.event == locks::lock_event_kind::anomaly) name += ":" + std::string(to_string(e.kind));
    events.push_back({e.ts_us, name, std::string(e.lock), std::string(e.owner), e.permits, e.permits_in_use,
                      e.permit_limit, e.held_us, e.latch, e.inferred, e.wait_us});
  }
  std::vector<permit_event> events;
};

permit_recorder permit_events_of(const std::string& pcap) {
  permit_recorder rec;
  run_pipeline(pcap, {}, rec, [](const locks::lock_timeline&) {}, [](const locks::lock_timeline&) {});
  return rec;
}

struct logged {
  std::int64_t ms = 0;
  std::string type, lock, owner, did;
};

std::vector<logged> permits_log(const std::string& file) {
  std::vector<logged> log;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto o = boost::json::parse(line).as_object();
    log.push_back({o.at("ms").as_int64(), std::string(o.at("type").as_string()), std::string(o.at("lock").as_string()),
                   std::string(o.at("owner").as_string()), std::string(o.at("did").as_string())});
  }
  return log;
}

std::string hex(std::string_view s) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// A permit id as the log writes it (hex): Redisson 3.2x+ sends the 16 raw bytes, 3.16 the hex text.
bool same_id(const std::string& owner, const std::string& logged_id) {
  return owner == logged_id || hex(owner) == logged_id;
}

// The event of `lock` named `what` that the logged call returned after: at most 100 ms
// before the log's time (and not after it: the thread logs once the reply came), not
// taken yet; owner-checked when the log names a permit id.
const permit_event* match(const permit_recorder& rec, std::vector<bool>& taken, const logged& l, const std::string& what,
                          bool by_id) {
  for (std::size_t i = 0; i < rec.events.size(); ++i) {
    const permit_event& e = rec.events[i];
    if (taken[i] || e.lock != l.lock || e.event != what) continue;
    const std::int64_t ms = e.ts_us / 1000;
    if (ms > l.ms + 1 || ms < l.ms - 100) continue;
    if (by_id && !same_id(e.owner, l.owner)) continue;
    taken[i] = true;
    return &e;
  }
  return nullptr;
}

// How many permits of `lock` the log shows held at `ms` (acquired by then, not yet released).
// (A call logged within `slack` of `ms` counts either way, as the log's time is when
// the reply had come back.)
int held_per_log(const std::vector<logged>& log, const std::string& lock, std::int64_t ms, std::int64_t slack) {
  int n = 0;
  for (const logged& l : log) {
    if (l.lock != lock) continue;
    if (l.ms > ms + slack) break;
    if (l.did == "acquired") ++n;
    if ((l.did == "released" || l.did == "lost") && l.ms < ms - slack) --n;
  }
  return n;
}

// Every acquisition, release, refusal of a polling thread, expiry, count-down and
// latch wake-up the threads logged after from_ms is an event; no permits shown beyond
// the limit, no overlapping_holders.
void check_permits_against_log(const permit_recorder& rec, const std::vector<logged>& log, std::int64_t from_ms,
                               bool whole) {
  std::vector<bool> taken(rec.events.size(), false);
  std::map<std::string, int> logged_n, found_n;
  std::int64_t leaked_at = -1;
  std::string leaked;
  for (const logged& l : log) {
    if (l.type == "expirable" && l.did == "acquired" && leaked.empty()) {
      leaked = l.owner;
      leaked_at = l.ms;
    }
    if (l.ms < from_ms) continue;
    INFO(l.type << " " << l.lock << " " << l.owner << " " << l.did << " at " << l.ms);
    const bool by_id = l.type == "expirable" && l.did != "refused" && l.did != "set";
    const std::string key = l.lock + " " + l.did;
    const permit_event* e = nullptr;
    if (l.did == "acquired" || l.did == "released") {
      e = match(rec, taken, l, l.did, by_id);
    } else if (l.did == "refused") {
      e = match(rec, taken, l, "contended", false);
    } else if (l.did == "lost") {
      e = match(rec, taken, l, "unlock_rejected", by_id);
    } else if (l.did == "set") {
      e = match(rec, taken, l, "permits_set", false);
      if (e != nullptr) CHECK(e->in_use >= 0);
    } else if (l.did == "counted_down") {
      e = match(rec, taken, l, "counted_down", false);
    } else if (l.did == "woke") {
      // The waiters' channel message "0" (delivered once per subscribed connection).
      e = nullptr;
      for (const permit_event& n : rec.events) {
        if (n.lock == l.lock && n.event == "notified" && n.ts_us / 1000 <= l.ms + 1 && n.ts_us / 1000 >= l.ms - 100) e = &n;
      }
      if (e != nullptr) CHECK(e->in_use == 0);  // the count reached zero
    } else {
      continue;
    }
    ++logged_n[key];
    if (e != nullptr) ++found_n[key];
    CHECK(e != nullptr);
  }
  for (const auto& [key, n] : logged_n) {
    INFO(key << ": found " << found_n[key] << " of " << n);
    CHECK(found_n[key] == n);
  }
  // The leaked permit ran out at its lease (400 ms), and no other did.
  std::size_t expiries = 0;
  for (const permit_event& e : rec.events) {
    if (e.event != "expired") continue;
    ++expiries;
    CHECK(same_id(e.owner, leaked));
    // Redisson counts the lease from before its call; the leaker logs once it returned
    // (its first call of the semaphore took up to ~100 ms).
    CHECK(e.ts_us / 1000 >= leaked_at + 400 - 150);
    CHECK(e.ts_us / 1000 <= leaked_at + 400 + 60);
  }
  if (whole || leaked_at >= from_ms) CHECK(expiries == 1);
  // Nothing beyond the limit, nothing reported as an overlap; a refusal only when the
  // threads' log shows every permit held around it.
  for (const permit_event& e : rec.events) {
    INFO(e.event << " " << e.lock << " at " << e.ts_us << " in use " << e.in_use << "/" << e.limit);
    CHECK(e.event.rfind("anomaly:", 0) == std::string::npos);
    CHECK_FALSE(e.inferred);
    // Joined after trySetPermits the limit is not known, and an acquisition's reply
    // captured a few µs before a release's that the server ran first shows one permit
    // more until that release (with a known limit it is held back: reply_skew_us).
    if (!e.latch && e.in_use >= 0) CHECK(e.in_use <= (e.limit >= 0 || whole ? 2 : 3));
    if (!e.latch && e.limit >= 0) CHECK(e.limit == 2);
    if (whole && !e.latch && e.event == "acquired") CHECK(e.limit == 2);
    // (100 ms: a thread logs once its call returned, late at a JVM's first calls.)
    if (e.event == "contended") CHECK(held_per_log(log, e.lock, e.ts_us / 1000, 100) >= 2);
  }
  // Whole recordings: no event beyond what the log explains (blocking threads' inner
  // attempts are refusals the log does not list, so contended is bounded above only by
  // the check above).
  if (whole) {
    for (const std::string what : {"acquired", "released", "counted_down", "unlock_rejected"}) {
      const std::size_t events = static_cast<std::size_t>(
          std::count_if(rec.events.begin(), rec.events.end(), [&](const permit_event& e) { return e.event == what; }));
      std::size_t logs = 0;
      for (const logged& l : log) logs += (l.did == what || (what == std::string("unlock_rejected") && l.did == "lost")) ? 1 : 0;
      INFO(what);
      CHECK(events == logs);
    }
  }
}

}  // namespace

TEST_CASE("permits: every semaphore and latch script of the catalogue is read by its role, by text and by its text's reading",
          "[recognizer][permits]") {
  for (const lock::primitive_script_info& s : lock::all_primitive_scripts()) {
    INFO(s.name);
    const locks::script_class c = locks::permit_script_class(s.text);
    CHECK(c.permit_role == static_cast<unsigned>(s.kind) + 1);
    // The same text with its spacing changed is no catalogue text: read by what it does.
    std::string respaced(s.text);
    std::replace(respaced.begin(), respaced.end(), ';', '\n');
    const locks::script_class read = locks::permit_script_class(respaced);
    if (s.kind != lock::primitive_script::latch_delete && s.kind != lock::primitive_script::expirable_add_permits) {
      CHECK(read.permit_role == c.permit_role);
      CHECK(read.owner_argv == c.owner_argv);
      CHECK(read.lease_argv == c.lease_argv);
    }
  }
  // Lock scripts are none of these.
  for (const lock::redisson_script& s : lock::redisson_catalogue()) {
    INFO(s.source);
    CHECK(locks::permit_script_class(s.text).permit_role == 0);
  }
}

TEST_CASE("permits: real Redisson's RSemaphore, RPermitExpirableSemaphore and RCountDownLatch agree with its threads' log",
          "[recognizer][permits][real]") {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/";
  for (const std::string release : {"4.7.0", "3.27.2", "3.16.8", "4.7.0-resp3", "3.27.2-resp3"}) {
    if (!std::filesystem::exists(dir + "permits-" + release + ".pcap")) continue;
    INFO("Redisson " << release);
    const std::vector<logged> log = permits_log(dir + "permits-" + release + ".log.jsonl");
    REQUIRE(log.size() >= 60);
    const permit_recorder rec = permit_events_of(dir + "permits-" + release + ".pcap");
    check_permits_against_log(rec, log, 0, true);
    // Both semaphores were full at times: 2/2 shown.
    for (const std::string lock : {"sem", "xsem"}) {
      INFO(lock);
      CHECK(std::any_of(rec.events.begin(), rec.events.end(),
                        [&](const permit_event& e) { return e.lock == lock && e.in_use == 2 && e.limit == 2; }));
    }
  }
}

TEST_CASE("permits: a Redisson recording joined mid-run still agrees with its threads' log", "[recognizer][permits][real]") {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/";
  for (const std::string release : {"4.7.0", "3.27.2", "3.16.8", "4.7.0-resp3", "3.27.2-resp3"}) {
    const std::string pcap = dir + "permits-" + release + ".pcap";
    if (!std::filesystem::exists(pcap)) continue;
    INFO("Redisson " << release);
    const std::vector<logged> log = permits_log(dir + "permits-" + release + ".log.jsonl");
    const auto cut = std::filesystem::temp_directory_path() /
                     ("lockscope-permits-cut-" + std::to_string(::getpid()) + ".pcap");
    // Past the connections' set-up and the semaphore's trySetPermits, into its contention.
    lockscope::test::cut_pcap(pcap, cut, 400);
    const permit_recorder rec = permit_events_of(cut.string());
    std::filesystem::remove(cut);
    REQUIRE_FALSE(rec.events.empty());
    // From a second after the first event: what began before the cut is seen in part.
    const std::int64_t from_ms = rec.events.front().ts_us / 1000 + 1000;
    std::size_t checked = 0;
    for (const logged& l : log) checked += l.ms >= from_ms ? 1 : 0;
    CHECK(checked >= 30);
    check_permits_against_log(rec, log, from_ms, false);
  }
}

TEST_CASE("permits: the summary and JSONL show a semaphore's permits", "[permits][outputs]") {
  const std::string pcap = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/permits-4.7.0.pcap";
  if (!std::filesystem::exists(pcap)) return;
  const std::string summary = report_of(pcap, locks::report_format::summary_only);
  CHECK(summary.find("sem: 2/2 permits at most") != std::string::npos);
  CHECK(summary.find("xsem: 2/2 permits at most") != std::string::npos);
  CHECK(summary.find("latch: latch, count 0") != std::string::npos);
  const std::string jsonl = report_of(pcap, locks::report_format::jsonl);
  CHECK(jsonl.find("\"permits_in_use\":2,\"permit_limit\":2") != std::string::npos);
  CHECK(jsonl.find("\"event\":\"counted_down\"") != std::string::npos);
  const std::string text = report_of(pcap, locks::report_format::text);
  CHECK(text.find("2/2 in use") != std::string::npos);
  CHECK(text.find("counted_down                 count 0") != std::string::npos);
  CHECK(text.find("overlapping_holders") == std::string::npos);
  // The HTML report's table and the trace's args, through the CLI.
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty()) return;
  int status = 0;
  const std::string html = command_output(cli + " analyze --format html " + pcap + " 2>/dev/null", status);
  CHECK(status == 0);
  CHECK(html.find("<span class=\"permits\">(2/2 permits at most, 56 refused)</span>") != std::string::npos);
  const std::string trace = command_output(cli + " analyze --format trace " + pcap + " 2>/dev/null", status);
  CHECK(status == 0);
  CHECK(trace.find("\"permits_in_use\":2,\"permit_limit\":2") != std::string::npos);
}

TEST_CASE("permits: the catalogue's scripts by EVALSHA of texts never seen", "[recognizer][permits]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const auto sha = [](lock::primitive_script k) { return std::string(lock::script(k).sha1); };
  feed(r, {"EVALSHA", sha(lock::primitive_script::semaphore_try_set_permits), "2", "sem", "redisson_sc:{sem}", "3", "PUBLISH"}, ":1\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::semaphore_try_acquire), "1", "sem", "2"}, ":1\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::semaphore_try_acquire), "1", "sem", "1"}, ":0\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::semaphore_release), "2", "sem", "redisson_sc:{sem}", "2", "PUBLISH"}, "$-1\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::latch_count_down), "2", "l", "redisson_countdownlatch__channel__{l}", "0", "PUBLISH"}, "$-1\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::expirable_try_acquire), "3", "x", "{x}:timeout", "redisson_sc:{x}", "1",
           "1000400", "1000000", "922337203685477", "PUBLISH", "id-1"}, "$2\r\nOK\r\n");
  feed(r, {"EVALSHA", sha(lock::primitive_script::expirable_try_release), "3", "x", "redisson_sc:{x}", "{x}:timeout", "id-1",
           "1", "1000100", "PUBLISH"}, ":1\r\n");
  REQUIRE(rec.ops.size() == 7);
  using K = locks::lock_op_kind;
  using O = locks::op_outcome;
  CHECK((rec.ops[0].kind == K::set_permits && rec.ops[0].outcome == O::ok));
  CHECK((rec.ops[1].kind == K::acquire && rec.ops[1].outcome == O::ok && rec.ops[1].family == locks::lock_family::redisson_semaphore));
  CHECK((rec.ops[2].kind == K::acquire && rec.ops[2].outcome == O::contended));
  CHECK((rec.ops[3].kind == K::unlock && rec.ops[3].outcome == O::ok));
  CHECK((rec.ops[4].kind == K::count_down && rec.ops[4].family == locks::lock_family::redisson_latch));
  CHECK((rec.ops[5].kind == K::acquire && rec.ops[5].outcome == O::ok && rec.ops[5].owner == "id-1" && rec.ops[5].lease_ms == 400));
  CHECK((rec.ops[6].kind == K::unlock && rec.ops[6].outcome == O::ok && rec.ops[6].owner == "id-1"));
  for (const recorded_op& o : rec.ops) CHECK_FALSE(o.inferred);
}

TEST_CASE("permits: a sorted-set semaphore is read by what its script does, whatever its locals and argument order",
          "[recognizer][permits]") {
  // redis-semaphore 5.8.0's acquire, byte for byte, and the same effect written with
  // other locals, another argument order and a <= comparison's mirror.
  const std::string redis_semaphore =
      "\n  local key = KEYS[1]\n  local limit = tonumber(ARGV[1])\n  local identifier = ARGV[2]\n"
      "  local lockTimeout = tonumber(ARGV[3])\n  local now = tonumber(ARGV[4])\n"
      "  local expiredTimestamp = now - lockTimeout\n\n"
      "  redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)\n\n"
      "  if redis.call('zcard', key) < limit then\n    redis.call('zadd', key, now, identifier)\n"
      "    redis.call('pexpire', key, lockTimeout)\n    return 1\n  else\n    return 0\n  end";
  const std::string other =
      "local ttl = ARGV[1]; local who = ARGV[2]; local t = tonumber(ARGV[3]); local cap = tonumber(ARGV[4])\n"
      "redis.call(\"ZREMRANGEBYSCORE\", KEYS[1], 0, t - ttl)\n"
      "if redis.call(\"ZCARD\", KEYS[1]) < cap then redis.call(\"ZADD\", KEYS[1], t, who) "
      "redis.call(\"PEXPIRE\", KEYS[1], ttl) return 1 end return 0";
  const locks::script_class a = locks::permit_script_class(redis_semaphore);
  CHECK(a.permit_role == locks::permit_zset_acquire);
  CHECK(a.limit_argv == 1);
  CHECK(a.owner_argv == 2);
  CHECK(a.lease_argv == 3);
  CHECK(a.now_argv == 4);
  const locks::script_class b = locks::permit_script_class(other);
  CHECK(b.permit_role == locks::permit_zset_acquire);
  CHECK(b.limit_argv == 4);
  CHECK(b.owner_argv == 2);
  CHECK(b.lease_argv == 1);
  CHECK(b.now_argv == 3);
  // Through the recognizer and the timeline: two holders of two permits are no anomaly,
  // a ZREM gives one back, the third refused; the member whose lease passed expires.
  permit_recorder events;
  locks::lock_timeline timeline({}, events);
  locks::lock_recognizer r(timeline);
  const std::int64_t s = 1'000'000;
  feed(r, {"EVAL", other, "1", "pool", "1000", "a", "5000", "2"}, ":1\r\n", 5 * s);
  feed(r, {"EVAL", other, "1", "pool", "1000", "b", "5100", "2"}, ":1\r\n", 5 * s + 100'000, 2);
  feed(r, {"EVAL", other, "1", "pool", "1000", "c", "5200", "2"}, ":0\r\n", 5 * s + 200'000, 3);
  feed(r, {"ZREM", "pool", "a"}, ":1\r\n", 5 * s + 300'000);
  feed(r, {"EVAL", other, "1", "pool", "1000", "c", "5400", "2"}, ":1\r\n", 5 * s + 400'000, 3);
  timeline.finish(8 * s);
  std::vector<std::string> seen;
  for (const permit_event& e : events.events) seen.push_back(e.event + " " + e.owner + " " + std::to_string(e.in_use) + "/" + std::to_string(e.limit));
  // (c, refused 100 ms before a gave back, polled again 100 ms after: a permit stood
  // free that long while it waited.)
  CHECK(seen == std::vector<std::string>{"acquired a 1/2", "acquired b 2/2", "contended c 2/2", "released a 1/2",
                                         "anomaly:idle_with_waiters c 1/2", "acquired c 2/2", "expired b 1/2",
                                         "expired c 0/2"});
}

TEST_CASE("permits: joined mid-run, a member refreshed before any acquire was seen is the semaphore's holder",
          "[recognizer][permits]") {
  // Written here: a semaphore of `limit` permits whose member is built from the holder's
  // id, its refresh and release scripts; the capture begins while `x` holds the permit,
  // so the key's first call is x's refresh, not yet known as a semaphore's.
  const std::string acquire =
      "local id, limit, lease, clock = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
      "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', clock - lease)\n"
      "if redis.call('ZCARD', KEYS[1]) >= limit then return 0 end\n"
      "redis.call('ZADD', KEYS[1], clock, id .. ':p1')\nredis.call('PEXPIRE', KEYS[1], lease)\nreturn 1\n";
  const std::string refresh =
      "if not redis.call('ZSCORE', KEYS[1], ARGV[1] .. ':p1') then return 0 end\n"
      "redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1] .. ':p1')\nredis.call('PEXPIRE', KEYS[1], ARGV[2])\nreturn 1\n";
  const std::string release = "return redis.call('ZREM', KEYS[1], ARGV[1] .. ':p1')";
  const std::string x = "holder-x-5f3a9c", y = "holder-y-8b21d4";
  permit_recorder events;
  locks::lock_timeline timeline({}, events);
  locks::lock_recognizer r(timeline);
  const std::int64_t s = 1'000'000;
  feed(r, {"EVAL", refresh, "1", "sem:jobs", x, "600", "1764000005000"}, ":1\r\n", 5 * s, 1);
  feed(r, {"EVAL", acquire, "1", "sem:jobs", y, "2", "600", "1764000005050"}, ":1\r\n", 5 * s + 50'000, 2);
  feed(r, {"EVAL", acquire, "1", "sem:jobs", "holder-z-77e0aa", "2", "600", "1764000005100"}, ":0\r\n", 5 * s + 100'000, 3);
  feed(r, {"EVAL", release, "1", "sem:jobs", x}, ":1\r\n", 5 * s + 150'000, 1);
  feed(r, {"EVAL", release, "1", "sem:jobs", y}, ":1\r\n", 5 * s + 200'000, 2);
  timeline.finish(8 * s);
  std::vector<std::string> seen;
  for (const permit_event& e : events.events) seen.push_back(e.event + " " + e.owner);
  CHECK(seen == std::vector<std::string>{"renewed " + x, "acquired " + y, "contended holder-z-77e0aa", "released " + x,
                                         "released " + y});
}

namespace {

// A semaphore written here: each take draws its holder id (a new owner per take), the
// member is that id, scored by the caller's clock; ARGV [id, limit, lease, now].
struct drawn_id_semaphore {
  const std::string acquire =
      "local id, limit, lease, clock = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
      "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', clock - lease)\n"
      "if redis.call('ZCARD', KEYS[1]) >= limit then return 0 end\n"
      "redis.call('ZADD', KEYS[1], clock, id)\nredis.call('PEXPIRE', KEYS[1], lease)\nreturn 1\n";
  const std::string release = "return redis.call('ZREM', KEYS[1], ARGV[1])";
  std::string key, limit;
  permit_recorder events;
  locks::lock_timeline timeline{{}, events};
  locks::lock_recognizer r{timeline};
  drawn_id_semaphore(std::string k, std::string l) : key(std::move(k)), limit(std::move(l)) {}
  void take(const std::string& who, std::int64_t at, bool got, std::uint64_t conn) {
    feed(r, {"EVAL", acquire, "1", key, who, limit, "9000", std::to_string(1'764'000'000'000 + at / 1000)},
         got ? ":1\r\n" : ":0\r\n", at, conn);
  }
  void give_back(const std::string& who, std::int64_t at, std::uint64_t conn) {
    feed(r, {"EVAL", release, "1", key, who}, ":1\r\n", at, conn);
  }
};

}  // namespace

TEST_CASE("permits: a semaphore's waiter whose connection goes on as another owner gave up and one that polls again did not",
          "[recognizer][permits]") {
  // A semaphore of 1 permit; a waiter gives up silently, and its connection's next take
  // shows it.
  drawn_id_semaphore sem("sem:orders", "1");
  const std::int64_t s = 1'000'000, one_ms = 1'000;
  sem.take("holder-h-00000001", 5 * s, true, 9);
  // Connection 1: a-... refused twice, then the connection's next take, b-..., holds and
  // gives back; a-... never attempts again: it gave up at its last refusal (100 ms in),
  // before b's first attempt (300 ms in).
  sem.take("waiter-a-0000001", 5 * s + 10 * one_ms, false, 1);
  sem.take("waiter-a-0000001", 5 * s + 110 * one_ms, false, 1);
  // Connection 2: two takes in turn, c-... still polling while d-... takes and gives
  // back on the same connection: c-... did not give up.
  sem.take("waiter-c-0000001", 5 * s + 120 * one_ms, false, 2);
  sem.give_back("holder-h-00000001", 5 * s + 200 * one_ms, 9);
  sem.take("taker-b-00000001", 5 * s + 310 * one_ms, true, 1);
  sem.give_back("taker-b-00000001", 5 * s + 400 * one_ms, 1);
  sem.take("taker-d-00000001", 5 * s + 410 * one_ms, true, 2);
  sem.take("waiter-c-0000001", 5 * s + 420 * one_ms, false, 2);
  sem.give_back("taker-d-00000001", 5 * s + 500 * one_ms, 2);
  sem.take("waiter-c-0000001", 5 * s + 520 * one_ms, true, 2);
  sem.timeline.finish(8 * s);
  std::vector<std::string> gave_up, waited;
  for (const permit_event& e : sem.events.events) {
    if (e.event == "gave_up") gave_up.push_back(e.owner + " " + std::to_string(e.wait_us / one_ms) + " ms");
    if (e.event == "acquired" && e.wait_us >= 0) waited.push_back(e.owner + " " + std::to_string(e.wait_us / one_ms) + " ms");
  }
  CHECK(gave_up == std::vector<std::string>{"waiter-a-0000001 100 ms"});
  CHECK(waited == std::vector<std::string>{"waiter-c-0000001 400 ms"});
}

TEST_CASE("permits: a semaphore's waiter whose connection closes gave up, at its last refusal when it had moved on",
          "[recognizer][permits]") {
  // A semaphore of 1 permit held throughout. Connection 1: a-... refused twice, then the
  // connection takes another semaphore's permit (its process's next task) and closes
  // holding it (killed: no release, no third owner to tell the wait ended). Connection 3:
  // e-... refused once, then its connection closes.
  drawn_id_semaphore sem("sem:orders", "1");
  const std::int64_t s = 1'000'000, one_ms = 1'000;
  sem.take("holder-h-00000001", 5 * s, true, 9);
  sem.take("waiter-a-0000001", 5 * s + 10 * one_ms, false, 1);
  sem.take("waiter-a-0000001", 5 * s + 110 * one_ms, false, 1);
  sem.take("waiter-e-0000001", 5 * s + 150 * one_ms, false, 3);
  feed(sem.r, {"EVAL", sem.acquire, "1", "sem:pool", "taker-b-00000001", "2", "9000", "1764000005160"}, ":1\r\n",
       5 * s + 160 * one_ms, 1);
  sem.timeline.on_connection_end(1, 5 * s + 300 * one_ms);
  sem.timeline.on_connection_end(3, 5 * s + 400 * one_ms);
  sem.timeline.finish(8 * s);
  std::vector<std::string> gave_up;
  for (const permit_event& e : sem.events.events) {
    if (e.event == "gave_up") gave_up.push_back(e.owner + " " + std::to_string(e.wait_us / one_ms) + " ms");
  }
  CHECK(gave_up == std::vector<std::string>{"waiter-a-0000001 100 ms", "waiter-e-0000001 0 ms"});
}

TEST_CASE("permits: a permit free while a sorted-set semaphore's waiter polled is idle_with_waiters",
          "[recognizer][permits]") {
  // 2 permits, both held; a waiter refused, then one holder gives back and the waiter's
  // next poll comes 120 ms later (a permit free all that time); later a second waiter's
  // poll comes 20 ms after a release: under the idle threshold.
  drawn_id_semaphore sem("sem:pool", "2");
  const std::int64_t s = 1'000'000, one_ms = 1'000;
  sem.take("holder-a-0000001", 5 * s, true, 1);
  sem.take("holder-b-0000001", 5 * s + 10 * one_ms, true, 2);
  sem.take("waiter-c-0000001", 5 * s + 20 * one_ms, false, 3);
  sem.give_back("holder-a-0000001", 5 * s + 100 * one_ms, 1);
  sem.take("waiter-c-0000001", 5 * s + 220 * one_ms, true, 3);
  sem.take("waiter-d-0000001", 5 * s + 300 * one_ms, false, 4);
  sem.give_back("holder-b-0000001", 5 * s + 400 * one_ms, 2);
  sem.take("waiter-d-0000001", 5 * s + 420 * one_ms, true, 4);
  sem.timeline.finish(8 * s);
  std::vector<std::string> idle;
  for (const permit_event& e : sem.events.events) {
    if (e.event == "anomaly:idle_with_waiters") idle.push_back(e.owner + " " + std::to_string((e.ts_us - 5 * s) / one_ms));
  }
  CHECK(idle == std::vector<std::string>{"waiter-c-0000001 220"});
}

TEST_CASE("permits: hostile script texts are read without harm", "[recognizer][permits]") {
  // Long operands (a regex engine that recurses per character would overflow its
  // stack), unterminated calls, aliases of aliases, random token soup.
  std::string huge = "local k = KEYS[1] if redis.call('zcard', k) < tonumber(ARGV[1]) then redis.call('zadd', k, ";
  huge += std::string(2'000'000, 'x');
  huge += ", ARGV[2]) end";
  CHECK(locks::permit_script_class(huge).permit_role == locks::permit_zset_acquire);  // its score is any expression
  CHECK(locks::permit_script_class("redis.call('zadd'").permit_role == 0);
  CHECK(locks::permit_script_class("local a = KEYS[1] local b = a redis.call('zadd', b, 1, ARGV[").permit_role == 0);
  CHECK(locks::permit_script_class(std::string(100'000, '(')).permit_role == 0);
  const std::vector<std::string> tokens = {"local ", "k", "=", "KEYS[1]", "ARGV[2]", "tonumber(", ")", "redis.call(",
                                           "'zadd'", "'zcard'", "'decrby'", "'get'", ",", "<", "then ", "end", "[", "]",
                                           "'zrangebyscore'", "'zscore'", "'pexpire'", "for i = ", "argv[i]"};
  std::uint32_t seed = 12345;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int n = 1 + round % 60;
    for (int i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      text += tokens[(seed >> 8) % tokens.size()];
    }
    const locks::script_class c = locks::permit_script_class(text);
    CHECK(c.permit_role <= locks::permit_zset_refresh);
  }
}

// npm redis-semaphore 5.8.0's Semaphore (never used while building this): a sorted set,
// read by what its scripts do (its locals resolved), 3 processes on 2 permits, each
// process's own log the truth (tests/locks/effect_clients/record.sh redis_semaphore_sem).
namespace {

// Every acquisition, refusal, refresh and release the processes logged after from_us is
// an event of that member; the unrefreshed hold expires at its lockTimeout; nothing beyond
// the limit; (whole) no acquisition or refusal the logs do not have.
void check_redis_semaphore(const std::string& pcap, std::int64_t from_us, bool whole) {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/effect_clients/";
  struct truth {
    std::int64_t us = 0;
    std::string event, owner;
    std::int64_t reply = -1;
  };
  std::vector<truth> log;
  {
    std::ifstream in(dir + "redis_semaphore_sem.truth.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto o = boost::json::parse(line).as_object();
      if (!o.contains("t_us")) continue;
      truth t{o.at("t_us").as_int64(), std::string(o.at("event").as_string()), std::string(o.at("owner").as_string())};
      if (o.contains("reply") && o.at("reply").is_int64()) t.reply = o.at("reply").as_int64();
      log.push_back(t);
    }
  }
  REQUIRE(log.size() >= 100);
  const permit_recorder rec = permit_events_of(pcap);
  std::vector<bool> taken(rec.events.size(), false);
  auto find = [&](const truth& t, std::initializer_list<std::string_view> kinds) -> const permit_event* {
    for (std::size_t i = 0; i < rec.events.size(); ++i) {
      const permit_event& e = rec.events[i];
      if (taken[i] || e.owner != t.owner || e.ts_us > t.us + 1000 || e.ts_us < t.us - 100'000) continue;
      if (std::find(kinds.begin(), kinds.end(), e.event) == kinds.end()) continue;
      taken[i] = true;
      return &e;
    }
    return nullptr;
  };
  std::map<std::string, std::pair<int, int>> found;  // event → (found, logged)
  std::string lost;
  std::int64_t lost_at = -1;
  std::map<std::string, std::int64_t> first_refused;  // member → its first refusal logged
  std::size_t waits_checked = 0;
  for (const truth& t : log) {
    if (t.event == "refused") first_refused.try_emplace(t.owner, t.us);
    if (t.event == "unrefreshed") {
      lost = t.owner;
      lost_at = t.us;
    }
    if (t.us < from_us) continue;
    // (A member acquired before the cut: its refreshes are read as its acquisitions.)
    INFO(t.event << " " << t.owner << " at " << t.us);
    const permit_event* e = nullptr;
    if (t.event == "acquired") {
      e = find(t, {"acquired"});
      // Its wait: from its first refused attempt to the acquisition, as its process saw
      // them (each logged once the reply came; lockscope counts from the first request).
      const auto r = first_refused.find(t.owner);
      if (e != nullptr && r != first_refused.end() && r->second >= from_us) {
        const std::int64_t logged_wait = t.us - r->second;
        INFO("wait " << e->wait_us << " us, logged " << logged_wait << " us");
        CHECK(std::abs(e->wait_us - logged_wait) <= 25'000);
        ++waits_checked;
      } else if (e != nullptr && r == first_refused.end()) {
        CHECK(e->wait_us == -1);  // never refused: no wait
      }
    }
    else if (t.event == "refused") e = find(t, {"contended"});
    else if (t.event == "refresh") e = find(t, {t.reply == 1 ? "renewed" : "renew_failed"});
    else if (t.event == "released") e = find(t, t.owner == lost ? std::initializer_list<std::string_view>{"released", "unlock_rejected"}
                                                                    : std::initializer_list<std::string_view>{"released"});
    else if (t.event == "unrefreshed") {
      lost = t.owner;
      lost_at = t.us;
      continue;
    } else continue;
    ++found[t.event].second;
    if (e != nullptr) ++found[t.event].first;
    CHECK(e != nullptr);
  }
  for (const auto& [event, n] : found) {
    INFO(event << ": " << n.first << " of " << n.second);
    CHECK(n.first == n.second);
  }
  REQUIRE_FALSE(lost.empty());
  // The logs' free stretches: a release, then the next acquisition, while an owner refused
  // before the release had not acquired yet (each line logged once its reply came).
  std::vector<std::pair<std::int64_t, std::int64_t>> free_stretches;  // (release, acquisition)
  {
    std::map<std::string, std::int64_t> waiting;  // owner → first refusal
    std::int64_t free_since = -1;
    for (const truth& t : log) {
      if (t.event == "refused") waiting.try_emplace(t.owner, t.us);
      if (t.event == "released" && free_since < 0) free_since = t.us;
      if (t.event != "acquired") continue;
      const bool waited = std::any_of(waiting.begin(), waiting.end(), [&](const auto& w) { return w.second < free_since; });
      if (free_since >= 0 && waited) free_stretches.emplace_back(free_since, t.us);
      free_since = -1;
      waiting.erase(t.owner);
    }
  }
  std::size_t expiries = 0;
  for (const permit_event& e : rec.events) {
    INFO(e.event << " " << e.owner << " at " << e.ts_us << " " << e.in_use << "/" << e.limit);
    CHECK(e.lock == "semaphore:pool");
    if (e.event == "anomaly:idle_with_waiters") {
      // Only where the logs show a permit free that long (the idle threshold, less 10 ms
      // for the logs' reply lag) while a waiter waited, ended by this acquisition.
      CHECK(std::any_of(free_stretches.begin(), free_stretches.end(), [&](const auto& f) {
        return std::abs(e.ts_us - f.second) <= 30'000 && f.second - f.first >= 40'000;
      }));
    } else {
      CHECK(e.event.rfind("anomaly:", 0) == std::string::npos);
    }
    CHECK(e.in_use <= 2);
    if (e.event == "acquired" || e.event == "contended") CHECK(e.limit == 2);
    if (e.event == "expired") {
      ++expiries;
      CHECK(e.owner == lost);
      CHECK(std::abs(e.ts_us - (lost_at + 1'000'000)) <= 60'000);  // its lockTimeout after the acquisition
    }
  }
  if (whole || lost_at >= from_us) CHECK(expiries == 1);
  if (whole) CHECK(waits_checked >= 10);
  if (!whole) return;
  // No event beyond the logs': every acquisition, refusal and release is one logged.
  CHECK(static_cast<int>(std::count_if(rec.events.begin(), rec.events.end(), [](const permit_event& e) { return e.event == "acquired"; })) ==
        found["acquired"].second);
  CHECK(static_cast<int>(std::count_if(rec.events.begin(), rec.events.end(), [](const permit_event& e) { return e.event == "contended"; })) ==
        found["refused"].second);
}

}  // namespace

TEST_CASE("permits: redis-semaphore's sorted-set Semaphore agrees with its processes' logs", "[recognizer][permits][real]") {
  check_redis_semaphore(std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/effect_clients/redis_semaphore_sem.pcap", 0, true);
}

// Joined mid-run: the scripts' texts (EVAL after NOSCRIPT, once per process at the
// start) are not in the capture; their EVALSHAs are inferred from their arguments.
TEST_CASE("permits: redis-semaphore's Semaphore joined mid-run still agrees with its processes' logs",
          "[recognizer][permits][real]") {
  const std::string pcap = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/locks/effect_clients/redis_semaphore_sem.pcap";
  const auto cut = std::filesystem::temp_directory_path() / ("lockscope-zsem-cut-" + std::to_string(::getpid()) + ".pcap");
  lockscope::test::cut_pcap(pcap, cut, 120);
  const permit_recorder rec = permit_events_of(cut.string());
  REQUIRE_FALSE(rec.events.empty());
  for (const permit_event& e : rec.events) {
    // The acquire script's calls are inferred (its text came before the cut; the refresh
    // script's first EVAL comes after it; ZREM releases and expiries are no script's).
    if (e.event == "acquired" || e.event == "contended") CHECK(e.inferred);
  }
  // From 2.5 s after the first event: every hold (at most 2.0 s) began after the cut.
  const std::int64_t from_us = rec.events.front().ts_us + 2'500'000;
  check_redis_semaphore(cut.string(), from_us, false);
  std::filesystem::remove(cut);
  const auto acquired_after = std::count_if(rec.events.begin(), rec.events.end(), [&](const permit_event& e) {
    return e.event == "acquired" && e.ts_us >= from_us;
  });
  CHECK(acquired_after >= 6);  // (what was checked: 8 in the committed recording)
}

}  // namespace lockscope::timeline_test
