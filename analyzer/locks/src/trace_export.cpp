#include "lockscope/locks/trace_export.hpp"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "lockscope/ingest/message.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_report.hpp"

namespace lockscope::analyzer {

namespace {

constexpr std::int64_t default_wait_ttl_us = 30'000'000;  // as lock_timeline: no TTL given
constexpr std::int64_t waiter_margin_us = 2'000'000;
constexpr std::int64_t wait_check_interval_us = 1'000'000;

bool closes_hold(lock_event_kind k) noexcept {
  return k == lock_event_kind::released || k == lock_event_kind::expired || k == lock_event_kind::force_released;
}

}  // namespace

struct trace_export::impl {
  struct level {
    std::int64_t start_us = 0;
    bool reentered = false;
    std::string begin;  // the opening event's JSONL
  };
  struct wait {
    std::int64_t start_us = -1;  // -1: no open wait
    std::int64_t last_us = 0;
    std::int64_t deadline_us = 0;
    std::string begin, last;
  };
  struct thread {
    std::uint64_t pid = 0, tid = 0;
    std::vector<level> holds;  // reentrant levels, outermost first
    wait waiting;
    bool idle() const noexcept { return holds.empty() && waiting.start_us < 0; }
  };

  trace_options options;
  std::function<void(std::string_view)> write;
  std::string out;
  bool first_event = true;
  std::uint64_t next_pid = 1, next_tid = 1;
  std::unordered_map<std::string, std::uint64_t> processes;  // identity → pid
  std::unordered_map<std::string, thread> threads;           // pid '\0' owner → thread
  std::size_t open_waits = 0;
  std::int64_t next_wait_check_us = 0;
  std::string key, jsonl;  // scratch
  std::uint64_t* written = nullptr;

  void begin_event() {
    if (first_event) {
      out += "{\"traceEvents\":[\n";
      first_event = false;
    } else {
      out += ",\n";
    }
    ++*written;
  }

  void maybe_flush() {
    if (out.size() >= options.flush_bytes) flush();
  }
  void flush() {
    if (!out.empty()) write(out);
    out.clear();
  }

  void metadata(std::string_view name, std::uint64_t pid, std::uint64_t tid, std::string_view arg,
                std::string_view value, std::uint64_t number, bool is_number) {
    begin_event();
    out += "{\"name\":\"";
    out += name;
    fmt::format_to(std::back_inserter(out), "\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":", pid, tid, arg);
    if (is_number) fmt::format_to(std::back_inserter(out), "{}", number);
    else append_json_string(out, value);
    out += "}}";
  }

  // The process of the event's lock, or of its group; named on first sight.
  std::uint64_t process_of(const lock_event& e) {
    key.clear();
    std::string title;
    if (e.group != nullptr && e.event == lock_event_kind::multilock) {
      key = "m";
      title = "multilock ";
      for (std::size_t i = 0; i < e.group->tried.size(); ++i) {
        if (i > 0) {
          key += ',';
          title += ',';
        }
        key += e.group->tried[i];
        title += e.group->tried[i];
      }
    } else if (is_group_event(e)) {
      fmt::format_to(std::back_inserter(key), "q{}\x1f{}", e.db, e.lock);
      title = "quorum " + lock_title(e.lock, {}, e.db, false, e.db != 0);
    } else {
      fmt::format_to(std::back_inserter(key), "l{}\x1f{}\x1f{}", e.db, e.lock_server, e.lock);
    }
    const auto [it, inserted] = processes.try_emplace(key, 0);
    if (inserted) {
      it->second = next_pid++;
      if (title.empty()) title = lock_title(e.lock, e.lock_server, e.db, true, e.db != 0);
      metadata("process_name", it->second, 0, "name", title, 0, false);
      metadata("process_sort_index", it->second, 0, "sort_index", {}, it->second, true);
    }
    return it->second;
  }

  thread& thread_of(std::uint64_t pid, std::string_view owner) {
    key.clear();
    fmt::format_to(std::back_inserter(key), "{}\x1f", pid);
    key += owner;
    const auto [it, inserted] = threads.try_emplace(key);
    if (inserted) {
      it->second.pid = pid;
      it->second.tid = next_tid++;
      metadata("thread_name", pid, it->second.tid, "name", owner.empty() ? std::string_view("(no owner)") : owner, 0,
               false);
      metadata("thread_sort_index", pid, it->second.tid, "sort_index", {}, it->second.tid, true);
    }
    return it->second;
  }

  void head(std::string_view name, std::string_view cat, char ph, std::int64_t ts, const thread& t) {
    begin_event();
    out += "{\"name\":";
    append_json_string(out, name);
    out += ",\"cat\":\"";
    out += cat;
    fmt::format_to(std::back_inserter(out), "\",\"ph\":\"{}\",\"ts\":{},\"pid\":{},\"tid\":{}", ph, ts, t.pid, t.tid);
  }

  void complete(std::string_view name, std::int64_t start_us, std::int64_t end_us, const thread& t,
                std::string_view begin, std::string_view end, bool gave_up, bool open_at_end) {
    head(name, "lock", 'X', start_us, t);
    fmt::format_to(std::back_inserter(out), ",\"dur\":{},\"args\":{{", end_us > start_us ? end_us - start_us : 0);
    bool comma = false;
    auto field = [&](std::string_view key_name, std::string_view value) {
      if (comma) out += ',';
      comma = true;
      out += '"';
      out += key_name;
      out += "\":";
      out += value;
    };
    if (!begin.empty()) field("begin", begin);
    if (!end.empty()) field("end", end);
    if (gave_up) field("gave_up", "true");
    if (open_at_end) field("open_at_end", "true");
    out += "}}";
    maybe_flush();
  }

  void instant(const lock_event& e, const thread& t) {
    const bool anomaly = e.event == lock_event_kind::anomaly;
    head(anomaly ? to_string(e.kind) : to_string(e.event), anomaly ? "anomaly" : "lock", 'i', e.ts_us, t);
    out += anomaly ? ",\"s\":\"p\"" : ",\"s\":\"t\"";
    out += ",\"args\":";
    out += jsonl;
    out += '}';
    maybe_flush();
  }

  void close_wait(thread& t, std::int64_t end_us, std::string_view end, bool gave_up) {
    complete("wait", t.waiting.start_us, end_us, t, t.waiting.begin, end, gave_up, false);
    t.waiting.start_us = -1;
    t.waiting.begin.clear();
    t.waiting.last.clear();
    --open_waits;
  }

  // Waiters that made no attempt within their TTL + margin gave up (no event says so).
  void close_given_up_waits(std::int64_t now_us) {
    if (open_waits == 0 || now_us < next_wait_check_us) return;
    next_wait_check_us = now_us + wait_check_interval_us;
    for (auto& [k, t] : threads) {
      if (t.waiting.start_us >= 0 && t.waiting.deadline_us < now_us) {
        close_wait(t, t.waiting.last_us, t.waiting.last, true);
      }
    }
  }

  // Past max_ids: forget the threads with nothing open, then the processes left with
  // no thread.
  void bound_ids() {
    if (threads.size() <= options.max_ids && processes.size() <= options.max_ids) return;
    std::unordered_set<std::uint64_t> busy;
    for (auto it = threads.begin(); it != threads.end();) {
      if (it->second.idle()) {
        it = threads.erase(it);
      } else {
        busy.insert(it->second.pid);
        ++it;
      }
    }
    for (auto it = processes.begin(); it != processes.end();) {
      it = busy.contains(it->second) ? std::next(it) : processes.erase(it);
    }
  }

  void on_event(const lock_event& e) {
    close_given_up_waits(e.ts_us);
    jsonl.clear();
    append_event_jsonl(jsonl, e);
    const std::uint64_t pid = process_of(e);
    thread& t = thread_of(pid, e.owner);
    if (e.group != nullptr) {
      // The group's JSONL is its own args (no begin / end pair).
      head(to_string(e.event), "lock", 'X', e.group->start_us, t);
      fmt::format_to(std::back_inserter(out), ",\"dur\":{},\"args\":", std::max<std::int64_t>(e.group->end_us - e.group->start_us, 0));
      out += jsonl;
      out += '}';
    } else {
      switch (e.event) {
        case lock_event_kind::contended:
          if (t.waiting.start_us < 0) {
            t.waiting.start_us = e.ts_us;
            t.waiting.begin = jsonl;
            ++open_waits;
          } else {
            instant(e, t);  // a retry
          }
          t.waiting.last_us = e.ts_us;
          t.waiting.last = jsonl;
          t.waiting.deadline_us = e.ts_us + (e.ttl_ms >= 0 ? e.ttl_ms * 1000 : default_wait_ttl_us) + waiter_margin_us;
          break;
        case lock_event_kind::acquired:
          if (t.waiting.start_us >= 0) {
            if (e.wait_us >= 0) t.waiting.start_us = e.ts_us - e.wait_us;  // the timeline's own account
            close_wait(t, e.ts_us, jsonl, false);
          } else if (e.wait_us > 0) {
            complete("wait", e.ts_us - e.wait_us, e.ts_us, t, {}, jsonl, false, false);
          }
          t.holds.push_back({e.ts_us, false, jsonl});
          break;
        case lock_event_kind::reentered:
          t.holds.push_back({e.ts_us, true, jsonl});
          break;
        case lock_event_kind::partially_released:
          if (t.holds.size() >= 2) {
            const level& l = t.holds.back();
            complete("reentered", l.start_us, e.ts_us, t, l.begin, jsonl, false, false);
            t.holds.pop_back();
          } else {
            instant(e, t);
          }
          break;
        default:
          if (closes_hold(e.event) && (!t.holds.empty() || e.held_us >= 0)) {
            if (t.holds.empty()) {  // acquired before the capture began
              complete("hold", e.ts_us - e.held_us, e.ts_us, t, {}, jsonl, false, false);
            }
            while (!t.holds.empty()) {
              const level& l = t.holds.back();
              complete(l.reentered ? "reentered" : "hold", l.start_us, e.ts_us, t, l.begin, jsonl, false, false);
              t.holds.pop_back();
            }
          } else {
            instant(e, t);
          }
      }
    }
    maybe_flush();
    bound_ids();
  }

  void finish(std::int64_t end_us) {
    for (auto& [k, t] : threads) {
      if (t.waiting.start_us >= 0) close_wait(t, t.waiting.last_us, t.waiting.last, true);
      while (!t.holds.empty()) {
        const level& l = t.holds.back();
        complete(l.reentered ? "reentered" : "hold", l.start_us, std::max(end_us, l.start_us), t, l.begin, {}, false,
                 true);
        t.holds.pop_back();
      }
    }
    if (first_event) out += "{\"traceEvents\":[\n";
    out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":";
    append_json_string(out, options.generator);
    if (!options.source.empty()) {
      out += ",\"source\":";
      append_json_string(out, options.source);
    }
    out += ",\"time\":\"ts and dur in microseconds since the Unix epoch (the JSONL's ts)\"}}\n";
    flush();
  }
};

trace_export::trace_export(const trace_options& options, std::function<void(std::string_view)> write)
    : impl_(std::make_unique<impl>()) {
  impl_->options = options;
  impl_->write = std::move(write);
  impl_->written = &written_;
}

trace_export::~trace_export() = default;

void trace_export::on_event(const lock_event& e) {
  ++events_;
  impl_->on_event(e);
}

void trace_export::finish(std::int64_t end_us) { impl_->finish(end_us); }

void trace_export::flush() { impl_->flush(); }

std::size_t trace_export::remembered_ids() const noexcept { return impl_->processes.size() + impl_->threads.size(); }

}  // namespace lockscope::analyzer
