// node-redisson 1.0.4 (ioredis 6, RESP3): three processes on one host, two lock owners
// each, joined mid-run (EVALSHA of scripts the capture never saw), compared with the
// clients' own log (captures/thirdparty/redisson.truth.jsonl). Issue 10's Done-when.
#include <algorithm>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "truth.hpp"

namespace lockscope::thirdparty_test {
namespace {

// sub_conn / conn "ip:port" -> the process's executor uuid (its owners are "<uuid>:<n>").
std::map<std::string, std::string> executor_by_connection(const recording& r) {
  std::map<std::string, std::string> out;
  for (const auto* c : r.truth_of("connections")) {
    out[text(*c, "sub_conn")] = text(*c, "executor_id");
    out[text(*c, "conn")] = text(*c, "executor_id");
  }
  return out;
}

// The analyzer's event for a client call logged as `t`: same lock and owner, on the wire
// between the client's send and its log line.
}  // namespace

TEST_CASE("thirdparty redisson: every acquisition and release the clients made is in the timeline",
          "[thirdparty][redisson]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  tally acquired{"node-redisson acquisitions found (lock, owner, time, the process's command connection)"};
  for (const auto* t : r->truth_of("acquired", r->start_us, r->stop_us)) {
    const json::object* e = matching(*r, "acquired", *t);
    acquired.add(e != nullptr && text(*e, "client") == text(*t, "conn") && text(*e, "server") == text(*t, "server"), brief(*t));
  }
  tally released{"node-redisson releases found"};
  for (const auto* t : r->truth_of("released", r->start_us, r->stop_us))
    released.add(matching(*r, "released", *t) != nullptr, brief(*t));
  INFO(acquired.report() << "\n" << released.report());
  CHECK(acquired.total >= 50);
  CHECK(acquired.percent() >= 98.0);
  CHECK(released.percent() >= 98.0);
}

TEST_CASE("thirdparty redisson: >= 95% of acquisitions after a failed attempt carry wait_ms, within 10 ms of the client's",
          "[thirdparty][redisson][wait][done-when]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  tally carried{"acquisitions that followed a failed attempt and carry wait_ms"};
  tally close{"of those, wait_ms within 10 ms of the client's own wait"};
  std::vector<double> truth_waits;
  for (const auto* t : r->truth_of("acquired", r->start_us, r->stop_us)) {
    if (!flag(*t, "contended")) continue;
    const double waited = number(*t, "waited_ms");
    // Only waits whose first failed attempt is inside the capture can be measured from it.
    if (t_us(*t) - static_cast<std::int64_t>(waited * 1000) < r->start_us + 20 * ms) continue;
    truth_waits.push_back(waited);
    const json::object* e = matching(*r, "acquired", *t);
    const bool has_wait = e != nullptr && has(*e, "wait_ms");
    carried.add(has_wait, (e == nullptr ? "not found: " : "no wait_ms: ") + brief(*t));
    if (has_wait) {
      const double measured = number(*e, "wait_ms");
      close.add(std::abs(measured - waited) <= 10.0,
                "client waited " + std::to_string(waited) + " ms, analyzer wait_ms " + std::to_string(measured) + ": " + brief(*e));
    }
  }
  std::sort(truth_waits.begin(), truth_waits.end());
  INFO(carried.report() << "\n" << close.report() << "\n(client's waits: " << truth_waits.size() << ", p50 "
                        << (truth_waits.empty() ? 0 : truth_waits[truth_waits.size() / 2]) << " ms, max "
                        << (truth_waits.empty() ? 0 : truth_waits.back()) << " ms)");
  CHECK(carried.total >= 30);
  CHECK(carried.percent() >= 95.0);
  CHECK(close.percent() >= 95.0);
}

TEST_CASE("thirdparty redisson: >= 98% of subscriber events name an owner of the process whose connection it is, "
          "no wrong one says high or certain",
          "[thirdparty][redisson][subscriber][done-when]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  const auto executors = executor_by_connection(*r);
  // UNSUBSCRIBEs the client sent for a channel it was not subscribed to are not events at
  // all. node-redisson may send two back to back, the first of which leaves the channel:
  // an unsubscribed event is spurious when client UNSUBSCRIBEs (same connection and
  // channel) were in flight at its time and none of them was subscribed.
  auto not_subscribed = [&](const json::object& e) {
    if (text(e, "event") != "unsubscribed") return false;
    bool in_flight = false;
    for (const auto* t : r->truth_of("unsubscribed", r->time_of(e) - 50 * ms, r->time_of(e) + 50 * ms)) {
      if (text(*t, "sub_conn") != text(e, "client") || text(*t, "lock") != text(e, "lock")) continue;
      const std::int64_t sent = static_cast<std::int64_t>(number(*t, "sent_us"));
      if (r->time_of(e) < sent - 5 * ms || r->time_of(e) > t_us(*t) + 5 * ms) continue;
      if (flag(*t, "was_subscribed")) return false;
      in_flight = true;
    }
    return in_flight;
  };
  tally right{"subscriber events (subscribed/notified/unsubscribed) naming an owner of the connection's process"};
  tally confident_wrong{"wrong subscriber events that say high or certain"};
  for (const char* kind : {"subscribed", "notified", "unsubscribed"}) {
    for (const auto* e : r->find(kind, r->start_us, r->stop_us)) {
      const auto it = executors.find(text(*e, "client"));
      const std::string owner = text(*e, "owner");
      const bool spurious = not_subscribed(*e);
      const bool ok = it != executors.end() && !owner.empty() && owner.rfind(it->second + ":", 0) == 0 && !spurious;
      const std::string why = it == executors.end() ? "not a client's connection"
                              : spurious            ? "UNSUBSCRIBE of a channel not subscribed"
                              : owner.empty()       ? "no owner"
                                                    : "owner of another process";
      right.add(ok, why + ": " + brief(*e));
      if (!ok) {
        const std::string confidence = text(*e, "confidence");
        confident_wrong.add(confidence == "high" || confidence == "certain", brief(*e));
      }
    }
  }
  INFO(right.report() << "\n" << confident_wrong.what << ": " << confident_wrong.hits << " of " << confident_wrong.total);
  CHECK(right.total >= 100);
  CHECK(right.percent() >= 98.0);
  CHECK(confident_wrong.hits == 0);
}

TEST_CASE("thirdparty redisson: every wait the client saw end by its timer while the lock was released is flagged",
          "[thirdparty][redisson][lost_wakeup][done-when]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  static const std::set<std::string> flags{"idle_with_waiters", "woken_by_timeout", "subscription_lost"};
  tally flagged{"lost wake-ups (woken by the timer though the lock was released meanwhile) flagged"};
  std::size_t timer_wakes = 0, withheld = 0;
  for (const auto* w : r->truth_of("woken", r->start_us, r->stop_us)) {
    if (text(*w, "by") != "timer") continue;
    ++timer_wakes;
    const std::int64_t slept_from = t_us(*w) - static_cast<std::int64_t>(number(*w, "slept_ms") * 1000);
    if (slept_from < r->start_us) continue;
    std::int64_t first_release = -1;
    for (const auto* rel : r->truth_of("released", slept_from, t_us(*w))) {
      if (text(*rel, "lock") == text(*w, "lock")) {
        first_release = t_us(*rel);
        break;
      }
    }
    if (first_release < 0) continue;  // the lock was held all along: the timer was right
    const auto anomalies = r->find("anomaly", first_release - 20 * ms, t_us(*w) + 500 * ms, [&](const json::object& e) {
      return text(e, "lock") == text(*w, "lock") && flags.count(text(e, "kind")) > 0;
    });
    // A lost wake-up is raised only when the waiter's subscriber is linked to it for
    // certain (docs/reference/anomalies.md#subscriber-links): withheld while every event
    // on that subscriber so far was a guess (the capture joined mid-run: no SYN, no name).
    const auto certain = r->find("subscribed", r->start_us, t_us(*w), [&](const json::object& e) {
      return text(e, "client") == text(*w, "sub_conn") && text(e, "lock") == text(*w, "lock") &&
             text(e, "confidence") == "certain";
    });
    if (anomalies.empty() && certain.empty()) {
      ++withheld;
      continue;
    }
    flagged.add(!anomalies.empty(), "released " + std::to_string((t_us(*w) - first_release) / 1000) +
                                        " ms before the timer woke it: " + brief(*w));
  }
  INFO(flagged.report() << "\n(timer wake-ups in the capture: " << timer_wakes << "; withheld, on a guessed link: "
                        << withheld << ")");
  CHECK(flagged.total >= 3);
  CHECK(flagged.hits == flagged.total);
  CHECK(withheld <= 1);
}

TEST_CASE("thirdparty redisson: the summary's contended share and waits per lock match the clients'",
          "[thirdparty][redisson][wait][summary]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  const tally rows = summary_matches(*r);
  INFO(rows.report());
  CHECK(rows.total == 3);
  CHECK(rows.hits == rows.total);
}

}  // namespace lockscope::thirdparty_test
