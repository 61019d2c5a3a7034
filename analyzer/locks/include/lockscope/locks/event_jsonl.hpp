// A lock event as one JSON object (the JSONL output, the live recorder's hooks, the HTML
// report's event details). Fields in this order, absent when they do not apply:
//   ts (epoch seconds.microseconds), lock, event, owner, client, server, db,
//   lock_server (a Redis Cluster's lock: "cluster:<first node>"), hold_count, lease_ms,
//   ttl_ms, wait_ms (+ wait_at_least), held_ms (milliseconds, microsecond precision),
//   kind (anomalies), inferred (true only), confidence (subscriber linking: certain,
//   high, low), token (fenced lock); redirected events: redirect, operation, slot, to;
//   asking; since, for_ms (an anomaly's interval); quorum events (lock_groups.hpp):
//   servers, acquired_on, needed (counts), acquired_servers, owners, outcome (acquired,
//   failed, failed_released), start, end; multilock events: keys, acquired_keys,
//   outcome, start, end.
#pragma once

#include <string>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

// Appends the object, without a newline.
void append_event_jsonl(std::string& out, const lock_event& e);

}  // namespace lockscope::locks
