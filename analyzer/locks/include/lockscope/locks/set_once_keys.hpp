// Keys set once and never used again: markers, not locks.
//
// `SET key value NX PX ttl` is how most clients take a lock, and also how applications
// mark a message as handled (an idempotency or dedupe key: `SET dedupe:<id> 1 NX EX
// 3600`), a key per message, set once and left to expire. On the wire the first use of
// each looks the same; what tells them apart comes after: a lock's key is released,
// renewed, contended or taken again, a marker's is never touched again.
//
// This stage sits between the lock groups and the outputs. An `acquired` marked
// first_of_key (the key's first operation, a SET NX-style call) is a candidate: it and
// every event after it wait (in time order) until the next event of the same lock
// (server, database, key) shows it is a lock, for up to order_hold_us of capture time
// and max_queued events. A candidate still unused past that bound steps out of the
// line (the events behind it go on) and waits on its own: if its key is used later its
// acquisition goes out then, before that event, out of time order with the events of
// other locks written meanwhile. At finish(), the candidates never used are grouped by
// the shape of their keys (each run of letters and digits that holds a digit counts as
// one `#`: `dedupe:worker:p3-17` is `dedupe:worker:#-#`): a shape with family_min keys
// or more, none of whose keys was ever used again, is a family of markers, not sent on
// (the pipeline takes their rows out of the locks: lock_timeline::set_aside); the others
// go out then, as locks held to the end (a capture ending while five per-order locks are
// held, `lock:order:#`, whose earlier keys were released, shows five holders).
// A key whose lease runs out within the capture is used again (its `expired`); what
// befalls a hold without a use of the key (its holder's connection closing, a long
// hold) waits with the acquisition and shares its fate.
//
// Bounded: at most max_held candidates wait on their own (past it the oldest goes out
// as a lock's). hold == false (live capture: an acquisition is shown when it happens)
// sends every event straight on. Nothing is copied while no candidate waits in line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

class owned_event;

struct set_once_options {
  bool hold = true;
  std::size_t family_min = 5;
  std::int64_t order_hold_us = 10'000'000;
  std::size_t max_queued = 4096;
  std::size_t max_held = 4096;
};

// A family of marker keys: their shape, how many, one of them, and their server and
// database (a lock's identity besides its name).
struct set_once_family {
  std::string shape;
  std::string example;
  std::string lock_server;
  std::int32_t db = 0;
  std::uint64_t keys = 0;
};

// A marker key: the lock it is not, and its family's shape.
struct set_once_key {
  std::string lock;
  std::string lock_server;
  std::int32_t db = 0;
  std::string shape;
};

class set_once_keys final : public lock_event_sink {
 public:
  set_once_keys(const set_once_options& options, lock_event_sink& next);
  ~set_once_keys() override;
  set_once_keys(const set_once_keys&) = delete;
  set_once_keys& operator=(const set_once_keys&) = delete;

  void on_event(const lock_event& e) override;
  // The end of the events: families of markers are kept aside, everything else goes on.
  void finish();

  const std::vector<set_once_family>& families() const noexcept { return families_; }
  const std::vector<set_once_key>& markers() const noexcept { return markers_; }
  // Events waiting in line, and candidates waiting on their own (tests).
  std::size_t queued() const noexcept { return queue_.size(); }
  std::size_t held() const noexcept { return on_own_.size(); }

  // `dedupe:worker:p3-17` → `dedupe:worker:#-#` (runs of letters and digits holding a digit).
  static std::string shape_of(std::string_view key);

 private:
  struct candidate;
  struct slot;
  using candidate_list = std::list<candidate>;

  static bool befalls_hold(const lock_event& e) noexcept;
  bool find(const lock_event& e, candidate_list::iterator& c, bool& in_line);
  void add_candidate(const lock_event& e);
  void enqueue(const lock_event& e);
  void release(std::int64_t now, bool all);
  void send(candidate_list::iterator c, candidate_list& from);
  void forget(candidate_list::iterator c, candidate_list& from);
  void drop_key(candidate_list::iterator c);
  void note_used_shape(std::string_view key);

  set_once_options options_;
  lock_event_sink& next_;
  std::list<slot> queue_;          // the line, oldest first
  std::list<slot> spare_slots_;    // their strings' capacity kept
  candidate_list in_line_;         // candidates whose acquisition waits in the line
  candidate_list on_own_;          // candidates past the bound, oldest first
  candidate_list spare_;
  // Candidates by key (a view of their own copy of the name).
  std::unordered_multimap<std::string_view, candidate_list::iterator> by_key_;
  std::vector<set_once_family> families_;
  std::vector<set_once_key> markers_;
  // The shapes of candidates whose key was used again: no family of markers. Past the
  // cap, no family is one (a key's shape is not known to be unused).
  static constexpr std::size_t max_used_shapes = 4096;
  std::unordered_set<std::string> used_shapes_;
  bool used_shapes_overflowed_ = false;
};

}  // namespace lockscope::locks
