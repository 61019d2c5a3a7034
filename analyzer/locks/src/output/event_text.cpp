#include "lockscope/locks/event_text.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lockscope/locks/anomaly_text.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/lock_groups.hpp"
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

// "+12.345678": a time relative to the capture's start, as the lines begin.
std::string relative_time(std::int64_t us, std::int64_t start_us) {
  const std::int64_t rel = us - start_us;
  const std::int64_t a = rel < 0 ? -rel : rel;
  return fmt::format("{}{}.{:06}", rel < 0 ? '-' : '+', a / 1'000'000, a % 1'000'000);
}

// How a gave_up waiter's wait is known to have ended.
std::string_view wait_end_text(wait_end w) {
  switch (w) {
    case wait_end::last_attempt: return "no attempt since its last one within the TTL it was given + margin";
    case wait_end::unsubscribed: return "it left the lock's channel";
    case wait_end::connection_closed: return "its connection closed";
    case wait_end::new_wait: return "its owner began a new wait";
    case wait_end::left_queue: return "its client took it out of the lock's queue";
    case wait_end::none: break;
  }
  return {};
}

// The holder whose connection closed while holding: on its expiry, what it was; on a
// waiter's acquisition or give-up, what the waiter waited for.
std::string closed_holder_text(const lock_event& e, std::int64_t start_us) {
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
  if (e.event == lock_event_kind::gave_up) {
    if (e.interval_start_us >= 0) add("waiting since " + relative_time(e.interval_start_us, start_us));
    if (e.wait_ended != wait_end::none) add(std::string(wait_end_text(e.wait_ended)));
  } else if (e.interval_start_us >= 0) {
    const std::int64_t from = e.interval_start_us - start_us;
    const std::int64_t f = from < 0 ? -from : from;
    add(fmt::format("from {}{}.{:06} for {}", from < 0 ? '-' : '+', f / 1'000'000, f % 1'000'000,
                    format_duration(std::max<std::int64_t>(e.interval_us, 0))));
  }
  if (e.confidence != link_confidence::none && !e.owner.empty()) {
    add(fmt::format("subscriber linked to waiter ({})", to_string(e.confidence)));
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
