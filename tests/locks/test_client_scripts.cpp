// Other clients' lock scripts (lock_patterns.hpp client_scripts(): Redisson 3.2x, node-redlock 5,
// redis-py 4.3, redsync v4, redis-plus-plus, node-redisson), each recognised as EVAL, as
// EVALSHA of its own SHA1, and as EVALSHA of a script the recognizer has never seen
// (inferred); value-flow inference of node-redlock-shaped EVALSHA-only traffic over three
// servers; and a plain DEL that releases someone else's lock (seed 004).
#include <map>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_patterns.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

// The wire: exchanges with a time, a connection and a server, into a recognizer.
class wire {
 public:
  explicit wire(locks::lock_operation_sink& sink) : recognizer(sink) {}
  void send(const std::vector<std::string>& args, std::string_view reply, double at_ms, std::uint64_t connection = 1,
            int server = 0) {
    static const std::string servers[] = {"10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379"};
    static const std::string clients[] = {"10.0.0.1:50000", "10.0.0.1:50001", "10.0.0.1:50002", "10.0.0.1:50003",
                                          "10.0.0.1:50004", "10.0.0.1:50005", "10.0.0.1:50006", "10.0.0.1:50007"};
    feed(recognizer, args, reply, t0 + static_cast<std::int64_t>(at_ms * ms), connection, clients[connection % 8],
         servers[server]);
  }
  locks::lock_recognizer recognizer;
};

const locks::known_script& client_script(std::string_view name) {
  for (const auto& s : locks::client_scripts()) {
    if (s.name == name) return s;
  }
  for (const auto& s : locks::known_scripts()) {
    if (s.name == name) return s;
  }
  FAIL("no such script: " << name);
  throw;
}

std::vector<std::string> call(std::string_view verb, std::string_view script_or_sha, std::vector<std::string> keys,
                              std::vector<std::string> argv) {
  std::vector<std::string> args{std::string(verb), std::string(script_or_sha), std::to_string(keys.size())};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

// A SHA1 no recognizer knows: the script as some other version might spell it.
std::string unseen_sha(std::string_view text) { return lock::sha1_hex(std::string(text) + "\n-- another version"); }

constexpr std::string_view redisson_owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
constexpr std::string_view node_redisson_owner = "0b3e4c8a-7d7c-4a55-9a43-5d0f3e0c9a11:6f1c2e7a-3b3d-4a8e-9c1d-2b9e8f7a6c51";

}  // namespace

// SHA1s computed from the clients' own sources (record: the versions in each origin).
// redsync's are printed in its scripts.go; the others are sha1 of the text as shipped.
TEST_CASE("client scripts: each text hashes to the SHA1 its client sends", "[recognizer][clients]") {
  const std::vector<std::pair<std::string, std::string>> expected{
      {"redisson unlock (publish command as ARGV, 3.22-3.23)", "778cea8aada230ae060b432fc333adaec85f2f4c"},
      {"redisson acquire (one branch, since 2022)", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94"},
      {"redisson unlock (latch, publish command as ARGV, since 3.24)", "6866459238a13a701d42f4971f12d9f3a50e2442"},
      {"redisson renew (batched, since 3.44)", "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635"},
      {"redisson forceUnlock (publish command as ARGV)", "605e338249a7a1d40df83b04f7658354f883b41b"},
      {"node-redlock 5.0.0-beta.2 acquire", "96da70f7716f27d278a5218544df37fd8b0a5e4c"},
      {"node-redlock 5.0.0-beta.2 extend", "aed6f382e410db8ba7926d4e5e9aab410bf2a78a"},
      {"node-redlock 5.0.0-beta.2 release", "e4612211c9f8f51c257e26e056b0a654b3187242"},
      {"redis-py 4.3 Lock release", "c3f8721cbb97f72bc19e972846bd7aaf91901658"},
      {"redis-py 4.3 Lock extend", "a4e8783852e6b949f9ef3a97212805108459a890"},
      {"redis-py 4.3 Lock reacquire", "1cac51482acf5858da00f6d685d68f886cd6b6b2"},
      {"redsync v4 release", "e950836ed1e694540c503ef9972b8de518044d3b"},
      {"redsync v4 extend", "d75bb8b5bd13532ddedd17762e772346e39b321e"},
      {"redsync v4 extend with SET NX", "b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79"},
      {"redis-plus-plus RedMutex extend", "d9558fccdcd78dcea082d72df1b67924077deac2"},
      {"redis-plus-plus RedMutex unlock", "764ece7daa93da82f4fbf4e82e0ade7067dfec70"},
      {"node-redisson 1.0.4 acquire", "1aa70d3714f14a74e5d432283dae75da8fd9f1f8"},
      {"node-redisson 1.0.4 unlock (latch)", "4a66e59a59b914f2e818c168080109f73e3b4996"},
      {"node-redisson 1.0.4 renew", "998172e59d96b314fb35ad302575fa19c8f518f2"},
      {"node-redisson 1.0.4 forceUnlock", "95d09a0dc5130d77bf36b4cb795f78f8839bc372"},
  };
  for (const auto& [name, sha] : expected) {
    INFO(name);
    CHECK(lock::sha1_hex(client_script(name).text) == sha);
  }
  CHECK(locks::client_scripts().size() == 16);
  for (const auto& s : locks::client_scripts()) {
    INFO(s.name);
    CHECK_FALSE(s.origin.empty());
    CHECK(locks::classify_script(s.text).is_lock_script());
  }
}

namespace {

struct client_case {
  std::string script;  // a client_scripts() / known_scripts() name
  std::vector<std::string> keys, argv;
  std::string reply;
  lock_op_kind kind;
  op_outcome outcome;
  std::string owner;
  std::int64_t lease_ms = -1;
  // Sent first with the same value (a SET NX acquire, for scripts that extend or release it).
  bool after_set = false;
};

}  // namespace

// Each script as EVAL, as EVALSHA of its known SHA1, and as EVALSHA of an unseen SHA1
// (inferred from the arguments, the reply and, for [value, ttl] scripts, the value's flow).
TEST_CASE("client scripts: recognised as EVAL, as known EVALSHA and as unseen EVALSHA", "[recognizer][clients]") {
  const std::string o(redisson_owner), nro(node_redisson_owner);
  const std::string channel = lock::channel_name("myLock");
  const std::string latch = "redisson_unlock_latch:{myLock}:0123456789abcdef0123456789abcdef";
  const std::string nr_latch = "redisson_unlock_latch:{myLock}:4c1d2b9e-8f7a-4c51-9a43-5d0f3e0c9a11";
  const std::string tok = "7a1c2e5a2b3f11efb1a20242ac120002";  // redis-py: a uuid1 hex
  const std::string rs = "q8VzLxg2lq3hCZ0PX+0dQg==";           // redsync: 16 random bytes, base64
  const std::string rpp = "Jx3k9QmZr2LpT7bW4nVc";              // redis-plus-plus: 20 alphanumerics
  const std::string rl = "5b0c5e1d3f9a8c7b6e5d4c3b2a190817";    // node-redlock: 16 random bytes, hex
  const std::vector<client_case> cases{
      {"redisson unlock (latch, publish command as ARGV, since 3.24)", {"myLock", channel, latch},
       {"0", "30000", o, "PUBLISH", "13500"}, ":1\r\n", lock_op_kind::unlock, op_outcome::ok, o, 30000},
      {"redisson unlock (latch, publish command as ARGV, since 3.24)", {"myLock", channel, latch},
       {"0", "30000", o, "SPUBLISH", "13500"}, ":0\r\n", lock_op_kind::unlock, op_outcome::partial, o, 30000},
      {"redisson unlock (publish command as ARGV, 3.22-3.23)", {"myLock", channel}, {"0", "30000", o, "PUBLISH"},
       "$-1\r\n", lock_op_kind::unlock, op_outcome::rejected, o, 30000},
      {"redisson acquire (one branch, since 2022)", {"myLock"}, {"30000", o}, "$-1\r\n", lock_op_kind::acquire,
       op_outcome::ok, o, 30000},
      {"node-redlock 5.0.0-beta.2 acquire", {"rl:payment"}, {rl, "1000"}, ":1\r\n", lock_op_kind::acquire,
       op_outcome::ok, rl, 1000},
      {"node-redlock 5.0.0-beta.2 acquire", {"rl:payment"}, {rl, "1000"}, ":0\r\n", lock_op_kind::acquire,
       op_outcome::contended, rl, 1000},
      {"node-redlock 5.0.0-beta.2 extend", {"rl:payment"}, {rl, "1000"}, ":1\r\n", lock_op_kind::renew,
       op_outcome::ok, rl, 1000, true},
      {"node-redlock 5.0.0-beta.2 release", {"rl:payment"}, {rl}, ":1\r\n", lock_op_kind::unlock, op_outcome::ok, rl,
       -1, true},
      {"redis-py 4.3 Lock release", {"job"}, {tok}, ":1\r\n", lock_op_kind::unlock, op_outcome::ok, tok, -1, true},
      {"redis-py 4.3 Lock extend", {"job"}, {tok, "5000", "1"}, ":1\r\n", lock_op_kind::renew, op_outcome::ok, tok,
       5000, true},
      {"redis-py 4.3 Lock reacquire", {"job"}, {tok, "8000"}, ":1\r\n", lock_op_kind::renew, op_outcome::ok, tok, 8000,
       true},
      {"redsync v4 release", {"job"}, {rs}, ":-1\r\n", lock_op_kind::unlock, op_outcome::expired, rs, -1, true},
      {"redsync v4 extend", {"job"}, {rs, "8000"}, ":1\r\n", lock_op_kind::renew, op_outcome::ok, rs, 8000, true},
      {"redsync v4 extend with SET NX", {"job"}, {rs, "8000"}, ":1\r\n", lock_op_kind::renew, op_outcome::ok, rs, 8000,
       true},
      {"redis-plus-plus RedMutex extend", {"job"}, {rpp, "3000"}, ":0\r\n", lock_op_kind::renew,
       op_outcome::rejected, rpp, 3000, true},
      {"redis-plus-plus RedMutex unlock", {"job"}, {rpp}, ":1\r\n", lock_op_kind::unlock, op_outcome::ok, rpp, -1,
       true},
      {"node-redisson 1.0.4 acquire", {"myLock"}, {"30000", nro}, ":2500\r\n", lock_op_kind::acquire,
       op_outcome::contended, nro, 30000},
      {"node-redisson 1.0.4 unlock (latch)", {"myLock", channel, nr_latch}, {"0", "30000", nro, "10"}, ":1\r\n",
       lock_op_kind::unlock, op_outcome::ok, nro, 30000},
      {"node-redisson 1.0.4 renew", {"myLock"}, {"30000", nro}, ":1\r\n", lock_op_kind::renew, op_outcome::ok, nro,
       30000},
      {"node-redisson 1.0.4 forceUnlock", {"myLock", channel}, {"0"}, ":1\r\n", lock_op_kind::force_unlock,
       op_outcome::ok, "", -1},
  };
  for (const auto& c : cases) {
    const auto& script = client_script(c.script);
    for (const int form : {0, 1, 2}) {
      INFO(c.script << " reply " << c.reply << (form == 0 ? " as EVAL" : form == 1 ? " as EVALSHA" : " as unseen EVALSHA"));
      op_recorder rec;
      wire w(rec);
      if (c.after_set) w.send({"SET", c.keys[0], c.argv[0], "PX", "10000", "NX"}, "+OK\r\n", 0);
      const std::string sha = form == 1 ? lock::sha1_hex(script.text) : unseen_sha(script.text);
      w.send(call(form == 0 ? "EVAL" : "evalsha", form == 0 ? script.text : std::string_view(sha), c.keys, c.argv),
             c.reply, 10);
      // The latch's DEL that follows a Redisson 3.24+ / node-redisson unlock is no release.
      if (c.keys.size() == 3) w.send({"DEL", c.keys[2]}, ":1\r\n", 11);
      REQUIRE(rec.ops.size() == (c.after_set ? 2u : 1u));
      const auto& op = rec.ops.back();
      CHECK(op.kind == c.kind);
      CHECK(op.outcome == c.outcome);
      CHECK(op.owner == c.owner);
      CHECK(op.lock == c.keys[0]);
      CHECK(op.lease_ms == c.lease_ms);
      CHECK(op.inferred == (form == 2));
    }
  }
}

TEST_CASE("client scripts: node-redlock's multi-key scripts, all or nothing, as EVAL and unseen EVALSHA",
          "[recognizer][clients]") {
  const auto& acquire = client_script("node-redlock 5.0.0-beta.2 acquire");
  const auto& extend = client_script("node-redlock 5.0.0-beta.2 extend");
  const auto& release = client_script("node-redlock 5.0.0-beta.2 release");
  const std::vector<std::string> keys{"rl:a", "rl:b", "rl:c"};
  for (const bool unseen : {false, true}) {
    INFO((unseen ? "unseen EVALSHA" : "EVAL"));
    op_recorder rec;
    wire w(rec);
    auto send = [&](const locks::known_script& s, std::vector<std::string> argv, std::string_view reply, double at) {
      if (unseen) w.send(call("evalsha", unseen_sha(s.text), keys, std::move(argv)), reply, at);
      else w.send(call("EVAL", s.text, keys, std::move(argv)), reply, at);
    };
    send(acquire, {"v2", "1000"}, ":0\r\n", 0);   // one key was taken: none acquired
    send(acquire, {"v1", "1000"}, ":3\r\n", 10);  // all three
    send(extend, {"v1", "1000"}, ":3\r\n", 500);
    send(release, {"v1"}, ":3\r\n", 900);
    REQUIRE(rec.ops.size() == 12);
    for (std::size_t i = 0; i < 12; ++i) {
      CHECK(rec.ops[i].lock == keys[i % 3]);
      CHECK(rec.ops[i].family == lock_family::redlock_multi);
      CHECK(rec.ops[i].inferred == unseen);
    }
    CHECK(rec.ops[0].kind == lock_op_kind::acquire);
    CHECK(rec.ops[2].outcome == op_outcome::contended);
    CHECK(rec.ops[3].kind == lock_op_kind::acquire);
    CHECK(rec.ops[5].outcome == op_outcome::ok);
    CHECK(rec.ops[5].owner == "v1");
    CHECK(rec.ops[6].kind == lock_op_kind::renew);
    CHECK(rec.ops[8].outcome == op_outcome::ok);
    CHECK(rec.ops[9].kind == lock_op_kind::unlock);
    CHECK(rec.ops[11].outcome == op_outcome::ok);
  }
}

namespace {

// node-redlock 5 as the wire shows it (wire-facts §6) when the capture starts after the
// scripts were loaded: EVALSHA only, lower case, RESP2, three servers. `n` acquisitions
// by two clients taking turns; every third one is contended first (the other client's
// attempt fails on all three servers, is retried twice with the same value, then gives
// up and releases everywhere: node-redlock's clean-up); every holder extends once and
// releases. Returns the acquisitions made, per server.
struct redlock_traffic {
  std::size_t acquisitions = 0;
  std::size_t failed_attempts = 0;
};
redlock_traffic node_redlock(wire& w, std::size_t n, const std::string& acquire_sha, const std::string& extend_sha,
                             const std::string& release_sha) {
  redlock_traffic t;
  double at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t me = 1 + (i % 2) * 3;  // connections 1-3 and 4-6: one per server
    const std::uint64_t other = 4 - (i % 2) * 3;
    const std::string value = "c0ffee" + std::to_string(1000000 + i) + "a1b2c3d4e5f6a7b8c9d0";
    for (int s = 0; s < 3; ++s) w.send({"evalsha", acquire_sha, "1", "rl:payment", value, "1000"}, ":1\r\n", at, me + s, s);
    ++t.acquisitions;
    if (i % 3 == 0) {
      const std::string loser = "deadbeef" + std::to_string(1000000 + i) + "00112233445566778899";
      for (int attempt = 0; attempt < 3; ++attempt) {
        at += 200;
        for (int s = 0; s < 3; ++s) {
          w.send({"evalsha", acquire_sha, "1", "rl:payment", loser, "1000"}, ":0\r\n", at, other + s, s);
        }
        ++t.failed_attempts;
      }
      at += 1;
      for (int s = 0; s < 3; ++s) w.send({"evalsha", release_sha, "1", "rl:payment", loser}, ":0\r\n", at, other + s, s);
    }
    at += 300;
    for (int s = 0; s < 3; ++s) w.send({"evalsha", extend_sha, "1", "rl:payment", value, "1000"}, ":1\r\n", at, me + s, s);
    at += 300;
    for (int s = 0; s < 3; ++s) w.send({"evalsha", release_sha, "1", "rl:payment", value}, ":1\r\n", at, me + s, s);
    at += 50;
  }
  return t;
}

}  // namespace

TEST_CASE("value flow: node-redlock EVALSHA-only traffic over three servers, acquisitions counted right",
          "[recognizer][clients][value-flow]") {
  event_recorder events;
  locks::lock_timeline timeline({}, events);
  wire w(timeline);
  const std::string a = unseen_sha("acquire"), e = unseen_sha("extend"), r = unseen_sha("release");
  const auto t = node_redlock(w, 65, a, e, r);
  timeline.finish(t0 + 3'600'000'000);
  std::map<std::string, std::size_t> acquired_per_server;
  for (const auto& ev : events.events) {
    if (ev.event == "acquired") ++acquired_per_server[ev.server];
    // (Until locks are told apart by server, the three servers' holds of one key are one
    // lock's three holders, and a renewal renews only one: the others "expire".)
    if (ev.event == "expired") continue;
    if (ev.event == "gave_up") continue;  // a waiter leaving: no operation of its own
    INFO(ev.event);
    CHECK(ev.inferred);
  }
  REQUIRE(acquired_per_server.size() == 3);
  for (const auto& [server, n] : acquired_per_server) {
    INFO(server);
    CHECK(n == t.acquisitions);
  }
  CHECK(events.count("contended") == 3 * t.failed_attempts);
  CHECK(events.count("renewed") == 3 * t.acquisitions);
  CHECK(events.count("released") == 3 * t.acquisitions);
  CHECK(events.count("renew_failed") == 0);
  CHECK(events.count("unlock_rejected") == 0);
  CHECK(events.count("anomaly:unlock_by_non_owner") == 0);
  CHECK(events.count("anomaly:expired_while_held") == 0);
  CHECK(w.recognizer.stats().unknown_shas == 3);
}

TEST_CASE("value flow: the roles are learnt per SHA1, so a capture joined mid-hold reads right once they are",
          "[recognizer][clients][value-flow]") {
  op_recorder rec;
  wire w(rec);
  const std::string a = unseen_sha("acquire"), e = unseen_sha("extend"), r = unseen_sha("release");
  // Joined while "old" was held: its extend is the first script its value meets, so it
  // reads as an acquire (a fresh value's first script) until the roles are learnt.
  w.send({"evalsha", e, "1", "k", "old-value-0001", "1000"}, ":1\r\n", 0);
  CHECK(rec.ops.back().kind == lock_op_kind::acquire);
  w.send({"evalsha", r, "1", "k", "old-value-0001"}, ":1\r\n", 10);
  node_redlock(w, 4, a, e, r);
  rec.ops.clear();
  // Learnt: a fresh value through the extend script is an extend now, and the acquire
  // script stays an acquire.
  w.send({"evalsha", e, "1", "k2", "held-before-0002", "1000"}, ":1\r\n", 100000);
  w.send({"evalsha", a, "1", "k3", "fresh-value-0003", "1000"}, ":0\r\n", 100001);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::renew);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
}

TEST_CASE("value flow: after SET NX, a [token, ms] script is an extend (redis-py, redsync, redis-plus-plus)",
          "[recognizer][clients][value-flow]") {
  op_recorder rec;
  wire w(rec);
  const std::string x = unseen_sha("extend");
  w.send({"SET", "job", "tok-1", "PX", "5000", "NX"}, "+OK\r\n", 0);
  w.send({"EVALSHA", x, "1", "job", "tok-1", "5000", "0"}, ":1\r\n", 100);
  w.send({"EVALSHA", x, "1", "job", "tok-1", "5000", "0"}, ":1\r\n", 200);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[1].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].lease_ms == 5000);
}

TEST_CASE("value flow: clean-up and retried releases change nothing: a refused release of a held value is kept",
          "[recognizer][clients][value-flow]") {
  op_recorder rec;
  wire w(rec);
  const auto& release = client_script("redis-plus-plus RedMutex unlock");
  // A failed SET NX, then the client's clean-up release: the value never held the lock.
  w.send({"SET", "job", "loser", "PX", "3000", "NX"}, "$-1\r\n", 0);
  w.send(call("EVAL", release.text, {"job"}, {"loser"}), ":0\r\n", 1);
  // A held value whose lease ran out: its first refused release is reported, the retries not.
  w.send({"SET", "job2", "late", "PX", "100", "NX"}, "+OK\r\n", 2);
  for (int i = 0; i < 3; ++i) w.send(call("EVAL", release.text, {"job2"}, {"late"}), ":0\r\n", 500 + 200 * i);
  REQUIRE(rec.ops.size() == 6);
  CHECK(rec.ops[1].outcome == op_outcome::none);
  CHECK(rec.ops[3].outcome == op_outcome::rejected);
  CHECK(rec.ops[4].outcome == op_outcome::none);
  CHECK(rec.ops[5].outcome == op_outcome::none);
  // A value never seen (the capture began after its acquire) is reported as refused.
  w.send(call("EVAL", release.text, {"job3"}, {"unknown"}), ":0\r\n", 2000);
  CHECK(rec.ops.back().outcome == op_outcome::rejected);
}

TEST_CASE("value flow: the table of values is bounded and released values leave it", "[recognizer][memory][value-flow]") {
  op_recorder rec;
  wire w(rec);
  const std::string a = unseen_sha("acquire"), r = unseen_sha("release");
  // Many values acquired and never released: the oldest are forgotten.
  const std::size_t n = locks::value_flow_entries + 10;
  for (std::size_t i = 0; i < n; ++i) {
    w.send({"evalsha", a, "1", "k" + std::to_string(i), "value-" + std::to_string(i), "1000"}, ":1\r\n", static_cast<double>(i));
  }
  CHECK(w.recognizer.stats().values_tracked == locks::value_flow_entries);
  CHECK(w.recognizer.stats().values_evicted == 10);
  for (std::size_t i = n - 5; i < n; ++i) {
    w.send({"evalsha", r, "1", "k" + std::to_string(i), "value-" + std::to_string(i)}, ":1\r\n", static_cast<double>(n + i));
  }
  CHECK(w.recognizer.stats().values_tracked == locks::value_flow_entries - 5);
}

// Seed 004's anti-pattern: a plain DEL carries no owner.
TEST_CASE("timeline: a DEL from a client whose lease ran out removes the new holder's lock: released_other_owner",
          "[timeline][anomaly][clients]") {
  event_recorder events;
  locks::lock_timeline timeline({}, events);
  wire w(timeline);
  w.send({"SET", "k", "a", "NX", "PX", "300"}, "+OK\r\n", 0, 1);
  w.send({"SET", "k", "b", "NX", "PX", "5000"}, "+OK\r\n", 500, 2);
  w.send({"DEL", "k"}, ":1\r\n", 600, 1);
  timeline.finish(t0 + 10'000 * ms);
  CHECK(events.names() == std::vector<std::string>{"acquired", "expired", "acquired", "released",
                                                   "anomaly:released_other_owner", "anomaly:unchecked_release"});
  const auto* other = events.first("anomaly:released_other_owner");
  REQUIRE(other != nullptr);
  CHECK(other->owner == "a");
  CHECK(other->client == "10.0.0.1:50001");
  CHECK(events.first("released")->owner == "b");
  // The right owner's DEL is still unchecked, but reported once per lock only.
  w.send({"SET", "k", "c", "NX", "PX", "5000"}, "+OK\r\n", 700, 3);
  w.send({"DEL", "k"}, ":1\r\n", 800, 3);
  timeline.finish(t0 + 20'000 * ms);
  CHECK(events.count("anomaly:released_other_owner") == 1);
  CHECK(events.count("anomaly:unchecked_release") == 1);
  CHECK(events.count("released") == 2);
}

TEST_CASE("timeline: a DEL from a connection that never acquired the lock names nobody else", "[timeline][anomaly]") {
  event_recorder events;
  locks::lock_timeline timeline({}, events);
  wire w(timeline);
  // A connection pool: acquired on one connection, deleted from another.
  w.send({"SET", "k", "a", "NX", "PX", "3000"}, "+OK\r\n", 0, 1);
  w.send({"DEL", "k"}, ":1\r\n", 100, 2);
  CHECK(events.names() == std::vector<std::string>{"acquired", "released", "anomaly:unchecked_release"});
}

TEST_CASE("client scripts: a retried Redisson 3.24+ unlock (same latch key) replays its reply and changes nothing",
          "[recognizer][clients]") {
  const std::string o(redisson_owner);
  const std::string channel = lock::channel_name("myLock");
  const std::string latch1 = "redisson_unlock_latch:{myLock}:0123456789abcdef0123456789abcdef";
  const std::string latch2 = "redisson_unlock_latch:{myLock}:fedcba9876543210fedcba9876543210";
  const auto& unlock = client_script("redisson unlock (latch, publish command as ARGV, since 3.24)");
  for (const bool unseen : {false, true}) {
    INFO((unseen ? "unseen EVALSHA" : "EVAL"));
    op_recorder rec;
    wire w(rec);
    const std::string sha = unseen ? unseen_sha(unlock.text) : lock::sha1_hex(unlock.text);
    auto send = [&](const std::string& latch, std::string_view reply, double at) {
      w.send(call("EVALSHA", sha, {"myLock", channel, latch}, {"0", "30000", o, "PUBLISH", "13500"}), reply, at);
    };
    send(latch1, ":1\r\n", 0);
    send(latch1, ":1\r\n", 5);  // the client timed out and sent it again: the latch answers
    w.send({"DEL", latch1}, ":1\r\n", 6);
    send(latch2, "$-1\r\n", 100);  // a later unlock call, by an owner that no longer holds it
    REQUIRE(rec.ops.size() == 3);
    CHECK(rec.ops[0].outcome == op_outcome::ok);
    CHECK(rec.ops[1].outcome == op_outcome::none);
    CHECK(rec.ops[2].outcome == op_outcome::rejected);
  }
}

TEST_CASE("client scripts: redis-py's extend adds to the remaining TTL unless replace_ttl", "[recognizer][clients]") {
  const auto& extend = client_script("redis-py 4.3 Lock extend");
  const auto c = locks::classify_script(extend.text);
  CHECK(c.lease_added);
  CHECK(c.replace_argv == 3);
  CHECK_FALSE(locks::classify_script(client_script("redis-py 4.3 Lock reacquire").text).lease_added);
  CHECK_FALSE(locks::classify_script(client_script("redsync v4 extend").text).lease_added);
  for (const bool unseen : {false, true}) {
    INFO((unseen ? "unseen EVALSHA" : "known EVALSHA"));
    event_recorder events;
    locks::lock_timeline timeline({}, events);
    wire w(timeline);
    const std::string sha = unseen ? unseen_sha(extend.text) : lock::sha1_hex(extend.text);
    w.send({"SET", "job", "tok", "PX", "2000", "NX"}, "+OK\r\n", 0);
    w.send({"EVALSHA", sha, "1", "job", "tok", "1000", "0"}, ":1\r\n", 500);  // 1.5 s left + 1 s
    w.send({"EVALSHA", sha, "1", "job", "tok", "4000", "1"}, ":1\r\n", 600);  // replaced: 4 s
    timeline.advance_to(t0 + 4500 * ms);  // a replacing reading of the first would have expired it at 1.5 s
    CHECK(events.count("expired") == 0);
    REQUIRE(events.count("renewed") == 2);
    CHECK(events.events[1].lease_ms == 2500);
    CHECK(events.events[2].lease_ms == 4000);
    timeline.advance_to(t0 + 4700 * ms);
    CHECK(events.count("expired") == 1);
  }
}

TEST_CASE("client scripts: Redisson 3.44+'s batched renewal as EVAL, known and unseen EVALSHA", "[recognizer][clients]") {
  const auto& renew = client_script("redisson renew (batched, since 3.44)");
  const std::string o1 = std::string(redisson_owner), o2 = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:13";
  for (const int form : {0, 1, 2}) {
    INFO((form == 0 ? "EVAL" : form == 1 ? "EVALSHA" : "unseen EVALSHA"));
    op_recorder rec;
    wire w(rec);
    const std::string sha = form == 1 ? lock::sha1_hex(renew.text) : unseen_sha(renew.text);
    w.send(call(form == 0 ? "EVAL" : "EVALSHA", form == 0 ? renew.text : std::string_view(sha), {"a", "b"},
                {"30000", o1, o2}),
           "*2\r\n:1\r\n:0\r\n", 0);
    REQUIRE(rec.ops.size() == 2);
    CHECK(rec.ops[0].kind == lock_op_kind::renew);
    CHECK(rec.ops[0].lock == "a");
    CHECK(rec.ops[0].owner == o1);
    CHECK(rec.ops[0].outcome == op_outcome::ok);
    CHECK(rec.ops[0].lease_ms == 30000);
    CHECK(rec.ops[1].lock == "b");
    CHECK(rec.ops[1].owner == o2);
    CHECK(rec.ops[1].outcome == op_outcome::rejected);
    CHECK(rec.ops[1].inferred == (form == 2));
  }
}
