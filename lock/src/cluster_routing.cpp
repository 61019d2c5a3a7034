#include "lockscope/lock/cluster_routing.hpp"

#include <algorithm>

#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

bool is_master(const slot_map& map, std::string_view key) {
  return std::any_of(map.masters().begin(), map.masters().end(),
                     [key](const node_address& n) { return n.text() == key; });
}

route_decision after_reply(std::error_code ec, const resp::value& reply, const node_address& from,
                           route_attempts& attempts, const redirect_policy& policy, bool time_left, bool closing) {
  route_decision d;
  if (ec == errc::not_connected && !closing && time_left) {
    // Never written (the node went down while it was held): where the map says, later.
    d.what = route_decision::action::retry_later;
    d.reload_map = true;
    return d;
  }
  if (ec != errc::server_error || closing) return d;
  redirect r = parse_redirect(reply.text);
  if (r.node.host.empty()) r.node.host = from.host;
  switch (r.kind) {
    case redirect_kind::none:
      return d;
    case redirect_kind::moved:
    case redirect_kind::ask:
      if (++attempts.redirects > policy.max_redirects) return d;
      d.what = route_decision::action::resend;
      d.to = std::move(r.node);
      d.asking = r.kind == redirect_kind::ask;
      if (r.kind == redirect_kind::moved) {
        d.learn_slot = true;
        d.slot = r.slot;
        d.reload_map = true;  // one MOVED seldom comes alone: a resharding or a failover
      }
      return d;
    case redirect_kind::cluster_down:
      d.reload_map = true;
      [[fallthrough]];
    case redirect_kind::try_again:
      d.what = route_decision::action::retry_later;
      return d;
  }
  return d;
}

std::optional<std::chrono::milliseconds> retry_pause(route_attempts& attempts, const redirect_policy& policy,
                                                     std::chrono::nanoseconds time_left) {
  const std::chrono::milliseconds pause = policy.backoff(++attempts.retries);
  if (attempts.retries > policy.max_redirects * 4 || pause >= time_left) return std::nullopt;
  return pause;
}

std::vector<std::string> cluster_nodes::take_unmapped_down(const slot_map& map) {
  std::vector<std::string> out;
  for (auto it = down_.begin(); it != down_.end();) {
    if (is_master(map, *it)) {
      ++it;
      continue;
    }
    out.push_back(*it);
    it = down_.erase(it);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<node_address> cluster_nodes::reload_candidates(const slot_map& map) const {
  std::vector<node_address> out = map.masters();
  for (const node_address& seed : seeds_)
    if (std::find(out.begin(), out.end(), seed) == out.end()) out.push_back(seed);
  std::stable_partition(out.begin(), out.end(), [this](const node_address& n) { return !is_down(n); });
  return out;
}

bool map_reload_schedule::request() noexcept {
  if (loading_) {
    again_ = true;
    return false;
  }
  loading_ = true;
  again_ = false;
  return true;
}

std::chrono::milliseconds map_reload_schedule::round_failed() noexcept {
  loading_ = false;
  ++failed_rounds_;
  return backoff(failed_rounds_);
}

std::optional<std::chrono::milliseconds> map_reload_schedule::loaded(std::size_t covered) noexcept {
  loading_ = false;
  failed_rounds_ = 0;
  std::optional<std::chrono::milliseconds> next;
  if (again_) {
    // MOVEDs came while this one loaded: once more, a moment later, to see their outcome.
    again_ = false;
    next = min_;
  }
  if (covered < cluster_slots) {
    // Slots without a master: a failover under way (the failed master left out, its
    // replica not promoted yet). The failed master's connection may be gone, so nothing
    // else would ask again.
    ++uncovered_maps_;
    next = std::min(next.value_or(max_), backoff(uncovered_maps_));
  } else {
    uncovered_maps_ = 0;
  }
  return next;
}

std::chrono::milliseconds map_reload_schedule::backoff(int rounds) const noexcept {
  return std::min(max_, min_ * (1 << std::clamp(rounds, 0, 6)));
}

void redirect_memory::learned(std::uint16_t slot, const node_address& node, clock_type::time_point now) {
  std::erase_if(learned_, [slot](const entry& e) { return e.slot == slot; });
  if (learned_.size() >= max_slots) learned_.erase(learned_.begin());
  learned_.push_back({slot, node, now});
}

bool redirect_memory::reconcile(slot_map& map, clock_type::time_point now) {
  bool contradicted = false;
  std::erase_if(learned_, [&](const entry& e) {
    if (now - e.at >= hold_) return true;
    const node_address* mapped = map.node_for(e.slot);
    if (mapped != nullptr && *mapped == e.node) return true;  // the map caught up
    map.assign(e.slot, e.node);
    contradicted = true;
    return false;
  });
  return contradicted;
}

}  // namespace lockscope::lock
