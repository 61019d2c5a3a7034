#include "lockscope/locks/event_text.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "lockscope/locks/anomaly_text.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/permit_text.hpp"
#include "output/append_format.hpp"

namespace lockscope::locks {

namespace {

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

// "+12.345678", or the absolute time (--time abs), as the lines begin.
std::string relative_time(std::int64_t us, const text_clock& clock) { return clock.stamp(us); }

// The time column: relative times right-aligned in 11 columns (+12.345678).
void append_time_column(std::string& out, std::int64_t us, const text_clock& clock) {
  if (clock.absolute) append_format(out, "  {}  ", clock.stamp(us));
  else append_format(out, "  {:>11}  ", clock.stamp(us));
}

// How a gave_up waiter's wait is known to have ended.
std::string_view wait_end_text(wait_end w) {
  switch (w) {
    case wait_end::last_attempt: return "no attempt since its last one within the TTL it was given + margin";
    case wait_end::unsubscribed: return "it left the lock's channel";
    case wait_end::connection_closed: return "its connection closed";
    case wait_end::new_wait: return "its owner began a new wait";
    case wait_end::left_queue: return "its client took it out of the lock's queue";
    case wait_end::group_decided: return "its MultiLock/RedLock went on without this server (it unlocked it)";
    case wait_end::forced: return "its connection deleted the hold that refused it";
    case wait_end::next_attempt_missed: return "its next attempt, due before the capture ended, never came";
    case wait_end::withdrew: return "its client released the value it had been refused, where its next attempt was due";
    case wait_end::none: break;
  }
  return {};
}

// The holder whose connection closed while holding: on its expiry, what it was; on a
// waiter's acquisition or give-up, what the waiter waited for.
std::string closed_holder_text(const lock_event& e, const text_clock& start_us) {
  const std::string closed = relative_time(e.closed_holder_us, start_us);
  if (e.event == lock_event_kind::expired) {
    return fmt::format("held by a closed connection (closed at {}) until the lease ran out", closed);
  }
  const std::string who(printable(short_owner(e.closed_holder)));
  if (e.closed_holder_expired_us >= 0) {
    return fmt::format("waited for {}, held by a closed connection (closed at {}) until the lease ran out at {}", who,
                       closed, relative_time(e.closed_holder_expired_us, start_us));
  }
  return fmt::format("waited for {}, held by a closed connection (closed at {})", who, closed);
}

}  // namespace

std::string iso_time(std::int64_t epoch_us, bool local) {
  std::int64_t seconds = epoch_us / 1'000'000, micros = epoch_us % 1'000'000;
  if (micros < 0) {
    micros += 1'000'000;
    --seconds;
  }
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (local) ::localtime_r(&t, &tm);
  else ::gmtime_r(&t, &tm);
  std::string zone = "Z";
  if (local) {
    const long off = tm.tm_gmtoff;
    const long a = off < 0 ? -off : off;
    zone = fmt::format("{}{:02}:{:02}", off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
  }
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}{}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, micros, zone);
}

std::string text_clock::stamp(std::int64_t us) const {
  if (absolute) return iso_time(us, local);
  const std::int64_t rel = us - start_us;
  const std::int64_t a = rel < 0 ? -rel : rel;
  return fmt::format("{}{}.{:06}", rel < 0 ? '-' : '+', a / 1'000'000, a % 1'000'000);
}

std::string capture_start_line(std::int64_t start_us, bool absolute, bool local_zone) {
  std::string line = "capture start " + iso_time(start_us, false);
  const std::string local = local_zone ? iso_time(start_us, true) : std::string();
  const bool local_differs = local_zone && !local.ends_with("+00:00");
  if (local_differs && !absolute) line += " (" + local + " local)";
  if (!absolute) return line + "; times are seconds after it\n";
  if (local_differs) return line + "; times are local (" + local.substr(local.size() - 6) + ")\n";
  return line + "; times are UTC\n";
}

bool is_group_event(const lock_event& e) noexcept {
  return e.group != nullptr ||
         (e.event == lock_event_kind::anomaly &&
          (e.kind == anomaly_kind::quorum_lost || e.kind == anomaly_kind::split_quorum));
}

void append_group_text(std::string& out, const lock_event& e, const text_clock& clock) {
  if (e.group == nullptr) {
    append_event_text(out, e, clock, true);
    return;
  }
  const lock_group& g = *e.group;
  append_time_column(out, e.ts_us, clock);
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
    // Redisson's RedLock and MultiLock look alike until one meets a refusal.
    if (g.kind_unknown) append_format(out, " if a RedLock ({} if a MultiLock)", g.total);
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

void append_event_text(std::string& out, const lock_event& e, const text_clock& start_us, bool with_lock,
                       std::string_view lock_title) {
  append_time_column(out, e.ts_us, start_us);
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
  if (e.wait_us >= 0 && e.wait_at_most_us >= 0) {
    add("waited " + format_duration(e.wait_us) + "–" + format_duration(e.wait_at_most_us));
  } else if (e.wait_us >= 0) {
    add((e.wait_at_least ? "waited ≥" : "waited ") + format_duration(e.wait_us));
  }
  if (e.wait_likely_us >= 0) {
    add(fmt::format("likely {} (as its {} earlier give-ups)", format_duration(e.wait_likely_us), e.wait_likely_from));
  }
  if (e.held_us >= 0) add((e.held_since_capture_start ? "held ≥" : "held ") + format_duration(e.held_us));
  if (e.held_since_capture_start) add("held since before the capture");
  if (e.token >= 0) add(fmt::format("token {}", e.token));
  if (std::string permits = permit_detail(e); !permits.empty()) add(permits);
  if (e.event == lock_event_kind::gave_up) {
    if (e.interval_start_us >= 0) add("waiting since " + relative_time(e.interval_start_us, start_us));
    if (e.wait_ended != wait_end::none) add(std::string(wait_end_text(e.wait_ended)));
  } else if (e.interval_start_us >= 0) {
    add(fmt::format("from {} for {}", start_us.stamp(e.interval_start_us),
                    format_duration(std::max<std::int64_t>(e.interval_us, 0))));
  }
  if (e.confidence != link_confidence::none && !e.owner.empty()) {
    add(fmt::format("subscriber linked to waiter ({})", to_string(e.confidence)));
  }
  if (e.link_not_certain != anomaly_kind::none) {
    add(fmt::format("link not certain: no {}", to_string(e.link_not_certain)));
  }
  if (e.closed_holder_us >= 0) add(closed_holder_text(e, start_us));
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

}  // namespace lockscope::locks
