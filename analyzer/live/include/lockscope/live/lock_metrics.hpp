// Prometheus metrics of a live `lockscope analyze` (`--metrics-listen`): lock events in,
// the text exposition format (version 0.0.4) out. Sans-I/O: the HTTP side is elsewhere
// (metrics_server.hpp) and hands render() the capture's own counters.
//
//   lock_metrics m({.max_locks = 100});
//   lock_event_tee tee(report, &m);   // the same events as the report
//   lock_groups groups(options, tee);
//   ...
//   std::string text;
//   m.render(text, gauges);           // whenever a scraper asks
//
// Per lock (label `lock`, the key's name: one name on several servers or databases is
// one series): acquisitions, failed attempts (`contended` events), waits given up (`gave_up`), expiries, anomalies
// by kind, and histograms of wait times (acquisitions after a wait) and hold times
// (released, expired, force-released), buckets 100 µs … 60 s.
//
// Cardinality: at most max_locks locks have a label of their own; the others' events
// are counted under lock="_other". A lock gets a label when it has an event and a slot
// is free; a labelled lock with no event for retire_after_us gives its slot to the next
// unlabelled lock that has one. So the labelled locks are the ones active most
// recently, and a busy lock never loses its label.
// Counters never decrease. Each event adds to exactly one series (its lock's if
// labelled at that moment, else _other), so sum(rate(...)) over the series is the
// total rate. A retired lock's series stops being exposed (Prometheus marks it stale)
// and its values are NOT added to _other (that would be a spike in rate(_other));
// they are remembered (the last retired_memory retired locks), and if the lock gets a
// label again its series continues from them. Only a lock forgotten that way (more
// than retired_memory other locks retired after it) starts again from zero, after at
// least retire_after_us of absence: a new series, as after a restart.
// A lock name that is not valid UTF-8 has its bad bytes written as `\xNN` text; a name
// that would then read like another labelled one, or the name `_other`, counts under
// _other.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

struct metrics_options {
  std::size_t max_locks = 100;
  std::int64_t retire_after_us = 600'000'000;  // 10 min: beyond Prometheus' 5 min staleness
  std::size_t retired_memory = 400;
};

// Upper bounds (`le`) of the wait and hold histograms, microseconds.
inline constexpr std::array<std::int64_t, 18> metrics_bucket_bounds_us = {
    100,     250,     500,       1'000,     2'500,     5'000,      10'000,     25'000,     50'000,
    100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000, 60'000'000};

// What render() reports besides the locks: the capture's totals and current sizes,
// gathered by the caller (the capture loop owns them). Counters are clamped to never
// go below what was rendered before.
struct capture_gauges {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t kernel_drops = 0;
  std::uint64_t exchanges = 0;
  std::uint64_t decode_errors = 0;
  std::uint64_t gap_bytes = 0;
  std::uint64_t flows_open = 0;
  std::uint64_t buffered_bytes = 0;  // what the open connections buffer (--max-buffer-total)
  std::uint64_t buffer_sheds = 0;    // times one gave it back: all of them held too much
  std::uint64_t rss_bytes = 0;
  // The bounded stores: entries now, and their caps (0: no cap of their own).
  std::uint64_t owners = 0;        // lock owners the timeline names now
  std::uint64_t connections = 0;   // connections the timeline names now
  std::uint64_t locks = 0;         // lock rows kept (a row per distinct lock)
  std::uint64_t locks_cap = 0;     // --max-locks (0: none)
  std::uint64_t locks_forgotten = 0;  // idle locks whose rows were given up at the cap
  std::uint64_t scripts = 0, scripts_cap = 0;
  std::uint64_t shas = 0, shas_cap = 0;
  std::uint64_t values = 0, values_cap = 0;
  std::uint64_t flows_cap = 0;
};

class lock_metrics final : public lock_event_sink {
 public:
  explicit lock_metrics(const metrics_options& options = {});
  ~lock_metrics() override;
  lock_metrics(const lock_metrics&) = delete;
  lock_metrics& operator=(const lock_metrics&) = delete;

  void on_event(const lock_event& e) override;
  // Replaces `out` with the whole exposition text.
  void render(std::string& out, const capture_gauges& g);
  std::size_t labelled_locks() const noexcept { return by_name_.size() - retired_.size(); }

  // A histogram of durations in metrics_bucket_bounds_us (plus +Inf).
  struct histogram {
    std::array<std::uint64_t, metrics_bucket_bounds_us.size() + 1> buckets{};  // not cumulative
    std::uint64_t count = 0;
    std::int64_t sum_us = 0;
    void add(std::int64_t us) noexcept;
  };
  struct series {
    std::string label;  // the escaped label value
    std::uint64_t acquisitions = 0, contended = 0, expired = 0, gave_up = 0;
    std::array<std::uint64_t, locks::anomaly_kind_count> anomalies{};
    histogram wait, hold;
    // A semaphore's permits held and limit after its latest event (-1: not a
    // semaphore, or the limit not known).
    std::int64_t permits_in_use = -1, permit_limit = -1;
    std::int64_t last_active_us = 0;
    bool retired = false;
    std::list<std::string>::iterator retired_at;  // in retired_, when retired
  };

 private:
  series* series_for(std::string_view lock, std::int64_t at_us);
  void retire_idlest(std::int64_t at_us);

  metrics_options options_;
  // Labelled and retired series by lock name (heterogeneous lookup: no copy per event).
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, series, name_hash, std::equal_to<>> by_name_;
  std::list<std::string> retired_;  // the names of retired series, most recently retired first
  series other_;
  // Once every slot is taken: no labelled lock can have been idle long enough before this.
  std::int64_t next_retire_check_us_ = 0;
  std::uint64_t last_packets_ = 0, last_bytes_ = 0, last_drops_ = 0, last_exchanges_ = 0, last_decode_errors_ = 0,
                last_gap_bytes_ = 0, last_buffer_sheds_ = 0;
};

// Passes each event to `first`, then to `second` when there is one.
class lock_event_tee final : public lock_event_sink {
 public:
  lock_event_tee(lock_event_sink& first, lock_event_sink* second) : first_(first), second_(second) {}
  void on_event(const lock_event& e) override {
    first_.on_event(e);
    if (second_ != nullptr) second_->on_event(e);
  }

 private:
  lock_event_sink& first_;
  lock_event_sink* second_;
};

// Prometheus label-value escaping (backslash, double quote, newline), with bytes that are
// not valid UTF-8 written as the text `\xNN`, and other control characters (C0, DEL, C1)
// as `?`: a scrape read in a terminal carries no escape sequence.
void append_label_value(std::string& out, std::string_view value);

}  // namespace lockscope::live
