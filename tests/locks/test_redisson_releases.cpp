// Every lock script of every Redisson release from 3.10.0 to 4.7.0, as
// tests/redisson/extract_scripts.py extracted them from the release tags' Java source
// (tests/redisson/redisson_scripts.json), recognised with the role its Java method gives
// it: as EVAL text, as EVALSHA of a SHA1 the recognizer has never seen the text of, and
// as EVALSHA after the EVAL. The expected operations are written here from the JSON's
// facts (lock type, Java method, the KEYS/ARGV the Java call passes), not from the
// recognizer's tables; the SHA1s are Python's hashlib's, checked against OpenSSL's.
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <map>
#include <set>
#include <sstream>

#include <boost/json.hpp>

#include "lockscope/test/real_capture.hpp"
#include "helpers.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_patterns.hpp"

using namespace lockscope;
using lockscope::timeline_test::feed;
using lockscope::timeline_test::event_recorder;
using lockscope::timeline_test::events_of;
using lockscope::timeline_test::recorded_event;

namespace redisson_releases_test {

using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

struct extracted {
  std::string text, sha1, type, role, first, last;
  std::vector<std::string> releases, sources;
  int lock_key = 0, channel_key = 0, latch_key = 0, owner_argv = 0, lease_argv = 0;
  int keys = -1;  // how many KEYS the Java call passes; -1: a list built at run time
  int argv = 0;   // how many ARGV; -1: a list built at run time
};

struct catalogue_file {
  std::vector<std::string> releases;
  std::vector<extracted> scripts;
};

const catalogue_file& extracted_scripts() {
  static const catalogue_file file = [] {
    std::ifstream in(std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/redisson_scripts.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const boost::json::object root = boost::json::parse(ss.str()).as_object();
    catalogue_file f;
    for (const auto& r : root.at("releases").as_array()) f.releases.emplace_back(r.as_string());
    for (const auto& v : root.at("scripts").as_array()) {
      const auto& o = v.as_object();
      extracted e;
      e.text = o.at("text").as_string();
      e.sha1 = o.at("sha1").as_string();
      e.type = o.at("type").as_string();
      e.role = o.at("role").as_string();
      for (const auto& r : o.at("releases").as_array()) e.releases.emplace_back(r.as_string());
      for (const auto& r : o.at("sources").as_array()) e.sources.emplace_back(r.as_string());
      e.first = e.releases.front();
      e.last = e.releases.back();
      const auto& p = o.at("positions").as_object();
      e.lock_key = static_cast<int>(p.at("lock_key").as_int64());
      e.channel_key = static_cast<int>(p.at("channel_key").as_int64());
      e.latch_key = static_cast<int>(p.at("latch_key").as_int64());
      e.owner_argv = static_cast<int>(p.at("owner_argv").as_int64());
      e.lease_argv = static_cast<int>(p.at("lease_argv").as_int64());
      if (o.at("keys").is_array()) e.keys = static_cast<int>(o.at("keys").as_array().size());
      const auto& argv = o.at("argv").as_array();
      e.argv = argv.size() == 1 && argv[0].as_string().ends_with(".toArray()") ? -1 : static_cast<int>(argv.size());
      f.scripts.push_back(std::move(e));
    }
    return f;
  }();
  return file;
}

struct seen_op {
  lock_op_kind kind{};
  lock_family family{};
  op_outcome outcome{};
  bool shared = false, inferred = false;
  std::string lock, owner, channel;
  std::int64_t lease_ms = -1, ttl_ms = -1, token = -1;
};

class recorder final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    ops.push_back({op.kind, op.family, op.outcome, op.shared, op.inferred, std::string(op.lock), std::string(op.owner),
                   std::string(op.channel), op.lease_ms, op.ttl_ms, op.token});
  }
  std::vector<seen_op> ops;
};

constexpr std::string_view owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
constexpr std::string_view owner2 = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:13";
constexpr std::string_view lease = "30000";
const std::string lock_name = "myLock";
const std::string channel = "redisson_lock__channel:{myLock}";
const std::string latch = "redisson_unlock_latch:{myLock}:0123456789abcdef0123456789abcdef";

// The lock family a lock type's operations carry (Redisson's Java class → lockscope's name).
lock_family family_of(const std::string& type) {
  static const std::map<std::string, lock_family> m{
      {"lock", lock_family::redisson},          {"non_reentrant", lock_family::redisson},
      {"faster_multi", lock_family::redisson},  {"fair", lock_family::redisson_fair},
      {"non_reentrant_fair", lock_family::redisson_fair}, {"read", lock_family::redisson_read},
      {"write", lock_family::redisson_write},   {"spin", lock_family::redisson_spin},
      {"fenced", lock_family::redisson_fenced}};
  return m.at(type);
}

// A call as the Java code makes it: KEYS and ARGV at the positions the extraction read.
struct call_args {
  std::vector<std::string> keys, argv;
};
call_args call_of(const extracted& s) {
  call_args c;
  const int nkeys = s.keys > 0 ? s.keys : 1;
  for (int i = 1; i <= nkeys; ++i) {
    if (i == s.lock_key) c.keys.push_back(lock_name);
    else if (i == s.channel_key) c.keys.push_back(channel);
    else if (i == s.latch_key) c.keys.push_back(latch);
    else c.keys.push_back("redisson_lock_queue:{myLock}" + std::to_string(i));
  }
  const int nargv = s.argv >= 0 ? s.argv : std::max({s.owner_argv, s.lease_argv, 6}) + 2;
  for (int i = 1; i <= nargv; ++i) {
    if (i == s.owner_argv) c.argv.emplace_back(owner);
    else if (i == s.lease_argv) c.argv.emplace_back(lease);
    else c.argv.push_back(std::to_string(1'700'000'000'000 + i));
  }
  return c;
}

std::vector<std::string> command(std::string_view verb, std::string_view script, const call_args& c) {
  std::vector<std::string> args{std::string(verb), std::string(script), std::to_string(c.keys.size())};
  args.insert(args.end(), c.keys.begin(), c.keys.end());
  args.insert(args.end(), c.argv.begin(), c.argv.end());
  return args;
}

// The replies a role can get, and the outcome each means (Redisson's Java decoding of it).
struct reply_case {
  std::string reply;
  op_outcome outcome;
  std::int64_t ttl_ms = -1, token = -1;
};
std::vector<reply_case> replies_of(const extracted& s) {
  const std::string& r = s.role;
  if (r == "acquire") {
    std::vector<reply_case> v{{"$-1\r\n", op_outcome::ok}, {":25000\r\n", op_outcome::contended, 25000}};
    if (s.type.starts_with("non_reentrant")) v.push_back({"-ERR lock is not reentrant\r\n", op_outcome::error});
    return v;
  }
  if (r == "try_acquire") return {{"$-1\r\n", op_outcome::ok}, {":1\r\n", op_outcome::contended}};
  if (r == "acquire_once") return {{":1\r\n", op_outcome::ok}, {":0\r\n", op_outcome::contended}};
  if (r == "acquire_token") {
    return {{"*2\r\n:-1\r\n:7\r\n", op_outcome::ok, -1, 7}, {"*2\r\n:2500\r\n:-1\r\n", op_outcome::contended, 2500}};
  }
  if (r == "unlock") return {{":1\r\n", op_outcome::ok}, {":0\r\n", op_outcome::partial}, {"$-1\r\n", op_outcome::rejected}};
  if (r == "force_unlock") {
    std::vector<reply_case> v{{":1\r\n", op_outcome::ok}, {":0\r\n", op_outcome::none}};
    if (s.type == "faster_multi") v.push_back({":3\r\n", op_outcome::ok});  // three of the group's locks removed
    return v;
  }
  if (r == "renew") return {{":1\r\n", op_outcome::ok}, {":0\r\n", op_outcome::rejected}};
  return {};
}

bool is_lock_operation(const std::string& role) {
  return role != "acquire_failed" && role != "expire" && role != "query" && role != "renew_batch";
}

lock_op_kind kind_of(const std::string& role) {
  if (role == "unlock") return lock_op_kind::unlock;
  if (role == "force_unlock") return lock_op_kind::force_unlock;
  if (role == "renew" || role == "renew_batch") return lock_op_kind::renew;
  return lock_op_kind::acquire;
}

// Other rows with this text: a text sent by two lock types (RedissonSpinLock's acquire
// is RLock's 3.12.3-3.18.1 acquire) may come out as either family.
std::set<lock_family> families_of_text(const std::string& text) {
  std::set<lock_family> out;
  for (const extracted& e : extracted_scripts().scripts) {
    if (e.text == text) out.insert(family_of(e.type));
  }
  return out;
}

enum class path { eval, evalsha_unseen_text, evalsha_after_eval };
const char* name_of(path p) {
  return p == path::eval ? "EVAL" : p == path::evalsha_unseen_text ? "EVALSHA (text never seen)" : "EVALSHA after EVAL";
}

// The one operation `reply` makes of the script's call, on `p`.
std::vector<seen_op> run(const extracted& s, path p, const call_args& c, std::string_view reply) {
  recorder rec;
  locks::lock_recognizer recognizer(rec);
  if (p == path::evalsha_after_eval) {
    call_args earlier = c;  // an earlier unlock call names a latch of its own
    if (s.latch_key != 0) earlier.keys[static_cast<std::size_t>(s.latch_key - 1)] += "-earlier";
    feed(recognizer, command("EVAL", s.text, earlier), reply);
    rec.ops.clear();
  }
  feed(recognizer, command(p == path::eval ? "EVAL" : "EVALSHA", p == path::eval ? s.text : s.sha1, c), reply,
       2'000'000);
  return rec.ops;
}

}  // namespace redisson_releases_test

using namespace redisson_releases_test;

TEST_CASE("redisson releases: the extracted scripts cover 3.10.0 to 4.7.0 and match the catalogue", "[recognizer][redisson]") {
  const catalogue_file& f = extracted_scripts();
  REQUIRE(f.releases.size() >= 120);
  CHECK(f.releases.front() == "3.10.0");
  CHECK(f.releases.back() == "4.7.0");
  // Every release sends an acquire, an unlock, a force-unlock and a renewal of RLock.
  for (const std::string& release : f.releases) {
    INFO(release);
    std::set<std::string> roles;
    for (const extracted& e : f.scripts) {
      if (e.type == "lock" && std::find(e.releases.begin(), e.releases.end(), release) != e.releases.end()) {
        roles.insert(e.role);
      }
    }
    CHECK(roles.count("acquire") == 1);
    CHECK(roles.count("unlock") == 1);
    CHECK(roles.count("force_unlock") == 1);
    CHECK((roles.count("renew") + roles.count("renew_batch")) == 1);
  }
  // The catalogue the client and the analyzer read is the extraction, row for row.
  const auto rows = lock::redisson_catalogue();
  REQUIRE(rows.size() == f.scripts.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const extracted& e = f.scripts[i];
    const lock::redisson_script& r = rows[i];
    INFO(e.type << " " << e.role << " " << e.sha1);
    CHECK(r.text == e.text);
    CHECK(r.sha1 == e.sha1);
    CHECK(lock::sha1_hex(r.text) == e.sha1);  // Python's hashlib and OpenSSL agree
    CHECK(lock::to_string(r.type) == e.type);
    CHECK(lock::to_string(r.role) == e.role);
    CHECK(r.first_release == e.first);
    CHECK(r.last_release == e.last);
    CHECK(std::tie(r.lock_key, r.channel_key, r.latch_key, r.owner_argv, r.lease_argv) ==
          std::make_tuple(e.lock_key, e.channel_key, e.latch_key, e.owner_argv, e.lease_argv));
    // redisson_scripts_of(release) gives the row for its first, last and middle release.
    for (const std::string& release : {e.first, e.last, e.releases[e.releases.size() / 2]}) {
      const auto of = lock::redisson_scripts_of(release);
      CHECK(std::find(of.begin(), of.end(), &r) != of.end());
    }
  }
  CHECK(lock::redisson_scripts_of("3.9.0").empty());
  CHECK(lock::redisson_scripts_of("4.8.0").empty());
  // lockscope's own 18 scripts are Redisson's, byte for byte.
  for (const lock::script_info& s : lock::all_scripts()) {
    INFO(s.name);
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.text == s.text; }));
  }
}

TEST_CASE("redisson releases: every lock script's role is recognised, by text and by SHA1", "[recognizer][redisson]") {
  std::size_t checked = 0;
  for (const extracted& s : extracted_scripts().scripts) {
    if (!is_lock_operation(s.role)) continue;
    const call_args c = call_of(s);
    const std::set<lock_family> families = families_of_text(s.text);
    for (const reply_case& rc : replies_of(s)) {
      for (const path p : {path::eval, path::evalsha_unseen_text, path::evalsha_after_eval}) {
        INFO(s.type << " " << s.role << " " << s.sha1 << " (" << s.sources.front() << ", " << s.first << "-" << s.last
                    << ") on " << name_of(p) << ", reply " << rc.reply);
        const auto ops = run(s, p, c, rc.reply);
        REQUIRE(ops.size() == 1);
        const seen_op& op = ops[0];
        CHECK(op.kind == kind_of(s.role));
        CHECK(families.count(op.family) == 1);
        CHECK_FALSE(op.inferred);
        CHECK(op.lock == lock_name);
        CHECK(op.outcome == rc.outcome);
        CHECK(op.shared == (s.type == "read" || s.type == "faster_multi"));
        if (s.role == "force_unlock") {
          CHECK(op.owner.empty());
          CHECK(op.lease_ms == -1);
        } else {
          CHECK(op.owner == owner);
          // The lease where the Java call passes one; never the latch's PX argument.
          CHECK(op.lease_ms == (s.lease_argv != 0 ? 30000 : -1));
        }
        if (s.channel_key != 0) CHECK(op.channel == channel);
        if (rc.ttl_ms != -1) CHECK(op.ttl_ms == rc.ttl_ms);
        if (rc.token != -1) CHECK(op.token == rc.token);
        ++checked;
      }
    }
  }
  CHECK(checked > 300);
}

TEST_CASE("redisson releases: a retried unlock replays through its latch at any KEYS position", "[recognizer][redisson]") {
  std::set<int> positions;
  for (const extracted& s : extracted_scripts().scripts) {
    if (s.role != "unlock" || s.latch_key == 0) continue;
    positions.insert(s.latch_key);
    const call_args c = call_of(s);
    for (const bool by_sha : {false, true}) {
      INFO(s.type << " " << s.sha1 << " latch KEYS[" << s.latch_key << "] " << (by_sha ? "EVALSHA" : "EVAL"));
      recorder rec;
      locks::lock_recognizer recognizer(rec);
      const auto args = command(by_sha ? "EVALSHA" : "EVAL", by_sha ? std::string_view(s.sha1) : std::string_view(s.text), c);
      feed(recognizer, args, ":1\r\n", 1'000'000);
      feed(recognizer, args, ":1\r\n", 1'005'000);  // the client timed out and sent it again
      REQUIRE(rec.ops.size() == 2);
      CHECK(rec.ops[0].outcome == op_outcome::ok);
      CHECK(rec.ops[1].outcome == op_outcome::none);
    }
  }
  CHECK(positions == std::set<int>{2, 3, 5});  // spin; RLock, write, FasterMultiLock; fair, read
}

TEST_CASE("redisson releases: batched renewals (3.44+) renew each lock for its owner", "[recognizer][redisson]") {
  std::size_t forms = 0;
  for (const extracted& s : extracted_scripts().scripts) {
    if (s.role != "renew_batch") continue;
    ++forms;
    INFO(s.type << " " << s.sha1 << " " << s.first << "-" << s.last);
    call_args c;
    std::vector<std::pair<std::string, std::string>> expected;  // lock, owner
    std::string reply;
    if (s.type == "lock") {
      // LockTask: KEYS = the locks, ARGV = lease, then each lock's owner.
      c.keys = {"a", "b"};
      c.argv = {"30000", std::string(owner), std::string(owner2)};
      expected = {{"a", std::string(owner)}, {"b", std::string(owner2)}};
      reply = "*2\r\n:1\r\n:0\r\n";
    } else if (s.text.find("lockNamesCount") == std::string::npos) {
      // ReadLockTask 3.44-4.3: KEYS = (lock, its timeout prefix) pairs; ARGV = lease, an owner per lock.
      c.keys = {"a", "{a}", "b", "{b}"};
      c.argv = {"30000", std::string(owner), std::string(owner2)};
      expected = {{"a", std::string(owner)}, {"b", std::string(owner2)}};
      reply = "*2\r\n:1\r\n:0\r\n";
    } else {
      // ReadLockTask 4.4+: ARGV = lease, then per lock the number of its owners and the owners.
      c.keys = {"a", "{a}", "b", "{b}"};
      c.argv = {"30000", "2", std::string(owner), std::string(owner2), "1", std::string(owner)};
      expected = {{"a", std::string(owner)}, {"a", std::string(owner2)}, {"b", std::string(owner)}};
      reply = "*2\r\n:1\r\n:0\r\n";
    }
    for (const path p : {path::eval, path::evalsha_unseen_text}) {
      INFO(name_of(p));
      const auto ops = run(s, p, c, reply);
      REQUIRE(ops.size() == expected.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        CHECK(ops[i].kind == lock_op_kind::renew);
        CHECK(ops[i].family == family_of(s.type));
        CHECK(ops[i].shared == (s.type == "read"));
        CHECK(ops[i].lock == expected[i].first);
        CHECK(ops[i].owner == expected[i].second);
        CHECK(ops[i].lease_ms == 30000);
        CHECK(ops[i].outcome == (ops[i].lock == "a" ? op_outcome::ok : op_outcome::rejected));
      }
    }
  }
  CHECK(forms == 4);
}

TEST_CASE("redisson releases: a fair waiter's give-up (acquireFailed) ends its wait on the lock its queue names",
          "[recognizer][redisson]") {
  std::size_t forms = 0;
  for (const extracted& s : extracted_scripts().scripts) {
    if (s.role != "acquire_failed") continue;
    ++forms;
    INFO(s.type << " " << s.role << " " << s.sha1 << " " << s.releases.front());
    call_args c;
    c.keys = {"redisson_lock_queue:{myLock}", "redisson_lock_timeout:{myLock}"};
    c.argv = {std::string(owner), "300000"};
    for (const path p : {path::eval, path::evalsha_unseen_text}) {
      INFO(name_of(p));
      const std::vector<seen_op> ops = run(s, p, c, "$-1\r\n");
      REQUIRE(ops.size() == 1);
      CHECK(ops[0].kind == lock_op_kind::acquire);
      CHECK(ops[0].outcome == op_outcome::abandoned);
      CHECK(ops[0].lock == lock_name);
      CHECK(ops[0].owner == owner);
      CHECK(ops[0].family == lock_family::redisson_fair);
      CHECK_FALSE(ops[0].inferred);
    }
    // A name with braces of its own is not wrapped in another pair.
    c.keys = {"redisson_lock_queue:{tenant}:myLock", "redisson_lock_timeout:{tenant}:myLock"};
    const std::vector<seen_op> ops = run(s, path::eval, c, "$-1\r\n");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].lock == "{tenant}:myLock");
  }
  CHECK(forms == 2);
}

TEST_CASE("redisson releases: the fair lock's expire and queries are no lock operation",
          "[recognizer][redisson]") {
  std::size_t forms = 0;
  for (const extracted& s : extracted_scripts().scripts) {
    if (is_lock_operation(s.role) || s.role == "renew_batch" || s.role == "acquire_failed") continue;
    ++forms;
    INFO(s.type << " " << s.role << " " << s.sha1);
    call_args c;
    for (int i = 0; i < std::max(s.keys, 1); ++i) c.keys.push_back(i == 0 ? lock_name : "redisson_lock_timeout:{myLock}");
    c.argv = {std::string(owner), "300000"};
    for (const path p : {path::eval, path::evalsha_unseen_text}) {
      INFO(name_of(p));
      CHECK(run(s, p, c, ":1\r\n").empty());
    }
    // Known, not taken for an unknown script (which would be inferred from its shape).
    recorder rec;
    locks::lock_recognizer recognizer(rec);
    feed(recognizer, command("EVALSHA", s.sha1, c), ":1\r\n");
    CHECK(recognizer.stats().unknown_shas == 0);
  }
  CHECK(forms == 6);
}

// docs/reference/clients.md lists the recognised Redisson releases: every row there is
// an extracted script (lock type, role, first and last release, SHA1), and every
// extracted script is listed. The test above proves each is recognised.
TEST_CASE("redisson releases: docs/reference/clients.md lists exactly the extracted scripts", "[recognizer][redisson][docs]") {
  std::ifstream in(std::string(LOCKSCOPE_SOURCE_DIR) + "/docs/reference/clients.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::size_t start = doc.find("## Redisson releases 3.10.0–4.7.0");
  REQUIRE(start != std::string::npos);
  const std::size_t end = doc.find("\n## ", start + 1);
  const std::string section = doc.substr(start, end - start);
  // The first cell names the Java class; the type is the one the extraction gives it.
  const std::vector<std::pair<std::string, std::string>> classes{
      {"RedissonNonReentrantFairLock", "non_reentrant_fair"}, {"RedissonNonReentrantLock", "non_reentrant"},
      {"RedissonFasterMultiLock", "faster_multi"}, {"RedissonFairLock", "fair"}, {"RedissonReadLock", "read"},
      {"RedissonWriteLock", "write"}, {"RedissonSpinLock", "spin"}, {"RedissonFencedLock", "fenced"},
      {"RedissonLock", "lock"}};
  std::multiset<std::string> listed;  // "type role first last sha8"
  std::istringstream lines(section);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("| ") || line.starts_with("| lock type") || line.starts_with("|---")) continue;
    std::vector<std::string> cells;
    for (std::size_t p = 1; p < line.size();) {
      const std::size_t q = line.find(" |", p);
      if (q == std::string::npos) break;
      std::string cell = line.substr(p, q - p);
      while (!cell.empty() && cell.front() == ' ') cell.erase(0, 1);
      cells.push_back(cell);
      p = q + 2;
    }
    INFO(line);
    REQUIRE(cells.size() == 3);
    std::string type;
    for (const auto& [cls, t] : classes) {
      if (cells[0].find(cls) != std::string::npos) {
        type = t;
        break;
      }
    }
    REQUIRE_FALSE(type.empty());
    // "3.10.0–3.12.2 `9401052d`, ..."
    std::size_t p = 0;
    while (p < cells[2].size()) {
      const std::size_t dash = cells[2].find("–", p);
      const std::size_t tick = cells[2].find('`', p);
      REQUIRE(dash != std::string::npos);
      REQUIRE(tick != std::string::npos);
      const std::string first = cells[2].substr(p, dash - p);
      const std::string last = cells[2].substr(dash + std::string_view("–").size(), tick - 1 - dash - std::string_view("–").size());
      const std::string sha = cells[2].substr(tick + 1, 8);
      listed.insert(type + " " + cells[1] + " " + first + " " + last + " " + sha);
      p = cells[2].find(", ", tick);
      p = p == std::string::npos ? cells[2].size() : p + 2;
    }
  }
  std::multiset<std::string> extracted_rows;
  for (const extracted& e : extracted_scripts().scripts) {
    extracted_rows.insert(e.type + " " + e.role + " " + e.first + " " + e.last + " " + e.sha1.substr(0, 8));
  }
  CHECK(listed == extracted_rows);
  CHECK(listed.size() == extracted_scripts().scripts.size());
}

// Real Redisson (/work/shared/redisson's 3.16.8, 3.27.2 and 4.7.0 jars) driving every
// lock type the release has against a real redis-server, recorded with tcpdump by
// tests/redisson/record.sh; the oracle is the driver's log of what Redisson's own API
// returned (tests/redisson/RedissonLockDriver.java). 3.16.8 sends full EVALs, 3.27.2
// EVALs with the unlock latch, 4.7.0 SCRIPT LOAD + EVALSHA and batched renewals; 3.27.2
// and 4.7.0 are recorded speaking RESP3 too (PROTOCOL=RESP3 record.sh).
struct logged_call {
  std::int64_t ms = 0;
  std::string type, lock, owner, did;
  std::int64_t token = -1;
};

std::vector<logged_call> redisson_log(const std::string& file) {
  std::vector<logged_call> log;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto o = boost::json::parse(line).as_object();
    logged_call l{o.at("ms").as_int64(), std::string(o.at("type").as_string()), std::string(o.at("lock").as_string()),
                  std::string(o.at("owner").as_string()), std::string(o.at("did").as_string())};
    if (o.contains("token")) l.token = o.at("token").as_int64();
    // A write lock's owner field is `<owner>:write` (RedissonWriteLock.getLockName).
    if (l.type == "write" && l.did != "force_released") l.owner += ":write";
    log.push_back(l);
  }
  return log;
}

// Every acquisition, release and force-release Redisson reported after `from_ms` is an
// event of that lock and owner at most 100 ms before Redisson's call returned, every
// "busy" a contended event; and (whole recordings) there are no others.
void check_against_log(const event_recorder& rec, const std::vector<logged_call>& log, std::int64_t from_ms) {
  std::vector<bool> taken(rec.events.size(), false);
  std::map<std::string, int> logged_count, found_count;
  for (const logged_call& l : log) {
    if (l.ms < from_ms) continue;
    INFO(l.type << " " << l.lock << " " << l.owner << " " << l.did << " at " << l.ms);
    const std::string want = l.did == "busy" ? "contended" : l.did;
    bool found = false;
    for (std::size_t i = 0; i < rec.events.size() && !found; ++i) {
      const recorded_event& e = rec.events[i];
      if (taken[i] || e.event != want || e.lock != l.lock) continue;
      if (l.did != "force_released" && e.owner != l.owner) continue;  // a force-unlock names no owner
      const std::int64_t at_ms = e.ts_us / 1000;
      if (at_ms > l.ms + 5 || at_ms < l.ms - (l.did == "busy" ? 400 : 100)) continue;
      found = true;
      if (l.did != "busy") taken[i] = true;
      if (l.token != -1) CHECK(e.token == l.token);
    }
    CHECK(found);
    if (l.did != "busy") ++logged_count[l.lock + " " + l.did];
  }
  if (from_ms != 0) return;
  for (const recorded_event& e : rec.events) {
    if (e.event == "acquired" || e.event == "released" || e.event == "force_released") ++found_count[e.lock + " " + e.event];
  }
  CHECK(found_count == logged_count);  // no acquisition, release or force-release Redisson did not report
}

// How often `needle` occurs in the bytes of `file`: what is on the wire, read without
// lockscope's decoder.
std::size_t occurrences(const std::string& file, std::string_view needle) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t n = 0;
  for (std::size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1)) ++n;
  return n;
}

// `e`'s owner released its lock at most 100 ms before `e`.
bool released_just_before(const event_recorder& rec, const recorded_event& e) {
  return std::any_of(rec.events.begin(), rec.events.end(), [&](const recorded_event& r) {
    return r.event == "released" && r.lock == e.lock && r.owner == e.owner && r.ts_us <= e.ts_us &&
           e.ts_us - r.ts_us <= 100'000;
  });
}

TEST_CASE("redisson releases: real Redisson 3.16.8, 3.27.2 and 4.7.0 recordings agree with Redisson's own log",
          "[recognizer][redisson][real]") {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/";
  // (-resp3: the release speaking RESP3, Config.setProtocol: HELLO 3 on every connection,
  // nil replies as `_`, maps, and pub/sub messages as `>` push frames.)
  for (const std::string release : {"3.16.8", "3.27.2", "4.7.0", "3.27.2-resp3", "4.7.0-resp3"}) {
    INFO("Redisson " << release);
    const std::vector<logged_call> log = redisson_log(dir + "redisson-" + release + ".log.jsonl");
    REQUIRE(log.size() >= 30);
    const std::string pcap = dir + "redisson-" + release + ".pcap";
    const event_recorder rec = events_of(pcap);
    check_against_log(rec, log, 0);

    // Every waiter's (un)subscription is the driver's lock channels', and every message a
    // release published reached a waiter: RESP2 sends them as arrays, RESP3 as pushes.
    const bool resp3 = release.ends_with("-resp3");
    CHECK((occurrences(pcap, "$5\r\nHELLO\r\n$1\r\n3\r\n") > 0) == resp3);
    CHECK(rec.count("subscribed") == occurrences(pcap, "$9\r\nSUBSCRIBE\r\n"));
    CHECK(rec.count("unsubscribed") == occurrences(pcap, "$11\r\nUNSUBSCRIBE\r\n"));
    const std::size_t messages = occurrences(pcap, resp3 ? ">3\r\n$7\r\nmessage\r\n" : "*3\r\n$7\r\nmessage\r\n");
    CHECK(messages > 0);
    CHECK(rec.count("notified") == messages);

    // Each first holder held 1.5 s under a 1.5 s watchdog (renewals every 500 ms): renewed
    // (4.7.0: by the batched forms of plain and read locks, and FasterMultiLock's), never lost.
    std::set<std::string> locks_held;
    for (const logged_call& l : log) locks_held.insert(l.lock);
    locks_held.erase("fenced");  // held for a few ms
    for (const std::string& lock : locks_held) {
      INFO(lock);
      CHECK(std::any_of(rec.events.begin(), rec.events.end(),
                        [&](const recorded_event& e) { return e.lock == lock && e.event == "renewed"; }));
    }
    for (const recorded_event& e : rec.events) {
      INFO(e.event << " " << e.lock << " " << e.owner << " " << e.detail);
      CHECK_FALSE(e.inferred);  // every script known by its text, its SHA1 or its SCRIPT LOAD
      CHECK(e.event != "expired");
      // A refused renewal only as the watchdog's tick crossing its owner's own unlock: 4.7.0's
      // batched renewal takes its list of locks before the unlock, done (its latch's DEL
      // included), cancels the entry.
      if (e.event == "renew_failed") CHECK(released_just_before(rec, e));
      CHECK(e.event != "unlock_rejected");
      // What a waiter did is no fault: the spin lock's waiter polls with a back-off (the
      // lock is free until its next try), and a waiter's retry after the holder's TTL
      // can come before the release's message.
      if (e.event.starts_with("anomaly:")) {
        CHECK((e.event == "anomaly:idle_with_waiters" || e.event == "anomaly:woken_by_timeout"));
      }
    }
  }
}

// Joined mid-run: the SCRIPT LOADs and the first lock types' traffic are not in the
// capture; every later operation is still known by its SHA1 (EVALSHA, text never seen),
// in RESP2 and in RESP3 (its connections' HELLO 3 unseen).
TEST_CASE("redisson releases: a Redisson 4.7.0 recording joined mid-run still agrees with Redisson's log",
          "[recognizer][redisson][real]") {
  const std::string dir = std::string(LOCKSCOPE_SOURCE_DIR) + "/tests/redisson/";
  const std::string release = GENERATE(as<std::string>{}, "4.7.0", "4.7.0-resp3");
  INFO("Redisson " << release);
  const std::vector<logged_call> log = redisson_log(dir + "redisson-" + release + ".log.jsonl");
  const auto cut = std::filesystem::temp_directory_path() / ("lockscope-redisson-cut-" + std::to_string(::getpid()) + ".pcap");
  lockscope::test::cut_pcap(dir + "redisson-" + release + ".pcap", cut, 300);
  const event_recorder rec = events_of(cut.string());
  std::filesystem::remove(cut);
  REQUIRE_FALSE(rec.events.empty());
  // From the first scenario (lock) that starts after the cut: the one running across it
  // is seen in part.
  const std::int64_t first_ms = rec.events.front().ts_us / 1000;
  std::string running;
  std::int64_t from_ms = 0;
  for (const logged_call& l : log) {
    if (l.ms <= first_ms) running = l.lock;
    else if (l.lock != running && from_ms == 0) from_ms = l.ms - 1;
  }
  REQUIRE(from_ms != 0);
  check_against_log(rec, log, from_ms);
  std::size_t checked = 0;
  for (const logged_call& l : log) checked += l.ms >= from_ms ? 1 : 0;
  CHECK(checked >= 20);
  for (const recorded_event& e : rec.events) {
    INFO(e.event << " " << e.lock << " " << e.owner);
    CHECK_FALSE(e.inferred);
  }
}

// A later release's or another spelling's text is not in the catalogue: it is read by
// classify_script, which knows no Redisson table. On the 67 extracted forms it must find
// what the Java source says, but for FasterMultiLock's (fields looped over ARGV: known by
// the catalogue only) and the spin lock's acquire (RLock's text, byte for byte).
TEST_CASE("redisson releases: the text classifier alone reads every form's role but FasterMultiLock's",
          "[recognizer][redisson]") {
  std::size_t agreed = 0;
  for (const lock::redisson_script& s : lock::redisson_catalogue()) {
    const locks::script_class expected = locks::redisson_script_class(s);
    const locks::script_class read = locks::classify_script(s.text);
    INFO(lock::to_string(s.type) << " " << lock::to_string(s.role) << " " << s.sha1 << " " << s.source);
    if (s.type == lock::redisson_lock_type::faster_multi) {
      CHECK((read.op == locks::script_op::none || read.op == expected.op));  // never another role
      continue;
    }
    CHECK(read.op == expected.op);
    if (expected.op == locks::script_op::none) continue;
    if (s.type != lock::redisson_lock_type::spin || s.role != lock::redisson_role::acquire) CHECK(read.family == expected.family);
    CHECK(read.owner_argv == expected.owner_argv);
    CHECK(read.lease_argv == expected.lease_argv);
    CHECK(read.channel_key == expected.channel_key);
    CHECK(read.latch_key == expected.latch_key);
    // (The recognizer takes a read lock's operations as shared whatever the class says.)
    CHECK((read.shared || read.family == lock_family::redisson_read) == expected.shared);
    if (expected.op == locks::script_op::renew_batch) CHECK(read.batch == expected.batch);
    if (expected.op == locks::script_op::acquire) CHECK(read.reply == expected.reply);
    ++agreed;
  }
  CHECK(agreed == 55);  // 67 forms, less FasterMultiLock's 8 and the 4 that are no lock operation
}
