#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/anomaly_text.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "lockscope/ingest/message.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/ingest/short_bytes.hpp"

namespace lockscope::locks {

bool glob_match(std::string_view p, std::string_view t) noexcept {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
      continue;
    }
    if (pi < p.size() && p[pi] == '[') {
      const std::size_t close = p.find(']', pi + 1);
      if (close != std::string_view::npos) {
        bool negate = pi + 1 < close && (p[pi + 1] == '!' || p[pi + 1] == '^');
        bool found = false;
        for (std::size_t k = pi + 1 + (negate ? 1 : 0); k < close; ++k) {
          if (k + 2 < close && p[k + 1] == '-') {
            if (t[ti] >= p[k] && t[ti] <= p[k + 2]) found = true;
            k += 2;
          } else if (p[k] == t[ti]) {
            found = true;
          }
        }
        if (found != negate) {
          pi = close + 1;
          ++ti;
          continue;
        }
      }
    } else if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
      continue;
    }
    if (star == std::string_view::npos) return false;
    pi = star + 1;
    ti = ++mark;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string short_owner(std::string_view owner) {
  if (auto parts = lock::parse_owner_id(owner)) {
    return std::string(parts->client_id.substr(0, 4)) + "…:" + std::string(parts->thread_id);
  }
  if (owner.size() > 12) return std::string(owner.substr(0, 8)) + "…";
  return std::string(owner);
}

std::string format_duration(std::int64_t us) {
  if (us < 0) return "-";
  if (us < 1000) return fmt::format("{}µs", us);
  if (us < 1'000'000) return fmt::format("{:.1f}ms", static_cast<double>(us) / 1e3);
  return fmt::format("{:.3f}s", static_cast<double>(us) / 1e6);
}

namespace {

// Names come from the wire: control bytes would break the text layout (and an escape
// sequence would reach the terminal), and bytes that are not UTF-8 make the output
// unreadable to the tools it is piped to. Each such byte becomes '?', as do both bytes
// of a C1 control written as UTF-8 (U+0080 to U+009F: U+009B is CSI to some
// terminals): the length, and so the table's widths, stay as they were.
bool is_control(char c) noexcept { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }
bool is_plain_ascii(char c) noexcept { return !is_control(c) && static_cast<unsigned char>(c) < 0x80; }

}  // namespace

std::string_view printable(std::string_view s) {
  if (std::all_of(s.begin(), s.end(), is_plain_ascii)) return s;  // the usual case: no copy
  thread_local std::string scratch;
  scratch.assign(s);
  for (std::size_t i = 0; i < scratch.size(); ++i) {
    if (static_cast<unsigned char>(scratch[i]) >= 0x80) {
      // A C1 control gives 0 here, and its second byte alone is no UTF-8: both become '?'.
      if (const std::size_t n = resp::printable_utf8_sequence(scratch, i); n > 0) {
        i += n - 1;
        continue;
      }
      scratch[i] = '?';
    } else if (is_control(scratch[i])) {
      scratch[i] = '?';
    }
  }
  return scratch;
}

namespace {

// fmt into a memory_buffer (its fast contiguous path), then one append.
template <class... Args>
void append_format(std::string& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::memory_buffer b;
  fmt::format_to(fmt::appender(b), f, std::forward<Args>(args)...);
  out.append(b.data(), b.size());
}

// "MOVED slot 5474 to 127.0.0.1:30002: acquire retried there".
std::string redirect_text(const lock_event& e) {
  const std::string_view op = to_string(e.operation);
  switch (e.redirect) {
    case cluster_reply::moved:
      return fmt::format("MOVED slot {} to {}: {} retried there", e.slot, printable(e.redirect_to), op);
    case cluster_reply::ask:
      return fmt::format("ASK slot {} to {} (migrating): {} retried there after ASKING", e.slot, printable(e.redirect_to), op);
    case cluster_reply::tryagain:
      return fmt::format("TRYAGAIN (slot migrating, keys split between nodes): {} retried later", op);
    case cluster_reply::clusterdown:
      return fmt::format("CLUSTERDOWN: {} retried later", op);
    case cluster_reply::none:
      break;
  }
  return std::string(op);
}

void append_ms(std::string& out, std::int64_t us) {
  append_format(out, "{}.{:03}", us / 1000, us % 1000);
}

}  // namespace

void append_event_jsonl(std::string& out, const lock_event& e) {
  const std::int64_t secs = e.ts_us / 1'000'000;
  const std::int64_t frac = e.ts_us % 1'000'000;
  append_format(out, "{{\"ts\":{}.{:06},\"lock\":", secs, frac);
  append_json_string(out, e.lock);
  out += ",\"event\":\"";
  out += to_string(e.event);
  out += "\",\"owner\":";
  append_json_string(out, e.owner);
  out += ",\"client\":";
  append_json_string(out, e.client);
  out += ",\"server\":";
  append_json_string(out, e.server);
  append_format(out, ",\"db\":{}", e.db);
  if (!e.lock_server.empty() && e.lock_server != e.server) {
    out += ",\"lock_server\":";  // a Redis Cluster's lock: "cluster:<first node>"
    append_json_string(out, e.lock_server);
  }
  if (e.hold_count >= 0) append_format(out, ",\"hold_count\":{}", e.hold_count);
  if (e.lease_ms >= 0) append_format(out, ",\"lease_ms\":{}", e.lease_ms);
  if (e.ttl_ms >= 0) append_format(out, ",\"ttl_ms\":{}", e.ttl_ms);
  if (e.wait_us >= 0) {
    out += ",\"wait_ms\":";
    append_ms(out, e.wait_us);
    if (e.wait_at_least) out += ",\"wait_at_least\":true";
  }
  if (e.held_us >= 0) {
    out += ",\"held_ms\":";
    append_ms(out, e.held_us);
  }
  if (e.event == lock_event_kind::anomaly) {
    out += ",\"kind\":\"";
    out += to_string(e.kind);
    out += '"';
  }
  if (e.inferred) out += ",\"inferred\":true";
  if (e.confidence != link_confidence::none) {
    out += ",\"confidence\":\"";
    out += to_string(e.confidence);
    out += '"';
  }
  if (e.token >= 0) append_format(out, ",\"token\":{}", e.token);
  if (e.event == lock_event_kind::redirected) {
    out += ",\"redirect\":\"";
    out += to_string(e.redirect);
    out += "\",\"operation\":\"";
    out += to_string(e.operation);
    out += '"';
    if (e.slot >= 0) append_format(out, ",\"slot\":{}", e.slot);
    if (!e.redirect_to.empty()) {
      out += ",\"to\":";
      append_json_string(out, e.redirect_to);
    }
  }
  if (e.asking) out += ",\"asking\":true";
  if (e.interval_start_us >= 0) {
    append_format(out, ",\"since\":{}.{:06},\"for_ms\":", e.interval_start_us / 1'000'000, e.interval_start_us % 1'000'000);
    append_ms(out, std::max<std::int64_t>(e.interval_us, 0));
  }
  if (e.group != nullptr) {
    const lock_group& g = *e.group;
    auto list = [&](std::string_view field, std::span<const std::string_view> items) {
      out += ",\"";
      out += field;
      out += "\":[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ',';
        append_json_string(out, items[i]);
      }
      out += ']';
    };
    if (e.event == lock_event_kind::quorum) {
      append_format(out, ",\"servers\":{},\"acquired_on\":{},\"needed\":{}", g.total, g.acquired, g.needed);
      list("acquired_servers", g.acquired_on);
      list("owners", g.owners);
    } else {
      list("keys", g.tried);
      list("acquired_keys", g.acquired_on);
    }
    out += ",\"outcome\":\"";
    out += g.succeeded ? "acquired" : g.released ? "failed_released" : "failed";
    out += "\",\"start\":";
    append_format(out, "{}.{:06}", g.start_us / 1'000'000, g.start_us % 1'000'000);
    out += ",\"end\":";
    append_format(out, "{}.{:06}", g.end_us / 1'000'000, g.end_us % 1'000'000);
  }
  out += '}';
}

bool is_group_event(const lock_event& e) noexcept {
  return e.group != nullptr ||
         (e.event == lock_event_kind::anomaly &&
          (e.kind == anomaly_kind::quorum_lost || e.kind == anomaly_kind::split_quorum));
}

void append_group_text(std::string& out, const lock_event& e, std::int64_t start_us) {
  if (e.group == nullptr) {
    append_event_text(out, e, start_us, true);
    return;
  }
  const lock_group& g = *e.group;
  const std::int64_t rel = e.ts_us - start_us;
  const char sign = rel < 0 ? '-' : '+';
  const std::int64_t a = rel < 0 ? -rel : rel;
  append_format(out, "  {:>11}  ", fmt::format("{}{}.{:06}", sign, a / 1'000'000, a % 1'000'000));
  std::string owners;
  auto add_owner = [&](std::string_view o) {
    const std::string s = short_owner(o);
    if (owners.find(s) != std::string::npos) return;
    if (!owners.empty()) owners += ',';
    owners += printable(s);
  };
  if (e.event == lock_event_kind::quorum) {
    out += printable(e.lock);
    if (e.db != 0) append_format(out, " db {}", e.db);
    out += ": ";
    if (g.owners.empty()) add_owner(e.owner);
    for (std::string_view o : g.owners) add_owner(o);
    append_format(out, "{} acquired on {}/{} servers, quorum {}", owners, g.acquired, g.total, g.needed);
    if (!g.succeeded) out += g.released ? ": failed, released" : ": failed";
  } else {
    for (std::size_t i = 0; i < g.tried.size(); ++i) {
      if (i > 0) out += '+';
      out += printable(g.tried[i]);
    }
    out += ": ";
    add_owner(e.owner);
    append_format(out, "{} acquired {}/{} keys together (MultiLock)", owners, g.acquired, g.total);
    if (!g.succeeded) out += g.released ? ": failed, released" : ": failed";
  }
  append_format(out, " in {}\n", format_duration(g.end_us - g.start_us));
}

std::string lock_title(std::string_view name, std::string_view server, std::int32_t db, bool with_server,
                       bool with_db) {
  std::string t(printable(name));
  if (with_server && !server.empty()) {
    t += " @";
    t += printable(server);
  }
  if (with_db) t += fmt::format(" db {}", db);
  return t;
}

void append_event_text(std::string& out, const lock_event& e, std::int64_t start_us, bool with_lock,
                       std::string_view lock_title) {
  const std::int64_t rel = e.ts_us - start_us;
  const char sign = rel < 0 ? '-' : '+';
  const std::int64_t a = rel < 0 ? -rel : rel;
  append_format(out, "  {:>11}  ", fmt::format("{}{}.{:06}", sign, a / 1'000'000, a % 1'000'000));
  if (with_lock) {
    out += lock_title.empty() ? printable(e.lock) : lock_title;
    out += "  ";
  }
  append_format(out, "{:<21}  {:<12}  ", e.client.empty() ? "-" : e.client,
                 e.owner.empty() ? std::string("-") : std::string(printable(short_owner(e.owner))));
  std::string what(to_string(e.event));
  if (e.event == lock_event_kind::anomaly) what = "ANOMALY " + std::string(to_string(e.kind));
  append_format(out, "{:<27}", what);
  std::string details;
  auto add = [&](const std::string& s) {
    if (!details.empty()) details += ", ";
    details += s;
  };
  if (e.hold_count >= 0) add(fmt::format("hold count {}", e.hold_count));
  if (e.lease_ms >= 0) add(fmt::format("lease {} ms", e.lease_ms));
  if (e.ttl_ms >= 0) add(fmt::format("holder's ttl {} ms", e.ttl_ms));
  if (e.wait_us >= 0) add((e.wait_at_least ? "waited ≥" : "waited ") + format_duration(e.wait_us));
  if (e.held_us >= 0) add("held " + format_duration(e.held_us));
  if (e.token >= 0) add(fmt::format("token {}", e.token));
  if (e.interval_start_us >= 0) {
    const std::int64_t from = e.interval_start_us - start_us;
    const std::int64_t f = from < 0 ? -from : from;
    add(fmt::format("from {}{}.{:06} for {}", from < 0 ? '-' : '+', f / 1'000'000, f % 1'000'000,
                    format_duration(std::max<std::int64_t>(e.interval_us, 0))));
  }
  if (e.confidence != link_confidence::none && !e.owner.empty()) {
    add(fmt::format("subscriber linked to waiter ({})", to_string(e.confidence)));
  }
  if (e.event == lock_event_kind::redirected) add(redirect_text(e));
  if (e.asking) add("after ASKING (ASK redirect)");
  {
    std::string sentence;
    append_anomaly_detail(sentence, e);
    if (!sentence.empty()) add(sentence);
  }
  if (e.inferred) add("inferred from EVALSHA arguments");
  if (!details.empty()) {
    out += "  ";
    out += details;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += '\n';
}

lock_report::lock_report(const report_options& options, std::function<void(std::string_view)> write)
    : options_(options), write_(std::move(write)) {
  out_.reserve(1u << 16);
}

lock_report::~lock_report() = default;

// Runs of text lines, each sorted by lock: records [lock index][size][text] (host byte
// order, 8-byte fields) back to back in an unlinked temporary file.
class lock_report::spill_file {
 public:
  spill_file() {
    const char* dir = std::getenv("TMPDIR");
    if (dir == nullptr || *dir == '\0') dir = "/tmp";
    std::string path = std::string(dir) + "/lockscope-text-XXXXXX";
    fd_ = ::mkstemp(path.data());
    if (fd_ < 0) fail("cannot create a temporary file in " + std::string(dir) + " (set TMPDIR)");
    ::unlink(path.c_str());
    out_.reserve(buffer_bytes);
  }
  ~spill_file() { ::close(fd_); }
  spill_file(const spill_file&) = delete;
  spill_file& operator=(const spill_file&) = delete;

  // Appends to the current run; locks in increasing order.
  void add(std::uint64_t lock, std::string_view text) {
    const std::uint64_t header[2] = {lock, text.size()};
    put({reinterpret_cast<const char*>(header), sizeof header});
    put(text);
  }
  void end_run() {
    drain();
    runs_.emplace_back(run_start_, size_);
    run_start_ = size_;
  }
  // Calls piece(lock, text) with every record's text, in pieces, by lock and then by
  // run (the order the lines were written in).
  template <class Piece>
  void merge(Piece&& piece) {
    std::vector<cursor> cursors(runs_.size());
    // Read buffers: 8 MiB in all, 4-64 KiB a run.
    const std::size_t each = std::clamp<std::size_t>((8u << 20) / std::max<std::size_t>(runs_.size(), 1), 4096, 65536);
    using key = std::pair<std::uint64_t, std::size_t>;  // next lock, run
    std::priority_queue<key, std::vector<key>, std::greater<>> next;
    for (std::size_t r = 0; r < runs_.size(); ++r) {
      cursors[r].at = runs_[r].first;
      cursors[r].end = runs_[r].second;
      cursors[r].buffer.resize(each);
      if (std::uint64_t lock; read_lock(cursors[r], lock)) next.emplace(lock, r);
    }
    while (!next.empty()) {
      const auto [lock, r] = next.top();
      next.pop();
      cursor& c = cursors[r];
      std::uint64_t size = 0;
      read(c, reinterpret_cast<char*>(&size), sizeof size);
      while (size > 0) {
        const std::string_view s = fill(c, size);
        if (s.empty()) throw report_error("text output: the temporary file ended early");
        piece(lock, s);
        c.used += s.size();
        size -= s.size();
      }
      if (std::uint64_t following; read_lock(c, following)) next.emplace(following, r);
    }
  }

 private:
  static constexpr std::size_t buffer_bytes = 1u << 16;
  struct cursor {
    std::uint64_t at = 0;   // file offset of buffer's end
    std::uint64_t end = 0;  // the run's end
    std::vector<char> buffer;
    std::size_t used = 0;   // consumed from the buffer
    std::size_t filled = 0;
  };
  [[noreturn]] static void fail(const std::string& what) {
    throw report_error("text output: " + what + ": " + std::strerror(errno));
  }
  void put(std::string_view s) {
    if (out_.size() + s.size() > buffer_bytes) drain();
    if (s.size() > buffer_bytes) write_all(s);
    else out_.append(s);
  }
  void drain() {
    write_all(out_);
    out_.clear();
  }
  void write_all(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::write(fd_, s.data(), s.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write the temporary file");
      s.remove_prefix(static_cast<std::size_t>(n));
      size_ += static_cast<std::uint64_t>(n);
    }
  }
  // At least one unread byte in the buffer (up to `want`), when the run has any.
  std::string_view fill(cursor& c, std::uint64_t want) {
    if (c.used == c.filled) {
      c.used = 0;
      c.filled = 0;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(c.buffer.size(), c.end - c.at));
      while (c.filled < n) {
        const ssize_t got = ::pread(fd_, c.buffer.data() + c.filled, n - c.filled, static_cast<off_t>(c.at));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) fail("cannot read the temporary file back");
        c.filled += static_cast<std::size_t>(got);
        c.at += static_cast<std::uint64_t>(got);
      }
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(c.filled - c.used, want));
    return {c.buffer.data() + c.used, n};
  }
  void read(cursor& c, char* to, std::size_t n) {
    while (n > 0) {
      const std::string_view s = fill(c, n);
      if (s.empty()) throw report_error("text output: the temporary file ended early");
      std::memcpy(to, s.data(), s.size());
      c.used += s.size();
      to += s.size();
      n -= s.size();
    }
  }
  bool read_lock(cursor& c, std::uint64_t& lock) {
    if (c.used == c.filled && c.at == c.end) return false;
    read(c, reinterpret_cast<char*>(&lock), sizeof lock);
    return true;
  }

  int fd_ = -1;
  std::string out_;
  std::uint64_t size_ = 0;
  std::uint64_t run_start_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs_;  // [start, end)
};

void lock_report::spill() {
  if (!spill_) spill_ = std::make_unique<spill_file>();
  for (std::size_t i = 0; i < per_lock_.size(); ++i) {
    std::string& lines = per_lock_[i].second;
    if (lines.empty()) continue;
    spill_->add(i, lines);
    std::string().swap(lines);  // the memory too
  }
  spill_->end_run();
  buffered_bytes_ = 0;
}

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

bool lock_report::selected(std::string_view lock) const noexcept {
  if (options_.lock_globs.empty()) return true;
  for (const std::string& g : options_.lock_globs) {
    if (glob_match(g, lock)) return true;
  }
  return false;
}

void lock_report::flush() {
  if (out_.empty()) return;
  write_(out_);
  out_.clear();
}

void lock_report::on_event(const lock_event& e) {
  if (!options_.lock_globs.empty() && !selected(e.lock)) return;
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
      if (is_group_event(e)) {
        append_group_text(out_, e, options_.start_us);
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
      if (several_servers_ || several_dbs_) {
        append_event_text(out_, e, options_.start_us, true,
                          lock_title(e.lock, e.lock_server, e.db, several_servers_, several_dbs_));
      } else {
        append_event_text(out_, e, options_.start_us, true);
      }
      flush();
      return;
    }
    case report_format::text: {
      if (is_group_event(e)) {
        // Attempts are reported once over, not in time order: sorted by time at the end.
        group_lines_.emplace_back(e.ts_us, std::string());
        append_group_text(group_lines_.back().second, e, options_.start_us);
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
      }
      std::string& lines = per_lock_[it->second].second;
      const std::size_t before = lines.size();
      append_event_text(lines, e, options_.start_us, false);
      buffered_bytes_ += lines.size() - before;
      if (buffered_bytes_ > options_.text_buffer_bytes) spill();
      return;
    }
  }
}

namespace {

// What a row shows after the lock's name: the whole of the row's tail depends on these
// and on nothing else.
struct row_values {
  std::uint64_t acquisitions = 0, contended = 0, renewals = 0, expiries = 0;
  std::int64_t hold[3] = {}, wait[3] = {};
  std::uint64_t anomalies[anomaly_kind_count] = {};
  explicit row_values(const lock_stats& s)
      : acquisitions(s.acquisitions), contended(s.contended_acquisitions), renewals(s.renewals), expiries(s.expiries),
        hold{s.hold.p50, s.hold.p99, s.hold.max}, wait{s.wait.p50, s.wait.p99, s.wait.max} {
    std::memcpy(anomalies, s.anomalies, sizeof anomalies);
  }
  // Whether `s` shows these values (the first ones differ most often).
  bool shown_by(const lock_stats& s) const noexcept {
    return acquisitions == s.acquisitions && hold[2] == s.hold.max && wait[2] == s.wait.max &&
           contended == s.contended_acquisitions && renewals == s.renewals && expiries == s.expiries &&
           hold[0] == s.hold.p50 && hold[1] == s.hold.p99 && wait[0] == s.wait.p50 && wait[1] == s.wait.p99 &&
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
    p = put_duration(p, d.p50, columns);
    *p++ = '/';
    p = put_duration(p, d.p99, columns);
    *p++ = '/';
    p = put_duration(p, d.max, columns);
    columns += 2;
  }
  return columns < width ? spaces(p, width - columns) : p;
}

}  // namespace

namespace {

// The row's tail (after the name's column): "  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>8}  {:>8}  {}\n".
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

// One row of the table: "{:<{}}  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>8}  {:>8}  {}\n".
// Many locks have the same figures (acquired once, never released in the capture): a
// row whose values equal the previous row's copies that row's tail.
void append_row(row_buffer& rows, std::string_view lock, const lock_stats& s, std::size_t width) {
  // The fixed part takes < 128 bytes, a duration < 32, an anomaly < 48.
  char* p = rows.begin_row(lock.size() + width + 128 + 8 * 32 + anomaly_kind_count * 48);
  if (plain_ascii(lock)) {  // the usual case
    p = copy_bytes(p, lock);
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

// Two threads format alternate batches (format(batch, rows) returns the batch's row
// count); each waits for its batch's turn to write, so the output is in order and at
// most two batches are held in memory.
template <class Format>
std::uint64_t write_batches_on_two_threads(std::size_t batches, const Format& format,
                                           const std::function<void(std::string_view)>& write) {
  std::mutex mutex;
  std::condition_variable turn_changed;
  std::size_t turn = 0;  // the batch whose rows are written next
  bool failed = false;
  std::uint64_t locks = 0;
  auto run = [&](std::size_t first_batch) {
    row_buffer rows;
    for (std::size_t b = first_batch; b < batches; b += 2) {
      const std::uint64_t batch_locks = format(b, rows);
      std::unique_lock guard(mutex);
      turn_changed.wait(guard, [&] { return turn == b || failed; });
      if (failed) return;
      try {
        if (!rows.view().empty()) write(rows.view());  // only this thread writes now
      } catch (...) {
        failed = true;
        turn_changed.notify_all();
        throw;
      }
      locks += batch_locks;
      ++turn;
      turn_changed.notify_all();
    }
  };
  std::exception_ptr helper_error;
  std::thread helper([&] {
    try {
      run(1);
    } catch (...) {
      helper_error = std::current_exception();
    }
  });
  try {
    run(0);
  } catch (...) {
    {
      std::lock_guard guard(mutex);
      failed = true;
    }
    turn_changed.notify_all();
    helper.join();
    throw;
  }
  helper.join();
  if (helper_error) std::rethrow_exception(helper_error);
  return locks;
}

}  // namespace

void lock_report::write_summary(const lock_timeline& timeline) {
  // Names on several servers or databases: their rows carry titles (only when the
  // capture has more than one (server, database) at all).
  struct seen {
    std::string_view server;
    std::int32_t db = 0;
    bool servers = false, dbs = false;
  };
  std::unordered_map<std::string_view, seen> shared_names;
  if (timeline.scope_count() > 1) {
    timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
      if (!selected(lock)) return;
      auto [it, added] = shared_names.try_emplace(lock, seen{s.server, s.db});
      it->second.servers |= s.server != it->second.server;
      it->second.dbs |= s.db != it->second.db;
    });
    std::erase_if(shared_names, [](const auto& n) { return !n.second.servers && !n.second.dbs; });
  }
  auto title_of = [&](std::string_view lock, const lock_stats& s) -> std::string {
    const auto it = shared_names.find(lock);
    if (it == shared_names.end()) return {};
    return lock_title(lock, s.server, s.db, it->second.servers, it->second.dbs);
  };
  std::size_t width = 4;
  if (!shared_names.empty()) {
    timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
      if (!selected(lock)) return;
      const std::string t = title_of(lock, s);
      width = std::max(width, std::min<std::size_t>(t.empty() ? lock.size() : t.size(), 48));
    });
  } else if (options_.lock_globs.empty()) {
    width = std::max(width, std::min<std::size_t>(timeline.longest_lock_name(), 48));
  } else {
    timeline.for_each_lock_name([&](std::string_view lock) {
      if (selected(lock)) width = std::max(width, std::min<std::size_t>(lock.size(), 48));
    });
  }
  append_format(out_, "{:<{}}  {:>6}  {:>9}  {:<28}  {:<28}  {:>8}  {:>8}  {}\n", "lock", width,
                 "acq", "contended", "hold p50/p99/max", "wait p50/p99/max", "renewals", "expiries", "anomalies");
  flush();
  // Rows are formatted a batch at a time (timeline.for_each_lock by part).
  const std::size_t batches = std::max<std::size_t>(1, timeline.lock_count() / summary_batch_locks);
  auto format_batch = [&](std::size_t batch, row_buffer& rows) {
    rows.clear();
    std::uint64_t n = 0;
    timeline.for_each_lock(batch, batches, [&](std::string_view lock, const lock_stats& s) {
      if (!options_.lock_globs.empty() && !selected(lock)) return;
      ++n;
      if (shared_names.empty()) {
        append_row(rows, lock, s, width);
      } else {
        const std::string t = title_of(lock, s);
        append_row(rows, t.empty() ? lock : std::string_view(t), s, width);
      }
    });
    return n;
  };
  std::uint64_t locks = 0;
  if (options_.top > 0) {
    locks = write_top_rows(timeline, width, [&](std::string_view lock, const lock_stats& s) {
      return shared_names.empty() ? std::string() : title_of(lock, s);
    });
  } else if (options_.threads < 2 || timeline.lock_count() < parallel_summary_min_locks) {
    row_buffer rows;
    for (std::size_t b = 0; b < batches; ++b) {
      locks += format_batch(b, rows);
      if (!rows.view().empty()) write_(rows.view());
    }
  } else {
    locks = write_batches_on_two_threads(batches, format_batch, write_);
  }
  const forgotten_locks& f = timeline.forgotten();
  if (f.locks > 0) {
    std::uint64_t anomalies = 0;
    for (const std::uint64_t a : f.anomalies) anomalies += a;
    append_format(out_,
                  "(not in the rows above: {} idle locks forgotten at --max-locks{}, with {} acquisitions ({} "
                  "contended), {} renewals, {} expiries and {} anomalies)\n",
                  f.locks, options_.lock_globs.empty() ? "" : " (selected by --lock or not)", f.acquisitions,
                  f.contended_acquisitions, f.renewals, f.expiries, anomalies);
  } else if (locks == 0) {
    out_ += "(no lock activity)\n";
  }
  flush();
}

std::uint64_t lock_report::write_top_rows(
    const lock_timeline& timeline, std::size_t width,
    const std::function<std::string(std::string_view, const lock_stats&)>& title_of) {
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
    std::uint64_t acquisitions = 0, contended = 0, renewals = 0, expiries = 0, anomalies = 0;
    void add(const lock_stats& s, std::uint64_t sign) noexcept {  // sign: 1 or -1 (mod 2^64)
      acquisitions += sign * s.acquisitions;
      contended += sign * s.contended_acquisitions;
      renewals += sign * s.renewals;
      expiries += sign * s.expiries;
      anomalies += sign * s.anomaly_total();
    }
  } others;
  std::vector<ranked> heap;  // the lowest ranked of those kept at the front
  std::uint64_t seen = 0;
  timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
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
  timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
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
                  "anomalous), with {} acquisitions ({} contended), {} renewals, {} expiries and {} anomalies)\n",
                  total - heap.size(), total, options_.top, others.acquisitions, others.contended, others.renewals,
                  others.expiries, others.anomalies);
  }
  return total;
}

void lock_report::finish(const lock_timeline& timeline) {
  if (options_.format == report_format::text && spill_) {
    write_spilled();
  } else if (options_.format == report_format::text) {
    const std::vector<std::string> title = titles();
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

}  // namespace lockscope::locks
