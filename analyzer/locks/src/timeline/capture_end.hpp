// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The capture's end: every connection still open ends, one after the other at the same
// time, and each one's waiters leave (still waiting when the capture ended: no event).
// One by one, each connection's end walked every waiter of every lock it waited on: a
// storm's 1,000 locks with 30 waiters each from 20 connections, walked 20 times (6% of
// storm-h20's instructions). Together, the connections that end at one time with nothing
// between their ends leave in one pass per lock when the next call comes (or the
// capture's last end is followed by anything), with the same result.
// Only where nothing but the waiters' leaving could differ: no subscription anywhere
// (a waiter kept for its subscriber depends on which connections ended before it), no
// event held (settled per connection), no channel operation since the capture began to end.
// Inline, included by lock_timeline.cpp.
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// Called by connection_ended with the connection's waits (each lock once): true when the
// waiters will leave with those of the connections ending with it (they stay until then).
inline bool lock_timeline::impl::defer_capture_end_waits(std::uint32_t conn, std::int64_t at,
                                                        std::vector<std::uint32_t>& waits) {
  if (!capture_ending) return false;
  if (capture_end == capture_end_mode::undecided) {  // once: no connection's records change but by a channel operation
    bool quiet = true;
    for (const connection_info& c : connections) {
      quiet = quiet && c.subscriptions.empty();
      for (const auto& p : c.partners) quiet = quiet && p.episodes == 0;
    }
    capture_end = quiet ? capture_end_mode::together : capture_end_mode::one_by_one;
  }
  if (capture_end != capture_end_mode::together || !outgoing.empty() || !subscribers_by_client.empty() ||
      !subscriber_of_client.empty()) {
    leave_capture_end_waits();  // those deferred first, as they would have
    return false;
  }
  if (!ending_conns.empty() && at != ending_at_us) leave_capture_end_waits();
  ending_at_us = at;
  ending_conns.push_back(conn);
  ending_waits.insert(ending_waits.end(), waits.begin(), waits.end());
  return true;
}

// The deferred waiters leave, lock by lock in the order first listed.
inline void lock_timeline::impl::leave_capture_end_waits() {
  if (ending_conns.empty()) return;
  std::vector<std::uint32_t> conns = std::move(ending_conns);
  std::vector<std::uint32_t> waits = std::move(ending_waits);
  ending_conns.clear();
  ending_waits.clear();
  keep_first_listings(waits);
  // Connection indexes are dense: a flag each.
  std::vector<bool> ending(connections.size());
  for (const std::uint32_t conn : conns) ending[conn] = true;
  const auto ends = [&](std::uint32_t conn) { return conn < ending.size() && ending[conn]; };
  for (const std::uint32_t lock : waits) {
    lock_state& l = locks[lock];
    if (!has_extra(l)) continue;
    // The index by owner is let go rather than erased from once a waiter (each erase a
    // shift, and a rehash each time it halves: two thirds of this pass on the storm's
    // first 110 MB); find_waiter builds it again if the lock has waiters enough and a
    // lookup comes.
    lock_extra& x = *xp(l);
    x.waiter_index_valid = false;
    x.waiter_index = {};
    remove_waiters(x, [&](const waiter& w) { return ends(w.conn); },
                   [&](const waiter_vector::dormant& d) { return ends(d.conn); });
    release_closed_holder_if_done(l);
  }
}

// An operation while the capture ends (a command flushed unanswered): the waiters of the
// connections ended before it leave first. A channel operation may make subscriptions:
// the rest end one by one.
inline void lock_timeline::impl::capture_end_operation(const lock_operation& op) {
  leave_capture_end_waits();
  if (op.kind == lock_op_kind::subscribe || op.kind == lock_op_kind::unsubscribe || op.kind == lock_op_kind::message) {
    capture_end = capture_end_mode::one_by_one;
  }
}

}  // namespace lockscope::locks
