#include "lockscope/locks/anomaly_text.hpp"

#include <iterator>

#include <fmt/format.h>

namespace lockscope::locks {

namespace {

// A duration in milliseconds with one decimal, truncated ("12.3 ms").
void append_ms_tenths(std::string& out, std::int64_t us) {
  out += std::to_string(us / 1000) + ".";
  out += static_cast<char>('0' + (us % 1000) / 100);
  out += " ms";
}

}  // namespace

void append_anomaly_detail(std::string& out, const lock_event& e) {
  const anomaly_facts& f = e.found;
  const auto put = std::back_inserter(out);
  switch (f.finding) {
    case anomaly_finding::none: return;
    case anomaly_finding::held_too_long: fmt::format_to(put, "held longer than {} ms", f.duration_us / 1000); return;
    case anomaly_finding::idle_while_subscribed_waiter_waits:
      out += "free so far while a subscribed waiter waits (missed wake-up?)";
      return;
    // A poller (no pub/sub: redis-py, RedLock, spin locks) misses nothing: it slept
    // longer than the lock stayed free.
    case anomaly_finding::idle_while_poller_slept: out += "free while a polling waiter slept between its attempts"; return;
    case anomaly_finding::idle_while_subscribed_waiter_waited:
      out += "free while a subscribed waiter waited (missed wake-up)";
      return;
    case anomaly_finding::idle_while_unsubscribed_waiter_waited:
      out += "free while an unsubscribed waiter waited (missed wake-up)";
      return;
    case anomaly_finding::idle_while_this_waiter_waited: out += "free while this waiter waited (missed wake-up)"; return;
    case anomaly_finding::idle_while_this_poller_slept:
      out += "free while this polling waiter slept between its attempts";
      return;
    case anomaly_finding::unsubscribed_before_release:
      out += "its subscriber unsubscribed ";
      append_ms_tenths(out, f.duration_us);
      out += " before the release while it still waited: nobody told it";
      return;
    case anomaly_finding::not_subscribed_at_release:
      out += "not subscribed when the lock was released: nobody told it";
      return;
    case anomaly_finding::retried_without_notification:
      out += "retried with no notification since the previous attempt";
      return;
    case anomaly_finding::acquired_while_held:
    case anomaly_finding::acquired_while_held_db_guessed:
      fmt::format_to(put, "acquired while {} still held it", f.other_owner);
      // Mid-stream, a connection's SELECT may be before the capture: the same key in two
      // databases would read as one lock held twice.
      if (f.finding == anomaly_finding::acquired_while_held_db_guessed) {
        out += " (a connection's database was not seen, so counted as db 0: if the two use different "
               "databases, these are two locks)";
      }
      return;
    case anomaly_finding::renewal_refused_key_lost:
    case anomaly_finding::unlock_refused_key_lost:
      fmt::format_to(put, "{} refused {} ms before the lease would run out: the key was lost (deleted, evicted, "
          "or a restart or failover without it)",
          f.finding == anomaly_finding::renewal_refused_key_lost ? "renewal" : "unlock", f.duration_us / 1000);
      return;
    case anomaly_finding::renewal_refused_lease_over: out += "renewal refused: the lease had already run out"; return;
    case anomaly_finding::unlock_refused_lease_over: out += "unlock refused: the lease had already run out"; return;
    case anomaly_finding::unlock_by_non_holder: out += "unlock by an owner that does not hold the lock"; return;
    case anomaly_finding::unlock_of_free_lock: out += "unlock of a lock nobody holds"; return;
    case anomaly_finding::renewed_late:
      fmt::format_to(put, "renewed {} ms after the previous renewal (expected every {} ms)", f.duration_us / 1000, f.expected_ms);
      return;
    case anomaly_finding::setnx_expiry_not_atomic: out += "SETNX: the expiry is not set atomically with the lock"; return;
    case anomaly_finding::del_removed_other_owner:
      fmt::format_to(put, "DEL from {}'s connection removed {}'s lock", e.owner, f.other_owner);
      return;
    case anomaly_finding::released_by_plain_del: out += "released by a plain DEL, which does not check the owner"; return;
    case anomaly_finding::holds_below_quorum:
      fmt::format_to(put, "holds {}/{} servers (quorum {}) after {} ran out or refused a renewal, yet still acts as the holder",
          f.quorum.held, f.quorum.total, f.quorum.needed, f.quorum.lost);
      return;
    case anomaly_finding::two_quorums_held:
      fmt::format_to(put, "{} holds {}/{} servers while {} holds {}/{} (quorum {})", e.owner, f.quorum.held, f.quorum.total,
          f.other_owner, f.quorum.other_held, f.quorum.other_total, f.quorum.needed);
      return;
    // Said as what is known: a pool may take the lock on one connection and renew or
    // release it on another, so the holder's process may well live on.
    case anomaly_finding::connection_closed_while_holding:
      out += "the connection that took the lock closed while holding it: ";
      if (f.duration_us >= 0) {
        out += "it stays held until the lease runs out in ";
        append_ms_tenths(out, f.duration_us);
        out += " unless renewed or released from another connection";
      } else {
        out += "it has no lease and stays held until released or deleted from another connection";
      }
      return;
    // A semaphore whose holders seen hold more permits than it has.
    case anomaly_finding::permits_over_limit:
      fmt::format_to(put, "{} permits held of a limit of {}", e.permits_in_use, e.permit_limit);
      return;
  }
}

}  // namespace lockscope::locks
