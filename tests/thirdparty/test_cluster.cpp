// redis-py 4.3's RedisCluster (Debian's python3-redis) running Redisson's scripts on a
// real 3-master Redis Cluster resharded live (captures/thirdparty/cluster.*, and the same
// run captured mid-stream, cluster_midstream.*): the analyzer's timeline compared with
// the clients' own truth logs (holds, releases, failed attempts, shard subscriptions,
// smessage wake-ups, the channel dropped by a slot move) and its redirect events with
// tshark's decode of the MOVED/ASK/TRYAGAIN replies.
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include "truth.hpp"

namespace lockscope::thirdparty_test {
namespace {

// Truth lines whose request the capture holds (sent after it started).
std::vector<const json::object*> captured(const recording& r, std::string_view event) {
  std::vector<const json::object*> out;
  for (const auto* t : r.truth_of(event, r.start_us, r.stop_us)) {
    if (sent_of(*t) >= r.start_us + tolerance) out.push_back(t);
  }
  return out;
}

// Every captured truth `truth_event` reported as `event` on the same lock (and owner,
// unless `any_owner`) between its request and its logging.
tally found_all_of(const recording& r, std::string_view truth_event, std::string_view event, bool any_owner = false) {
  tally t(std::string(truth_event) + " (client) reported as " + std::string(event));
  for (const auto* line : captured(r, truth_event)) {
    const auto found = r.find(event, sent_of(*line) - tolerance, t_us(*line) + tolerance, [&](const json::object& e) {
      return text(e, "lock") == text(*line, "lock") && (any_owner || text(e, "owner") == text(*line, "owner"));
    });
    t.add(!found.empty(), brief(*line));
  }
  return t;
}

std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

}  // namespace

TEST_CASE("thirdparty cluster: holds, releases and failed attempts over a live resharding match the clients'",
          "[thirdparty][cluster]") {
  for (const char* name : {"cluster", "cluster_midstream"}) {
    const recording* r = load(name);
    if (r == nullptr) return;
    INFO(name);
    const tally acquired = found_all_of(*r, "acquired", "acquired");
    const tally released = found_all_of(*r, "released", "released");
    const tally failed = found_all_of(*r, "attempt_failed", "contended");
    INFO(acquired.report() << "\n" << released.report() << "\n" << failed.report());
    CHECK(acquired.total >= (std::string(name) == "cluster" ? 30u : 20u));
    CHECK(acquired.hits == acquired.total);
    CHECK(released.hits == released.total);
    CHECK(failed.total >= 20);
    CHECK(failed.percent() >= 95.0);
    // The clients never held a lock together (the servers decided), and neither does the
    // timeline: a lock that moved between masters is not two locks held at once.
    CHECK(r->find("anomaly", INT64_MIN, INT64_MAX, [](const json::object& e) {
             return text(e, "kind") == "overlapping_holders";
           }).empty());
    // Nor did a lease run out: every hold ended by its owner's unlock, wherever it went.
    CHECK(r->find("expired", INT64_MIN, INT64_MAX).empty());
    // The migrated lock is one lock: one summary row.
    std::size_t orders_rows = 0;
    for (const auto& [lock, row] : summary_of(name)) orders_rows += lock.rfind("orders", 0) == 0;
    CHECK(orders_rows == 1);
  }
}

TEST_CASE("thirdparty cluster: shard subscriptions, smessage wake-ups and the channel a slot move dropped",
          "[thirdparty][cluster][pubsub]") {
  for (const char* name : {"cluster", "cluster_midstream"}) {
    const recording* r = load(name);
    if (r == nullptr) return;
    INFO(name);
    const tally subscribed = found_all_of(*r, "subscribed", "subscribed", true);
    // A wake-up: the smessage on the waiter's subscriber connection, which the client
    // reads when it gets to it (up to ~100 ms later on a loaded machine); each message
    // wakes one waiter, and a message the analyzer links to a waiter for certain names that one.
    tally woken{"woken (client) reported as notified (one each; the same owner when linked for certain)"};
    std::set<const json::object*> used;
    for (const auto* line : captured(*r, "woken")) {
      // The event naming this owner first; else one not linked for certain (no owner,
      // or a `high`/`low` guess among waiters of one host: README, linking).
      auto notified = [&](bool unlinked) {
        return r->find("notified", t_us(*line) - 100 * ms, t_us(*line) + tolerance, [&](const json::object& e) {
          return text(e, "lock") == text(*line, "lock") && !used.contains(&e) &&
                 (unlinked ? text(e, "owner").empty() || text(e, "confidence") != "certain"
                           : text(e, "owner") == text(*line, "owner"));
        });
      };
      auto found = notified(false);
      if (found.empty()) found = notified(true);
      if (!found.empty()) used.insert(found.back());
      woken.add(!found.empty(), brief(*line));
    }
    const tally dropped = found_all_of(*r, "channel_dropped", "unsubscribed", true);
    INFO(subscribed.report() << "\n" << woken.report() << "\n" << dropped.report());
    CHECK(subscribed.total >= 10);
    CHECK(subscribed.hits == subscribed.total);
    CHECK(woken.total >= 10);
    CHECK(woken.hits == woken.total);
    CHECK(dropped.total >= 1);
    CHECK(dropped.hits == dropped.total);
  }
}

TEST_CASE("thirdparty cluster: each redirected event is a MOVED/ASK/TRYAGAIN reply tshark decodes, with its slot and node",
          "[thirdparty][cluster][redirect][tshark]") {
  const recording* r = load("cluster");
  if (r == nullptr) return;
  if (shell_output("command -v tshark").empty()) {
    WARN("tshark is not installed: cross-check skipped");
    return;
  }
  std::string decode_as;
  for (const auto& s : r->header.at("servers").as_array()) {
    const std::string server(s.as_string());
    decode_as += " -d tcp.port==" + server.substr(server.rfind(':') + 1) + ",resp";
  }
  const std::string out = shell_output("tshark -r " + std::string(LOCKSCOPE_SOURCE_DIR) + "/captures/thirdparty/cluster.pcap" +
                                       decode_as + " -Y resp.error -T fields -e frame.time_epoch -e tcp.srcport -e resp.error 2>/dev/null");
  // tshark: (reply time µs, server port) → error text.
  std::map<std::pair<std::int64_t, std::string>, std::string> theirs;
  std::map<std::string, std::size_t> their_kinds;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string time, port, error;
    std::getline(fields, time, '\t');
    std::getline(fields, port, '\t');
    std::getline(fields, error);
    const std::string kind = error.substr(0, error.find(' '));
    if (kind != "MOVED" && kind != "ASK" && kind != "TRYAGAIN") continue;
    const std::int64_t us = std::llround(std::stod(time) * 1e6);
    theirs[{us, port}] = error;
    ++their_kinds[kind];
  }
  tally matched{"redirected events matching a tshark-decoded reply (time, node, kind, slot, target)"};
  std::map<std::string, std::size_t> our_kinds;
  for (const auto* e : r->find("redirected", INT64_MIN, INT64_MAX)) {
    const std::int64_t us = r->time_of(*e) + r->offset_us;
    const std::string server = text(*e, "server");
    const std::string kind = text(*e, "redirect");
    ++our_kinds[kind];
    auto it = theirs.find({us, server.substr(server.rfind(':') + 1)});
    std::string expected = kind == "moved" ? "MOVED " : kind == "ask" ? "ASK " : "TRYAGAIN";
    if (kind == "moved" || kind == "ask") expected += text(*e, "slot") + " " + text(*e, "to");
    matched.add(it != theirs.end() && it->second.rfind(expected, 0) == 0,
                brief(*e) + " / tshark: " + (it == theirs.end() ? std::string("no error reply then") : it->second));
  }
  INFO(matched.report());
  CHECK(matched.hits == matched.total);
  // All of tshark's, but for replies to the client's DEL of a latch key (not a lock call).
  for (const auto& [kind, lower] : std::map<std::string, std::string>{{"MOVED", "moved"}, {"ASK", "ask"}, {"TRYAGAIN", "tryagain"}}) {
    INFO(kind << ": tshark " << their_kinds[kind] << ", analyzer " << our_kinds[lower]);
    CHECK(our_kinds[lower] >= 1);
    CHECK(our_kinds[lower] <= their_kinds[kind]);
    CHECK(our_kinds[lower] * 10 >= their_kinds[kind] * 9);
  }
  // A redirected call is retried on the node named: the owner's next attempt on the lock
  // went there (and the client's own log says that is where the lock's slot lived).
  tally retried{"MOVED/ASK'd calls whose owner's next call on the lock went to the node named"};
  for (const auto* e : r->find("redirected", INT64_MIN, INT64_MAX)) {
    if (text(*e, "to").empty()) continue;
    // Unless that reply was the last RedisCluster allowed the call ("TTL exhausted" in
    // the client's log at once): then the client's next call starts over at the slot's owner.
    bool gave_up = false;
    for (std::string_view retry : {"unlock_retry", "acquire_retry"}) {
      for (const auto* t : r->truth_of(retry, r->time_of(*e), r->time_of(*e) + 10 * ms)) {
        gave_up = gave_up || text(*t, "owner") == text(*e, "owner");
      }
    }
    if (gave_up) continue;
    const std::string op = text(*e, "operation");
    const auto next = r->find("", r->time_of(*e) + 1, r->time_of(*e) + 2000 * ms, [&](const json::object& n) {
      const std::string ev = text(n, "event");
      const bool same_call = op == "acquire" ? (ev == "acquired" || ev == "contended" || ev == "redirected")
                                             : (ev == "released" || ev == "redirected" || ev == "unlock_rejected");
      return same_call && text(n, "lock") == text(*e, "lock") && text(n, "owner") == text(*e, "owner");
    });
    retried.add(!next.empty() && text(*next.front(), "server") == text(*e, "to"), brief(*e));
  }
  INFO(retried.report());
  CHECK(retried.total >= 10);
  CHECK(retried.hits == retried.total);
  CHECK_FALSE(r->find("redirected", INT64_MIN, INT64_MAX, [](const json::object& e) {
                 return text(e, "redirect") == "moved" && text(e, "operation") == "acquire";
               }).empty());
  // An ASK's retry on the importing node is marked.
  CHECK_FALSE(r->find("", INT64_MIN, INT64_MAX, [](const json::object& e) { return flag(e, "asking"); }).empty());
}

}  // namespace lockscope::thirdparty_test
