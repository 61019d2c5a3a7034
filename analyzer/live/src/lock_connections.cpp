#include "lockscope/live/lock_connections.hpp"

#include <algorithm>

namespace lockscope::live {

lock_connections::lock_connections(const lock_connections_options& options, lock_event_sink& next,
                                   anomaly_handler on_anomaly)
    : options_(options), next_(next), on_anomaly_(std::move(on_anomaly)) {}

void lock_connections::note(lock_entry& entry, const lock_event& e) {
  entry.last_us = std::max(entry.last_us, e.ts_us);
  // An event that names no connection (a group's split quorum) has none to remember.
  if (e.client_endpoint == nullptr) return;
  connection_ref ref;
  ref.client = *e.client_endpoint;
  ref.has_server = e.server_endpoint != nullptr;
  if (ref.has_server) ref.server = *e.server_endpoint;
  for (seen_connection& c : entry.connections) {
    if (c.ref.client == ref.client && c.ref.has_server == ref.has_server && (!ref.has_server || c.ref.server == ref.server)) {
      c.last_us = std::max(c.last_us, e.ts_us);
      return;
    }
  }
  if (entry.connections.size() >= options_.max_connections_per_lock) {
    // The least recently seen makes room.
    auto oldest = std::min_element(entry.connections.begin(), entry.connections.end(),
                                   [](const seen_connection& a, const seen_connection& b) { return a.last_us < b.last_us; });
    *oldest = seen_connection{ref, e.ts_us};
    return;
  }
  entry.connections.push_back(seen_connection{ref, e.ts_us});
}

void lock_connections::sweep(std::int64_t now_us) {
  const std::int64_t since = now_us - options_.window_us;
  for (auto it = locks_.begin(); it != locks_.end();) {
    lock_entry& entry = it->second;
    std::erase_if(entry.connections, [&](const seen_connection& c) { return c.last_us < since; });
    std::erase_if(entry.last_saved, [&](const auto& s) { return s.second < now_us - options_.min_interval_us; });
    if (entry.last_us < since && entry.last_saved.empty()) {
      it = locks_.erase(it);
    } else {
      ++it;
    }
  }
  last_sweep_us_ = now_us;
}

void lock_connections::on_event(const lock_event& e) {
  if (e.ts_us - last_sweep_us_ > options_.window_us / 4) sweep(e.ts_us);
  auto it = locks_.find(e.lock);
  if (it == locks_.end()) {
    if (locks_.size() >= options_.max_locks) {
      ++stats_.untracked_locks;
    } else {
      it = locks_.emplace(std::string(e.lock), lock_entry{}).first;
    }
  }
  if (it != locks_.end()) note(it->second, e);
  next_.on_event(e);
  if (e.event != lock_event_kind::anomaly || it == locks_.end()) return;
  ++stats_.anomalies;
  lock_entry& entry = it->second;
  const auto saved = std::find_if(entry.last_saved.begin(), entry.last_saved.end(),
                                  [&](const auto& s) { return s.first == e.kind; });
  if (saved == entry.last_saved.end()) {
    entry.last_saved.emplace_back(e.kind, e.ts_us);
  } else if (e.ts_us - saved->second < options_.min_interval_us) {
    ++stats_.rate_limited;
    return;
  } else {
    saved->second = e.ts_us;
  }
  scratch_.clear();
  const std::int64_t since = e.ts_us - options_.window_us;
  for (const seen_connection& c : entry.connections) {
    if (c.last_us >= since) scratch_.push_back(c.ref);
  }
  if (on_anomaly_) on_anomaly_(e, scratch_);
}

std::vector<connection_ref> lock_connections::connections_of(std::string_view lock, std::int64_t now_us) const {
  std::vector<connection_ref> out;
  const auto it = locks_.find(lock);
  if (it == locks_.end()) return out;
  for (const seen_connection& c : it->second.connections) {
    if (c.last_us >= now_us - options_.window_us) out.push_back(c.ref);
  }
  return out;
}

}  // namespace lockscope::live
