// The timeline's record of locks with several holders (semaphores and latches:
// lock_operation.hpp permit_family): who holds how many permits, out of which limit,
// and who waits on the lock's channel. Its handlers are in timeline/permits.hpp.
//
// Kept apart from the lock rows and their holders: a semaphore's holders are many by
// design, so the one-holder model (overlaps, expiries by lease, waiters' hand-overs)
// does not apply to them. Keyed by the lock's scope and name, not by its row id, which
// forgetting idle locks renumbers. Semaphore traffic is small beside lock traffic: this
// holds texts as strings.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace lockscope::locks::timeline_detail {

struct permit_holder {
  // The permit's id (RPermitExpirableSemaphore) or sorted-set member; empty for
  // RSemaphore, whose permits have no owner on the wire: the holder is the connection
  // that took them (`client`), and a release on another connection (Redisson's pool)
  // gives back the oldest holder's permits.
  std::string owner;
  std::string client, server;
  std::uint64_t connection = 0;
  std::int64_t permits = 1;
  std::int64_t since_us = 0;
  std::int64_t deadline_us = -1;  // the permit's expiry; -1 none
  // The same in the caller's clock (Unix ms; -1 none): the server judges expiry by the
  // `now` later calls pass, which can run ahead of the capture's clock.
  std::int64_t deadline_caller_ms = -1;
};

// A sorted-set semaphore's owner refused and not yet holding (its member keeps its id
// across attempts).
struct permit_waiter {
  std::int64_t first_us = 0;  // the first refused attempt's request
  std::int64_t last_us = 0;   // the latest's
  std::uint64_t connection = 0;
  std::string client, server;
  // Its connection's first attempt as another owner since its latest (-1 none), and that
  // owner: it went on to its next take, unless it attempts again (two takes sharing
  // the connection).
  std::int64_t moved_on_us = -1;
  std::string moved_for;
  // Its tries each drew a new owner (lock_operation::fresh_owner): a later try on its
  // connection, whatever owner it names, is this wait's.
  bool fresh_owner = false;
};

struct permit_lock {
  std::uint32_t scope = 0;
  std::string name;
  bool latch = false;
  // The permits the semaphore has (set, plus added); -1 not known (joined mid-run
  // before trySetPermits, or never set). A latch: -1.
  std::int64_t limit = -1;
  // A latch's count; -1 not known.
  std::int64_t count = -1;
  std::vector<permit_holder> holders;
  std::int64_t in_use = 0;  // the holders' permits
  // The permits given back that no holder seen had taken (taken before the capture):
  // while > 0, in_use is a lower bound and no overrun is judged.
  bool unseen_holders = false;
  // The ids of permits that expired lately (at most 64): one given back later is no
  // holder unseen.
  std::vector<std::string> expired_ids;
  // Waiters by owner, until the owner acquires or gives up (at most 4096 owners).
  std::unordered_map<std::string, permit_waiter> waiting_since;
  // Since when a permit stood free (a release or expiry left fewer than the limit in
  // use) while a waiter refused before it waited; -1 none. Ended by the next acquisition.
  std::int64_t free_since_us = -1;
  // Subscribed waiters: connections on the lock's channel.
  std::vector<std::uint64_t> subscribers;
  // Counted for the summary.
  std::uint64_t acquisitions = 0, refusals = 0, releases = 0, expiries = 0, count_downs = 0, overruns = 0;
  std::int64_t peak_in_use = 0;
  // An acquisition that took the permits beyond the limit, not judged yet: replies on
  // different connections can be captured out of the server's order, so a release whose
  // request went out before this acquisition's reply may have run first. Judged
  // reply_skew_us after it (-1: none pending).
  std::int64_t overrun_at_us = -1;
  std::int64_t overrun_in_use = 0;
  std::string overrun_owner, overrun_client, overrun_server;
  std::int64_t next_deadline_us = -1;  // the earliest holder deadline; -1 none
};

struct permit_book {
  std::unordered_map<std::string, permit_lock> locks;  // by "<scope>:<name>"
  // The waiters (permit_lock::waiting_since) on each connection: only a connection that
  // has one looks for waiters it left behind.
  std::unordered_map<std::uint64_t, std::uint32_t> waiters_on_connection;
  std::int64_t next_deadline_us = -1;                   // the earliest of any lock; -1 none
};

}  // namespace lockscope::locks::timeline_detail
