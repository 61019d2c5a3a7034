#include "lockscope/analyzer/lock_report.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "lockscope/analyzer/message.hpp"
#include "lockscope/lock/naming.hpp"

namespace lockscope::analyzer {

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

// fmt into a memory_buffer (its fast contiguous path), then one append.
template <class... Args>
void append_format(std::string& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::memory_buffer b;
  fmt::format_to(fmt::appender(b), f, std::forward<Args>(args)...);
  out.append(b.data(), b.size());
}

// Names come from the wire: control bytes would break the text layout.
bool is_control(char c) noexcept { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }
std::string_view printable(std::string_view s) {
  if (std::none_of(s.begin(), s.end(), is_control)) return s;  // the usual case: no copy
  thread_local std::string scratch;
  scratch.assign(s);
  std::replace_if(scratch.begin(), scratch.end(), is_control, '?');
  return scratch;
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
  if (e.hold_count >= 0) append_format(out, ",\"hold_count\":{}", e.hold_count);
  if (e.lease_ms >= 0) append_format(out, ",\"lease_ms\":{}", e.lease_ms);
  if (e.ttl_ms >= 0) append_format(out, ",\"ttl_ms\":{}", e.ttl_ms);
  if (e.wait_us >= 0) {
    out += ",\"wait_ms\":";
    append_ms(out, e.wait_us);
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
  out += '}';
}

void append_event_text(std::string& out, const lock_event& e, std::int64_t start_us, bool with_lock) {
  const std::int64_t rel = e.ts_us - start_us;
  const char sign = rel < 0 ? '-' : '+';
  const std::int64_t a = rel < 0 ? -rel : rel;
  append_format(out, "  {:>11}  ", fmt::format("{}{}.{:06}", sign, a / 1'000'000, a % 1'000'000));
  if (with_lock) {
    out += printable(e.lock);
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
  if (e.wait_us >= 0) add("waited " + format_duration(e.wait_us));
  if (e.held_us >= 0) add("held " + format_duration(e.held_us));
  if (e.token >= 0) add(fmt::format("token {}", e.token));
  if (e.confidence != link_confidence::none && !e.owner.empty()) {
    add(fmt::format("subscriber linked to waiter ({})", to_string(e.confidence)));
  }
  if (!e.detail.empty()) add(std::string(e.detail));
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
  if (!selected(e.lock)) return;
  ++events_;
  if (options_.start_us < 0) options_.start_us = e.ts_us;
  switch (options_.format) {
    case report_format::summary_only:
      return;
    case report_format::jsonl:
      append_event_jsonl(out_, e);
      out_ += '\n';
      if (out_.size() > (1u << 16)) flush();
      return;
    case report_format::stream_text:
      append_event_text(out_, e, options_.start_us, true);
      flush();
      return;
    case report_format::text: {
      auto it = index_.find(e.lock);
      if (it == index_.end()) {
        it = index_.emplace(std::string(e.lock), per_lock_.size()).first;
        per_lock_.emplace_back(std::string(e.lock), std::string());
      }
      append_event_text(per_lock_[it->second].second, e, options_.start_us, false);
      return;
    }
  }
}

namespace {

struct percentiles {
  std::int64_t p50 = -1, p99 = -1, max = -1;
};

// Nearest-rank percentiles; `scratch` is reused across locks.
percentiles compute(std::span<const std::int64_t> samples, std::vector<std::int64_t>& scratch) {
  percentiles p;
  if (samples.empty()) return p;
  if (samples.size() == 1) {
    p.p50 = p.p99 = p.max = samples[0];
    return p;
  }
  scratch.assign(samples.begin(), samples.end());
  std::sort(scratch.begin(), scratch.end());
  auto rank = [&](double q) {
    std::size_t i = static_cast<std::size_t>(q * static_cast<double>(scratch.size()) + 0.999999);
    if (i == 0) i = 1;
    return scratch[std::min(i, scratch.size()) - 1];
  };
  p.p50 = rank(0.50);
  p.p99 = rank(0.99);
  p.max = scratch.back();
  return p;
}

std::string triple(const percentiles& p) {
  if (p.max < 0) return "-";
  return format_duration(p.p50) + "/" + format_duration(p.p99) + "/" + format_duration(p.max);
}

}  // namespace

void lock_report::write_summary(const lock_timeline& timeline) {
  std::size_t width = 4;
  timeline.for_each_lock_name([&](std::string_view lock) {
    if (selected(lock)) width = std::max(width, std::min<std::size_t>(lock.size(), 48));
  });
  std::vector<std::int64_t> scratch;
  append_format(out_, "{:<{}}  {:>6}  {:>9}  {:<28}  {:<28}  {:>8}  {:>8}  {}\n", "lock", width,
                 "acq", "contended", "hold p50/p99/max", "wait p50/p99/max", "renewals", "expiries", "anomalies");
  std::uint64_t locks = 0;
  timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
    if (!selected(lock)) return;
    ++locks;
    const double contended = s.acquisitions == 0 ? 0.0
                                                 : 100.0 * static_cast<double>(s.contended_acquisitions) /
                                                       static_cast<double>(s.acquisitions);
    std::string anomalies;
    if (s.anomaly_total() == 0) anomalies = "-";
    for (std::size_t k = 1; k < anomaly_kind_count; ++k) {
      if (s.anomalies[k] == 0) continue;
      if (!anomalies.empty()) anomalies += ' ';
      anomalies += fmt::format("{}={}", to_string(static_cast<anomaly_kind>(k)), s.anomalies[k]);
    }
    append_format(out_, "{:<{}}  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>8}  {:>8}  {}\n", printable(lock),
                   width, s.acquisitions, contended, triple(compute(s.hold_us, scratch)), triple(compute(s.wait_us, scratch)),
                   s.renewals, s.expiries, anomalies);
    if (out_.size() > (1u << 16)) flush();
  });
  if (locks == 0) out_ += "(no lock activity)\n";
  flush();
}

void lock_report::finish(const lock_timeline& timeline) {
  if (options_.format == report_format::text) {
    for (const auto& [lock, lines] : per_lock_) {
      out_ += "== ";
      out_ += printable(lock);
      out_ += '\n';
      out_ += lines;
      out_ += '\n';
      flush();
    }
  }
  if (options_.format == report_format::stream_text && events_ > 0 && options_.summary) out_ += '\n';
  flush();
  if (options_.format == report_format::summary_only ||
      (options_.summary && (options_.format == report_format::text || options_.format == report_format::stream_text))) {
    write_summary(timeline);
  }
}

}  // namespace lockscope::analyzer
