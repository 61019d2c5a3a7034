// Unseen scripts (EVALSHA of a SHA1 whose text the capture never showed) whose ARGV put
// the holder's value and the lease anywhere, beside a constant database index or a
// constant word: the recognizer finds the value and the lease by what they look like and
// tells the acquire from the extend by how the value flows (argument_roles.cpp). The
// truth is the sequence each test writes: who held the lock, with which lease.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_family;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

const std::string acquire_sha(40, 'a'), extend_sha(40, 'b'), release_sha(40, 'c');

// One argument of a call: the value, the lease, a database index or a constant word.
enum class slot { value, lease, db, word };

// ARGV in `order`, with `value`, `lease` and `db` in their slots (a release leaves the lease out).
std::vector<std::string> args_of(std::string_view sha, const std::vector<std::string>& keys,
                                 const std::vector<slot>& order, const std::string& value, const std::string& lease,
                                 const std::string& db, bool with_lease) {
  std::vector<std::string> a{"EVALSHA", std::string(sha), std::to_string(keys.size())};
  a.insert(a.end(), keys.begin(), keys.end());
  for (const slot s : order) {
    if (s == slot::value) a.push_back(value);
    else if (s == slot::lease && with_lease) a.push_back(lease);
    else if (s == slot::db) a.push_back(db);
    else if (s == slot::word) a.push_back("PX");
  }
  return a;
}

// One lock's life as a Redlock-like client draws it: A acquires, B is refused, A extends,
// A releases, B acquires, B releases; every call is an EVALSHA of an unseen script.
std::vector<recorded_op> run_life(const std::vector<slot>& order, const std::string& db,
                                  const std::vector<std::string>& keys = {"locks:orders"}) {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string a = "9f2c1e77b04d4a6e8c3d5f1a2b7e6c90", b = "3b8d0c2f6e1a49d7b5c4e2f0a1d9c8b7";
  const std::string count = std::to_string(keys.size());
  std::int64_t t = 1'000'000;
  auto call = [&](std::string_view sha, const std::string& value, bool with_lease, std::string_view reply) {
    feed(r, args_of(sha, keys, order, value, "1000", db, with_lease), reply, t);
    t += 20'000;
  };
  const std::string ok = ":" + count + "\r\n";
  call(acquire_sha, a, true, ok);
  call(acquire_sha, b, true, ":0\r\n");
  call(extend_sha, a, true, ok);
  call(release_sha, a, false, ":1\r\n");
  call(acquire_sha, b, true, ok);
  call(release_sha, b, false, ":1\r\n");
  return rec.ops;
}

void check_life(const std::vector<recorded_op>& ops, std::size_t keys) {
  REQUIRE(ops.size() == 6 * keys);
  const std::string a = "9f2c1e77b04d4a6e8c3d5f1a2b7e6c90", b = "3b8d0c2f6e1a49d7b5c4e2f0a1d9c8b7";
  struct expected {
    lock_op_kind kind;
    op_outcome outcome;
    std::string owner;
    std::int64_t lease;
  };
  const std::array<expected, 6> want{{{lock_op_kind::acquire, op_outcome::ok, a, 1000},
                                      {lock_op_kind::acquire, op_outcome::contended, "", 1000},
                                      {lock_op_kind::renew, op_outcome::ok, a, 1000},
                                      {lock_op_kind::unlock, op_outcome::ok, a, -1},
                                      {lock_op_kind::acquire, op_outcome::ok, b, 1000},
                                      {lock_op_kind::unlock, op_outcome::ok, b, -1}}};
  for (std::size_t i = 0; i < 6; ++i) {
    for (std::size_t k = 0; k < keys; ++k) {
      const recorded_op& op = ops[i * keys + k];
      INFO("call " << i << " key " << k);
      CHECK(op.inferred);
      CHECK(op.kind == want[i].kind);
      CHECK(op.outcome == want[i].outcome);
      if (!want[i].owner.empty()) CHECK(op.owner == want[i].owner);
      if (want[i].kind != lock_op_kind::unlock) CHECK(op.lease_ms == want[i].lease);
      CHECK(op.family == (keys == 1 ? lock_family::set_based : lock_family::redlock_multi));
    }
  }
}

}  // namespace

TEST_CASE("argument roles: an unseen acquire, extend and release with the value and the lease in any order, "
          "beside a constant database index",
          "[recognizer][argument_roles]") {
  std::vector<slot> order{slot::db, slot::lease, slot::value};
  std::sort(order.begin(), order.end());
  do {
    for (const std::string db : {"0", "3"}) {
      INFO("order " << static_cast<int>(order[0]) << static_cast<int>(order[1]) << static_cast<int>(order[2])
                    << ", db " << db);
      check_life(run_life(order, db), 1);
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("argument roles: an extra constant word, and several keys at once", "[recognizer][argument_roles]") {
  SECTION("[db, value, PX, ttl]") { check_life(run_life({slot::db, slot::value, slot::word, slot::lease}, "0"), 1); }
  SECTION("[ttl, db, value] on two keys") {
    check_life(run_life({slot::lease, slot::db, slot::value}, "0", {"locks:a", "locks:b"}), 2);
  }
}

TEST_CASE("argument roles: numbers and words are not values, two tokens are no shape", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string sha(40, 'd');
  // A counter's bump, a constant mode word, two random tokens: none says whose the lock is.
  feed(r, {"EVALSHA", sha, "1", "counter", "0", "1000"}, ":1\r\n");
  feed(r, {"EVALSHA", sha, "1", "queue", "1000", "PX"}, ":1\r\n");
  feed(r, {"EVALSHA", sha, "1", "pair", "9f2c1e77b04d4a6e", "3b8d0c2f6e1a49d7", "1000"}, ":1\r\n");
  CHECK(rec.ops.empty());
}

// limits 2.8's moving-window rate limiter joined mid-run (its scripts only by EVALSHA): a hit
// is `[timestamp, limit, expiry, amount]` answered 1 (allowed) or nil, a window's stats
// `[since, limit]` answered `{oldest, count}`. No lock: nothing may come of it.
TEST_CASE("argument roles: a decimal timestamp is no holder's value (a rate limiter's hit)", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string hit(40, 'b');
  std::int64_t t = 1'000'000;
  for (const std::string ts : {"1796010652.9674013", "1796010653.0417058", "1796010653.087685"}) {
    feed(r, {"EVALSHA", hit, "1", "LIMITER/api/shared/6/1/second", ts, "6", "1", "1"}, ":1\r\n", t += 20'000);
  }
  // `[timestamp, limit]` alone: the shape of node-redlock's `[value, ttl]`.
  feed(r, {"EVALSHA", std::string(40, 'c'), "1", "LIMITER/api/shared/6/1/second", "1796010653.1608524", "6"},
       ":1\r\n", t += 20'000);
  CHECK(rec.ops.empty());
}

// A job queue's finishing script joined mid-run (its text never seen): 14 keys of the
// queue's own structures, ARGV the job id, the time, words and the job's options as a
// msgpack map that carries the worker's token inside it; answered 0 (no next job) or 1.
// The map has digits and varied bytes like a token, but its control bytes show it is
// serialized data the script decodes: no lock may come of it.
TEST_CASE("argument roles: serialized data (a msgpack map) is no holder's value", "[recognizer][argument_roles]") {
  using namespace std::literals;
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string finish(40, 'e');
  std::vector<std::string> keys;
  for (const char* k : {"wait", "active", "prioritized", "events", "stalled", "limiter", "delayed", "paused", "meta",
                        "pc", "completed", "7", "metrics:completed", "marker"}) {
    keys.push_back(fmt::format("q:jobs:{}", k));
  }
  std::int64_t t = 1'000'000;
  for (int i = 0; i < 6; ++i) {
    const std::string opts = std::string("\xde\x00\x03\xa5token\xd9\x27"sv) +
                             fmt::format("b1af9c6f-9fb7-4ea5-b068-bad89d72f934:{}", 10 + i) +
                             std::string("\xa4name\xc0\xac" "lockDuration\xcd\x04\xb0"sv);
    std::vector<std::string> call{"EVALSHA", finish, "14"};
    call.insert(call.end(), keys.begin(), keys.end());
    call.insert(call.end(), {std::to_string(20 + i), "1796023963655", "returnvalue", "null", "completed", "q:jobs:", opts});
    feed(r, call, i % 2 == 0 ? ":0\r\n" : ":1\r\n", t += 150'000);
  }
  CHECK(rec.ops.empty());
}

// A job queue joined mid-run (its scripts only by EVALSHA): a worker's token and job id
// travel with the job's lock, the time and the lock's duration in the queue's calls. Where
// several numbers could each be the lease, which one is is not sure, and neither is that
// there is none: no call may be read as a release for want of a lease.
TEST_CASE("argument roles: a value beside several lease-sized numbers is no release", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string token = "95dfd6d9-11e5-4430-9f6e-7ea11d4a6340";
  std::int64_t t = 1'000'000;
  // [token, duration, job id] on the job's lock: a renewal whose job id is above 15.
  for (const std::string job : {"16", "17", "37"}) {
    feed(r, {"EVALSHA", std::string(40, 'a'), "1", "q:jobs:" + job + ":lock", token, "1200", job}, ":1\r\n",
         t += 100'000);
  }
  // [prefix, token, duration, time, job id]: the step that takes the next job, finding none.
  feed(r, {"EVALSHA", std::string(40, 'b'), "1", "q:jobs:wait", "q:jobs:", token, "1200", "1796033916071", "18"},
       "$-1\r\n", t += 100'000);
  CHECK(rec.ops.empty());
}

// node-redlock's scripts on several keys set all of them or none and answer how many
// (its release: how many it removed). A script taking a value and a lease on several keys
// that answers 1 for two keys names other keys than locks beside its lock (a job's lock
// renewed beside the queue's set of stalled jobs): neither that call nor any later one of
// the script is a group's, nor one answered 0.
TEST_CASE("argument roles: a script answering part of its keys is no multi-key lock's", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string extend(40, 'e'), token = "9c2e70e6-e791-4fd3-8d89-43c839cf7296";
  std::int64_t t = 1'000'000;
  for (const std::string job : {"10", "14", "11"}) {
    feed(r, {"EVALSHA", extend, "2", "q:jobs:" + job + ":lock", "q:jobs:stalled", token, "1200", job}, ":1\r\n",
         t += 100'000);
  }
  feed(r, {"EVALSHA", extend, "2", "q:jobs:13:lock", "q:jobs:stalled", token, "1200", "13"}, ":0\r\n", t += 100'000);
  CHECK(rec.ops.empty());
}

// node-redlock's multi-key scripts answer a count; nil or OK on several keys is another
// script's answer (a job queue's step that found nothing to move, its one lease-sized
// number the time): no acquisition refused on each of its keys.
TEST_CASE("argument roles: nil on several keys is no multi-key lock's answer", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string step(40, 'f');
  std::int64_t t = 1'000'000;
  for (const std::string token : {"e63f8c27-e528-4bec-8ceb-db3600dc9946", "95dfd6d9-11e5-4430-9f6e-7ea11d4a6340"}) {
    t += 300'000;
    feed(r, {"EVALSHA", step, "4", "q:jobs:delayed", "q:jobs:active", "q:jobs:wait", "q:jobs:paused", "q:jobs:",
             std::to_string(1796033919314 + t / 1000), token},
         "$-1\r\n", t);
  }
  CHECK(rec.ops.empty());
}

TEST_CASE("argument roles: a count a script answered in a list is learnt as a drawn value only from a call that acts "
          "for it unambiguously",
          "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string stats(40, 'c'), hit(40, 'b');
  const std::string key = "LIMITER/login/shared/3/2/second";
  std::int64_t t = 1'000'000;
  // The window's stats answer {oldest, count}: the count 2 is kept as a candidate drawn value...
  feed(r, {"EVALSHA", stats, "1", key, "1796010651", "3"}, "*2\r\n:1796010653\r\n:2\r\n", t += 20'000);
  // ...and comes back as the hit's constant expiry, beside two other numbers: which one is
  // the holder's, and which a lease, nothing says.
  feed(r, {"EVALSHA", hit, "1", key, "1796010653.4027433", "3", "2", "1"}, ":1\r\n", t += 20'000);
  feed(r, {"EVALSHA", stats, "1", key, "1796010651", "3"}, "*2\r\n:1796010653\r\n:3\r\n", t += 20'000);
  feed(r, {"EVALSHA", stats, "1", key, "1796010652", "3"}, "*2\r\n:1796010655\r\n:2\r\n", t += 20'000);
  CHECK(rec.ops.empty());
}

TEST_CASE("argument roles: joined mid-run, a hold begun before the capture is extended, not acquired, once the "
          "waiters' acquire is known",
          "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::vector<slot> order{slot::db, slot::value, slot::lease};
  const std::vector<std::string> key{"locks:stock"};
  const std::string held = "0ed4ea0451a1d7704ec72cde919b0830";  // acquired before the capture
  std::int64_t t = 1'000'000;
  // Three waiters refused, each with its own fresh value.
  for (const std::string w : {"752088247f0bf9ca924795376f4f216b", "54a5dbacd48cb3de2d9959bbfcce2214",
                              "68d3ce1e87266dc005d0fb1f82aa149b"}) {
    feed(r, args_of(acquire_sha, key, order, w, "1000", "0", true), ":0\r\n", t += 10'000);
  }
  // The holder's extend: its value is new to the capture, its script never refused.
  feed(r, args_of(extend_sha, key, order, held, "1000", "0", true), ":1\r\n", t += 10'000);
  feed(r, args_of(release_sha, key, order, held, "1000", "0", false), ":1\r\n", t += 10'000);
  // A waiter's next attempt now succeeds with a fresh value: its acquire.
  feed(r, args_of(acquire_sha, key, order, "752088247f0bf9ca924795376f4f216b", "1000", "0", true), ":1\r\n",
       t += 10'000);
  REQUIRE(rec.ops.size() == 6);
  for (std::size_t i = 0; i < 3; ++i) CHECK(rec.ops[i].outcome == op_outcome::contended);
  CHECK(rec.ops[3].kind == lock_op_kind::renew);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[3].owner == held);
  CHECK(rec.ops[4].kind == lock_op_kind::unlock);
  CHECK(rec.ops[5].kind == lock_op_kind::acquire);
  CHECK(rec.ops[5].outcome == op_outcome::ok);
}

TEST_CASE("argument roles: a lease below 100 counts seconds, from 100 up milliseconds", "[recognizer][argument_roles]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string v = "9f2c1e77b04d4a6e8c3d5f1a2b7e6c90", w = "3b8d0c2f6e1a49d7b5c4e2f0a1d9c8b7";
  feed(r, {"EVALSHA", acquire_sha, "1", "jobs:a", "0", v, "30"}, ":1\r\n", 1'000'000);   // [db, value, s]
  feed(r, {"EVALSHA", extend_sha, "1", "jobs:b", w, "30"}, ":1\r\n", 1'010'000);         // [value, s]
  feed(r, {"EVALSHA", acquire_sha, "1", "jobs:c", "0", w, "250"}, ":1\r\n", 1'020'000);  // [db, value, ms]
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].lease_ms == 30'000);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].lease_ms == 30'000);
  CHECK(rec.ops[2].lease_ms == 250);
}

TEST_CASE("argument roles: random unseen calls never crash it and keep its tables bounded",
          "[recognizer][argument_roles][random]") {
  std::uint64_t seed = 4242;
  auto next = [&](std::uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  const std::vector<std::string> words{"0", "3", "15", "16", "30", "99", "100", "1000", "-1", "99999999999999999999",
                                       "PX", "NX", "RedisLockPrefixWord", "9f2c1e77b04d4a6e", "3b8d0c2f6e1a49d7",
                                       "proc-1:12", "", "a1b2", "\x01\x02\x03\x04" "9"};
  const std::vector<std::string> replies{":0\r\n", ":1\r\n", ":2\r\n", ":-1\r\n", ":5000\r\n", "+OK\r\n", "$-1\r\n",
                                         "-ERR x\r\n", "*2\r\n:1\r\n:7\r\n", ""};
  op_recorder rec;
  locks::lock_recognizer r(rec);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> args{"EVALSHA", std::string(40, "abcdef01"[next(8)])};
    const std::uint64_t nkeys = 1 + next(3);
    args.push_back(std::to_string(nkeys));
    for (std::uint64_t k = 0; k < nkeys; ++k) args.push_back("k" + std::to_string(next(4)));
    for (std::uint64_t k = next(6); k > 0; --k) {
      // A fresh token now and then, so the value table fills and forgets.
      args.push_back(next(4) == 0 ? fmt::format("{:016x}{}", seed, i) : words[next(words.size())]);
    }
    feed(r, args, replies[next(replies.size())], 1'000'000 + i * 1000);
  }
  CHECK(r.stats().exchanges == 20000);
  CHECK(r.stats().values_tracked <= locks::value_flow_entries);
}
