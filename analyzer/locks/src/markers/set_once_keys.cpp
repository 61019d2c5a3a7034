#include "lockscope/locks/set_once_keys.hpp"

#include <iterator>
#include <map>
#include <tuple>

#include "vocabulary/owned_event.hpp"

namespace lockscope::locks {

// A candidate's acquisition and what befell its hold since (at most max_after events:
// past that the key counts as used).
struct set_once_keys::candidate {
  static constexpr std::size_t max_after = 4;
  owned_event acquired;
  std::vector<owned_event> after;
  std::size_t after_count = 0;  // of `after`, in use (the rest keep their capacity)
  bool used = false;            // its key was used again: a lock
  bool in_line = true;
};

// An event in the line: a copy, or a candidate's place.
struct set_once_keys::slot {
  owned_event event;
  candidate_list::iterator place{};
  bool is_candidate = false;
};

namespace {

bool alnum(char c) noexcept { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

set_once_keys::set_once_keys(const set_once_options& options, lock_event_sink& next) : options_(options), next_(next) {}

set_once_keys::~set_once_keys() = default;

std::string set_once_keys::shape_of(std::string_view key) {
  std::string shape;
  shape.reserve(key.size());
  std::size_t i = 0;
  while (i < key.size()) {
    if (!alnum(key[i])) {
      shape += key[i++];
      continue;
    }
    std::size_t end = i;
    bool digit = false;
    for (; end < key.size() && alnum(key[end]); ++end) digit |= key[end] >= '0' && key[end] <= '9';
    if (digit) shape += '#';
    else shape.append(key.substr(i, end - i));
    i = end;
  }
  return shape;
}

// Anomalies about the hold that no use of the key caused: its holder's connection closed,
// it was held long.
bool set_once_keys::befalls_hold(const lock_event& e) noexcept {
  return e.event == lock_event_kind::anomaly &&
         (e.kind == anomaly_kind::holder_connection_closed || e.kind == anomaly_kind::long_hold);
}

void set_once_keys::on_event(const lock_event& e) {
  if (!options_.hold || (by_key_.empty() && queue_.empty() && !e.first_of_key)) {
    next_.on_event(e);  // nothing waits: the common case, no copy
    return;
  }
  candidate_list::iterator c;
  bool in_line = false;
  if (!by_key_.empty() && find(e, c, in_line)) {
    if (befalls_hold(e) && c->after_count < candidate::max_after) {
      if (c->after.size() == c->after_count) c->after.emplace_back();
      c->after[c->after_count++].assign(e);
      return;
    }
    drop_key(c);  // a lock: its key is no candidate's any more
    note_used_shape(c->acquired.event().lock);
    if (in_line) c->used = true;  // it goes out in its place in the line
    else send(c, on_own_);        // late: it stepped out of the line
  }
  if (e.first_of_key && e.event == lock_event_kind::acquired) add_candidate(e);
  else if (queue_.empty()) next_.on_event(e);
  else enqueue(e);
  release(e.ts_us, false);
}

bool set_once_keys::find(const lock_event& e, candidate_list::iterator& c, bool& in_line) {
  const auto [from, to] = by_key_.equal_range(e.lock);
  for (auto it = from; it != to; ++it) {
    const lock_event& h = it->second->acquired.event();
    if (h.db == e.db && h.lock_server == e.lock_server) {
      c = it->second;
      in_line = c->in_line;
      return true;
    }
  }
  return false;
}

void set_once_keys::add_candidate(const lock_event& e) {
  if (spare_.empty()) in_line_.emplace_back();
  else in_line_.splice(in_line_.end(), spare_, spare_.begin());
  const auto c = std::prev(in_line_.end());
  c->acquired.assign(e);
  c->after_count = 0;
  c->used = false;
  c->in_line = true;
  by_key_.emplace(c->acquired.event().lock, c);
  if (spare_slots_.empty()) queue_.emplace_back();
  else queue_.splice(queue_.end(), spare_slots_, spare_slots_.begin());
  queue_.back().is_candidate = true;
  queue_.back().place = c;
}

void set_once_keys::enqueue(const lock_event& e) {
  if (spare_slots_.empty()) queue_.emplace_back();
  else queue_.splice(queue_.end(), spare_slots_, spare_slots_.begin());
  queue_.back().is_candidate = false;
  queue_.back().event.assign(e);
}

// Sends the line's front while it may go: copies, used candidates; an unused candidate
// past the bound (or every one, `all`) steps out of the line.
void set_once_keys::release(std::int64_t now, bool all) {
  while (!queue_.empty()) {
    slot& s = queue_.front();
    if (s.is_candidate) {
      const candidate_list::iterator c = s.place;
      if (c->used) {
        send(c, in_line_);
      } else {
        const bool past = all || queue_.size() > options_.max_queued ||
                          now - c->acquired.event().ts_us >= options_.order_hold_us;
        if (!past) return;
        c->in_line = false;
        on_own_.splice(on_own_.end(), in_line_, c);
        if (on_own_.size() > options_.max_held) {
          drop_key(on_own_.begin());
          send(on_own_.begin(), on_own_);
        }
      }
    } else {
      next_.on_event(s.event.event());
    }
    spare_slots_.splice(spare_slots_.begin(), queue_, queue_.begin());
  }
}

void set_once_keys::send(candidate_list::iterator c, candidate_list& from) {
  next_.on_event(c->acquired.event());
  for (std::size_t i = 0; i < c->after_count; ++i) next_.on_event(c->after[i].event());
  forget(c, from);
}

void set_once_keys::note_used_shape(std::string_view key) {
  if (used_shapes_.size() >= max_used_shapes) {
    used_shapes_overflowed_ = true;
    return;
  }
  used_shapes_.insert(shape_of(key));
}

void set_once_keys::drop_key(candidate_list::iterator c) {
  const auto [from, to] = by_key_.equal_range(c->acquired.event().lock);
  for (auto k = from; k != to; ++k) {
    if (k->second == c) {
      by_key_.erase(k);
      return;
    }
  }
}

void set_once_keys::forget(candidate_list::iterator c, candidate_list& from) { spare_.splice(spare_.begin(), from, c); }

void set_once_keys::finish() {
  release(0, true);
  // (shape, server, database) → its family
  std::map<std::tuple<std::string, std::string_view, std::int32_t>, std::size_t> family_of;
  std::vector<std::size_t> family_index;
  family_index.reserve(on_own_.size());
  for (const candidate& c : on_own_) {
    const lock_event& e = c.acquired.event();
    const auto [it, added] = family_of.try_emplace({shape_of(e.lock), e.lock_server, e.db}, families_.size());
    if (added) {
      set_once_family f;
      f.shape = std::get<0>(it->first);
      f.example.assign(e.lock);
      f.lock_server.assign(e.lock_server);
      f.db = e.db;
      families_.push_back(std::move(f));
    }
    ++families_[it->second].keys;
    family_index.push_back(it->second);
  }
  by_key_.clear();
  std::size_t i = 0;
  for (auto c = on_own_.begin(); c != on_own_.end(); ++i) {
    const auto next = std::next(c);
    const set_once_family& f = families_[family_index[i]];
    if (f.keys >= options_.family_min && !used_shapes_overflowed_ && !used_shapes_.contains(f.shape)) {
      const lock_event& e = c->acquired.event();
      markers_.push_back({std::string(e.lock), std::string(e.lock_server), e.db, f.shape});
      forget(c, on_own_);
    } else {
      send(c, on_own_);
    }
    c = next;
  }
  std::erase_if(families_, [&](const set_once_family& f) {
    return f.keys < options_.family_min || used_shapes_overflowed_ || used_shapes_.contains(f.shape);
  });
}

}  // namespace lockscope::locks
