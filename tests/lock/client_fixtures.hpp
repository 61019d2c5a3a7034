// Helpers the client tests share: a config for a test server, and polling.
#pragma once

#include <chrono>
#include <thread>

#include "lockscope/lock/config.hpp"
#include "lockscope/test/redis_server.hpp"

namespace lockscope::test {

inline lock::client_config config_for(const redis_server& server) {
  using namespace std::chrono_literals;
  lock::client_config c;
  c.host = server.host();
  c.port = server.port();
  c.connect_timeout = 2s;
  c.command_timeout = 5s;
  return c;
}

// The same, sending the scripts as `mode` says (EVALSHA or EVAL).
inline lock::client_config config_for(const redis_server& server, lock::script_mode mode) {
  lock::client_config c = config_for(server);
  c.scripts = mode;
  return c;
}

inline std::chrono::milliseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t);
}

// Polls `condition` until true or `timeout`; returns whether it became true.
template <class F>
bool eventually(F condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace lockscope::test
