// redis-py 4.3 (Debian's python3-redis), RESP2: the seed's 004 anti-pattern (plain DEL
// releases, captures/thirdparty/del_other.*) and redis.lock.Lock pollers over IPv6
// recorded with `tcpdump -i any` (LINUX_SLL2, captures/thirdparty/pylock.*), compared
// with the scripts' own truth logs.
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "truth.hpp"

namespace lockscope::thirdparty_test {
namespace {

constexpr std::int64_t idle_threshold = 50 * ms;  // lockscope analyze's default --idle-threshold
constexpr std::int64_t idle_margin = 30 * ms;     // gaps this close to the threshold are not asserted

// Every truth `truth_event` in the capture reported as `event` (same lock and owner).
tally found_all(const recording& r, std::string_view truth_event, std::string_view event) {
  tally t(std::string(truth_event) + " (client) reported as " + std::string(event));
  for (const auto* line : r.truth_of(truth_event, r.start_us, r.stop_us)) t.add(matching(r, event, *line) != nullptr, brief(*line));
  return t;
}

// Contended acquisitions whose analyzer event carries wait_ms within 10 ms of the client's.
tally waits_match(const recording& r) {
  tally t("contended acquisitions with wait_ms within 10 ms of the client's own wait");
  for (const auto* a : r.truth_of("acquired", r.start_us, r.stop_us)) {
    if (!flag(*a, "contended")) continue;
    if (t_us(*a) - static_cast<std::int64_t>(number(*a, "waited_ms") * 1000) < r.start_us) continue;
    const json::object* e = matching(r, "acquired", *a);
    const double measured = e == nullptr ? -1 : number(*e, "wait_ms", -1);
    t.add(measured >= 0 && std::abs(measured - number(*a, "waited_ms")) <= 10.0,
          "client waited " + std::to_string(number(*a, "waited_ms")) + " ms, analyzer " +
              (e == nullptr ? std::string("no acquisition") : "wait_ms " + std::to_string(measured)) + ": " + brief(*a));
  }
  return t;
}

}  // namespace

TEST_CASE("thirdparty del_other: the plain SET NX PX / DEL client's acquisitions, releases and waits",
          "[thirdparty][del_other]") {
  const recording* r = load("del_other");
  if (r == nullptr) return;
  const tally acquired = found_all(*r, "acquired", "acquired");
  // A DEL ends the hold of whoever held the key then (deleted_owner), whoever sent it.
  tally released{"DELs reported as the release of the hold they ended (lock, deleted_owner)"};
  for (const auto* d : r->truth_of("released")) {
    const auto found = r->find("released", sent_of(*d) - tolerance, t_us(*d) + tolerance, [&](const json::object& e) {
      return text(e, "lock") == text(*d, "lock") && text(e, "owner") == text(*d, "deleted_owner");
    });
    released.add(!found.empty(), brief(*d));
  }
  const tally waits = waits_match(*r);
  INFO(acquired.report() << "\n" << released.report() << "\n" << waits.report());
  CHECK(acquired.total == 5);
  CHECK(released.total == 4);
  CHECK(acquired.hits == acquired.total);
  CHECK(released.hits == released.total);
  CHECK(waits.total == 2);
  CHECK(waits.hits == waits.total);
}

TEST_CASE("thirdparty del_other: a DEL from a connection whose lease ran out is released_other_owner, a right owner's "
          "plain DEL is unchecked_release once per lock",
          "[thirdparty][del_other][anomaly]") {
  const recording* r = load("del_other");
  if (r == nullptr) return;
  tally other{"DELs that removed another owner's lock, flagged released_other_owner"};
  std::set<std::string> plain_del_locks;
  for (const auto* d : r->truth_of("released")) {
    if (flag(*d, "released_other_owner")) {
      other.add(!r->find("anomaly", sent_of(*d) - tolerance, t_us(*d) + 50 * ms, [&](const json::object& e) {
                   return text(e, "lock") == text(*d, "lock") && text(e, "kind") == "released_other_owner";
                 }).empty(),
                brief(*d));
    } else {
      plain_del_locks.insert(text(*d, "lock"));
    }
  }
  tally unchecked{"locks released with a plain DEL by the right owner, flagged unchecked_release exactly once"};
  for (const std::string& lock : plain_del_locks) {
    const auto found = r->find("anomaly", INT64_MIN, INT64_MAX,
                               [&](const json::object& e) { return text(e, "lock") == lock && text(e, "kind") == "unchecked_release"; });
    unchecked.add(found.size() == 1, lock + ": " + std::to_string(found.size()) + " unchecked_release anomalies");
  }
  INFO(other.report() << "\n" << unchecked.report());
  CHECK(other.total == 1);
  CHECK(other.hits == other.total);
  CHECK(unchecked.total == 2);
  CHECK(unchecked.hits == unchecked.total);
}

TEST_CASE("thirdparty del_other: a DEL by the lock's own holder is never released_other_owner", "[thirdparty][del_other][anomaly]") {
  const recording* r = load("del_other");
  if (r == nullptr) return;
  tally not_other{"DELs by the right owner NOT flagged released_other_owner"};
  for (const auto* d : r->truth_of("released")) {
    if (flag(*d, "released_other_owner")) continue;
    not_other.add(r->find("anomaly", sent_of(*d) - tolerance, t_us(*d) + 50 * ms, [&](const json::object& e) {
                     return text(e, "lock") == text(*d, "lock") && text(e, "kind") == "released_other_owner";
                   }).empty(),
                  brief(*d));
  }
  INFO(not_other.report());
  CHECK(not_other.total == 3);
  CHECK(not_other.hits == not_other.total);
}

TEST_CASE("thirdparty del_other: the lock sitting free while a poller sleeps is idle_with_waiters",
          "[thirdparty][del_other][lost_wakeup]") {
  const recording* r = load("del_other");
  if (r == nullptr) return;
  const tally flagged = idle_gaps_flagged(*r, idle_threshold + idle_margin);
  INFO(flagged.report());
  CHECK(flagged.total == 2);
  CHECK(flagged.hits == flagged.total);
}

TEST_CASE("thirdparty pylock: redis-py Lock over IPv6 (SLL2): acquisitions, releases, extends and failed attempts",
          "[thirdparty][pylock]") {
  const recording* r = load("pylock");
  if (r == nullptr) return;
  const tally acquired = found_all(*r, "acquired", "acquired");
  const tally released = found_all(*r, "released", "released");
  const tally extended = found_all(*r, "extended", "renewed");
  const tally failed = found_all(*r, "attempt_failed", "contended");
  const tally refused = found_all(*r, "release_failed", "unlock_rejected");
  INFO(acquired.report() << "\n" << released.report() << "\n" << extended.report() << "\n" << failed.report() << "\n"
                         << refused.report());
  CHECK(acquired.total >= 15);
  CHECK(acquired.hits == acquired.total);
  CHECK(released.hits == released.total);
  CHECK(extended.hits == extended.total);
  CHECK(failed.percent() >= 95.0);
  CHECK(refused.hits == refused.total);
}

TEST_CASE("thirdparty pylock: contended acquisitions carry the client's wait_ms", "[thirdparty][pylock][wait]") {
  const recording* r = load("pylock");
  if (r == nullptr) return;
  const tally waits = waits_match(*r);
  INFO(waits.report());
  CHECK(waits.total >= 5);
  CHECK(waits.percent() >= 95.0);
}

TEST_CASE("thirdparty pylock: the summary's contended share and waits per lock match the clients'",
          "[thirdparty][pylock][wait][summary]") {
  const recording* r = load("pylock");
  if (r == nullptr) return;
  const tally rows = summary_matches(*r);
  INFO(rows.report());
  CHECK(rows.total == 2);
  CHECK(rows.hits == rows.total);
}

TEST_CASE("thirdparty pylock: the lock sitting free while pollers sleep is idle_with_waiters",
          "[thirdparty][pylock][lost_wakeup]") {
  const recording* r = load("pylock");
  if (r == nullptr) return;
  const tally flagged = idle_gaps_flagged(*r, idle_threshold + idle_margin);
  INFO(flagged.report());
  CHECK(flagged.total >= 1);
  CHECK(flagged.hits == flagged.total);
}

}  // namespace lockscope::thirdparty_test
