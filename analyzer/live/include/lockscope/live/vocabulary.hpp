// The earlier stages' vocabulary that the live stage reads by its own names: captured
// packets and their endpoints, and lock events. Anything else is named ingest:: or locks::.
#pragma once

#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_event.hpp"

namespace lockscope::live {

using ingest::captured_packet;
using ingest::endpoint;
using locks::anomaly_kind;
using locks::lock_event;
using locks::lock_event_kind;
using locks::lock_event_sink;

}  // namespace lockscope::live
