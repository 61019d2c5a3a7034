#include "lockscope/locks/swimlane.hpp"

#include <algorithm>
#include <map>

#include "lockscope/locks/event_jsonl.hpp"
#include "lockscope/locks/lock_groups.hpp"

namespace lockscope::locks {

namespace {

// A waiter that makes no attempt within its last TTL (none given: 30 s) + 2 s gave
// up (the timeline's waiter model).
constexpr std::int64_t default_wait_ttl_us = 30'000'000;
constexpr std::int64_t waiter_margin_us = 2'000'000;

}  // namespace

std::string_view to_string(mark_kind k) noexcept {
  switch (k) {
    case mark_kind::hold: return "hold";
    case mark_kind::reenter: return "reenter";
    case mark_kind::lease: return "lease";
    case mark_kind::renewal: return "renewal";
    case mark_kind::release: return "release";
    case mark_kind::expiry: return "expiry";
    case mark_kind::wait: return "wait";
    case mark_kind::retry: return "retry";
    case mark_kind::subscription: return "subscription";
    case mark_kind::notification: return "notification";
    case mark_kind::anomaly: return "anomaly";
    case mark_kind::anomaly_band: return "anomaly-band";
    case mark_kind::group: return "group";
    case mark_kind::redirect: return "redirect";
    case mark_kind::gave_up: return "gave-up";
  }
  return "?";
}

bool swimlane_block::several_servers() const noexcept {
  const std::string* first = nullptr;
  for (const auto& l : lanes) {
    if (l.group) continue;
    if (first == nullptr) first = &l.server;
    else if (*first != l.server) return true;
  }
  return false;
}

std::string block_key(std::string_view name, std::int32_t db) {
  std::string k(name);
  k += '\0';
  k += std::to_string(db);
  return k;
}

swimlane_builder::swimlane_builder(const swimlane_options& options, const std::vector<std::string>& blocks)
    : options_(options),
      block_events_(std::clamp(options.max_total_events / std::max<std::size_t>(1, blocks.size()),
                               std::min(options.min_block_events, options.max_block_events),
                               options.max_block_events)) {
  blocks_.reserve(blocks.size());
  state_.resize(blocks.size());
  for (const auto& k : blocks) {
    const auto nul = k.find('\0');
    swimlane_block b;
    b.name = k.substr(0, nul);
    b.db = nul == std::string::npos ? 0 : std::stoi(k.substr(nul + 1));
    names_.emplace(b.name, 0);
    index_.emplace(k, blocks_.size());
    blocks_.push_back(std::move(b));
  }
}

bool swimlane_builder::selects(std::string_view name) const noexcept { return names_.find(name) != names_.end(); }

std::uint16_t swimlane_builder::lane(std::size_t block, std::string_view server, std::string_view owner, bool group) {
  auto& st = state_[block];
  auto& b = blocks_[block];
  lane_key_.assign(group ? std::string_view("group") : server);
  lane_key_ += '\0';
  lane_key_ += owner;
  auto it = st.lane_of.find(lane_key_);
  if (it != st.lane_of.end()) return it->second;
  if (b.lanes.size() >= options_.max_lanes) {
    // Owners beyond the limit share one lane (its key: no server, an owner of one NUL).
    static constexpr std::string_view other_key("\0\0", 2);
    auto other = st.lane_of.find(other_key);
    if (other != st.lane_of.end()) return other->second;
    b.lanes.push_back({"", "(other owners)", false});
    st.lanes.emplace_back();
    const auto i = static_cast<std::uint16_t>(b.lanes.size() - 1);
    st.lane_of.emplace(std::string(other_key), i);
    return i;
  }
  b.lanes.push_back({std::string(server), std::string(owner), group});
  st.lanes.emplace_back();
  const auto i = static_cast<std::uint16_t>(b.lanes.size() - 1);
  st.lane_of.emplace(lane_key_, i);
  return i;
}

std::uint32_t swimlane_builder::add_mark(std::size_t block, const swimlane_mark& m) {
  blocks_[block].marks.push_back(m);
  return static_cast<std::uint32_t>(blocks_[block].marks.size() - 1);
}

void swimlane_builder::close_wait(swimlane_block& b, lane_state& s) {
  if (s.wait_mark < 0) return;
  b.marks[static_cast<std::size_t>(s.wait_mark)].t1_us = s.last_attempt_us;
  s.wait_mark = -1;
}

void swimlane_builder::on_event(const lock_event& e) {
  key_.assign(e.lock);
  key_ += '\0';
  key_ += std::to_string(e.db);
  const auto found = index_.find(key_);
  if (found == index_.end()) return;
  const std::size_t bi = found->second;
  auto& b = blocks_[bi];
  auto& st = state_[bi];
  ++b.events_seen;
  if (b.events.size() >= block_events_) {
    if (b.events_dropped++ == 0) finish_block(bi, e.ts_us);
    return;
  }
  const bool group = e.event == lock_event_kind::quorum || e.event == lock_event_kind::multilock;
  const std::string_view server = e.lock_server.empty() ? e.server : e.lock_server;
  const std::uint16_t li = lane(bi, server, e.owner, group);

  swimlane_event ev;
  ev.event = e.event;
  ev.anomaly = e.kind;
  line_.clear();
  append_event_jsonl(line_, e);
  ev.json_offset = static_cast<std::uint32_t>(b.text.size());
  ev.json_size = static_cast<std::uint32_t>(line_.size());
  b.text += line_;
  ev.owner_offset = static_cast<std::uint32_t>(b.text.size());
  ev.owner_size = static_cast<std::uint32_t>(e.owner.size());
  b.text += e.owner;
  const auto ei = static_cast<std::uint32_t>(b.events.size());
  b.events.push_back(ev);

  auto& ls = st.lanes[li];
  swimlane_mark m;
  m.t0_us = m.t1_us = e.ts_us;
  m.event = ei;
  m.lane = m.from_lane = li;
  auto lease = [&] {
    if (e.lease_ms <= 0) return;
    swimlane_mark l = m;
    l.kind = mark_kind::lease;
    l.t1_us = e.ts_us + e.lease_ms * 1000;
    add_mark(bi, l);
  };
  auto close_reenters_to = [&](std::size_t depth) {
    while (ls.reenters.size() > depth) {
      b.marks[ls.reenters.back()].t1_us = e.ts_us;
      ls.reenters.pop_back();
    }
  };
  // A holder first seen by its renewal or release held the lock when the capture began.
  auto hold_from_capture_start = [&] {
    if (!e.held_since_capture_start || ls.hold_mark >= 0) return;
    swimlane_mark h = m;
    h.kind = mark_kind::hold;
    h.before_capture = true;
    h.t0_us = capture_start_us_ >= 0 ? std::min(capture_start_us_, e.ts_us)
                                     : e.ts_us - std::max<std::int64_t>(e.held_us, 0);
    ls.hold_mark = add_mark(bi, h);
  };
  auto end_hold = [&] {
    close_reenters_to(0);
    if (ls.hold_mark >= 0) b.marks[static_cast<std::size_t>(ls.hold_mark)].t1_us = e.ts_us;
    ls.hold_mark = -1;
  };
  switch (e.event) {
    case lock_event_kind::acquired:
      end_hold();
      if (ls.wait_mark >= 0) {
        b.marks[static_cast<std::size_t>(ls.wait_mark)].t1_us = e.ts_us;
        ls.wait_mark = -1;
      }
      lease();
      m.kind = mark_kind::hold;
      ls.hold_mark = add_mark(bi, m);
      break;
    case lock_event_kind::reentered:
      m.kind = mark_kind::reenter;
      m.depth = static_cast<std::uint8_t>(std::clamp<std::int64_t>(e.hold_count, 2, 255));
      close_reenters_to(static_cast<std::size_t>(std::max<std::int64_t>(e.hold_count - 2, 0)));
      ls.reenters.push_back(add_mark(bi, m));
      lease();
      break;
    case lock_event_kind::renewed:
    case lock_event_kind::renew_failed:
      hold_from_capture_start();
      m.kind = mark_kind::renewal;
      m.failed = e.event == lock_event_kind::renew_failed;
      add_mark(bi, m);
      if (!m.failed) lease();
      break;
    case lock_event_kind::partially_released:
      hold_from_capture_start();
      close_reenters_to(static_cast<std::size_t>(std::max<std::int64_t>(e.hold_count - 1, 0)));
      m.kind = mark_kind::release;
      add_mark(bi, m);
      break;
    case lock_event_kind::unlock_rejected:
      m.kind = mark_kind::release;
      m.failed = true;
      add_mark(bi, m);
      break;
    case lock_event_kind::released:
    case lock_event_kind::force_released:
    case lock_event_kind::expired:
      hold_from_capture_start();
      end_hold();
      m.kind = e.event == lock_event_kind::expired ? mark_kind::expiry : mark_kind::release;
      add_mark(bi, m);
      st.last_release_us = e.ts_us;
      st.last_release_lane = li;
      break;
    case lock_event_kind::contended: {
      if (ls.wait_mark >= 0 && e.ts_us > ls.give_up_after_us) close_wait(b, ls);
      if (ls.wait_mark < 0) {
        m.kind = mark_kind::wait;
        ls.wait_mark = add_mark(bi, m);
      }
      ls.last_attempt_us = e.ts_us;
      ls.give_up_after_us = e.ts_us + (e.ttl_ms >= 0 ? e.ttl_ms * 1000 : default_wait_ttl_us) + waiter_margin_us;
      b.marks[static_cast<std::size_t>(ls.wait_mark)].t1_us = e.ts_us;
      m.kind = mark_kind::retry;
      add_mark(bi, m);
      break;
    }
    case lock_event_kind::subscribed:
      if (ls.sub_mark < 0) {
        m.kind = mark_kind::subscription;
        ls.sub_mark = add_mark(bi, m);
      }
      break;
    case lock_event_kind::unsubscribed:
      if (ls.sub_mark >= 0) b.marks[static_cast<std::size_t>(ls.sub_mark)].t1_us = e.ts_us;
      ls.sub_mark = -1;
      break;
    case lock_event_kind::notified:
      m.kind = mark_kind::notification;
      if (st.last_release_us >= 0) {
        m.t0_us = st.last_release_us;
        m.from_lane = st.last_release_lane;
      }
      add_mark(bi, m);
      break;
    case lock_event_kind::anomaly:
      m.kind = mark_kind::anomaly;
      if (e.interval_start_us >= 0 && e.interval_us >= 0) {
        m.t0_us = e.interval_start_us;
        m.t1_us = e.interval_start_us + e.interval_us;
      }
      add_mark(bi, m);
      if (e.kind == anomaly_kind::idle_with_waiters) {
        m.kind = mark_kind::anomaly_band;
        add_mark(bi, m);
      }
      break;
    case lock_event_kind::redirected:
      m.kind = mark_kind::redirect;
      add_mark(bi, m);
      break;
    case lock_event_kind::gave_up: {
      // The timeline's account: the wait ended at since + wait_ms, known now.
      const std::int64_t end = e.interval_start_us >= 0 && e.wait_us >= 0 ? e.interval_start_us + e.wait_us : e.ts_us;
      if (ls.wait_mark >= 0) {
        b.marks[static_cast<std::size_t>(ls.wait_mark)].t1_us = std::max(end, b.marks[static_cast<std::size_t>(ls.wait_mark)].t0_us);
        ls.wait_mark = -1;
      }
      m.kind = mark_kind::gave_up;
      m.t0_us = m.t1_us = end;
      add_mark(bi, m);
      break;  // a new wait's bar begins at its next contended attempt
    }
    case lock_event_kind::counted_down:  // a latch's count going down: a mark on its lane
      m.kind = mark_kind::release;
      add_mark(bi, m);
      break;
    case lock_event_kind::permits_set:
      break;
    case lock_event_kind::quorum:
    case lock_event_kind::multilock:
      m.kind = mark_kind::group;
      if (e.group != nullptr) {
        m.t0_us = e.group->start_us;
        m.t1_us = e.group->end_us;
      }
      add_mark(bi, m);
      break;
  }
}

void swimlane_builder::finish_block(std::size_t bi, std::int64_t end_us) {
  auto& b = blocks_[bi];
  for (auto& ls : state_[bi].lanes) {
    for (auto r : ls.reenters) {
      b.marks[r].t1_us = end_us;
      b.marks[r].open = true;
    }
    ls.reenters.clear();
    if (ls.hold_mark >= 0) {
      b.marks[static_cast<std::size_t>(ls.hold_mark)].t1_us = end_us;
      b.marks[static_cast<std::size_t>(ls.hold_mark)].open = true;
    }
    ls.hold_mark = -1;
    if (ls.sub_mark >= 0) {
      b.marks[static_cast<std::size_t>(ls.sub_mark)].t1_us = end_us;
      b.marks[static_cast<std::size_t>(ls.sub_mark)].open = true;
    }
    ls.sub_mark = -1;
    close_wait(b, ls);
  }
}

void swimlane_builder::finish(std::int64_t end_us) {
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].events_dropped == 0) finish_block(i, end_us);
  }
}

}  // namespace lockscope::locks
