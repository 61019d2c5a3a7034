// lock_timeline's public functions over its parts (timeline_state.hpp and one file per
// job). Every part's inline definitions are included here, so that the per-operation
// path (on_operation → handle → the handlers and the lookups they do) is one
// translation unit, inlined as it was when the timeline was one struct.
#include "lockscope/locks/lock_timeline.hpp"

#include <functional>
#include <stdexcept>
#include <vector>

#include "timeline/announced.hpp"
#include "timeline/capture_end.hpp"
#include "timeline/channel_operations.hpp"
#include "timeline/clock.hpp"
#include "timeline/connections.hpp"
#include "timeline/dispatch.hpp"
#include "timeline/group_waits.hpp"
#include "timeline/holders.hpp"
#include "timeline/identity.hpp"
#include "timeline/lock_operations.hpp"
#include "timeline/lock_rows.hpp"
#include "timeline/permits.hpp"
#include "timeline/subscriber_links.hpp"
#include "timeline/subscriptions.hpp"
#include "timeline/timeline_state.hpp"
#include "timeline/waiter_lookup.hpp"
#include "timeline/waiters.hpp"

namespace lockscope::locks {

lock_timeline::lock_timeline(const timeline_options& options, lock_event_sink& sink)
    : impl_(std::make_unique<impl>(options, sink)) {}
lock_timeline::~lock_timeline() = default;

void lock_timeline::on_operation(const lock_operation& op) { impl_->on_operation(op); }
void lock_timeline::will_handle(std::span<const lock_operation> upcoming) noexcept { impl_->will_handle(upcoming); }
void lock_timeline::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  if (connection == capture_ends_connection) {
    // Before the connections' ends take the waiters still waiting (silently: the capture
    // ended, not their waits), the pollers whose next attempt was overdue gave up.
    impl_->give_up_stopped_pollers(impl_->now);
    impl_->capture_ending = true;
    return;
  }
  // What fell due before the end (a lock left idle while this connection's waiter
  // waited) is judged with the waiter still there.
  if (at_us != impl_->ending_at_us) impl_->leave_capture_end_waits();  // (capture_end.hpp)
  impl_->advance(at_us);
  impl_->connection_ended(connection, at_us);
  impl_->release_held();
  impl_->collect();
}
void lock_timeline::advance_to(std::int64_t now_us) {
  impl_->leave_capture_end_waits();
  impl_->advance(now_us);
  if (impl_->permits.next_deadline_us >= 0 && impl_->permits.next_deadline_us <= now_us) impl_->expire_permits(now_us);
  impl_->release_held();  // live: a held event goes out on the clock, traffic or not
  impl_->collect();
}
void lock_timeline::finish(std::int64_t end_us) {
  impl_->leave_capture_end_waits();
  impl_->advance(end_us);
  impl_->give_up_stopped_pollers(end_us);
  if (impl_->permits.next_deadline_us >= 0) impl_->expire_permits(end_us);
  for (auto& [key, p] : impl_->permits.locks) impl_->judge_overrun(p, end_us, true);
  impl_->report_overlaps(end_us, true);  // no reply can come any more
  impl_->outgoing.flush(impl_->sink);       // no decision can come any more
  impl_->collect();
}
timeline_memory lock_timeline::memory() const noexcept {
  timeline_memory m;
  m.owners = impl_->owners.live();
  m.endpoint_texts = impl_->texts.live();
  m.connections = impl_->connection_ids.size();
  m.text_bytes = impl_->owners.text_bytes() + impl_->texts.text_bytes();
  m.arena_bytes = impl_->owners.arena_bytes() + impl_->texts.arena_bytes();
  m.subscriber_clients = impl_->subscribers_by_client.size();
  return m;
}
std::int64_t lock_timeline::now_us() const noexcept { return impl_->now; }
std::int64_t lock_timeline::first_us() const noexcept { return impl_->first; }
std::int64_t lock_timeline::held_from_us() const noexcept { return impl_->outgoing.oldest_us(); }
std::size_t lock_timeline::lock_count() const noexcept { return impl_->locks.size() - impl_->set_aside_rows.size(); }
bool lock_timeline::set_aside(std::string_view lock, std::string_view lock_server, std::int32_t db, std::string_view shape) {
  for (std::uint32_t s = 0; s < impl_->scopes.size(); ++s) {
    const impl::scope& sc = impl_->scopes[s];
    if (impl_->canon(s) != s || sc.db != db || (sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label)) != lock_server) {
      continue;
    }
    const std::uint32_t id = impl_->find_lock(s, lock);
    if (id == no_id || !impl_->set_aside_rows.insert(&impl_->locks[id]).second) continue;
    auto& families = impl_->set_aside_families;
    auto f = std::find_if(families.begin(), families.end(), [&](const set_aside_family& x) { return x.shape == shape; });
    if (f == families.end()) f = families.insert(families.end(), {std::string(shape), std::string(lock), 0});
    ++f->keys;
    return true;
  }
  return false;
}
const std::vector<lock_timeline::set_aside_family>& lock_timeline::set_aside_families() const noexcept {
  return impl_->set_aside_families;
}
const forgotten_locks& lock_timeline::forgotten() const noexcept { return impl_->forgotten; }
std::size_t lock_timeline::scope_count() const noexcept {
  std::size_t n = 0;
  for (std::uint32_t s = 0; s < impl_->scopes.size(); ++s) n += impl_->scopes[s].alias == no_id && impl_->scopes[s].seen;
  return n;
}

void lock_timeline::for_each_lock_name(const std::function<void(std::string_view)>& f) const {
  impl_->locks.for_each([&](const lock_state& l, std::string_view name) {
    if (impl_->set_aside_rows.empty() || !impl_->set_aside_rows.contains(&l)) f(name);
  });
}

void lock_timeline::for_each_permit_lock(const std::function<void(std::string_view, const lock_stats&)>& f) const {
  for (const auto& [key, p] : impl_->permits.locks) {
    lock_stats s;
    const impl::scope& sc = impl_->scopes[impl_->canon(p.scope)];
    s.server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
    s.db = sc.db;
    s.acquisitions = p.acquisitions;
    s.permit_limit = p.latch ? p.count : p.limit;
    s.permits_peak = p.peak_in_use;
    s.permits_in_use = p.latch ? p.count : p.in_use;
    s.permit_refusals = p.refusals;
    s.latch = p.latch;
    f(p.name, s);
  }
}

std::size_t lock_timeline::longest_lock_name() const noexcept { return impl_->locks.longest_name(); }

void lock_timeline::for_each_lock(const std::function<void(std::string_view, const lock_stats&)>& f) const {
  for_each_lock(0, 1, f);
}

void lock_timeline::for_each_lock(std::size_t part, std::size_t parts,
                                  const std::function<void(std::string_view, const lock_stats&)>& f) const {
  if (parts == 0 || part >= parts) throw std::invalid_argument("lock_timeline::for_each_lock: part out of range");
  static const duration_samples none;
  std::vector<std::int64_t> scratch;
  std::vector<std::int64_t> hold_us;
  impl_->locks.for_each(part, parts, [&](const lock_state& l, std::string_view name) {
    if (!impl_->set_aside_rows.empty() && impl_->set_aside_rows.contains(&l)) return;
    const lock_extra* x = impl_->xp(l);
    const lock_side* sd = impl_->side_ptr(l);
    const duration_samples& holds = sd != nullptr ? sd->holds : none;
    const duration_samples& waits = x != nullptr ? x->waits : none;
    lock_stats s = impl_->counts_of(l);
    const impl::scope& sc = impl_->scopes[impl_->canon(lock_store::scope_of(l))];
    s.server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
    s.db = sc.db;
    const std::int64_t first_hold_us = impl_->first_hold_of(l);
    s.hold = holds.summarize(first_hold_us, scratch);
    s.wait = waits.summarize(-1, scratch);
    s.hold.at_least = sd != nullptr && sd->holds_at_least;
    s.wait.at_least = x != nullptr && x->waits_at_least;
    hold_us.clear();
    if (s.hold.exact) {
      if (first_hold_us >= 0) hold_us.push_back(first_hold_us);
      hold_us.insert(hold_us.end(), holds.samples().begin(), holds.samples().end());
    }
    s.hold_us = hold_us;
    s.wait_us = waits.samples();
    if (!impl_->permits.locks.empty()) {
      std::string key = std::to_string(impl_->canon(lock_store::scope_of(l)));
      key += ':';
      key.append(name);
      if (const auto it = impl_->permits.locks.find(key); it != impl_->permits.locks.end()) {
        const timeline_detail::permit_lock& p = it->second;
        s.permit_limit = p.latch ? p.count : p.limit;
        s.permits_peak = p.peak_in_use;
        s.permits_in_use = p.latch ? p.count : p.in_use;
        s.permit_refusals = p.refusals;
        s.latch = p.latch;
      }
    }
    f(name, s);
  });
}

}  // namespace lockscope::locks
