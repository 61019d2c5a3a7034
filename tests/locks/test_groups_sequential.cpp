// Lock groups (lock_groups.cpp) fed lock events: what is no group.
//  - A MultiLock tries its next key only while it holds every key before it: past a
//    refusal it gives back what it took and starts again from its first key, or gives
//    up. A poller that gave up on one key and then takes another (redis-mutex 2.0.1: one
//    value, `mutex`, for every process and key) took them one after the other, not
//    together (tests/locks/effect_clients/redis_mutex.truth.jsonl: p2 gives up on
//    mutex:stock at +1.0445 and acquires mutex:orders 23 ms later, on the same connection).
//  - A value that several clients send at once (refused over one connection while it holds
//    over another to the same server: the timeline marks the refusal owner_shared) is no
//    owner: its tries on several servers are no quorum attempt.
//  - The tries kept while the capture had one server are replayed when a second server
//    appears, each with its own owner's group (not the first replayed try's).
//  - A MultiLock gives its keys back together. A job worker's one token for every job it
//    takes (Bull 4.16.5: tests/locks/effect_clients/bull_jobs.truth.jsonl, p1 takes jobs 6
//    and 9 367 ms apart and frees them 53 ms apart, job by job) takes keys one by one.
#include <deque>
#include <string>
#include <string_view>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_timeline.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_event_kind;

namespace {

constexpr std::int64_t base_us = 1'000'000;

struct fed_groups {
  explicit fed_groups(locks::group_options o = {}) : groups(o, events) {}
  void at(double ms, lock_event_kind kind, std::string_view lock, std::string_view owner,
          std::string_view server = s1, std::string_view client = "10.0.0.1:50000") {
    groups.on_event(lock_event_of(kind, base_us + static_cast<std::int64_t>(ms * 1000), lock, owner, client, server));
  }
  std::vector<const recorded_event*> all(std::string_view name) const { return events.all(name); }
  event_recorder events;
  locks::lock_groups groups;
};

}  // namespace

TEST_CASE("lock_groups: a key taken after giving up on another is no MultiLock", "[groups][sets]") {
  // redis-mutex's p2: refused on stock (its fifth and last attempt), gives up, takes
  // orders 23 ms later and releases it.
  fed_groups f;
  f.at(0, lock_event_kind::contended, "mutex:stock", "mutex");
  f.at(23.3, lock_event_kind::acquired, "mutex:orders", "mutex");
  f.at(220, lock_event_kind::released, "mutex:orders", "mutex");
  // Refused at once on stock, then on orders too (a give-up with nothing held).
  f.at(1000, lock_event_kind::contended, "mutex:stock", "mutex");
  f.at(1051, lock_event_kind::contended, "mutex:orders", "mutex");
  f.groups.finish(base_us + 10'000'000);
  CHECK(f.all("multilock").empty());
}

TEST_CASE("lock_groups: a MultiLock refused on a key keeps it, and a multi-key call's refusal is one set",
          "[groups][sets]") {
  // The check above can fail: keys taken while holding the ones before are a MultiLock,
  // and a refusal ends it (given back: failed, released).
  fed_groups f;
  f.at(0, lock_event_kind::acquired, "a", "M");
  f.at(0.5, lock_event_kind::acquired, "b", "M");
  f.at(1, lock_event_kind::contended, "c", "M");
  f.at(1.5, lock_event_kind::released, "a", "M");
  f.at(1.6, lock_event_kind::released, "b", "M");
  REQUIRE(f.all("multilock").size() == 1);
  const recorded_event& failed = *f.all("multilock")[0];
  CHECK(failed.tried == std::vector<std::string>{"a", "b", "c"});
  CHECK(failed.acquired_on == std::vector<std::string>{"a", "b"});
  CHECK(failed.released);
  // node-redlock's multi-key script: one reply for every key, all refused at one time.
  fed_groups g;
  g.at(0, lock_event_kind::contended, "x", "N");
  g.at(0, lock_event_kind::contended, "y", "N");
  g.at(0, lock_event_kind::contended, "z", "N");
  g.groups.finish(base_us + 10'000'000);
  REQUIRE(g.all("multilock").size() == 1);
  CHECK(g.all("multilock")[0]->tried == std::vector<std::string>{"x", "y", "z"});
  CHECK(g.all("multilock")[0]->acquired == 0);
}

TEST_CASE("lock_groups: tries replayed when a second server appears keep their own owners", "[groups][quorum]") {
  // Two node-redlock style clients (one value per attempt, the same on every server) on
  // one key. Until +0.2 ms the capture has one server: R1's and R2's tries on it are kept
  // and replayed when server 2 appears.
  fed_groups f;
  f.at(0, lock_event_kind::acquired, "rl:job", "R1", s1, "10.0.0.1:1");
  f.at(0.1, lock_event_kind::contended, "rl:job", "R2", s1, "10.0.0.2:1");
  f.at(0.2, lock_event_kind::acquired, "rl:job", "R1", s2, "10.0.0.1:2");
  f.at(0.3, lock_event_kind::contended, "rl:job", "R2", s2, "10.0.0.2:2");
  f.groups.finish(base_us + 10'000'000);
  const auto q = f.all("quorum");
  REQUIRE(q.size() == 2);
  const recorded_event* won = q[0]->owner == "R1" ? q[0] : q[1];
  const recorded_event* lost = q[0]->owner == "R1" ? q[1] : q[0];
  CHECK(won->owner == "R1");
  CHECK(won->succeeded);
  CHECK(won->acquired == 2);
  CHECK(won->acquired_on == std::vector<std::string>{s1, s2});
  CHECK(won->owners == std::vector<std::string>{"R1", "R1"});
  CHECK_FALSE(lost->succeeded);
  CHECK(lost->acquired == 0);
  CHECK(lost->total == 2);
}

TEST_CASE("lock_groups: a value several processes send at once is no quorum owner", "[groups][quorum]") {
  // redis-mutex's way over two servers: every process sends `mutex`. Through the timeline,
  // which marks a refusal of a value that holds over another connection.
  {
    event_recorder events;
    locks::lock_groups groups({}, events);
    locks::lock_timeline timeline({}, groups);
    std::deque<std::string> texts;
    auto op = [&](locks::op_outcome outcome, std::string_view owner, double at_ms, const char* server,
                  std::uint64_t connection) {
      locks::lock_operation o;
      o.kind = locks::lock_op_kind::acquire;
      o.family = locks::lock_family::set_based;
      o.outcome = outcome;
      o.lock = "job";
      o.owner = "mutex";
      (void)owner;  // the process, for the reader: the wire shows `mutex` from each
      o.lease_ms = 1000;
      o.server_text = server;
      o.client_text = texts.emplace_back("10.0.0." + std::to_string(connection) + ":50000");
      o.connection = connection;
      o.request_us = base_us + static_cast<std::int64_t>(at_ms * 1000);
      o.reply_us = o.request_us + 100;
      timeline.on_operation(with_addresses(o));
    };
    // p1 holds job on server 1, p2 is refused there; p3 holds job on server 2, p4 is
    // refused there. Four processes, one lock each: no group.
    op(locks::op_outcome::ok, "p1", 0, s1, 1);
    op(locks::op_outcome::contended, "p2", 10, s1, 2);
    op(locks::op_outcome::ok, "p3", 20, s2, 3);
    op(locks::op_outcome::contended, "p4", 30, s2, 4);
    op(locks::op_outcome::contended, "p2", 60, s1, 2);
    op(locks::op_outcome::contended, "p4", 70, s2, 4);
    timeline.finish(base_us + 5'000'000);
    groups.finish(base_us + 5'000'000);
    CHECK(events.count("quorum") == 0);
    CHECK(events.count("multilock") == 0);
    CHECK(events.count("contended") == 4);
  }
  // A node-redlock client's one value on both servers, beside the shared one, is still
  // grouped: the mark is the value's, not the lock's.
  event_recorder events;
  locks::lock_groups groups({}, events);
  locks::lock_timeline timeline({}, groups);
  std::deque<std::string> texts;
  auto op = [&](locks::op_outcome outcome, std::string_view owner, double at_ms, const char* server,
                std::uint64_t connection) {
    locks::lock_operation o;
    o.kind = locks::lock_op_kind::acquire;
    o.family = locks::lock_family::set_based;
    o.outcome = outcome;
    o.lock = "job";
    o.owner = owner;
    o.lease_ms = 1000;
    o.server_text = server;
    o.client_text = texts.emplace_back("10.0.0." + std::to_string(connection) + ":50000");
    o.connection = connection;
    o.request_us = base_us + static_cast<std::int64_t>(at_ms * 1000);
    o.reply_us = o.request_us + 100;
    timeline.on_operation(with_addresses(o));
  };
  op(locks::op_outcome::ok, "mutex", 0, s1, 1);
  op(locks::op_outcome::contended, "mutex", 10, s1, 2);
  op(locks::op_outcome::contended, "R7", 20, s1, 5);
  op(locks::op_outcome::contended, "R7", 20.5, s2, 6);
  timeline.finish(base_us + 5'000'000);
  groups.finish(base_us + 5'000'000);
  REQUIRE(events.count("quorum") == 1);
}

TEST_CASE("lock_groups: keys set between another owner's tries over the same connection are no MultiLock",
          "[groups][sets]") {
  // The Chat SDK's dedupe markers (`SET chat-sdk:cache:dedupe:… true NX PX 600000`, never
  // released) set by one connection round after round, each round's lock attempts (their
  // own tokens) between them: tests/locks/effect_clients/chat_state_redis.pcap.
  fed_groups f;
  const std::string_view c = "10.0.0.1:50000";
  for (int round = 0; round < 4; ++round) {
    const double t = 300.0 * round;
    f.at(t, lock_event_kind::acquired, "dedupe:" + std::to_string(round), "true", s1, c);
    const std::string token = "tok" + std::to_string(round);
    f.at(t + 1, lock_event_kind::contended, "lock:orders", token, s1, c);
    f.at(t + 51, lock_event_kind::acquired, "lock:orders", token, s1, c);
    f.at(t + 150, lock_event_kind::released, "lock:orders", token, s1, c);
  }
  f.groups.finish(base_us + 10'000'000);
  CHECK(f.all("multilock").empty());
}

TEST_CASE("lock_groups: a MultiLock's keys taken back to back stay one set beside another connection's tries",
          "[groups][sets]") {
  // The rule above looks at the set's own connection only: another client's tries
  // (another connection) between the keys change nothing.
  fed_groups f;
  f.at(0, lock_event_kind::acquired, "k1", "owner-a", s1, "10.0.0.1:50000");
  f.at(0.5, lock_event_kind::contended, "k1", "owner-b", s1, "10.0.0.2:50001");
  f.at(1, lock_event_kind::acquired, "k2", "owner-a", s1, "10.0.0.1:50000");
  f.at(2, lock_event_kind::acquired, "k3", "owner-a", s1, "10.0.0.1:50000");
  f.groups.finish(base_us + 10'000'000);
  const auto sets = f.all("multilock");
  REQUIRE(sets.size() == 1);
  CHECK(sets[0]->tried.size() == 3);
  CHECK(sets[0]->succeeded);
}

TEST_CASE("lock_groups: keys taken apart and given back one by one are no MultiLock but given back together are one",
          "[groups][sets]") {
  // Bull's worker: the job lock taken over the worker's connection, freed over another of
  // the same host when that job is done; the next job taken meanwhile.
  fed_groups bull;
  bull.at(0, lock_event_kind::acquired, "q:6:lock", "T", s1, "10.0.0.1:50000");
  bull.at(367, lock_event_kind::acquired, "q:9:lock", "T", s1, "10.0.0.1:50000");
  bull.at(614, lock_event_kind::released, "q:9:lock", "T", s1, "10.0.0.1:50001");
  bull.at(667, lock_event_kind::released, "q:6:lock", "T", s1, "10.0.0.1:50001");
  bull.at(700, lock_event_kind::acquired, "q:12:lock", "T", s1, "10.0.0.1:50000");
  bull.at(988, lock_event_kind::acquired, "q:15:lock", "T", s1, "10.0.0.1:50000");
  // A killed worker's: its two jobs' locks run out as far apart as they were taken.
  bull.at(1900, lock_event_kind::expired, "q:12:lock", "T", s1, "10.0.0.1:50000");
  bull.at(2188, lock_event_kind::expired, "q:15:lock", "T", s1, "10.0.0.1:50000");
  bull.groups.finish(base_us + 10'000'000);
  CHECK(bull.all("multilock").empty());

  // The same keys taken as far apart, given back together (each unlock sent at once), are
  // one MultiLock, reported then with its tries' times.
  fed_groups together;
  together.at(0, lock_event_kind::acquired, "q:6:lock", "T", s1, "10.0.0.1:50000");
  together.at(367, lock_event_kind::acquired, "q:9:lock", "T", s1, "10.0.0.1:50000");
  together.at(2000, lock_event_kind::released, "q:9:lock", "T", s1, "10.0.0.1:50001");
  CHECK(together.all("multilock").empty());
  together.at(2000.4, lock_event_kind::released, "q:6:lock", "T", s1, "10.0.0.1:50001");
  REQUIRE(together.all("multilock").size() == 1);
  CHECK(together.all("multilock")[0]->tried == std::vector<std::string>{"q:6:lock", "q:9:lock"});
  // A key another host deletes (a peer clearing a stale lock: RQ's schedulers) was not
  // given back by its owner; the other one still is, later: a MultiLock still.
  together.at(3000, lock_event_kind::acquired, "a", "T", s1, "10.0.0.1:50000");
  together.at(3100, lock_event_kind::acquired, "b", "T", s1, "10.0.0.1:50000");
  together.at(3500, lock_event_kind::released, "a", "T", s1, "10.0.0.2:40000");
  together.at(3650, lock_event_kind::released, "b", "T", s1, "10.0.0.1:50001");
  CHECK(together.all("multilock").size() == 2);
  // Still held when the capture ends: nothing disproves it, reported at the end.
  together.at(5000, lock_event_kind::acquired, "c", "T", s1, "10.0.0.1:50000");
  together.at(5200, lock_event_kind::acquired, "d", "T", s1, "10.0.0.1:50000");
  CHECK(together.all("multilock").size() == 2);
  together.groups.finish(base_us + 10'000'000);
  CHECK(together.all("multilock").size() == 3);
}
