#include "output/summary_table.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "lockscope/ingest/short_bytes.hpp"
#include "lockscope/ingest/counted.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/event_text.hpp"
#include "lockscope/locks/lock_globs.hpp"
#include "lockscope/locks/permit_text.hpp"
#include "output/append_format.hpp"
#include "output/two_thread_batches.hpp"

namespace lockscope::locks {

namespace {

// What a row shows after the lock's name: the whole of the row's tail depends on these
// and on nothing else.
struct row_values {
  std::uint64_t acquisitions = 0, contended = 0, gave_up = 0, renewals = 0, expiries = 0;
  std::int64_t hold[3] = {}, wait[3] = {};
  bool hold_at_least = false, wait_at_least = false;
  std::uint64_t anomalies[anomaly_kind_count] = {};
  explicit row_values(const lock_stats& s)
      : acquisitions(s.acquisitions), contended(s.contended_acquisitions), gave_up(s.gave_up), renewals(s.renewals),
        expiries(s.expiries),
        hold{s.hold.p50, s.hold.p99, s.hold.max}, wait{s.wait.p50, s.wait.p99, s.wait.max},
        hold_at_least(s.hold.at_least), wait_at_least(s.wait.at_least) {
    std::memcpy(anomalies, s.anomalies, sizeof anomalies);
  }
  // Whether `s` shows these values (the first ones differ most often).
  bool shown_by(const lock_stats& s) const noexcept {
    return acquisitions == s.acquisitions && hold[2] == s.hold.max && wait[2] == s.wait.max &&
           contended == s.contended_acquisitions && gave_up == s.gave_up && renewals == s.renewals &&
           expiries == s.expiries &&
           hold[0] == s.hold.p50 && hold[1] == s.hold.p99 && wait[0] == s.wait.p50 && wait[1] == s.wait.p99 &&
           hold_at_least == s.hold.at_least && wait_at_least == s.wait.at_least &&
           std::memcmp(anomalies, s.anomalies, sizeof anomalies) == 0;
  }
};

// The summary table has a row per lock (hundreds of thousands on big captures): rows
// are written straight into a char buffer. Each fast path prints exactly what the fmt
// specification of the row prints, and defers to fmt where that is not obvious.
class row_buffer {
 public:
  // Room for `n` more bytes; the row is then written through the pointer returned and
  // ended with end_row.
  char* begin_row(std::size_t n) {
    if (used_ + n > bytes_.size()) bytes_.resize(std::max(bytes_.size() * 2, used_ + n));
    return bytes_.data() + used_;
  }
  void end_row(char* p) noexcept { used_ = static_cast<std::size_t>(p - bytes_.data()); }
  std::string_view view() const noexcept { return {bytes_.data(), used_}; }
  void clear() noexcept { used_ = 0; }

  // The last row's tail (after the lock's column) and the values it shows (append_row).
  std::string& last_tail() noexcept { return last_tail_; }
  const row_values* last_values() const noexcept { return last_values_ ? &*last_values_ : nullptr; }
  void set_last_values(const row_values& v) { last_values_ = v; }

 private:
  std::vector<char> bytes_ = std::vector<char>(1u << 18);
  std::size_t used_ = 0;
  std::string last_tail_;
  std::optional<row_values> last_values_;
};

char* put(char* p, std::string_view s) noexcept {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* spaces(char* p, std::size_t n) noexcept {
  std::memset(p, ' ', n);
  return p + n;
}
// `{:>width}` of an integer.
char* put_right(char* p, std::uint64_t v, std::size_t width) noexcept {
  const fmt::format_int f(v);
  if (f.size() < width) p = spaces(p, width - f.size());
  return put(p, std::string_view(f.data(), f.size()));
}

// Printable ASCII only: shown as is, and its display width is its size.
bool plain_ascii(std::string_view s) noexcept {
  // Eight bytes at a time: whether any byte is < 0x20 (a borrow starts only at one) or
  // > 0x7e (+1 sets its top bit, or it is set already).
  constexpr std::uint64_t ones = 0x0101010101010101ull, tops = 0x8080808080808080ull;
  auto bad = [&](const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return (((w - 0x20 * ones) & ~w) | ((w + ones) | w)) & tops;
  };
  const std::size_t n = s.size();
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
      if (bad(s.data() + i) != 0) return false;
    }
    return bad(s.data() + n - 8) == 0;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// format_duration at `p` (at most 32 bytes), without allocating; `columns` counts the
// display width. Exact ties (x.xxx5 s, x.x5 ms) go through fmt, whose rounding of the
// binary value decides them.
char* put_duration(char* p, std::int64_t us, std::size_t& columns) {
  char* const start = p;
  if (us < 0) {
    *p++ = '-';
  } else if (us < 1000) {
    const fmt::format_int f(us);
    p = put(p, std::string_view(f.data(), f.size()));
    p = put(p, "µs");
    --columns;  // µ is two bytes, one column
  } else if (us >= (std::int64_t{1} << 50) || (us < 1'000'000 ? us % 100 == 50 : us % 1000 == 500)) {
    p = put(p, format_duration(us));
  } else {
    const bool ms = us < 1'000'000;
    const std::int64_t unit = ms ? 100 : 1000;
    const std::int64_t digits = ms ? 10 : 1000;
    std::int64_t q = us / unit;
    if (us % unit > unit / 2) ++q;
    const fmt::format_int whole(q / digits);
    p = put(p, std::string_view(whole.data(), whole.size()));
    *p++ = '.';
    const fmt::format_int frac(q % digits + digits);  // leading zeros: cut the leading 1
    p = put(p, std::string_view(frac.data() + 1, frac.size() - 1));
    p = put(p, ms ? "ms" : "s");
  }
  columns += static_cast<std::size_t>(p - start);
  return p;
}

// "p50/p99/max" (or "-") left-aligned in `width` columns, like fmt's `{:<width}`.
char* put_triple(char* p, const duration_stats& d, std::size_t width) {
  std::size_t columns = 0;
  if (d.max < 0) {
    *p++ = '-';
    columns = 1;
  } else {
    if (d.at_least) {
      p = put(p, "≥");  // three bytes, one column
      columns += 1;
    }
    p = put_duration(p, d.p50, columns);
    *p++ = '/';
    p = put_duration(p, d.p99, columns);
    *p++ = '/';
    p = put_duration(p, d.max, columns);
    columns += 2;
  }
  return columns < width ? spaces(p, width - columns) : p;
}

// The row's tail (after the name's column): "  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>7}  {:>8}  {:>8}  {}\n".
char* put_row_tail(char* p, const lock_stats& s) {
  p = spaces(p, 2);
  p = put_right(p, s.acquisitions, 6);
  p = spaces(p, 2);
  if (s.contended_acquisitions == 0) {
    p = put(p, "     0.0");
  } else if (s.contended_acquisitions == s.acquisitions) {
    p = put(p, "   100.0");
  } else {
    const double contended = s.acquisitions == 0 ? 0.0
                                                 : 100.0 * static_cast<double>(s.contended_acquisitions) /
                                                       static_cast<double>(s.acquisitions);
    p = fmt::format_to(p, "{:>8.1f}", contended);
  }
  p = put(p, "%  ");
  p = put_triple(p, s.hold, 28);
  p = spaces(p, 2);
  p = put_triple(p, s.wait, 28);
  p = spaces(p, 2);
  p = put_right(p, s.gave_up, 7);
  p = spaces(p, 2);
  p = put_right(p, s.renewals, 8);
  p = spaces(p, 2);
  p = put_right(p, s.expiries, 8);
  p = spaces(p, 2);
  if (s.anomaly_total() == 0) {
    *p++ = '-';
  } else {
    bool first = true;
    for (std::size_t k = 1; k < anomaly_kind_count; ++k) {
      if (s.anomalies[k] == 0) continue;
      if (!first) *p++ = ' ';
      first = false;
      p = put(p, to_string(static_cast<anomaly_kind>(k)));
      *p++ = '=';
      p = put_right(p, s.anomalies[k], 0);
    }
  }
  *p++ = '\n';
  return p;
}

// One row of the table: "{:<{}}  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>7}  {:>8}  {:>8}  {}\n".
// Many locks have the same figures (acquired once, never released in the capture): a
// row whose values equal the previous row's copies that row's tail.
void append_row(row_buffer& rows, std::string_view lock, const lock_stats& s, std::size_t width) {
  // The fixed part takes < 128 bytes, a duration < 32, an anomaly < 48.
  char* p = rows.begin_row(lock.size() + width + 128 + 8 * 32 + anomaly_kind_count * 48);
  if (plain_ascii(lock)) {  // the usual case
    p = ingest::copy_bytes(p, lock);
    if (lock.size() < width) {  // width <= 48: 48 spaces fit the room asked for, the rest is overwritten
      std::memset(p, ' ', 48);
      p += width - lock.size();
    }
  } else {
    p = fmt::format_to(p, "{:<{}}", printable(lock), width);
  }
  std::string& tail = rows.last_tail();
  if (rows.last_values() != nullptr && rows.last_values()->shown_by(s)) {
    p = put(p, tail);
  } else {
    char* const start = p;
    p = put_row_tail(p, s);
    tail.assign(start, p);
    rows.set_last_values(row_values(s));
  }
  rows.end_row(p);
}

// Below this many locks a second thread costs more than it saves.
constexpr std::size_t parallel_summary_min_locks = 20'000;
// Locks per batch of rows (~250 KB of text).
constexpr std::size_t summary_batch_locks = 2048;

// One table: the names that need titles, the name column's width, then the rows.
class summary_writer {
 public:
  summary_writer(const lock_timeline& timeline, const report_options& options, std::string& out,
                 const std::function<void(std::string_view)>& write)
      : timeline_(timeline), options_(options), out_(out), write_(write) {}

  void write() {
    find_shared_names();
    const std::size_t width = name_width();
    append_format(out_, "{:<{}}  {:>6}  {:>9}  {:<28}  {:<28}  {:>7}  {:>8}  {:>8}  {}\n", "lock", width,
                   "acq", "contended", "hold p50/p99/max", "wait p50/p99/max", "gave_up", "renewals", "expiries", "anomalies");
    flush();
    std::uint64_t locks = 0;
    if (options_.top > 0) {
      locks = write_top_rows(width);
    } else {
      locks = write_rows(width);
    }
    write_footer(locks);
    write_permit_notes();
    flush();
  }

 private:
  bool selected(std::string_view lock) const noexcept {
    return options_.lock_globs.empty() || matches_any_glob(options_.lock_globs, lock);
  }

  // Semaphores and latches: their permits beside the table's columns ("sem: 2/2 permits
  // at most, 41 refused"), in name order.
  void write_permit_notes() {
    std::vector<std::pair<std::string, std::string>> notes;
    timeline_.for_each_permit_lock([&](std::string_view lock, const lock_stats& s) {
      if (selected(lock)) notes.emplace_back(printable(lock), permit_summary(s));
    });
    if (notes.empty()) return;
    std::sort(notes.begin(), notes.end());
    out_ += notes.size() == 1 ? "semaphore or latch (several holders by design):\n" : "semaphores and latches (several holders by design):\n";
    for (const auto& [lock, note] : notes) append_format(out_, "  {}: {}\n", lock, note);
  }

  void flush() {
    if (out_.empty()) return;
    write_(out_);
    out_.clear();
  }

  // Names on several servers or databases: their rows carry titles (only when the
  // capture has more than one (server, database) at all).
  void find_shared_names() {
    if (timeline_.scope_count() <= 1) return;
    timeline_.for_each_lock([&](std::string_view lock, const lock_stats& s) {
      if (!selected(lock)) return;
      auto [it, added] = shared_names_.try_emplace(lock, name_scopes{s.server, s.db});
      it->second.servers |= s.server != it->second.server;
      it->second.dbs |= s.db != it->second.db;
    });
    std::erase_if(shared_names_, [](const auto& n) { return !n.second.servers && !n.second.dbs; });
  }

  // A row's title when not just the name (else empty).
  std::string title_of(std::string_view lock, const lock_stats& s) const {
    if (shared_names_.empty()) return {};
    const auto it = shared_names_.find(lock);
    if (it == shared_names_.end()) return {};
    return lock_title(lock, s.server, s.db, it->second.servers, it->second.dbs);
  }

  std::size_t name_width() const {
    std::size_t width = 4;
    if (!shared_names_.empty()) {
      timeline_.for_each_lock([&](std::string_view lock, const lock_stats& s) {
        if (!selected(lock)) return;
        const std::string t = title_of(lock, s);
        width = std::max(width, std::min<std::size_t>(t.empty() ? lock.size() : t.size(), 48));
      });
    } else if (options_.lock_globs.empty()) {
      width = std::max(width, std::min<std::size_t>(timeline_.longest_lock_name(), 48));
    } else {
      timeline_.for_each_lock_name([&](std::string_view lock) {
        if (selected(lock)) width = std::max(width, std::min<std::size_t>(lock.size(), 48));
      });
    }
    return width;
  }

  // Rows are formatted a batch at a time (timeline.for_each_lock by part); the number of
  // locks selected.
  std::uint64_t write_rows(std::size_t width) {
    const std::size_t batches = std::max<std::size_t>(1, timeline_.lock_count() / summary_batch_locks);
    auto format_batch = [&](std::size_t batch, row_buffer& rows) {
      rows.clear();
      std::uint64_t n = 0;
      timeline_.for_each_lock(batch, batches, [&](std::string_view lock, const lock_stats& s) {
        if (!options_.lock_globs.empty() && !selected(lock)) return;
        ++n;
        if (shared_names_.empty()) {
          append_row(rows, lock, s, width);
        } else {
          const std::string t = title_of(lock, s);
          append_row(rows, t.empty() ? lock : std::string_view(t), s, width);
        }
      });
      return n;
    };
    if (options_.threads < 2 || timeline_.lock_count() < parallel_summary_min_locks) {
      std::uint64_t locks = 0;
      row_buffer rows;
      for (std::size_t b = 0; b < batches; ++b) {
        locks += format_batch(b, rows);
        if (!rows.view().empty()) write_(rows.view());
      }
      return locks;
    }
    row_buffer rows_of_thread[2];
    return write_batches_on_two_threads(
        batches,
        [&](std::size_t batch, unsigned thread, std::string_view& text) {
          const std::uint64_t n = format_batch(batch, rows_of_thread[thread]);
          text = rows_of_thread[thread].view();
          return n;
        },
        write_);
  }

  // The rows of the options.top highest ranked locks (lock_rank), highest first, and
  // the line on the others; the number of locks selected.
  std::uint64_t write_top_rows(std::size_t width) {
    // Pass 1: the highest ranked selected locks, each known by its place among them in
    // for_each_lock's order, and what every selected lock counted.
    struct ranked {
      std::uint64_t trouble, activity, seen;
    };
    const auto before = [](const ranked& a, const ranked& b) {
      if (a.trouble != b.trouble) return a.trouble > b.trouble;
      if (a.activity != b.activity) return a.activity > b.activity;
      return a.seen < b.seen;
    };
    struct counts {
      std::uint64_t acquisitions = 0, contended = 0, gave_up = 0, renewals = 0, expiries = 0, anomalies = 0;
      void add(const lock_stats& s, std::uint64_t sign) noexcept {  // sign: 1 or -1 (mod 2^64)
        acquisitions += sign * s.acquisitions;
        contended += sign * s.contended_acquisitions;
        gave_up += sign * s.gave_up;
        renewals += sign * s.renewals;
        expiries += sign * s.expiries;
        anomalies += sign * s.anomaly_total();
      }
    } others;
    std::vector<ranked> heap;  // the lowest ranked of those kept at the front
    std::uint64_t seen = 0;
    timeline_.for_each_lock([&](std::string_view lock, const lock_stats& s) {
      if (!options_.lock_globs.empty() && !selected(lock)) return;
      const lock_rank rank(s);
      const ranked r{rank.trouble, rank.activity, seen++};
      others.add(s, 1);
      if (heap.size() < options_.top) {
        heap.push_back(r);
        std::push_heap(heap.begin(), heap.end(), before);
      } else if (before(r, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), before);
        heap.back() = r;
        std::push_heap(heap.begin(), heap.end(), before);
      }
    });
    const std::uint64_t total = seen;
    std::sort(heap.begin(), heap.end(), before);
    // Pass 2: their rows, in rank order.
    std::vector<std::pair<std::uint64_t, std::size_t>> wanted;  // (seen, rank) by seen
    wanted.reserve(heap.size());
    for (std::size_t i = 0; i < heap.size(); ++i) wanted.emplace_back(heap[i].seen, i);
    std::sort(wanted.begin(), wanted.end());
    std::vector<std::string> rows_by_rank(heap.size());
    row_buffer row;
    std::size_t next = 0;
    seen = 0;
    timeline_.for_each_lock([&](std::string_view lock, const lock_stats& s) {
      if (next == wanted.size() || (!options_.lock_globs.empty() && !selected(lock))) return;
      if (seen++ != wanted[next].first) return;
      row.clear();
      const std::string title = title_of(lock, s);
      append_row(row, title.empty() ? lock : std::string_view(title), s, width);
      rows_by_rank[wanted[next++].second] = row.view();
      others.add(s, ~std::uint64_t{0});
    });
    for (const std::string& r : rows_by_rank) {
      out_ += r;
      if (out_.size() >= (64u << 10)) flush();
    }
    if (total > heap.size()) {
      append_format(out_,
                    "(not in the rows above: the other {} of {} locks (--top {} shows the most contended and "
                    "anomalous), with {} ({} contended), {}, {}, {} and {})\n",
                    total - heap.size(), total, options_.top, ingest::counted(others.acquisitions, "acquisition"),
                    others.contended, ingest::counted(others.gave_up, "wait given up", "waits given up"),
                    ingest::counted(others.renewals, "renewal"),
                    ingest::counted(others.expiries, "expiry", "expiries"),
                    ingest::counted(others.anomalies, "anomaly", "anomalies"));
    }
    return total;
  }

  // What the rows leave out: the locks forgotten at --max-locks, or that there were none.
  void write_footer(std::uint64_t locks) {
    const forgotten_locks& f = timeline_.forgotten();
    if (f.locks > 0) {
      std::uint64_t anomalies = 0;
      for (const std::uint64_t a : f.anomalies) anomalies += a;
      append_format(out_,
                    "(not in the rows above: {} forgotten at --max-locks{}, with {} ({} "
                    "contended), {}, {}, {} and {})\n",
                    ingest::counted(f.locks, "idle lock"), options_.lock_globs.empty() ? "" : " (selected by --lock or not)",
                    ingest::counted(f.acquisitions, "acquisition"), f.contended_acquisitions,
                    ingest::counted(f.gave_up, "wait given up", "waits given up"),
                    ingest::counted(f.renewals, "renewal"), ingest::counted(f.expiries, "expiry", "expiries"),
                    ingest::counted(anomalies, "anomaly", "anomalies"));
    } else if (locks == 0 && timeline_.set_aside_families().empty()) {
      out_ += "(no lock activity)\n";
    }
    for (const lock_timeline::set_aside_family& family : timeline_.set_aside_families()) {
      append_format(out_,
                    "(not in the rows above: {} set once by a SET NX and never used again: markers (dedupe, "
                    "idempotency keys), not locks: {}, e.g. {})\n",
                    ingest::counted(family.keys, "key"), printable(family.shape), printable(family.example));
    }
  }

  // A name's first (server, database), and whether other locks of the name differ.
  struct name_scopes {
    std::string_view server;
    std::int32_t db = 0;
    bool servers = false, dbs = false;
  };

  const lock_timeline& timeline_;
  const report_options& options_;
  std::string& out_;
  const std::function<void(std::string_view)>& write_;
  std::unordered_map<std::string_view, name_scopes> shared_names_;
};

}  // namespace

void write_summary_table(const lock_timeline& timeline, const report_options& options, std::string& out,
                         const std::function<void(std::string_view)>& write) {
  summary_writer(timeline, options, out, write).write();
}

}  // namespace lockscope::locks
