#include "lockscope/live/lock_metrics.hpp"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <utility>

#include <fmt/format.h>
#include "lockscope/ingest/message.hpp"
#include "lockscope/resp/format.hpp"

namespace lockscope::live {

namespace {

constexpr std::string_view other_label = "_other";

// The `le` texts of metrics_bucket_bounds_us, in seconds, then +Inf.
constexpr std::array<std::string_view, metrics_bucket_bounds_us.size() + 1> bucket_labels = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25",   "0.5",     "1",      "2.5",   "5",      "10",    "30",   "60",    "+Inf"};

void append_seconds(std::string& out, std::int64_t us) {
  fmt::format_to(std::back_inserter(out), "{}.{:06}", us / 1'000'000, us % 1'000'000);
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP lockscope_{} {}\n# TYPE lockscope_{} {}\n", name, help, name, type);
}

void sample(std::string& out, std::string_view name, std::uint64_t value) {
  fmt::format_to(std::back_inserter(out), "lockscope_{} {}\n", name, value);
}

// Counters from the capture loop: a counter that came back smaller (a wrapped 32-bit
// kernel counter) keeps its last value.
std::uint64_t monotonic(std::uint64_t& last, std::uint64_t now) noexcept {
  last = std::max(last, now);
  return last;
}

}  // namespace

void append_label_value(std::string& out, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    const bool ascii = static_cast<unsigned char>(value[i]) < 0x80;
    const std::size_t n = ascii ? 1 : ingest::utf8_sequence(value, i);  // the JSONL's reading of the bytes
    if (n == 0) {
      fmt::format_to(std::back_inserter(out), "\\\\x{:02X}", static_cast<unsigned char>(value[i]));
      ++i;
      continue;
    }
    // Prometheus takes any UTF-8 in a label value, but a scrape is often read with curl
    // in a terminal: control characters (C0 but the newline, which has its escape, DEL,
    // and both bytes of a C1 control in UTF-8) become '?', as analyze's text shows them.
    if (n == 1) {
      const char c = value[i];
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += '?';
      else out += c;
    } else if (resp::printable_utf8_sequence(value, i) == 0) {
      out.append(n, '?');
    } else {
      out.append(value.substr(i, n));
    }
    i += n;
  }
}

void lock_metrics::histogram::add(std::int64_t us) noexcept {
  const auto it = std::lower_bound(metrics_bucket_bounds_us.begin(), metrics_bucket_bounds_us.end(), us);
  ++buckets[static_cast<std::size_t>(it - metrics_bucket_bounds_us.begin())];
  ++count;
  sum_us += std::max<std::int64_t>(us, 0);
}

lock_metrics::lock_metrics(const metrics_options& options) : options_(options) {
  other_.label = std::string(other_label);
  by_name_.reserve(options_.max_locks + options_.retired_memory + 1);
}

lock_metrics::~lock_metrics() = default;

void lock_metrics::retire_idlest(std::int64_t at_us) {
  if (at_us < next_retire_check_us_) return;
  auto idlest = by_name_.end();
  for (auto it = by_name_.begin(); it != by_name_.end(); ++it) {
    if (!it->second.retired && (idlest == by_name_.end() || it->second.last_active_us < idlest->second.last_active_us)) {
      idlest = it;
    }
  }
  if (idlest == by_name_.end()) return;
  series& s = idlest->second;
  if (at_us - s.last_active_us < options_.retire_after_us) {
    next_retire_check_us_ = s.last_active_us + options_.retire_after_us;
    return;
  }
  retired_.push_front(idlest->first);
  s.retired = true;
  s.retired_at = retired_.begin();
  if (retired_.size() > options_.retired_memory) {  // forget the longest retired
    by_name_.erase(retired_.back());
    retired_.pop_back();
  }
}

lock_metrics::series* lock_metrics::series_for(std::string_view lock, std::int64_t at_us) {
  const auto it = by_name_.find(lock);
  if (it != by_name_.end() && !it->second.retired) {
    it->second.last_active_us = std::max(it->second.last_active_us, at_us);
    return &it->second;
  }
  if (labelled_locks() >= options_.max_locks) {
    retire_idlest(at_us);
    if (labelled_locks() >= options_.max_locks) return nullptr;
  }
  // `it` may be stale now (retire_idlest may have forgotten a series): look again.
  if (const auto again = by_name_.find(lock); again != by_name_.end()) {
    series& s = again->second;
    retired_.erase(s.retired_at);
    s.retired = false;
    s.last_active_us = std::max(s.last_active_us, at_us);
    return &s;
  }
  std::string label;
  append_label_value(label, lock);
  if (label == other_label) return nullptr;
  for (const auto& [name, s] : by_name_) {
    if (s.label == label) return nullptr;  // only names with bytes shown as \xNN or ? can meet here
  }
  series& s = by_name_.emplace(std::string(lock), series{}).first->second;
  s.label = std::move(label);
  s.last_active_us = at_us;
  return &s;
}

void lock_metrics::on_event(const lock_event& e) {
  switch (e.event) {
    case lock_event_kind::acquired:
    case lock_event_kind::contended:
    case lock_event_kind::gave_up:
    case lock_event_kind::expired:
    case lock_event_kind::released:
    case lock_event_kind::force_released:
    case lock_event_kind::anomaly:
      break;
    default:
      if (e.permits_in_use >= 0 && !e.latch) break;  // a semaphore's permits changed
      return;  // nothing counted: no slot taken either
  }
  series* found = series_for(e.lock, e.ts_us);
  series& s = found != nullptr ? *found : other_;
  if (e.permits_in_use >= 0 && !e.latch && found != nullptr) {
    s.permits_in_use = e.permits_in_use;
    s.permit_limit = e.permit_limit;
  }
  switch (e.event) {
    case lock_event_kind::acquired:
      ++s.acquisitions;
      if (e.wait_us >= 0) s.wait.add(e.wait_us);
      break;
    case lock_event_kind::contended:
      ++s.contended;
      break;
    case lock_event_kind::gave_up:
      ++s.gave_up;
      break;
    case lock_event_kind::expired:
      ++s.expired;
      if (e.held_us >= 0 && !e.held_since_capture_start) s.hold.add(e.held_us);  // not a lower bound
      break;
    case lock_event_kind::released:
    case lock_event_kind::force_released:
      if (e.held_us >= 0 && !e.held_since_capture_start) s.hold.add(e.held_us);
      break;
    case lock_event_kind::anomaly:
      ++s.anomalies[static_cast<std::size_t>(e.kind)];
      break;
    default:
      break;
  }
}

void lock_metrics::render(std::string& out, const capture_gauges& g) {
  out.clear();
  // Labelled series in name order (stable output), then _other.
  std::vector<const series*> shown;
  shown.reserve(labelled_locks() + 1);
  for (const auto& [name, s] : by_name_) {
    if (!s.retired) shown.push_back(&s);
  }
  std::sort(shown.begin(), shown.end(), [](const series* a, const series* b) { return a->label < b->label; });
  shown.push_back(&other_);
  const std::string fold = fmt::format(
      " At most {} locks (--metrics-max-locks) have a label of their own, the most recently active; the others are "
      "summed under lock=\"_other\".",
      options_.max_locks);

  const auto counter = [&](std::string_view name, std::string_view help, auto value) {
    header(out, name, "counter", std::string(help) + fold);
    for (const series* s : shown) {
      fmt::format_to(std::back_inserter(out), "lockscope_{}{{lock=\"{}\"}} {}\n", name, s->label, value(*s));
    }
  };
  counter("lock_acquisitions_total", "Locks acquired (not reentered).",
          [](const series& s) { return s.acquisitions; });
  counter("lock_contended_total", "Failed acquire attempts: the lock was held (contended events).",
          [](const series& s) { return s.contended; });
  counter("lock_gave_up_total", "Waits that ended without an acquisition (gave_up events).",
          [](const series& s) { return s.gave_up; });
  counter("lock_expired_total", "Leases that ran out while held (expired events).",
          [](const series& s) { return s.expired; });

  // Semaphores only (no lines when the capture has none).
  const bool any_permits = std::any_of(shown.begin(), shown.end(), [](const series* s) { return s->permits_in_use >= 0; });
  if (any_permits) {
    header(out, "lock_permits_in_use", "gauge", "A semaphore's permits held now (as its traffic shows)." + fold);
    for (const series* s : shown) {
      if (s->permits_in_use >= 0) fmt::format_to(std::back_inserter(out), "lockscope_lock_permits_in_use{{lock=\"{}\"}} {}\n", s->label, s->permits_in_use);
    }
    header(out, "lock_permit_limit", "gauge", "A semaphore's permits, when its traffic told them." + fold);
    for (const series* s : shown) {
      if (s->permit_limit >= 0) fmt::format_to(std::back_inserter(out), "lockscope_lock_permit_limit{{lock=\"{}\"}} {}\n", s->label, s->permit_limit);
    }
  }

  header(out, "lock_anomalies_total", "counter", "Anomalies by kind (see lockscope analyze)." + fold);
  for (const series* s : shown) {
    for (std::size_t k = 1; k < locks::anomaly_kind_count; ++k) {
      if (s->anomalies[k] == 0) continue;
      fmt::format_to(std::back_inserter(out), "lockscope_lock_anomalies_total{{lock=\"{}\",kind=\"{}\"}} {}\n",
                     s->label, to_string(static_cast<anomaly_kind>(k)), s->anomalies[k]);
    }
  }

  const auto histo = [&](std::string_view name, std::string_view help, histogram series::*which) {
    header(out, name, "histogram", std::string(help) + fold);
    for (const series* s : shown) {
      const histogram& h = s->*which;
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < h.buckets.size(); ++b) {
        cumulative += h.buckets[b];
        fmt::format_to(std::back_inserter(out), "lockscope_{}_bucket{{lock=\"{}\",le=\"{}\"}} {}\n", name, s->label,
                       bucket_labels[b], cumulative);
      }
      fmt::format_to(std::back_inserter(out), "lockscope_{}_sum{{lock=\"{}\"}} ", name, s->label);
      append_seconds(out, h.sum_us);
      fmt::format_to(std::back_inserter(out), "\nlockscope_{}_count{{lock=\"{}\"}} {}\n", name, s->label, h.count);
    }
  };
  histo("lock_wait_seconds", "Waits that ended in an acquisition: from the owner's first failed attempt.",
        &series::wait);
  histo("lock_hold_seconds", "Completed holds: acquisition to release, forced release or expiry.", &series::hold);

  header(out, "capture_packets_total", "counter", "Packets captured.");
  sample(out, "capture_packets_total", monotonic(last_packets_, g.packets));
  header(out, "capture_bytes_total", "counter", "Bytes captured.");
  sample(out, "capture_bytes_total", monotonic(last_bytes_, g.bytes));
  header(out, "capture_kernel_drops_total", "counter",
         "Packets the kernel or the interface dropped: the capture buffer was full.");
  sample(out, "capture_kernel_drops_total", monotonic(last_drops_, g.kernel_drops));
  header(out, "exchanges_total", "counter", "Redis exchanges decoded (command and reply, or a server push).");
  sample(out, "exchanges_total", monotonic(last_exchanges_, g.exchanges));
  header(out, "decode_errors_total", "counter", "RESP decode errors.");
  sample(out, "decode_errors_total", monotonic(last_decode_errors_, g.decode_errors));
  header(out, "tcp_gap_bytes_total", "counter", "TCP payload bytes missing from the capture (gaps in a stream).");
  sample(out, "tcp_gap_bytes_total", monotonic(last_gap_bytes_, g.gap_bytes));
  header(out, "flows_open", "gauge", "TCP connections followed now.");
  sample(out, "flows_open", g.flows_open);
  header(out, "buffered_bytes", "gauge",
         "What the open connections buffer now: out-of-order segments and commands awaiting replies, at their "
         "cost (--max-buffer-total caps the sum).");
  sample(out, "buffered_bytes", g.buffered_bytes);
  header(out, "buffer_sheds_total", "counter",
         "Times a connection gave back what it buffered (its holes given up, its waiting commands shown without "
         "a reply) because all of them together passed --max-buffer-total.");
  sample(out, "buffer_sheds_total", monotonic(last_buffer_sheds_, g.buffer_sheds));
  header(out, "process_resident_memory_bytes", "gauge", "Resident memory of the lockscope process.");
  sample(out, "process_resident_memory_bytes", g.rss_bytes);

  header(out, "store_entries", "gauge",
         "Entries in the analyzer's bounded stores now: flows (open connections), owners and connections the "
         "timeline names, locks (one row per lock seen, idle ones forgotten at --max-locks), scripts and shas (learnt from the traffic), values "
         "(lock values followed), labelled_locks (this endpoint's lock labels).");
  const auto stores = [&](std::string_view metric, std::initializer_list<std::pair<std::string_view, std::uint64_t>> v) {
    for (const auto& [store, n] : v) {
      fmt::format_to(std::back_inserter(out), "lockscope_{}{{store=\"{}\"}} {}\n", metric, store, n);
    }
  };
  stores("store_entries", {{"flows", g.flows_open},
                           {"owners", g.owners},
                           {"connections", g.connections},
                           {"locks", g.locks},
                           {"scripts", g.scripts},
                           {"shas", g.shas},
                           {"values", g.values},
                           {"labelled_locks", labelled_locks()}});
  header(out, "store_capacity", "gauge", "The caps of the bounded stores (entries).");
  stores("store_capacity", {{"flows", g.flows_cap},
                            {"scripts", g.scripts_cap},
                            {"shas", g.shas_cap},
                            {"values", g.values_cap},
                            {"labelled_locks", options_.max_locks}});
  if (g.locks_cap > 0) stores("store_capacity", {{"locks", g.locks_cap}});
  header(out, "locks_forgotten_total", "counter",
         "Idle locks whose rows were given up when the rows reached --max-locks (their totals stay in the summary).");
  sample(out, "locks_forgotten_total", g.locks_forgotten);
}

}  // namespace lockscope::live
