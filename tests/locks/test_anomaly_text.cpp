// Anomalies are data (lock_event::found); the outputs put them into words. Each finding
// renders to exactly the sentence the timeline and the lock groups wrote themselves
// before, literally: the text output and the HTML report show these bytes.
#include <string>

#include <catch2/catch.hpp>

#include "lockscope/locks/anomaly_text.hpp"

using namespace lockscope::locks;

namespace {

std::string sentence(const anomaly_facts& found, std::string_view owner = "A") {
  lock_event e;
  e.event = lock_event_kind::anomaly;
  e.owner = owner;
  e.found = found;
  std::string out;
  append_anomaly_detail(out, e);
  return out;
}

}  // namespace

TEST_CASE("an event without a finding has no sentence", "[anomaly_text]") {
  CHECK(sentence({}).empty());
  lock_event acquired;
  std::string out = "kept";
  append_anomaly_detail(out, acquired);
  CHECK(out == "kept");  // appends, never replaces
}

TEST_CASE("timeline findings render the sentences the timeline wrote", "[anomaly_text]") {
  using f = anomaly_finding;
  CHECK(sentence({f::held_too_long, 60'000'000}) == "held longer than 60000 ms");
  CHECK(sentence({f::held_too_long, 1'999}) == "held longer than 1 ms");
  CHECK(sentence({f::idle_while_subscribed_waiter_waits}) ==
        "free so far while a subscribed waiter waits (missed wake-up?)");
  CHECK(sentence({f::idle_while_poller_slept}) == "free while a polling waiter slept between its attempts");
  CHECK(sentence({f::idle_while_subscribed_waiter_waited}) ==
        "free while a subscribed waiter waited (missed wake-up)");
  CHECK(sentence({f::idle_while_unsubscribed_waiter_waited}) ==
        "free while an unsubscribed waiter waited (missed wake-up)");
  CHECK(sentence({f::idle_while_this_waiter_waited}) == "free while this waiter waited (missed wake-up)");
  CHECK(sentence({f::idle_while_this_poller_slept}) ==
        "free while this polling waiter slept between its attempts");
  CHECK(sentence({f::unsubscribed_before_release, 100'000}) ==
        "its subscriber unsubscribed 100.0 ms before the release while it still waited: nobody told it");
  CHECK(sentence({f::unsubscribed_before_release, 1'234'567}) ==
        "its subscriber unsubscribed 1234.5 ms before the release while it still waited: nobody told it");
  CHECK(sentence({f::unsubscribed_before_release, 99}) ==
        "its subscriber unsubscribed 0.0 ms before the release while it still waited: nobody told it");
  CHECK(sentence({f::not_subscribed_at_release}) ==
        "not subscribed when the lock was released: nobody told it");
  CHECK(sentence({f::retried_without_notification}) ==
        "retried with no notification since the previous attempt");
  CHECK(sentence({f::acquired_while_held, "B"}) == "acquired while B still held it");
  CHECK(sentence({f::acquired_while_held_db_guessed, "B"}) ==
        "acquired while B still held it (a connection's database was not seen, so counted as db 0: if the two use "
        "different databases, these are two locks)");
  CHECK(sentence({f::renewal_refused_key_lost, 20'999'999}) ==
        "renewal refused 20999 ms before the lease would run out: the key was lost (deleted, evicted, or a restart or "
        "failover without it)");
  CHECK(sentence({f::unlock_refused_key_lost, 5'000}) ==
        "unlock refused 5 ms before the lease would run out: the key was lost (deleted, evicted, or a restart or "
        "failover without it)");
  CHECK(sentence({f::renewal_refused_lease_over}) == "renewal refused: the lease had already run out");
  CHECK(sentence({f::unlock_refused_lease_over}) == "unlock refused: the lease had already run out");
  CHECK(sentence({f::unlock_by_non_holder}) == "unlock by an owner that does not hold the lock");
  CHECK(sentence({f::unlock_of_free_lock}) == "unlock of a lock nobody holds");
  CHECK(sentence({f::renewed_late, 25'400'000, 10'000}) ==
        "renewed 25400 ms after the previous renewal (expected every 10000 ms)");
  CHECK(sentence({f::setnx_expiry_not_atomic}) == "SETNX: the expiry is not set atomically with the lock");
  CHECK(sentence({f::del_removed_other_owner, "owner-2"}, "owner-1") ==
        "DEL from owner-1's connection removed owner-2's lock");
  CHECK(sentence({f::released_by_plain_del}) == "released by a plain DEL, which does not check the owner");
}

TEST_CASE("lock group findings render the sentences the lock groups wrote", "[anomaly_text]") {
  anomaly_facts lost{anomaly_finding::holds_below_quorum};
  lost.quorum.held = 1;
  lost.quorum.total = 3;
  lost.quorum.needed = 2;
  lost.quorum.lost = 2;
  CHECK(sentence(lost, "R1") ==
        "holds 1/3 servers (quorum 2) after 2 ran out or refused a renewal, yet still acts as the holder");
  anomaly_facts split{anomaly_finding::two_quorums_held, "B"};
  split.quorum.held = 3;
  split.quorum.total = 5;
  split.quorum.needed = 3;
  split.quorum.other_held = 3;
  split.quorum.other_total = 5;
  CHECK(sentence(split, "A") == "A holds 3/5 servers while B holds 3/5 (quorum 3)");
}
