// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Forgetting idle locks (timeline_options::max_locks) and the counters they leave.
// Off the per-operation path (a pass runs when the lock count reaches forget_at), so in
// its own translation unit.
#include "timeline/identity.hpp"
#include "timeline/lock_rows.hpp"

namespace lockscope::locks {

bool lock_timeline::impl::idle(const lock_state& l) const {
  if (l.active != no_id || l.queued_us >= 0) return false;
  const lock_extra* x = xp(l);
  return x == nullptr || (x->more_holders.empty() && x->waiters.empty());
}

// A row's counters (the 16-bit ones with their carries), as the summary shows them.
lock_stats lock_timeline::impl::counts_of(const lock_state& l) const {
  const lock_side* sd = side_ptr(l);
  const lock_extra* x = xp(l);
  lock_stats s;
  s.acquisitions = l.acquisitions + (sd != nullptr ? sd->acquisitions_carry : 0);
  s.renewals = l.renewals + (sd != nullptr ? sd->renewals_carry : 0);
  s.expiries = l.expiries + (sd != nullptr ? sd->expiries_carry : 0);
  if (x != nullptr) {
    s.contended_acquisitions = x->waits.count();
    s.gave_up = x->gave_up;
    std::copy(std::begin(x->anomalies), std::end(x->anomalies), std::begin(s.anomalies));
  }
  return s;
}

void lock_timeline::impl::fold_into_forgotten(const lock_state& l) {
  const lock_stats s = counts_of(l);
  ++forgotten.locks;
  forgotten.acquisitions += s.acquisitions;
  forgotten.contended_acquisitions += s.contended_acquisitions;
  forgotten.gave_up += s.gave_up;
  forgotten.renewals += s.renewals;
  forgotten.expiries += s.expiries;
  for (std::size_t k = 0; k < anomaly_kind_count; ++k) forgotten.anomalies[k] += s.anomalies[k];
}

void lock_timeline::impl::forget_idle_locks() {
  ++forgotten.passes;
  outgoing.settle_all();  // held guesses are keyed by the rows, which move now: they keep their guesses
  std::unordered_set<std::uint32_t> named;  // by something besides their rows
  for (const suspected_overlap& p : suspected_overlaps) named.insert(p.lock);
  for (const connection_info& c : connections) {
    for (const auto& sub : c.subscriptions) named.insert(sub.lock);
    named.insert(c.waits.begin(), c.waits.end());
  }
  lock_store kept;
  id_table kept_ids{id_table::growth::by_half};
  stable_vector<lock_side> kept_sides;
  stable_vector<lock_extra> kept_extras;
  std::vector<std::pair<std::uint32_t, std::int64_t>> kept_expired;
  // Once its row is copied, an old row's `active` says where it went (no_id: forgotten).
  locks.for_each_with_id([&](std::uint32_t id, lock_state& l, std::string_view name) {
    std::int64_t expired_since = -1;
    if (idle(l) && !named.contains(id)) {
      if (l.last_expired != no_id) {
        const auto mark = std::lower_bound(expired_kept.begin(), expired_kept.end(), std::pair{id, std::int64_t{-1}});
        expired_since = mark != expired_kept.end() && mark->first == id ? mark->second : now;
      }
      if (expired_since < 0 || now - expired_since >= expired_memory_us) {
        fold_into_forgotten(l);
        if (lock_extra* x = xp(l)) {
          owners.release(x->acquired_owner);
          owners.release(x->closed_owner);
        }
        owners.release(l.last_expired);
        return;
      }
    }
    const std::uint32_t filed_under = lock_store::scope_of(l);
    const std::uint32_t to = kept.add(filed_under, name);  // fewer rows than before: never full
    lock_state& row = kept[to];
    std::memcpy(static_cast<void*>(&row), &l, sizeof(lock_state));
    if (l.side != no_id) {
      row.side = static_cast<std::uint32_t>(kept_sides.size());
      lock_side& sd = kept_sides.emplace_back(std::move(sides[l.side]));
      if (sd.extra != no_id) {
        const std::uint32_t extra = static_cast<std::uint32_t>(kept_extras.size());
        kept_extras.emplace_back(std::move(extras[sd.extra]));
        sd.extra = extra;
      }
    }
    kept_ids.insert(to, lock_hash(canon(filed_under), name));
    if (expired_since >= 0) kept_expired.emplace_back(to, expired_since);  // ids ascend
    l.active = to;
  });
  expired_kept = std::move(kept_expired);
  const auto moved = [&](std::uint32_t old) { return locks[old].active.get(); };
  timers.remap(moved);
  for (suspected_overlap& p : suspected_overlaps) p.lock = moved(p.lock);
  for (connection_info& c : connections) {
    for (auto& sub : c.subscriptions) sub.lock = moved(sub.lock);
    for (std::uint32_t& w : c.waits) w = moved(w);
    if (c.refused_lock != no_id) c.refused_lock = moved(c.refused_lock);
    for (auto& lo : c.last_owners) {
      if (lo.lock == no_id) continue;
      lo.lock = moved(lo.lock);
      if (lo.lock != no_id) continue;
      owners.release(lo.owner);
      lo.owner = no_id;
    }
  }
  upcoming_head = upcoming_tail = 0;  // their ids and the table's generation are gone
  locks.swap(kept);
  lock_ids = std::move(kept_ids);
  sides = std::move(kept_sides);
  extras = std::move(kept_extras);
  forget_at = std::max(options.max_locks, 2 * locks.size());
}

}  // namespace lockscope::locks
