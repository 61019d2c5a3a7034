// Lock events of one client connection to 10.0.0.1:6379, for the recorder's tests.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/test/endpoint_text.hpp"

namespace lockscope::recorder_test {

inline locks::lock_event event(std::int64_t ts, std::string_view lock, std::string_view client,
                                  locks::lock_event_kind k, locks::anomaly_kind a = locks::anomaly_kind::none) {
  locks::lock_event e;
  e.ts_us = ts;
  e.lock = lock;
  e.client = client;
  e.server = "10.0.0.1:6379";
  e.client_endpoint = test::interned_endpoint(e.client);
  e.server_endpoint = test::interned_endpoint(e.server);
  e.event = k;
  e.kind = a;
  return e;
}

}  // namespace lockscope::recorder_test
