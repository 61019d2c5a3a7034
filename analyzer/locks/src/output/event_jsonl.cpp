#include "lockscope/locks/event_jsonl.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "output/append_format.hpp"
#include "lockscope/ingest/message.hpp"
#include "lockscope/locks/lock_groups.hpp"

namespace lockscope::locks {

namespace {

void append_ms(std::string& out, std::int64_t us) {
  append_format(out, "{}.{:03}", us / 1000, us % 1000);
}

}  // namespace

void append_event_jsonl(std::string& out, const lock_event& e) {
  const std::int64_t secs = e.ts_us / 1'000'000;
  const std::int64_t frac = e.ts_us % 1'000'000;
  append_format(out, "{{\"ts\":{}.{:06},\"lock\":", secs, frac);
  ingest::append_json_string(out, e.lock);
  out += ",\"event\":\"";
  out += to_string(e.event);
  out += "\",\"owner\":";
  ingest::append_json_string(out, e.owner);
  out += ",\"client\":";
  ingest::append_json_string(out, e.client);
  out += ",\"server\":";
  ingest::append_json_string(out, e.server);
  append_format(out, ",\"db\":{}", e.db);
  if (!e.lock_server.empty() && e.lock_server != e.server) {
    out += ",\"lock_server\":";  // a Redis Cluster's lock: "cluster:<first node>"
    ingest::append_json_string(out, e.lock_server);
  }
  if (e.hold_count >= 0) append_format(out, ",\"hold_count\":{}", e.hold_count);
  if (e.lease_ms >= 0) append_format(out, ",\"lease_ms\":{}", e.lease_ms);
  if (e.ttl_ms >= 0) append_format(out, ",\"ttl_ms\":{}", e.ttl_ms);
  if (e.wait_us >= 0) {
    out += ",\"wait_ms\":";
    append_ms(out, e.wait_us);
    if (e.wait_at_least) out += ",\"wait_at_least\":true";
    if (e.wait_at_most_us >= 0) {
      out += ",\"wait_at_most_ms\":";
      append_ms(out, e.wait_at_most_us);
    }
    if (e.wait_likely_us >= 0) {
      out += ",\"wait_likely_ms\":";
      append_ms(out, e.wait_likely_us);
      append_format(out, ",\"wait_likely_from\":{}", e.wait_likely_from);
    }
  }
  if (e.held_us >= 0) {
    out += ",\"held_ms\":";
    append_ms(out, e.held_us);
  }
  if (e.held_since_capture_start) out += ",\"since_capture_start\":true";
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
  if (e.link_not_certain != anomaly_kind::none) {
    out += ",\"link_not_certain\":\"";
    out += to_string(e.link_not_certain);
    out += '"';
  }
  if (e.token >= 0) append_format(out, ",\"token\":{}", e.token);
  // Semaphores and latches (keys only on their events).
  if (e.permits >= 0) append_format(out, ",\"permits\":{}", e.permits);
  if (e.latch) {
    if (e.permits_in_use >= 0) append_format(out, ",\"count\":{}", e.permits_in_use);
  } else if (e.permits_in_use >= 0) {
    append_format(out, ",\"permits_in_use\":{}", e.permits_in_use);
    if (e.permit_limit >= 0) append_format(out, ",\"permit_limit\":{}", e.permit_limit);
  }
  if (e.event == lock_event_kind::redirected) {
    out += ",\"redirect\":\"";
    out += to_string(e.redirect);
    out += "\",\"operation\":\"";
    out += to_string(e.operation);
    out += '"';
    if (e.slot >= 0) append_format(out, ",\"slot\":{}", e.slot);
    if (!e.redirect_to.empty()) {
      out += ",\"to\":";
      ingest::append_json_string(out, e.redirect_to);
    }
  }
  if (e.asking) out += ",\"asking\":true";
  if (e.interval_start_us >= 0) {
    append_format(out, ",\"since\":{}.{:06},\"for_ms\":", e.interval_start_us / 1'000'000, e.interval_start_us % 1'000'000);
    append_ms(out, std::max<std::int64_t>(e.interval_us, 0));
  }
  if (e.wait_ended != wait_end::none) {
    out += ",\"ended\":\"";
    out += to_string(e.wait_ended);
    out += '"';
  }
  if (e.closed_holder_us >= 0) {
    out += ",\"closed_holder\":";
    ingest::append_json_string(out, e.closed_holder);
    append_format(out, ",\"holder_closed_at\":{}.{:06}", e.closed_holder_us / 1'000'000, e.closed_holder_us % 1'000'000);
    if (e.closed_holder_expired_us >= 0) {
      append_format(out, ",\"holder_lease_ran_out_at\":{}.{:06}", e.closed_holder_expired_us / 1'000'000,
                    e.closed_holder_expired_us % 1'000'000);
    }
  }
  if (e.group != nullptr) {
    const lock_group& g = *e.group;
    auto list = [&](std::string_view field, std::span<const std::string_view> items) {
      out += ",\"";
      out += field;
      out += "\":[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ',';
        ingest::append_json_string(out, items[i]);
      }
      out += ']';
    };
    if (e.event == lock_event_kind::quorum) {
      append_format(out, ",\"servers\":{},\"acquired_on\":{},\"needed\":{}", g.total, g.acquired, g.needed);
      if (g.kind_unknown) out += ",\"redlock_or_multilock\":true";
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

}  // namespace lockscope::locks
