#include "lockscope/locks/lock_report.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "lockscope/locks/event_jsonl.hpp"
#include "lockscope/locks/event_text.hpp"
#include "lockscope/locks/event_selection.hpp"
#include "lockscope/locks/lock_globs.hpp"
#include "output/sorted_spool.hpp"
#include "output/summary_table.hpp"

namespace lockscope::locks {

lock_report::lock_report(const report_options& options, std::function<void(std::string_view)> write)
    : options_(options), write_(std::move(write)) {
  out_.reserve(1u << 16);
}

lock_report::~lock_report() = default;

void lock_report::on_event(const lock_event& e) {
  if (!options_.lock_globs.empty() && !event_selected(e, [this](std::string_view lock) { return selected(lock); })) return;
  ++events_;
  if (options_.start_us < 0) options_.start_us = e.ts_us;
  if (options_.format != report_format::summary_only) write_event(e);  // --summary: only counted
}

void lock_report::write_event(const lock_event& e) {
  switch (options_.format) {
    case report_format::summary_only:
      return;
    case report_format::jsonl:
      append_event_jsonl(out_, e);
      out_ += '\n';
      if (options_.line_buffered || out_.size() > (1u << 16)) flush();
      return;
    case report_format::stream_text: {
      write_start_line();
      if (is_group_event(e)) {
        append_group_text(out_, e, clock());
        flush();
        return;
      }
      if (!seen_scope_) {
        seen_scope_ = true;
        first_server_ = e.lock_server;
        first_db_ = e.db;
      }
      several_servers_ |= e.lock_server != first_server_;
      several_dbs_ |= e.db != first_db_;
      const std::string title = several_servers_ || several_dbs_
                                    ? lock_title(e.lock, e.lock_server, e.db, several_servers_, several_dbs_)
                                    : std::string(printable(e.lock));
      if (options_.live_lock_width > 0) {
        append_event_text(out_, e, clock(), true, fit_column(title, options_.live_lock_width));
      } else {
        append_event_text(out_, e, clock(), true, title);
      }
      flush();
      return;
    }
    case report_format::text: {
      if (is_group_event(e)) {
        // Attempts are reported once over, not in time order: sorted by time at the end.
        group_lines_.emplace_back(e.ts_us, std::string());
        append_group_text(group_lines_.back().second, e, clock());
        return;
      }
      identity_key_.assign(e.lock);
      identity_key_ += '\0';
      identity_key_ += e.lock_server;
      identity_key_ += '\0';
      identity_key_ += fmt::format_int(e.db).c_str();
      auto it = index_.find(identity_key_);
      if (it == index_.end()) {
        it = index_.emplace(identity_key_, per_lock_.size()).first;
        per_lock_.emplace_back(std::string(e.lock), std::string());
        scope_of_.emplace_back(std::string(e.lock_server), e.db);
        last_ts_.push_back(e.ts_us);
      }
      // Events come in time order but for operations decided late (a one-direction
      // capture's commands, flushed when their connection ends): such a lock's lines are
      // sorted at the end.
      std::int64_t& last = last_ts_[it->second];
      if (e.ts_us < last) unsorted_locks_.insert(it->second);
      else last = e.ts_us;
      std::string& lines = per_lock_[it->second].second;
      const std::size_t before = lines.size();
      append_event_text(lines, e, clock(), false);
      buffered_bytes_ += lines.size() - before;
      if (buffered_bytes_ > options_.text_buffer_bytes) spill();
      return;
    }
  }
}

namespace {

// A line's time, to sort by: "+12.000345" as microseconds, an absolute stamp (one
// format and zone for the whole output) as its text.
struct line_time {
  std::int64_t relative_us = 0;
  std::string_view absolute;
  bool operator<(const line_time& o) const noexcept {
    return relative_us != o.relative_us ? relative_us < o.relative_us : absolute < o.absolute;
  }
};

line_time time_of_line(std::string_view line) {
  const std::size_t from = line.find_first_not_of(' ');
  if (from == std::string_view::npos) return {};
  const std::size_t to = std::min(line.find(' ', from), line.size());
  const std::string_view token = line.substr(from, to - from);
  if (token.empty() || (token[0] != '+' && token[0] != '-')) return {0, token};
  std::int64_t seconds = 0, micros = 0;
  std::size_t i = 1;
  for (; i < token.size() && token[i] != '.'; ++i) seconds = seconds * 10 + (token[i] - '0');
  for (++i; i < token.size(); ++i) micros = micros * 10 + (token[i] - '0');
  const std::int64_t us = seconds * 1'000'000 + micros;
  return {token[0] == '-' ? -us : us, {}};
}

}  // namespace

void lock_report::sort_lines_by_time(std::string& lines) {
  std::vector<std::string_view> each;
  for (std::size_t at = 0; at < lines.size();) {
    const std::size_t end = lines.find('\n', at);
    const std::size_t next = end == std::string::npos ? lines.size() : end + 1;
    each.emplace_back(lines.data() + at, next - at);
    at = next;
  }
  std::stable_sort(each.begin(), each.end(),
                   [](std::string_view a, std::string_view b) { return time_of_line(a) < time_of_line(b); });
  std::string sorted;
  sorted.reserve(lines.size());
  for (std::string_view l : each) sorted += l;
  lines.swap(sorted);
}

bool lock_report::selected(std::string_view lock) const noexcept {
  return options_.lock_globs.empty() || matches_any_glob(options_.lock_globs, lock);
}

void lock_report::flush() {
  if (out_.empty()) return;
  write_(out_);
  out_.clear();
}

text_clock lock_report::clock() const noexcept {
  text_clock c(options_.start_us);
  c.absolute = options_.absolute_time;
  c.local = options_.local_time;
  return c;
}

void lock_report::write_start_line() {
  if (!options_.start_line || start_line_written_ || options_.start_us < 0) return;
  start_line_written_ = true;
  out_ += capture_start_line(options_.start_us, options_.absolute_time, options_.local_time);
}

std::string fit_column(std::string_view name, std::size_t width) {
  // Display columns: UTF-8 continuation bytes take none.
  std::vector<std::size_t> starts;  // byte offset of each character
  for (std::size_t i = 0; i < name.size(); ++i) {
    if ((static_cast<unsigned char>(name[i]) & 0xc0) != 0x80) starts.push_back(i);
  }
  const std::size_t columns = starts.size();
  if (columns <= width) return std::string(name) + std::string(width - columns, ' ');
  if (width < 3) return std::string(name.substr(0, starts[width]));
  const std::size_t tail = (width - 1) / 2 + (width - 1) % 2, head = width - 1 - tail;
  return std::string(name.substr(0, starts[head])) + "…" + std::string(name.substr(starts[columns - tail]));
}

void lock_report::finish(const lock_timeline& timeline) {
  if (options_.format == report_format::text || options_.format == report_format::stream_text) write_start_line();
  if (options_.format == report_format::text && spill_) {
    write_spilled();
  } else if (options_.format == report_format::text) {
    const std::vector<std::string> title = titles();
    for (const std::size_t i : unsorted_locks_) sort_lines_by_time(per_lock_[i].second);
    for (std::size_t i = 0; i < per_lock_.size(); ++i) {
      out_ += "== ";
      out_ += title[i];
      out_ += '\n';
      out_ += per_lock_[i].second;
      out_ += '\n';
      flush();
    }
  }
  if (options_.format == report_format::text && !group_lines_.empty()) {
    std::stable_sort(group_lines_.begin(), group_lines_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    out_ += "== lock groups\n";
    for (const auto& line : group_lines_) out_ += line.second;
    out_ += '\n';
    flush();
  }
  if (options_.format == report_format::stream_text && events_ > 0 && options_.summary) out_ += '\n';
  flush();
  if (options_.format == report_format::summary_only ||
      (options_.summary && (options_.format == report_format::text || options_.format == report_format::stream_text))) {
    write_summary(timeline);
  }
}

void lock_report::write_summary(const lock_timeline& timeline) { write_summary_table(timeline, options_, out_, write_); }

std::vector<std::string> lock_report::titles() const {
  // Per name: the first lock's server and database, and whether others differ.
  struct seen {
    std::size_t first;
    bool servers = false, dbs = false;
  };
  std::map<std::string_view, seen> names;
  for (std::size_t i = 0; i < per_lock_.size(); ++i) {
    auto [it, added] = names.try_emplace(per_lock_[i].first, seen{i});
    if (added) continue;
    it->second.servers |= scope_of_[i].first != scope_of_[it->second.first].first;
    it->second.dbs |= scope_of_[i].second != scope_of_[it->second.first].second;
  }
  std::vector<std::string> t;
  t.reserve(per_lock_.size());
  for (std::size_t i = 0; i < per_lock_.size(); ++i) {
    const seen& n = names.at(per_lock_[i].first);
    t.push_back(lock_title(per_lock_[i].first, scope_of_[i].first, scope_of_[i].second, n.servers, n.dbs));
  }
  return t;
}

void lock_report::spill() {
  if (!spill_) spill_ = std::make_unique<sorted_spool>();
  for (std::size_t i = 0; i < per_lock_.size(); ++i) {
    std::string& lines = per_lock_[i].second;
    if (lines.empty()) continue;
    spill_->add(i, lines);
    std::string().swap(lines);  // the memory too
  }
  spill_->end_run();
  buffered_bytes_ = 0;
}

void lock_report::write_spilled() {
  spill();
  const std::vector<std::string> title = titles();
  std::uint64_t current = UINT64_MAX;
  spill_->merge([&](std::uint64_t lock, std::string_view text) {
    if (lock != current) {
      if (current != UINT64_MAX) out_ += '\n';
      current = lock;
      out_ += "== ";
      out_ += title[lock];
      out_ += '\n';
    }
    out_ += text;
    if (out_.size() > (1u << 16)) flush();
  });
  if (current != UINT64_MAX) out_ += '\n';
  flush();
}

}  // namespace lockscope::locks
