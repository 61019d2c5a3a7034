// Part of lock_timeline::impl (its data: timeline_state.hpp).
// A lock's row and its side records: the 16-bit counters and their carries, the
// rarely needed extra parts (made on demand), and completed holds.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// 16-bit counters in the lock's row, carried into its side record on overflow.
inline void lock_timeline::impl::count_acquisition(lock_state& l) {
  if (++l.acquisitions == 0) side_of(l).acquisitions_carry += 0x10000;
}

inline void lock_timeline::impl::count_renewal(lock_state& l) {
  if (++l.renewals == 0) side_of(l).renewals_carry += 0x10000;
}

inline void lock_timeline::impl::count_expiry(lock_state& l) {
  if (++l.expiries == 0) side_of(l).expiries_carry += 0x10000;
}

// The lock's extra parts, made the first time (a lock that has them, a waited one, pays
// two tests: the herd's messages and attempts asked it 1.2 million times, out of line).
inline lock_extra& lock_timeline::impl::ex(lock_state& l) {
  if (l.side != no_id) {
    if (const std::uint32_t extra = sides[l.side].extra; extra != no_id) [[likely]] return extras[extra];
  }
  return new_extra(l);
}

[[gnu::noinline]] inline lock_extra& lock_timeline::impl::new_extra(lock_state& l) {
  lock_side& sd = side_of(l);
  sd.extra = static_cast<std::uint32_t>(extras.size());
  extras.emplace_back().waiters.set_context(&waiter_fields);
  return extras[sd.extra];
}

inline lock_side& lock_timeline::impl::side_of(lock_state& l) {
  if (l.side != no_id) [[likely]] return sides[l.side];
  return new_side(l);
}

[[gnu::noinline]] inline lock_side& lock_timeline::impl::new_side(lock_state& l) {
  l.side = static_cast<std::uint32_t>(sides.size());
  sides.emplace_back();
  return sides[l.side];
}

inline const lock_side* lock_timeline::impl::side_ptr(const lock_state& l) const { return l.side == no_id ? nullptr : &sides[l.side]; }

inline bool lock_timeline::impl::has_extra(const lock_state& l) const { return l.side != no_id && sides[l.side].extra != no_id; }

inline lock_extra* lock_timeline::impl::xp(const lock_state& l) { return has_extra(l) ? &extras[sides[l.side].extra] : nullptr; }

inline const lock_extra* lock_timeline::impl::xp(const lock_state& l) const { return has_extra(l) ? &extras[sides[l.side].extra] : nullptr; }

inline void lock_timeline::impl::add_hold(lock_state& l, std::int64_t us) {
  if (first_hold_of(l) < 0) set_first_hold(l, us);
  else side_of(l).holds.add(us);
}

inline std::int64_t lock_timeline::impl::first_hold_of(const lock_state& l) const {
  const std::int64_t us = l.first_hold_us.get();
  return us == packed_int48::spilled ? sides[l.side].first_hold_spilled_us : us;
}

inline void lock_timeline::impl::set_first_hold(lock_state& l, std::int64_t us) {
  if (!packed_int48::fits(us)) side_of(l).first_hold_spilled_us = us;
  l.first_hold_us.set(us);
}

}  // namespace lockscope::locks
