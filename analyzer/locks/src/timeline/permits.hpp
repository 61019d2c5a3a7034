// Part of lock_timeline::impl (its data: timeline_state.hpp, permit_book.hpp).
// Locks with several holders: semaphores (Redisson's RSemaphore and
// RPermitExpirableSemaphore, other clients' sorted-set semaphores) and count-down
// latches. handle() sends every operation of a permit family here.
//
// A semaphore's events: acquired (a holder took `permits`), contended (an attempt
// refused: too few free), released, unlock_rejected (an unknown or expired permit id
// given back), expired (a permit's lease ran out while held), permits_set, and
// subscribed / notified / unsubscribed for the waiters on its channel. Each carries the
// permits in use after it and the limit when known. Several holders within the limit are
// the point of a semaphore: only holders beyond a known limit are an anomaly
// (overlapping_holders, permits_over_limit). A latch's: permits_set (its count),
// counted_down (the count left), and notified when the count reaches zero and its waiters go.
// Inline, included by lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <tuple>

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// `id` as it is shown: itself when printable ASCII, else its bytes in hex.
inline std::string permit_owner_text(std::string_view id) {
  const bool printable = std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  if (printable) return std::string(id);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(id.size() * 2);
  for (const char c : id) {
    out += digits[static_cast<unsigned char>(c) >> 4];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// The waiter of `p` on `connection` whose tries each drew a new owner, still waiting
// (its connection has not gone on to another lock); end() when none.
inline auto fresh_owner_waiter(permit_lock& p, std::uint64_t connection) -> decltype(p.waiting_since.begin()) {
  return std::find_if(p.waiting_since.begin(), p.waiting_since.end(), [&](const auto& w) {
    return w.second.fresh_owner && w.second.connection == connection && w.second.moved_on_us < 0;
  });
}

inline permit_lock& lock_timeline::impl::permit_lock_of(std::uint32_t id) {
  const lock_state& l = locks[id];
  const std::uint32_t where = canon(lock_store::scope_of(l));
  const std::string_view name = name_of(l);
  std::string key = std::to_string(where);
  key += ':';
  key.append(name);
  auto [it, added] = permits.locks.try_emplace(std::move(key));
  if (added) {
    it->second.scope = where;
    it->second.name.assign(name);
  }
  return it->second;
}

inline lock_event lock_timeline::impl::permit_event(const permit_lock& p, std::int64_t ts, lock_event_kind kind) const {
  lock_event e;
  e.ts_us = ts;
  e.event = kind;
  e.lock = p.name;
  const scope& sc = scopes[canon(p.scope)];
  e.lock_server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
  e.db = sc.db;
  e.permits_in_use = p.latch ? p.count : p.in_use;
  e.permit_limit = p.limit;
  e.latch = p.latch;
  return e;
}

inline void lock_timeline::impl::permit_deadlines(permit_lock& p) {
  p.next_deadline_us = -1;
  for (const permit_holder& h : p.holders) {
    if (h.deadline_us >= 0 && (p.next_deadline_us < 0 || h.deadline_us < p.next_deadline_us)) p.next_deadline_us = h.deadline_us;
  }
  if (p.next_deadline_us >= 0 && (permits.next_deadline_us < 0 || p.next_deadline_us < permits.next_deadline_us)) {
    permits.next_deadline_us = p.next_deadline_us;
  }
}

// A pending overrun of `p` judged at `now_us`: still beyond the limit reply_skew_us after
// the acquisition (no release run before it came), it is an anomaly, at the acquisition.
inline void lock_timeline::impl::judge_overrun(permit_lock& p, std::int64_t now_us, bool all) {
  if (p.overrun_at_us < 0 || (!all && now_us < p.overrun_at_us + options.reply_skew_us)) return;
  const std::int64_t at = p.overrun_at_us;
  p.overrun_at_us = -1;
  ++p.overruns;
  p.peak_in_use = std::max(p.peak_in_use, p.overrun_in_use);
  lock_event a = permit_event(p, at, lock_event_kind::anomaly);
  a.kind = anomaly_kind::overlapping_holders;
  a.found = anomaly_facts(anomaly_finding::permits_over_limit);
  a.owner = p.overrun_owner;
  a.client = p.overrun_client;
  a.server = p.overrun_server;
  a.permits_in_use = p.overrun_in_use;
  const std::uint32_t id = find_lock(p.scope, p.name);
  if (id != no_id) emit(locks[id], a);
  else outgoing.pass(a, sink);  // behind any held event: time order
}

// `p`'s permits expired by the caller's clock (`caller_now_ms`, a call's `now`): expired
// at `at` (the call's request), if the capture's clock has not passed their deadline yet.
inline void lock_timeline::impl::expire_by_caller_clock(permit_lock& p, std::int64_t caller_now_ms, std::int64_t at) {
  bool any = false;
  for (permit_holder& h : p.holders) {
    if (h.deadline_caller_ms >= 0 && h.deadline_caller_ms <= caller_now_ms && (h.deadline_us < 0 || h.deadline_us > at)) {
      h.deadline_us = std::max(h.since_us, at);
      any = true;
    }
  }
  if (!any) return;
  permits.next_deadline_us = at;
  expire_permits(at);
}

// Permits whose lease ran out by `to`: each an `expired` event at its deadline.
void lock_timeline::impl::expire_permits(std::int64_t to) {  // (one translation unit: lock_timeline.cpp)
  permits.next_deadline_us = -1;
  for (auto& [key, p] : permits.locks) {
    if (p.next_deadline_us >= 0 && p.next_deadline_us <= to) {
      std::sort(p.holders.begin(), p.holders.end(),
                [](const permit_holder& a, const permit_holder& b) { return a.since_us < b.since_us; });
      for (std::size_t i = 0; i < p.holders.size();) {
        const permit_holder h = p.holders[i];
        if (h.deadline_us < 0 || h.deadline_us > to) {
          ++i;
          continue;
        }
        p.holders.erase(p.holders.begin() + static_cast<std::ptrdiff_t>(i));
        p.in_use = std::max<std::int64_t>(0, p.in_use - h.permits);
        ++p.expiries;
        if (const std::uint32_t id = find_lock(p.scope, p.name); id != no_id) {
          count_expiry(locks[id]);
          add_hold(locks[id], h.deadline_us - h.since_us);
        }
        if (p.overrun_at_us >= 0 && p.in_use <= p.limit && h.deadline_us <= p.overrun_at_us) p.overrun_at_us = -1;
        if (!h.owner.empty()) {
          if (p.expired_ids.size() >= 64) p.expired_ids.erase(p.expired_ids.begin());
          p.expired_ids.push_back(h.owner);
        }
        lock_event e = permit_event(p, h.deadline_us, lock_event_kind::expired);
        e.owner = h.owner.empty() ? std::string_view(h.client) : std::string_view(h.owner);
        e.client = h.client;
        e.server = h.server;
        e.permits = h.permits;
        e.held_us = h.deadline_us - h.since_us;
        outgoing.pass(e, sink);
        if (!p.waiting_since.empty()) permit_went_free(p, h.deadline_us);
      }
    }
    permit_deadlines(p);
  }
}

inline void lock_timeline::impl::forget_permit_waiter(permit_lock& p, std::unordered_map<std::string, permit_waiter>::iterator w) {
  if (const auto c = permits.waiters_on_connection.find(w->second.connection); c != permits.waiters_on_connection.end()) {
    if (--c->second == 0) permits.waiters_on_connection.erase(c);
  }
  p.waiting_since.erase(w);
}

// A permit of `p` stood free from `at` (given back or expired below a known limit): a
// stretch that counts while a waiter refused before it still waits.
inline void lock_timeline::impl::permit_went_free(permit_lock& p, std::int64_t at) {
  if (p.free_since_us >= 0 || p.limit < 0 || p.in_use >= p.limit) return;
  for (const auto& [who, w] : p.waiting_since) {
    if (w.first_us < at && w.moved_on_us < 0) {
      p.free_since_us = at;
      return;
    }
  }
}

// An acquisition at `at` ends `p`'s free stretch: idle_with_waiters when it lasted the
// idle threshold and a waiter refused before it began had not gone on (the longest
// waiting named), as a one-holder lock's stretch is judged.
inline void lock_timeline::impl::permit_free_stretch_ended(std::uint32_t id, permit_lock& p, std::int64_t at) {
  const std::int64_t since = p.free_since_us;
  p.free_since_us = -1;
  if (since < 0 || at - since < options.idle_threshold_us) return;
  const permit_waiter* longest = nullptr;
  std::string_view who;
  for (const auto& [owner, w] : p.waiting_since) {
    if (w.first_us >= since || (w.moved_on_us >= 0 && w.moved_on_us <= since)) continue;
    if (longest == nullptr || w.first_us < longest->first_us) {
      longest = &w;
      who = owner;
    }
  }
  if (longest == nullptr) return;
  lock_event e = permit_event(p, at, lock_event_kind::anomaly);
  e.kind = anomaly_kind::idle_with_waiters;
  e.found = anomaly_facts(anomaly_finding::idle_while_poller_slept);
  e.owner = who;
  e.client = longest->client;
  e.server = longest->server;
  e.interval_start_us = since;
  e.interval_us = at - since;
  emit(locks[id], e);
}

// A sorted-set semaphore's waiter whose connection goes on as another owner (its next
// take: a client draws a holder id per take) without it attempting again had given up
// at its latest refusal, no later than that other owner's first attempt. Told once that
// other take's hold ends (its release) or a third owner's attempt comes, with no attempt
// of its own between: two takes sharing a connection poll in turn, and a waiter that
// attempts again was still waiting (permit_waiter::moved_on_us). Reported then as a
// give-up bounded by the two (wait_at_least, wait_at_most_us).
void lock_timeline::impl::permit_waiters_moved_on(const lock_operation& op, std::string_view owner,
                                                  const permit_lock* current) {
  if (permits.waiters_on_connection.find(op.connection) == permits.waiters_on_connection.end()) return;
  const bool attempt = op.kind == lock_op_kind::acquire && (op.outcome == op_outcome::ok || op.outcome == op_outcome::contended);
  const bool released = op.kind == lock_op_kind::unlock && op.outcome == op_outcome::ok;
  if (!attempt && !released) return;
  for (auto& [key, p] : permits.locks) {
    for (auto w = p.waiting_since.begin(); w != p.waiting_since.end();) {
      permit_waiter& v = w->second;
      // A try on the same lock by a waiter drawing a new owner each try: the same wait,
      // unless its connection went on to another lock since (then it gave up there).
      const bool same_wait = v.fresh_owner && op.fresh_owner && attempt && &p == current && v.moved_on_us < 0;
      if (v.connection != op.connection || w->first == owner || same_wait) {
        ++w;
        continue;
      }
      const bool told = v.moved_on_us >= 0 && v.moved_for != owner;
      if (!told && !released) {
        if (v.moved_on_us < 0 && attempt) {
          v.moved_on_us = op.request_us;
          v.moved_for.assign(owner);
        }
        ++w;
        continue;
      }
      if (!told && v.moved_on_us < 0) {  // a release on its connection before any other take: not told yet
        ++w;
        continue;
      }
      report_permit_give_up(p, w->first, v, op.at_us(), wait_end::new_wait, v.moved_on_us);
      const auto gone = w++;
      forget_permit_waiter(p, gone);
    }
  }
}

// A sorted-set semaphore's waiter `owner` gave up, reported at `at`: it waited from its
// first refusal to its last at least, and stopped by `stopped_by_us` at the latest.
void lock_timeline::impl::report_permit_give_up(const permit_lock& p, std::string_view owner, const permit_waiter& v,
                                                std::int64_t at, wait_end ended, std::int64_t stopped_by_us) {
  lock_event e = permit_event(p, at, lock_event_kind::gave_up);
  e.owner = owner;
  e.client = v.client;
  e.server = v.server;
  e.wait_ended = ended;
  e.wait_us = v.last_us - v.first_us;
  e.wait_at_least = true;
  e.wait_at_most_us = std::max(stopped_by_us - v.first_us, e.wait_us);
  e.interval_start_us = v.first_us;
  e.interval_us = e.wait_us;
  if (const std::uint32_t id = find_lock(p.scope, p.name); id != no_id) {
    ++ex(locks[id]).gave_up;
    emit(locks[id], e);
  } else {
    outgoing.pass(e, sink);
  }
}

// The connection of a sorted-set semaphore's waiters has closed (a process killed or gone
// after its last refusal): each gave up, no later than the close. One whose connection had
// gone on as another owner (moved_on_us; a killed holder's take is never released, so
// nothing else tells it) gave up at its latest refusal, as permit_waiters_moved_on says.
void lock_timeline::impl::permit_waiters_connection_closed(std::uint64_t connection, std::int64_t at) {
  for (auto& [key, p] : permits.locks) {
    for (auto w = p.waiting_since.begin(); w != p.waiting_since.end();) {
      permit_waiter& v = w->second;
      if (v.connection != connection) {
        ++w;
        continue;
      }
      const bool moved_on = v.moved_on_us >= 0;
      report_permit_give_up(p, w->first, v, at, moved_on ? wait_end::new_wait : wait_end::connection_closed,
                            moved_on ? v.moved_on_us : at);
      const auto gone = w++;
      forget_permit_waiter(p, gone);
    }
  }
}

void lock_timeline::impl::on_permit_operation(std::uint32_t id, const lock_operation& op) {
  if (permits.next_deadline_us >= 0 && permits.next_deadline_us <= op.at_us()) expire_permits(op.at_us());
  if (op.outcome == op_outcome::redirected) {
    on_redirect(id, op);
    return;
  }
  lock_state& l = locks[id];
  permit_lock& p = permit_lock_of(id);
  if (op.family == lock_family::redisson_latch) p.latch = true;
  const std::int64_t at = op.at_us();
  if (p.overrun_at_us >= 0) judge_overrun(p, at, false);
  if (op.family == lock_family::semaphore && op.limit >= 0) p.limit = op.limit;  // each call names it
  if (op.family == lock_family::semaphore && has_holder(l)) {
    // Joined mid-run, a member's refresh or release seen before any acquire on the key
    // was a one-holder lock's (no call had shown the key a semaphore yet): that holder
    // is the semaphore's, held since before the capture, and goes on here, not there
    // (where its lease would run out unreleased).
    const std::int64_t start = options.capture_start_us >= 0 ? options.capture_start_us : first_op_us;
    for_each_holder(l, [&](const holder& h) {
      permit_holder moved;
      moved.owner.assign(owners.text(h.owner));
      moved.since_us = h.since_us >= 0 ? std::int64_t{h.since_us} : start;
      moved.deadline_us = h.deadline_us;
      p.holders.push_back(std::move(moved));
      ++p.in_use;
    });
    clear_holders(l);
    permit_deadlines(p);
  }
  if (op.caller_now_ms >= 0 && p.next_deadline_us >= 0) expire_by_caller_clock(p, op.caller_now_ms, op.request_us);
  // A permit id as text: Redisson 3.2x+ sends 16 raw bytes, shown (and matched) in hex.
  const std::string owner = permit_owner_text(op.owner);
  auto event = [&](lock_event_kind kind) {
    lock_event e = from_op(l, op, kind);
    e.owner = owner;
    e.permits_in_use = p.latch ? p.count : p.in_use;
    e.permit_limit = p.limit;
    e.latch = p.latch;
    return e;
  };
  const bool ok = op.outcome == op_outcome::ok;
  if (op.family == lock_family::semaphore && !owner.empty() && !permits.waiters_on_connection.empty()) {
    permit_waiters_moved_on(op, owner, &p);
  }
  switch (op.kind) {
    case lock_op_kind::acquire: {
      // An inferred sorted-set acquire (EVALSHA of a text never seen) of a member that
      // holds already is its refresh (the two scripts take the same arguments).
      if (op.inferred && !owner.empty() && (op.outcome == op_outcome::ok || op.outcome == op_outcome::contended)) {
        const auto held = std::find_if(p.holders.begin(), p.holders.end(), [&](const permit_holder& h) { return h.owner == owner; });
        if (held != p.holders.end()) {
          if (op.limit >= 0) p.limit = op.limit;
          if (op.outcome == op_outcome::ok) {
            held->deadline_us = op.lease_ms > 0 ? at + op.lease_ms * 1000 : -1;
            held->deadline_caller_ms = op.lease_ms > 0 && op.caller_now_ms >= 0 ? op.caller_now_ms + op.lease_ms : -1;
            permit_deadlines(p);
            count_renewal(l);
          }
          if (op.outcome != op_outcome::ok) {  // refused: the member was no longer in the set
            p.in_use = std::max<std::int64_t>(0, p.in_use - held->permits);
            p.holders.erase(held);
            permit_deadlines(p);
          }
          lock_event e = event(op.outcome == op_outcome::ok ? lock_event_kind::renewed : lock_event_kind::renew_failed);
          e.lease_ms = op.lease_ms;
          emit(l, e);
          return;
        }
      }
      if (op.outcome == op_outcome::contended) {
        ++p.refusals;
        // A wait, when the owner is the same across attempts: a sorted-set semaphore's
        // member (Redisson's permit-expirable semaphore tries with a fresh id each time).
        if (op.family == lock_family::semaphore && !owner.empty() && p.waiting_since.size() < 4096) {
          auto w = op.fresh_owner ? fresh_owner_waiter(p, op.connection) : p.waiting_since.end();
          if (w == p.waiting_since.end()) {
            bool added = false;
            std::tie(w, added) = p.waiting_since.try_emplace(owner);
            if (added) {
              w->second.first_us = op.request_us;
              w->second.connection = op.connection;
              w->second.client.assign(op.client_text);
              w->second.server.assign(op.server_text);
              w->second.fresh_owner = op.fresh_owner;
              ++permits.waiters_on_connection[op.connection];
            }
          }
          w->second.last_us = op.request_us;
          w->second.moved_on_us = -1;  // still waiting
        }
        lock_event e = event(lock_event_kind::contended);
        e.permits = op.permits;
        e.ttl_ms = op.ttl_ms;
        emit(l, e);
        return;
      }
      if (!ok) return;
      if (op.limit >= 0) p.limit = op.limit;  // a sorted-set semaphore's call names it
      if (p.free_since_us >= 0) permit_free_stretch_ended(id, p, at);
      const std::int64_t n = op.permits > 0 ? op.permits : 1;
      permit_holder h;
      h.owner.assign(owner);
      h.client.assign(op.client_text);
      h.server.assign(op.server_text);
      h.connection = op.connection;
      h.permits = n;
      h.since_us = at;
      h.deadline_us = op.lease_ms > 0 ? at + op.lease_ms * 1000 : -1;
      h.deadline_caller_ms = op.lease_ms > 0 && op.caller_now_ms >= 0 ? op.caller_now_ms + op.lease_ms : -1;
      p.holders.push_back(std::move(h));
      p.in_use += n;
      ++p.acquisitions;
      count_acquisition(l);
      lock_event e = event(lock_event_kind::acquired);
      if (owner.empty()) e.owner = op.client_text;  // RSemaphore: the holder is its connection
      e.permits = n;
      e.lease_ms = op.lease_ms;
      if (!owner.empty()) {
        auto w = p.waiting_since.find(owner);
        if (w == p.waiting_since.end() && op.fresh_owner) w = fresh_owner_waiter(p, op.connection);
        if (w != p.waiting_since.end()) {
          e.wait_us = at - w->second.first_us;  // from the first refused attempt's request
          ex(l).waits.add(e.wait_us);
          forget_permit_waiter(p, w);
        }
      }
      if (p.limit >= 0 && p.in_use > p.limit && !p.unseen_holders) {
        // Beyond the limit: judged reply_skew_us later (a release captured after this
        // reply may have run before it); shown at the limit until then.
        p.overrun_at_us = at;
        p.overrun_in_use = p.in_use;
        p.overrun_owner.assign(e.owner);
        p.overrun_client.assign(op.client_text);
        p.overrun_server.assign(op.server_text);
        e.permits_in_use = p.limit;
      } else {
        p.peak_in_use = std::max(p.peak_in_use, p.in_use);
      }
      emit(l, e);
      permit_deadlines(p);
      return;
    }
    case lock_op_kind::unlock: {
      if (op.outcome == op_outcome::rejected) {
        // An id not held (never acquired, given back twice, or expired: Redisson's
        // try_release answers 0 for an expired permit).
        auto it = std::find_if(p.holders.begin(), p.holders.end(),
                               [&](const permit_holder& h) { return !owner.empty() && h.owner == owner; });
        if (it != p.holders.end()) {
          // Its expiry was not yet passed by our clock (the caller's clock is ahead):
          // the permit is gone either way.
          p.in_use = std::max<std::int64_t>(0, p.in_use - it->permits);
          p.holders.erase(it);
          permit_deadlines(p);
        }
        lock_event e = event(lock_event_kind::unlock_rejected);
        e.permits = op.permits;
        emit(l, e);
        return;
      }
      if (!ok) return;
      std::int64_t n = op.permits > 0 ? op.permits : 1;
      lock_event e = event(lock_event_kind::released);
      e.permits = n;
      std::string holder_named, holder_client, holder_server;
      // The holder: the permit's id; else (RSemaphore) one on this connection, else the oldest.
      while (n > 0) {
        auto it = p.holders.end();
        if (!owner.empty()) {
          it = std::find_if(p.holders.begin(), p.holders.end(), [&](const permit_holder& h) { return h.owner == owner; });
        } else {
          it = std::find_if(p.holders.begin(), p.holders.end(),
                            [&](const permit_holder& h) { return h.owner.empty() && h.connection == op.connection; });
          if (it == p.holders.end()) {
            it = std::find_if(p.holders.begin(), p.holders.end(), [](const permit_holder& h) { return h.owner.empty(); });
          }
        }
        if (it == p.holders.end()) {
          const bool expired = !owner.empty() &&
                               std::find(p.expired_ids.begin(), p.expired_ids.end(), owner) != p.expired_ids.end();
          if (!expired) p.unseen_holders = true;  // taken before the capture began
          break;
        }
        const std::int64_t taken = std::min(n, it->permits);
        if (e.held_us < 0) {
          e.held_us = at - it->since_us;
          // Named as the holder whose permits came back (RSemaphore: the connection that
          // took them, which a pool's release on another connection is not).
          holder_named.assign(it->owner.empty() ? it->client : it->owner);
          holder_client.assign(it->client);
          holder_server.assign(it->server);
        }
        add_hold(l, at - it->since_us);
        it->permits -= taken;
        p.in_use = std::max<std::int64_t>(0, p.in_use - taken);
        n -= taken;
        if (it->permits == 0) p.holders.erase(it);
        if (!owner.empty()) break;
      }
      ++p.releases;
      permit_deadlines(p);
      if (p.overrun_at_us >= 0 && op.request_us <= p.overrun_at_us && p.in_use <= p.limit) {
        p.overrun_at_us = -1;  // this release ran first: the server never went beyond the limit
      }
      e.permits_in_use = p.in_use;
      if (!holder_client.empty()) {
        e.owner = holder_named;
        if (holder_client != op.client_text) {
          e.client = holder_client;
          e.server = holder_server;
          e.client_endpoint = nullptr;
          e.server_endpoint = nullptr;
        }
      } else if (owner.empty()) {
        e.owner = op.client_text;
      }
      emit(l, e);
      if (!p.waiting_since.empty()) permit_went_free(p, op.request_us);
      return;
    }
    case lock_op_kind::renew: {
      // A sorted-set semaphore's refresh: its holder's lease starts again.
      if (op.outcome != op_outcome::ok && op.outcome != op_outcome::rejected) return;
      if (op.limit >= 0) p.limit = op.limit;
      auto it = std::find_if(p.holders.begin(), p.holders.end(), [&](const permit_holder& h) { return h.owner == owner; });
      if (op.outcome == op_outcome::rejected && it != p.holders.end()) {  // the member was gone
        p.in_use = std::max<std::int64_t>(0, p.in_use - it->permits);
        p.holders.erase(it);
        permit_deadlines(p);
      } else if (op.outcome == op_outcome::ok && it != p.holders.end()) {
        it->deadline_us = op.lease_ms > 0 ? at + op.lease_ms * 1000 : -1;
        it->deadline_caller_ms = op.lease_ms > 0 && op.caller_now_ms >= 0 ? op.caller_now_ms + op.lease_ms : -1;
        permit_deadlines(p);
      }
      lock_event e = event(op.outcome == op_outcome::ok ? lock_event_kind::renewed : lock_event_kind::renew_failed);
      e.lease_ms = op.lease_ms;
      if (op.outcome == op_outcome::ok) count_renewal(l);
      emit(l, e);
      return;
    }
    case lock_op_kind::set_permits: {
      if (!ok) return;
      if (p.latch) {
        p.count = op.permits;
      } else if (op.limit >= 0) {
        p.limit = op.limit + p.in_use;  // trySetPermits: the free permits, none yet taken
      } else if (p.limit >= 0 && op.permits != -1) {
        p.limit += op.permits;  // addPermits (may be negative)
      }
      lock_event e = event(lock_event_kind::permits_set);
      e.permits = op.permits;
      emit(l, e);
      return;
    }
    case lock_op_kind::count_down: {
      if (!ok) return;
      p.latch = true;
      if (p.count > 0) --p.count;
      ++p.count_downs;
      lock_event e = event(lock_event_kind::counted_down);
      e.permits = 1;
      emit(l, e);
      return;
    }
    case lock_op_kind::force_unlock: {
      if (!ok) return;
      if (p.latch) p.count = -1;
      p.holders.clear();
      p.in_use = 0;
      permit_deadlines(p);
      lock_event e = event(lock_event_kind::force_released);
      emit(l, e);
      return;
    }
    case lock_op_kind::subscribe: {
      if (!ok) return;
      if (std::find(p.subscribers.begin(), p.subscribers.end(), op.connection) == p.subscribers.end()) {
        p.subscribers.push_back(op.connection);
      }
      lock_event e = event(lock_event_kind::subscribed);
      emit(l, e);
      return;
    }
    case lock_op_kind::unsubscribe: {
      std::erase(p.subscribers, op.connection);
      lock_event e = event(lock_event_kind::unsubscribed);
      emit(l, e);
      return;
    }
    case lock_op_kind::message: {
      // RSemaphore's release publishes the free permits (a waiter then retries); a
      // latch's "0": the count reached zero and its waiters go.
      if (p.latch && op.message == "0") p.count = 0;
      lock_event e = event(lock_event_kind::notified);
      emit(l, e);
      return;
    }
    default: return;
  }
}

}  // namespace lockscope::locks
