// Three rules of the recognizer that a fifth set of unseen clients asked for
// (docs/reference/clients.md, "Held out, fifth set"), fed operations, no sockets:
// - a re-entrant acquire answering alike when it creates the key and when the caller's
//   value already held it is an acquisition unless that value holds the lock;
// - `SET key value XX PX|EX` renews the lease (nil: the key had gone);
// - a refused `SET NX` of a value that holds the lock is the holder's retry (nothing)
//   only over the connection that holds it, until another connection sent it too; over
//   another, a process sharing the value.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "lockscope/locks/lock_analysis.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

// A re-entrant acquire with Lua locals: 1 when it created the key or the key already
// held the caller's value (nothing written then), 0 when another value holds it.
constexpr std::string_view reentrant_acquire =
    "local key = KEYS[1]\nlocal id = ARGV[1]\nlocal ms = ARGV[2]\n"
    "if redis.call(\"get\", key) == id or redis.call(\"set\", key, id, \"NX\", \"PX\", ms) then\n"
    "  return 1\nelse\n  return 0\nend";
constexpr std::string_view checked_release =
    "local key = KEYS[1]\nlocal id = ARGV[1]\n"
    "if redis.call(\"get\", key) == id then\n  return redis.call(\"del\", key)\nelse\n  return 0\nend";
// An acquire that answers nil whatever it did: its reply never tells.
constexpr std::string_view nil_acquire =
    "local v = ARGV[1]\nredis.call('set', KEYS[1], v, 'NX', 'PX', ARGV[2])\nreturn nil";

void eval(locks::lock_recognizer& r, std::string_view script, const std::string& key, const std::string& value,
          std::vector<std::string> more, std::string_view reply, std::int64_t at_us, std::uint64_t connection = 1) {
  std::vector<std::string> args{"EVAL", std::string(script), "1", key, value};
  args.insert(args.end(), more.begin(), more.end());
  feed(r, args, reply, at_us, connection);
}

}  // namespace

TEST_CASE("reentry: an acquire answering 1 alike for created and already mine is an acquisition for a value not holding",
          "[recognizer][reentry]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string a = "a1025030-fd35-4e1f-8ebd-1b23c3e7bca1", b = "18ade074-4423-4e4d-a54e-9765c40dc864";
  eval(r, reentrant_acquire, "orders", a, {"1000"}, ":1\r\n", 1'000'000);
  eval(r, reentrant_acquire, "orders", b, {"1000"}, ":0\r\n", 1'050'000, 2);
  eval(r, reentrant_acquire, "orders", a, {"1000"}, ":1\r\n", 1'100'000);  // re-entry while it holds
  eval(r, checked_release, "orders", a, {}, ":1\r\n", 1'200'000);
  eval(r, reentrant_acquire, "orders", b, {"1000"}, ":1\r\n", 1'250'000, 2);  // b, refused before
  eval(r, reentrant_acquire, "orders", a, {"1000"}, ":1\r\n", 3'000'000);  // a again, released long ago
  REQUIRE(rec.ops.size() == 6);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].owner == a);
  CHECK(rec.ops[0].lease_ms == 1000);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].outcome == op_outcome::none);  // its own re-entry: nothing changed
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[4].outcome == op_outcome::ok);
  CHECK(rec.ops[4].owner == b);
  // b's hold (1 s lease from 1.25 s) has run out; a's value does not hold: created.
  CHECK(rec.ops[5].outcome == op_outcome::ok);
}

TEST_CASE("reentry: a value whose lease ran out re-acquires, and an acquire whose reply never tells stays undecided",
          "[recognizer][reentry]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  const std::string a = "65486cd9-952e-4c9b-9bd6-980dbb0fb957";
  eval(r, reentrant_acquire, "stock", a, {"1000"}, ":1\r\n", 1'000'000);
  eval(r, reentrant_acquire, "stock", a, {"1000"}, ":1\r\n", 2'500'000);  // past its lease: created again
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[1].outcome == op_outcome::ok);

  // nil whether it created the key or another value held it: no success follows from
  // the value alone (the other path does not need the caller's own hold).
  op_recorder rec2;
  locks::lock_recognizer r2(rec2);
  eval(r2, nil_acquire, "stock", a, {"1000"}, "$-1\r\n", 1'000'000);
  REQUIRE(rec2.ops.size() == 1);
  CHECK(rec2.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec2.ops[0].outcome == op_outcome::none);
}

TEST_CASE("plain renew: SET XX with an expiry renews a value's lock (nil: the key had gone), a cache's is nothing",
          "[recognizer][plain]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SET", "mutex:stock", "mutex", "PX", "500", "NX"}, "+OK\r\n", 1'000'000);
  feed(r, {"SET", "mutex:stock", "mutex", "PX", "500", "XX"}, "+OK\r\n", 1'300'000);
  feed(r, {"set", "mutex:stock", "mutex", "xx", "ex", "2"}, "+OK\r\n", 1'600'000);
  feed(r, {"SET", "mutex:stock", "mutex", "PX", "500", "XX"}, "$-1\r\n", 5'000'000);
  feed(r, {"SET", "mutex:stock", "mutex", "XX"}, "+OK\r\n", 5'100'000);  // no expiry: no lock's
  // A cache refreshing an entry: no value of it was seen taking that key as a lock.
  feed(r, {"SET", "session:42", "{\"user\":7}", "XX", "EX", "3600"}, "+OK\r\n", 5'200'000);
  feed(r, {"SET", "mutex:stock", "other", "XX", "PX", "500"}, "+OK\r\n", 5'300'000);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[1].kind == lock_op_kind::renew);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[1].owner == "mutex");
  CHECK(rec.ops[1].lease_ms == 500);
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].lease_ms == 2000);
  CHECK(rec.ops[3].kind == lock_op_kind::renew);
  CHECK(rec.ops[3].outcome == op_outcome::rejected);
}

TEST_CASE("shared value: a refused SET NX of the held value is a retry over the holder's connection, a refusal over another",
          "[recognizer][plain]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SET", "mutex:orders", "mutex", "PX", "500", "NX"}, "+OK\r\n", 1'000'000, 1);
  feed(r, {"SET", "mutex:orders", "mutex", "PX", "500", "NX"}, "$-1\r\n", 1'020'000, 1);  // the holder's retry
  feed(r, {"SET", "mutex:orders", "mutex", "PX", "500", "NX"}, "$-1\r\n", 1'050'000, 2);  // another process
  // Once another process sent it, the value names no one: a try over the holder's
  // connection is refused like any (test_transactions_and_multi_del.cpp, shared values).
  feed(r, {"SET", "mutex:orders", "mutex", "PX", "500", "NX"}, "$-1\r\n", 1'060'000, 1);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[1].outcome == op_outcome::none);
  CHECK(rec.ops[2].outcome == op_outcome::contended);
  CHECK(rec.ops[3].outcome == op_outcome::contended);
}
