// node-redlock 5.0.0-beta.2 (ioredis 6, RESP2) over three independent redis-servers,
// four processes, a capture that starts after the scripts were loaded (EVALSHA only),
// compared with Redlock's own results and each server's replies as the client saw them
// (captures/thirdparty/redlock.truth.jsonl). Issue 10's Done-when.
#include <algorithm>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "truth.hpp"

namespace lockscope::thirdparty_test {
namespace {

// The script calls (server_reply lines) of one kind and reply in the capture.
std::vector<const json::object*> calls(const recording& r, std::string_view script, int reply) {
  std::vector<const json::object*> out;
  for (const auto* t : r.truth_of("server_reply", r.start_us + 20 * ms, r.stop_us - 20 * ms)) {
    if (text(*t, "script") == script && number(*t, "reply", -1) == reply) out.push_back(t);
  }
  return out;
}

// The analyzer's `event` for one script call on one server.
bool reported(const recording& r, std::string_view event, const json::object& call) {
  return !r.find(event, sent_of(call) - tolerance, t_us(call) + tolerance, [&](const json::object& e) {
            return text(e, "server") == text(call, "server") && text(e, "lock") == text(call, "lock") &&
                   text(e, "owner") == text(call, "owner");
          }).empty();
}

// One Redlock attempt: the acquire script sent to the three servers with one value.
struct round {
  std::string lock, owner;
  std::int64_t first_sent = 0, last_reply = 0;
  int replies = 0, votes = 0;
};

std::vector<round> acquire_rounds(const recording& r) {
  std::vector<round> rounds;
  std::map<std::string, std::size_t> open;  // owner -> its latest round
  for (const auto* t : r.truth_of("server_reply", r.start_us + 20 * ms, r.stop_us - 200 * ms)) {
    if (text(*t, "script") != "acquire") continue;
    const std::string owner = text(*t, "owner");
    auto it = open.find(owner);
    if (it == open.end() || sent_of(*t) - rounds[it->second].last_reply > 50 * ms) {
      rounds.push_back({text(*t, "lock"), owner, sent_of(*t), t_us(*t), 0, 0});
      it = open.insert_or_assign(owner, rounds.size() - 1).first;
    }
    round& rd = rounds[it->second];
    rd.last_reply = std::max(rd.last_reply, t_us(*t));
    ++rd.replies;
    if (number(*t, "reply", -1) == 1) ++rd.votes;
  }
  return rounds;
}

}  // namespace

TEST_CASE("thirdparty redlock: no acquisition on one server is read as a re-entry of another server's",
          "[thirdparty][redlock]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally separate{"acquired events with hold_count 1 (none reentered)"};
  for (const char* kind : {"acquired", "reentered"}) {
    for (const auto* e : r->find(kind, INT64_MIN, INT64_MAX))
      separate.add(std::string(kind) == "acquired" && number(*e, "hold_count", 1) == 1, brief(*e));
  }
  INFO(separate.report());
  CHECK(separate.hits == separate.total);
}

TEST_CASE("thirdparty redlock: every acquisition the client got on a server is reported on that server",
          "[thirdparty][redlock][done-when]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally per_server{"acquire script calls answered 1 reported as acquired on that server (lock, value)"};
  for (const auto* call : calls(*r, "acquire", 1)) per_server.add(reported(*r, "acquired", *call), brief(*call));
  INFO(per_server.report());
  CHECK(per_server.total >= 30);
  CHECK(per_server.percent() >= 98.0);
}

TEST_CASE("thirdparty redlock: extends and releases are recognised without the script text", "[thirdparty][redlock]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally extended{"extend calls answered 1 reported as renewed"};
  for (const auto* call : calls(*r, "extend", 1)) extended.add(reported(*r, "renewed", *call), brief(*call));
  tally released{"release calls answered 1 reported as released"};
  for (const auto* call : calls(*r, "release", 1)) released.add(reported(*r, "released", *call), brief(*call));
  INFO(extended.report() << "\n" << released.report());
  CHECK(extended.total >= 10);
  CHECK(extended.percent() >= 95.0);
  CHECK(released.total >= 10);
  CHECK(released.percent() >= 95.0);
}

TEST_CASE("thirdparty redlock: acquires are told from extends by how values flow (failed ones are contended, none a renewal)",
          "[thirdparty][redlock][recognize]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally failed{"acquire calls answered 0 reported as contended"};
  for (const auto* call : calls(*r, "acquire", 0)) failed.add(reported(*r, "contended", *call), brief(*call));
  tally misread{"acquire calls NOT reported as a renewal (renewed/renew_failed)"};
  for (int reply : {0, 1}) {
    for (const auto* call : calls(*r, "acquire", reply))
      misread.add(!reported(*r, "renewed", *call) && !reported(*r, "renew_failed", *call), brief(*call));
  }
  INFO(failed.report() << "\n" << misread.report());
  CHECK(failed.total >= 30);
  CHECK(failed.percent() >= 95.0);
  CHECK(misread.hits == misread.total);
}

TEST_CASE("thirdparty redlock: every attempt that won a server has a quorum event with servers 3, acquired_on, needed 2",
          "[thirdparty][redlock][quorum][done-when]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally grouped{"Redlock attempts with >= 1 vote reported as a quorum event (servers 3, acquired_on = votes, needed 2)"};
  std::size_t split = 0;
  for (const round& rd : acquire_rounds(*r)) {
    if (rd.votes == 0 || rd.replies != 3) continue;
    if (rd.votes < 3) ++split;
    const auto found = r->find("quorum", rd.first_sent - tolerance, rd.last_reply + 100 * ms, [&](const json::object& e) {
      return text(e, "lock") == rd.lock && text(e, "owner") == rd.owner && count_of(e, "servers") == 3 &&
             count_of(e, "acquired_on") == rd.votes && number(e, "needed") == 2;
    });
    grouped.add(!found.empty(), rd.lock + " value " + rd.owner + ": " + std::to_string(rd.votes) + " of 3 votes at t_us " +
                                    std::to_string(rd.first_sent));
  }
  INFO(grouped.report() << "\n(attempts with split votes, 1 or 2 of 3: " << split << ")");
  CHECK(grouped.total >= 15);
  CHECK(split >= 1);
  CHECK(grouped.hits == grouped.total);
}

TEST_CASE("thirdparty redlock: a holder whose lease ran out while it still acted as the holder is quorum_lost",
          "[thirdparty][redlock][quorum]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  tally lost{"holders that stalled past their lease and then extended/released, flagged quorum_lost"};
  for (const auto* t : r->truth_of("extend_failed", r->start_us + 1500 * ms, r->stop_us - 100 * ms)) {
    if (!flag(*t, "stalled")) continue;
    const auto found = r->find("anomaly", t_us(*t) - 1500 * ms, t_us(*t) + 3000 * ms, [&](const json::object& e) {
      return text(e, "kind") == "quorum_lost" && text(e, "owner") == text(*t, "owner");
    });
    lost.add(!found.empty(), brief(*t));
  }
  INFO(lost.report());
  CHECK(lost.total >= 1);
  CHECK(lost.hits == lost.total);
}

TEST_CASE("thirdparty redlock: no split_quorum (Redlock never let two values hold a majority), and every "
          "unlock_by_non_owner is a release a server really refused",
          "[thirdparty][redlock][quorum]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  const auto refused = calls(*r, "release", 0);
  tally no_false{"split_quorum / unlock_by_non_owner anomalies matching a release the server answered 0"};
  for (const auto* e : r->find("anomaly", r->start_us + 20 * ms, r->stop_us - 20 * ms)) {
    const std::string kind = text(*e, "kind");
    if (kind != "split_quorum" && kind != "unlock_by_non_owner") continue;
    const bool real = kind == "unlock_by_non_owner" && std::any_of(refused.begin(), refused.end(), [&](const json::object* call) {
                        return text(*call, "server") == text(*e, "server") && text(*call, "owner") == text(*e, "owner") &&
                               r->time_of(*e) >= sent_of(*call) - tolerance && r->time_of(*e) <= t_us(*call) + tolerance;
                      });
    no_false.add(real, brief(*e));
  }
  INFO(no_false.report());
  CHECK(no_false.hits == no_false.total);
}

}  // namespace lockscope::thirdparty_test

namespace lockscope::thirdparty_test {

TEST_CASE("thirdparty redlock: the lock sitting free while a retrying waiter sleeps is idle_with_waiters",
          "[thirdparty][redlock][lost_wakeup]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  const tally flagged = idle_gaps_flagged(*r, 80 * ms);
  INFO(flagged.report());
  CHECK(flagged.total >= 2);
  CHECK(flagged.hits == flagged.total);
}

}  // namespace lockscope::thirdparty_test
