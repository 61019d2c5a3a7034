#include "lockscope/locks/trace_export.hpp"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "lockscope/ingest/message.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/event_jsonl.hpp"
#include "lockscope/locks/event_text.hpp"

namespace lockscope::locks {

namespace {


bool closes_hold(lock_event_kind k) noexcept {
  return k == lock_event_kind::released || k == lock_event_kind::expired || k == lock_event_kind::force_released;
}

}  // namespace

struct trace_export::impl {
  // Per (lock, owner): its thread id and what is open on it, in 48 bytes: a capture
  // that ends with hundreds of thousands of holds still open keeps one of these each.
  struct thread {
    std::uint32_t pid = 0, tid = 0;
    std::int64_t hold_start_us = -1;     // the outermost open hold; -1: none
    std::int64_t wait_start_us = -1;     // -1: no open wait
    std::int64_t wait_last_us = 0;       // its last attempt
    // Inside an open hold: the starts of its open reentered levels, and the spans that
    // closed inside it, held back (rendered) so that the hold is written first and a
    // thread's spans come in start order.
    struct inside_hold {
      std::vector<std::int64_t> open_levels;
      std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::string>> held_back;  // (start, -dur)
    };
    std::unique_ptr<inside_hold> inside;
    inside_hold& inner() {
      if (!inside) inside = std::make_unique<inside_hold>();
      return *inside;
    }
    bool idle() const noexcept { return hold_start_us < 0 && wait_start_us < 0; }
  };

  trace_options options;
  std::function<void(std::string_view)> write;
  std::string out;
  bool first_event = true;
  std::uint32_t next_pid = 1, next_tid = 1;
  // Keyed by a 64-bit hash of the lock's identity / of (pid, owner), not the text: among
  // a million keys, two collide (and share a track) with odds of about 3 in 10^8.
  std::unordered_map<std::uint64_t, std::uint32_t> processes;
  std::unordered_map<std::uint64_t, thread> threads;
  std::size_t open_waits = 0;
  std::size_t sweep_at = 0;  // bound_ids() sweeps when the maps hold more ids than this
  std::string key, jsonl;  // scratch
  std::uint64_t* written = nullptr;

  static std::uint64_t hash(std::string_view s) noexcept { return std::hash<std::string_view>{}(s); }

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

  void metadata(std::string_view name, std::uint32_t pid, std::uint32_t tid, std::string_view value) {
    begin_event();
    fmt::format_to(std::back_inserter(out), "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                   name, pid, tid);
    ingest::append_json_string(out, value);
    out += "}}";
  }
  void sort_index(std::string_view name, std::uint32_t pid, std::uint32_t tid, std::uint32_t index) {
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}", name, pid,
                   tid, index);
  }

  // The process of the event's lock, or of its group; named on first sight.
  std::uint32_t process_of(const lock_event& e) {
    key.clear();
    const bool multilock = e.group != nullptr && e.event == lock_event_kind::multilock;
    const bool quorum = !multilock && is_group_event(e);
    if (multilock) {
      key = "multilock ";
      for (std::size_t i = 0; i < e.group->tried.size(); ++i) {
        if (i > 0) key += ',';
        key += e.group->tried[i];
      }
    } else if (quorum) {
      key = "quorum " + lock_title(e.lock, {}, e.db, false, e.db != 0);
    } else {
      fmt::format_to(std::back_inserter(key), "l{}\x1f{}\x1f{}", e.db, e.lock_server, e.lock);
    }
    const auto [it, inserted] = processes.try_emplace(hash(key), 0);
    if (inserted) {
      it->second = next_pid++;
      metadata("process_name", it->second, 0,
               multilock || quorum ? std::string_view(key) : lock_title(e.lock, e.lock_server, e.db, true, e.db != 0));
      sort_index("process_sort_index", it->second, 0, it->second);
    }
    return it->second;
  }

  thread& thread_of(std::uint32_t pid, std::string_view owner) {
    key.clear();
    fmt::format_to(std::back_inserter(key), "{}\x1f", pid);
    key += owner;
    const auto [it, inserted] = threads.try_emplace(hash(key));
    if (inserted) {
      it->second.pid = pid;
      it->second.tid = next_tid++;
      metadata("thread_name", pid, it->second.tid, owner.empty() ? std::string_view("(no owner)") : owner);
      sort_index("thread_sort_index", pid, it->second.tid, it->second.tid);
    }
    return it->second;
  }

  static void head(std::string& dst, std::string_view name, std::string_view cat, char ph, std::int64_t ts,
                   const thread& t) {
    dst += "{\"name\":\"";
    dst += name;  // event and anomaly names: no escaping needed
    dst += "\",\"cat\":\"";
    dst += cat;
    fmt::format_to(std::back_inserter(dst), "\",\"ph\":\"{}\",\"ts\":{},\"pid\":{},\"tid\":{}", ph, ts, t.pid, t.tid);
  }

  static void render_complete(std::string& dst, std::string_view name, std::int64_t start_us, std::int64_t dur_us,
                              const thread& t, std::string_view args) {
    head(dst, name, "lock", 'X', start_us, t);
    fmt::format_to(std::back_inserter(dst), ",\"dur\":{},\"args\":", dur_us);
    dst += args;
    dst += '}';
  }

  // args: the event's JSONL (`jsonl`), or a synthetic note when no event closed it.
  // Inside an open hold of the same thread, held back until the hold is written.
  void complete(std::string_view name, std::int64_t start_us, std::int64_t end_us, thread& t, std::string_view args) {
    const std::int64_t dur = std::max<std::int64_t>(end_us - start_us, 0);
    if (t.hold_start_us >= 0 && name != "hold") {
      auto& held = t.inner().held_back;
      held.emplace_back(std::pair(start_us, -dur), std::string());
      render_complete(held.back().second, name, start_us, dur, t, args);
      return;
    }
    begin_event();
    render_complete(out, name, start_us, dur, t, args);
    maybe_flush();
  }

  void instant(const lock_event& e, const thread& t) {
    const bool anomaly = e.event == lock_event_kind::anomaly;
    begin_event();
    head(out, anomaly ? to_string(e.kind) : to_string(e.event), anomaly ? "anomaly" : "lock", 'i', e.ts_us, t);
    out += anomaly ? ",\"s\":\"p\"" : ",\"s\":\"t\"";
    out += ",\"args\":";
    out += jsonl;
    out += '}';
    maybe_flush();
  }

  void end_wait(thread& t) {
    t.wait_start_us = -1;
    --open_waits;
  }

  // Past the threshold: forget the threads with nothing open, then the processes left
  // with no thread. Many spans open at once: the next sweep waits until the maps doubled,
  // so sweeps cost O(1) per event however many stay open.
  void bound_ids() {
    if (threads.size() + processes.size() <= sweep_at) return;
    std::unordered_set<std::uint32_t> busy;
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
    sweep_at = std::max(2 * options.max_ids, 2 * (threads.size() + processes.size()));
  }

  // The hold, then what closed inside it in start order (longer first at the same start).
  void close_holds(thread& t, std::int64_t end_us, std::string_view args) {
    if (t.inside) {
      // The release is the outer hold's args; the levels inside only say they ended with it.
      for (const std::int64_t start : t.inside->open_levels) {
        complete("reentered", start, end_us, t, R"({"ended_with_hold":true})");
      }
    }
    complete("hold", t.hold_start_us, end_us, t, args);
    t.hold_start_us = -1;
    if (!t.inside) return;
    auto& held = t.inside->held_back;
    std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [order, text] : held) {
      begin_event();
      out += text;
    }
    t.inside.reset();
    maybe_flush();
  }

  void on_event(const lock_event& e) {
    jsonl.clear();
    append_event_jsonl(jsonl, e);
    const std::uint32_t pid = process_of(e);
    thread& t = thread_of(pid, e.owner);
    if (e.group != nullptr) {
      complete(to_string(e.event), e.group->start_us, e.group->end_us, t, jsonl);
    } else {
      switch (e.event) {
        case lock_event_kind::contended:
          if (t.wait_start_us < 0) {
            t.wait_start_us = e.ts_us;
            ++open_waits;
          }
          t.wait_last_us = e.ts_us;
          instant(e, t);
          break;
        case lock_event_kind::gave_up: {
          // The timeline's account of the wait (first attempt → its end), which it gives
          // once the end is known: the span closes then, with the gave_up as its args.
          const std::int64_t start = e.interval_start_us >= 0 ? e.interval_start_us : t.wait_start_us;
          const std::int64_t end = start >= 0 && e.wait_us >= 0 ? start + e.wait_us : t.wait_last_us;
          if (start >= 0) complete("wait", start, std::max(end, start), t, jsonl);
          else instant(e, t);
          if (t.wait_start_us >= 0) end_wait(t);
          if (e.wait_ended == wait_end::new_wait) {  // the attempt that began the next wait came already
            t.wait_start_us = end;
            t.wait_last_us = end;
            ++open_waits;
          }
          break;
        }
        case lock_event_kind::acquired:
          if (t.wait_start_us >= 0 || e.wait_us > 0) {
            // The wait's span carries the acquisition; its start is the timeline's account.
            complete("wait", e.wait_us >= 0 ? e.ts_us - e.wait_us : t.wait_start_us, e.ts_us, t, jsonl);
            if (t.wait_start_us >= 0) end_wait(t);
          } else {
            instant(e, t);
          }
          if (t.hold_start_us >= 0) {  // a shared hold taken again: nested in the open one
            t.inner().open_levels.push_back(e.ts_us);
          } else {
            t.hold_start_us = e.ts_us;
          }
          break;
        case lock_event_kind::reentered:
          instant(e, t);
          if (t.hold_start_us >= 0) t.inner().open_levels.push_back(e.ts_us);
          break;
        case lock_event_kind::partially_released:
          if (t.inside && !t.inside->open_levels.empty()) {
            const std::int64_t start = t.inside->open_levels.back();
            t.inside->open_levels.pop_back();
            complete("reentered", start, e.ts_us, t, jsonl);
          } else {
            instant(e, t);
          }
          break;
        default:
          if (closes_hold(e.event) && t.hold_start_us >= 0) {
            close_holds(t, e.ts_us, jsonl);
          } else if (closes_hold(e.event) && e.held_us >= 0) {  // acquired before the capture began
            complete("hold", e.ts_us - e.held_us, e.ts_us, t, jsonl);
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
      if (t.wait_start_us >= 0) {
        complete("wait", t.wait_start_us, std::max(end_us, t.wait_last_us), t, R"({"open_at_end":true})");
        end_wait(t);
      }
      if (t.hold_start_us >= 0) close_holds(t, std::max(end_us, t.hold_start_us), R"({"open_at_end":true})");
    }
    if (first_event) out += "{\"traceEvents\":[\n";
    out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":";
    ingest::append_json_string(out, options.generator);
    if (!options.source.empty()) {
      out += ",\"source\":";
      ingest::append_json_string(out, options.source);
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
  impl_->sweep_at = 2 * options.max_ids;
}

trace_export::~trace_export() = default;

void trace_export::on_event(const lock_event& e) {
  ++events_;
  impl_->on_event(e);
}

void trace_export::finish(std::int64_t end_us) { impl_->finish(end_us); }

void trace_export::flush() { impl_->flush(); }

std::size_t trace_export::remembered_ids() const noexcept { return impl_->processes.size() + impl_->threads.size(); }

}  // namespace lockscope::locks
