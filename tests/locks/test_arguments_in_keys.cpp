// Unseen scripts (EVALSHA of a SHA1 whose text the capture never showed, as when a
// capture is joined after the clients loaded their scripts) in the forms of the seventh
// held-out set (docs/reference/clients.md): the holder's value and the lease passed as
// KEYS with no ARGV (node-redis-lock 1.0.1), a key acquired by a plain SET NX whose
// extend is a script (redislock 1.3.0), a poller that keeps one value for every attempt,
// and a value whose release was refused taking the key anew. The truth is the sequence
// each test writes: who held the key, with which lease.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

const std::string acquire_sha(40, 'a'), renew_sha(40, 'b'), release_sha(40, 'c');
const std::string v = "6dbaed4e-60e8-4868-a76f-54db9189c89a", w = "75523e97-baaa-4e15-80ac-a54e55b8217e";

}  // namespace

TEST_CASE("arguments in keys: an unseen acquire, renew and release with the value and a lease in seconds as KEYS",
          "[recognizer][argument_roles][keys]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::int64_t t = 1'000'000;
  // node-redis-lock: EVALSHA sha 3 name value ttl (seconds) / EVALSHA sha 2 name value, no ARGV.
  feed(r, {"EVALSHA", acquire_sha, "3", "locks:orders", v, "1"}, ":1\r\n", t += 10'000);
  feed(r, {"EVALSHA", acquire_sha, "3", "locks:orders", w, "1"}, ":0\r\n", t += 10'000, 2);
  feed(r, {"EVALSHA", renew_sha, "3", "locks:orders", v, "1"}, ":1\r\n", t += 10'000);
  feed(r, {"EVALSHA", release_sha, "2", "locks:orders", v}, ":1\r\n", t += 10'000);
  feed(r, {"EVALSHA", acquire_sha, "3", "locks:orders", w, "1"}, ":1\r\n", t += 10'000, 2);
  REQUIRE(rec.ops.size() == 5);
  for (const recorded_op& op : rec.ops) {
    CHECK(op.lock == "locks:orders");
    CHECK(op.inferred);
  }
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].owner == v);
  CHECK(rec.ops[0].lease_ms == 1000);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(rec.ops[2].lease_ms == 1000);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[3].owner == v);
  CHECK(rec.ops[4].kind == lock_op_kind::acquire);
  CHECK(rec.ops[4].outcome == op_outcome::ok);
  CHECK(rec.ops[4].owner == w);
}

TEST_CASE("arguments in keys: KEYS that name keys stay keys", "[recognizer][argument_roles][keys]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  // Two key names (a queue and its processing list), no ARGV: no value, no lease.
  feed(r, {"EVALSHA", acquire_sha, "2", "jobs:2024", "jobs:2024:processing"}, ":1\r\n");
  feed(r, {"EVALSHA", acquire_sha, "2", "jobs:{a}", "jobs:{a}:done"}, ":1\r\n");
  CHECK(rec.ops.empty());
}

TEST_CASE("arguments in keys: joined mid-run, on a key taken by SET NX an unseen script succeeding for a fresh "
          "value extends the hold begun before the capture",
          "[recognizer][argument_roles][mid-run]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::int64_t t = 1'000'000;
  // redislock: SET key id PX ttl NX, refused while a hold begun before the capture lasts ...
  feed(r, {"SET", "lock:stock", w, "PX", "1000", "NX"}, "$-1\r\n", t += 10'000, 2);
  // ... whose holder extends it (EVALSHA of `GET == ARGV[1] then PEXPIRE`, [id, ms]) and releases it.
  feed(r, {"EVALSHA", renew_sha, "1", "lock:stock", v, "1000"}, ":1\r\n", t += 10'000);
  feed(r, {"EVALSHA", release_sha, "1", "lock:stock", v}, ":1\r\n", t += 10'000);
  feed(r, {"SET", "lock:stock", w, "PX", "1000", "NX"}, "+OK\r\n", t += 10'000, 2);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[0].outcome == op_outcome::contended);
  CHECK(rec.ops[1].kind == lock_op_kind::renew);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[1].owner == v);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].kind == lock_op_kind::acquire);
  CHECK(rec.ops[3].outcome == op_outcome::ok);

  SECTION("with no SET NX seen on the key, the same script's success is an acquire, as before") {
    op_recorder fresh;
    locks::lock_recognizer r2(fresh);
    feed(r2, {"EVALSHA", renew_sha, "1", "lock:orders", v, "1000"}, ":1\r\n");
    REQUIRE(fresh.ops.size() == 1);
    CHECK(fresh.ops[0].kind == lock_op_kind::acquire);
  }
}

TEST_CASE("arguments in keys: a poller refused again with its one value shows the key's acquire script, so a "
          "fresh value's success of another script is an extend",
          "[recognizer][argument_roles][mid-run]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::int64_t t = 1'000'000;
  // One waiter keeping one value for all its attempts (no fresh value per attempt) ...
  feed(r, {"EVALSHA", acquire_sha, "1", "locks:stock", w, "1000"}, ":0\r\n", t += 10'000, 2);
  feed(r, {"EVALSHA", acquire_sha, "1", "locks:stock", w, "1000"}, ":0\r\n", t += 150'000, 2);
  // ... and the holder of a hold begun before the capture renewing it.
  feed(r, {"EVALSHA", renew_sha, "1", "locks:stock", v, "1000"}, ":1\r\n", t += 10'000);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].outcome == op_outcome::contended);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(rec.ops[2].owner == v);
}

TEST_CASE("arguments in keys: a value whose release was refused holds nothing, and a script succeeding for it then "
          "acquires",
          "[recognizer][argument_roles][mid-run]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  std::int64_t t = 1'000'000;
  // Joined mid-run: v's hold, begun before the capture, ran out; its release is refused.
  feed(r, {"EVALSHA", release_sha, "1", "locks:orders", v}, ":0\r\n", t += 10'000);
  // v takes the key again with the acquire script, never seen before.
  feed(r, {"EVALSHA", acquire_sha, "1", "locks:orders", v, "1000"}, ":1\r\n", t += 500'000);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::unlock);
  CHECK(rec.ops[0].outcome == op_outcome::rejected);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[1].owner == v);
}

TEST_CASE("arguments in keys: random unseen calls with arguments among their KEYS, beside SET NX, never crash it "
          "and keep its tables bounded",
          "[recognizer][argument_roles][keys][random]") {
  std::uint64_t seed = 7171;
  auto next = [&](std::uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  const std::vector<std::string> words{"0", "1", "15", "30", "1000", "-1", "99999999999999999999", "PX", "NX",
                                       "locks:orders", "jobs:{a}", "9f2c1e77b04d4a6e", "a1b2", "", "\x01\x02\x03\x04" "9"};
  const std::vector<std::string> replies{":0\r\n", ":1\r\n", ":2\r\n", ":-1\r\n", "+OK\r\n", "$-1\r\n", "-ERR x\r\n",
                                         "*2\r\n:1\r\n:7\r\n", ""};
  op_recorder rec;
  locks::lock_recognizer r(rec);
  for (int i = 0; i < 20000; ++i) {
    const std::string token = next(3) == 0 ? fmt::format("{:016x}{}", seed, i) : words[next(words.size())];
    if (next(5) == 0) {
      feed(r, {"SET", "k" + std::to_string(next(4)), token, "PX", "1000", "NX"}, next(2) == 0 ? "+OK\r\n" : "$-1\r\n",
           1'000'000 + i * 1000, 1 + next(3));
      continue;
    }
    std::vector<std::string> args{"EVALSHA", std::string(40, "abcdef01"[next(8)])};
    const std::uint64_t nkeys = 1 + next(4);
    args.push_back(std::to_string(nkeys));
    args.push_back("k" + std::to_string(next(4)));
    for (std::uint64_t k = 1; k < nkeys; ++k) args.push_back(next(2) == 0 ? token : words[next(words.size())]);
    if (next(2) == 0) {
      for (std::uint64_t k = next(3); k > 0; --k) args.push_back(words[next(words.size())]);
    }
    feed(r, args, replies[next(replies.size())], 1'000'000 + i * 1000, 1 + next(3));
  }
  CHECK(r.stats().exchanges == 20000);
  CHECK(r.stats().values_tracked <= locks::value_flow_entries);
}
