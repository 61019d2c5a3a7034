// Lock events → swimlanes: the drawing model of the HTML and SVG reports (sans-I/O).
//
//   swimlane_builder b(options, {"myLock"});   // a lock_event_sink; the blocks to draw
//   ... timeline → groups → b ...
//   b.finish(end_us);                          // closes what is still open at the end
//   for (const swimlane_block& blk : b.blocks()) layout_block(blk, geometry);  // swimlane_svg.hpp
//
// A block is a lock name in one database, over every server it is on (a RedLock's
// servers are one block with a lane per server); a lane is one (server, owner). Marks:
//   hold          acquired → released / expired / force_released (open: the capture end);
//                 a hold begun before the capture, from the capture's start (before_capture)
//   reenter       a reentrant level inside a hold (depth = hold count)
//   lease         acquired / renewed → + lease_ms (the lease's deadline)
//   renewal       a tick at renewed / renew_failed
//   release       a tick at released, partially_released, unlock_rejected, force_released
//   expiry        a mark at expired
//   wait          first failed attempt → the acquisition; a waiter with no attempt
//                 within its last ttl_ms (none: 30 s) + 2 s gave up at its last attempt
//   retry         a dot at every contended attempt
//   subscription  subscribed → unsubscribed (open: the capture end)
//   notification  an arrow from the lock's last release (its lane) to notified
//   anomaly       since → since + for_ms, else a mark at ts; idle_with_waiters also
//                 gets an anomaly_band over the whole block (the lock was free)
//   group         quorum / multilock: start → end on the owner's `group` lane
//   redirect      a redirected event (Redis Cluster), at ts on the owner's lane
// Each mark points at the event it came from (its JSONL line, event name, owner).
// Memory: events of blocks not selected cost nothing; a block keeps its first
// max_total_events / blocks events (within [min_block_events, max_block_events]; the
// rest are counted, not drawn), so a report holds at most about max_total_events events
// however long the capture.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

enum class mark_kind : std::uint8_t {
  hold,
  reenter,
  lease,
  renewal,
  release,
  expiry,
  wait,
  retry,
  subscription,
  notification,
  anomaly,
  anomaly_band,
  group,
  redirect,  // Redis Cluster: a call redirected (MOVED/ASK/TRYAGAIN/CLUSTERDOWN), a hollow dot
  gave_up,   // a waiter's wait ended without an acquisition (at its end, as the timeline tells)
};
std::string_view to_string(mark_kind k) noexcept;

struct swimlane_mark {
  std::int64_t t0_us = 0, t1_us = 0;  // absolute (epoch µs)
  std::uint32_t event = 0;            // index into swimlane_block::events
  std::uint16_t lane = 0;
  std::uint16_t from_lane = 0;        // notification: the releasing lane
  mark_kind kind = mark_kind::hold;
  std::uint8_t depth = 1;             // hold count (reenter)
  bool open = false;                  // hold / subscription still open at the capture end
  bool before_capture = false;        // hold: held when the capture began (drawn from its start)
  bool failed = false;                // renewal: renew_failed; release: unlock_rejected
};

struct swimlane_event {
  std::uint32_t json_offset = 0, json_size = 0;  // in swimlane_block::text
  std::uint32_t owner_offset = 0, owner_size = 0;
  lock_event_kind event = lock_event_kind::acquired;
  anomaly_kind anomaly = anomaly_kind::none;
};

struct swimlane_lane {
  std::string server;  // "" for quorum / multilock lanes
  std::string owner;
  bool group = false;
};

struct swimlane_block {
  std::string name;
  std::int32_t db = 0;
  std::vector<swimlane_lane> lanes;
  std::vector<swimlane_mark> marks;
  std::vector<swimlane_event> events;
  std::string text;  // the events' JSONL lines and owners
  std::uint64_t events_seen = 0;
  std::uint64_t events_dropped = 0;  // beyond max_block_events
  std::string_view json(const swimlane_event& e) const noexcept { return {text.data() + e.json_offset, e.json_size}; }
  std::string_view owner(const swimlane_event& e) const noexcept {
    return {text.data() + e.owner_offset, e.owner_size};
  }
  bool several_servers() const noexcept;
};

struct swimlane_options {
  // Events kept per block: max_total_events shared out over the blocks, at least
  // min_block_events and at most max_block_events each.
  std::size_t max_block_events = 20'000;
  std::size_t min_block_events = 200;
  std::size_t max_total_events = 100'000;
  std::size_t max_lanes = 64;  // more owners share the last lane ("other owners")
};

// A block's identity: the name and the database.
std::string block_key(std::string_view name, std::int32_t db);

class swimlane_builder final : public lock_event_sink {
 public:
  // `blocks`: block_key()s to draw, in the order to draw them.
  swimlane_builder(const swimlane_options& options, const std::vector<std::string>& blocks);
  void on_event(const lock_event& e) override;
  void finish(std::int64_t end_us);
  // Where a hold begun before the capture is drawn from (lock_event::held_since_capture_start);
  // unset, from its release's held time back.
  void set_capture_start(std::int64_t us) noexcept { capture_start_us_ = us; }
  const std::vector<swimlane_block>& blocks() const noexcept { return blocks_; }
  // Whether a lock name is drawn at all (the operation filter in front of the timeline).
  bool selects(std::string_view name) const noexcept;

 private:
  struct lane_state {
    std::int64_t hold_mark = -1;            // open hold's mark index
    std::vector<std::uint32_t> reenters;    // open reentrant levels' marks
    std::int64_t wait_mark = -1;
    std::int64_t last_attempt_us = -1, give_up_after_us = 0;
    std::int64_t sub_mark = -1;
  };
  struct block_state {
    std::vector<lane_state> lanes;
    std::map<std::string, std::uint16_t, std::less<>> lane_of;  // server \0 owner
    std::int64_t last_release_us = -1;
    std::uint16_t last_release_lane = 0;
  };
  swimlane_options options_;
  std::size_t block_events_;  // kept per block
  std::int64_t capture_start_us_ = -1;
  std::vector<swimlane_block> blocks_;
  std::vector<block_state> state_;
  std::map<std::string, std::size_t, std::less<>> index_;  // block_key → block
  std::map<std::string, int, std::less<>> names_;
  std::string key_, line_, lane_key_;
  std::uint16_t lane(std::size_t block, std::string_view server, std::string_view owner, bool group);
  std::uint32_t add_mark(std::size_t block, const swimlane_mark& m);
  void close_wait(swimlane_block& b, lane_state& s);
  void finish_block(std::size_t block, std::int64_t end_us);
};

}  // namespace lockscope::locks
