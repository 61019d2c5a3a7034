// A master, its replica and three redis-sentinel processes watching them as
// `mymaster` (quorum 2), on free loopback ports, tuned so that a failover after the
// master dies takes a few seconds: down-after-milliseconds 800, failover-timeout 4000.
// The constructor returns once every sentinel sees the replica and the two other
// sentinels (else a kill could not be failed over).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "lockscope/lock/config.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "replication.hpp"

namespace lockscope::test {

inline constexpr const char* sentinel_master_name = "mymaster";

// A sentinel config watching `master` as `name`.
inline std::string sentinel_conf(const std::string& name, const std::string& host, std::uint16_t port,
                                 int down_after_ms = 800) {
  return fmt::format(
      "sentinel monitor {0} {1} {2} 2\n"
      "sentinel down-after-milliseconds {0} {3}\n"
      "sentinel failover-timeout {0} 4000\n"
      "sentinel parallel-syncs {0} 1\n",
      name, host, port, down_after_ms);
}

inline std::unique_ptr<redis_server> start_sentinel(const std::string& conf) {
  redis_server_options o;
  o.sentinel_config = conf;
  return std::make_unique<redis_server>(std::move(o));
}

struct sentinel_group {
  replicated_pair data;
  std::vector<std::unique_ptr<redis_server>> sentinels;

  sentinel_group() {
    const std::string conf = sentinel_conf(sentinel_master_name, data.master.host(), data.master.port());
    for (int i = 0; i < 3; ++i) sentinels.push_back(start_sentinel(conf));
    wait_until_watching(std::chrono::seconds(20));
  }

  // redis-sentinel://127.0.0.1:a,127.0.0.1:b,127.0.0.1:c#mymaster
  std::string url(std::string_view scheme = "redis-sentinel") const {
    std::string hosts;
    for (const auto& s : sentinels) hosts += (hosts.empty() ? "" : ",") + fmt::format("{}:{}", s->host(), s->port());
    return fmt::format("{}://{}#{}", scheme, hosts, sentinel_master_name);
  }

  // What one sentinel says the master is: "host:port", or "" when it does not know.
  std::string master_according_to(std::size_t sentinel) const {
    resp_connection c(sentinels[sentinel]->host(), sentinels[sentinel]->port(), std::chrono::milliseconds(1000));
    const resp::value reply = c.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel_master_name);
    if (reply.elements.size() != 2) return {};
    return reply.elements[0].text + ":" + reply.elements[1].text;
  }

  // A field of `SENTINEL MASTER mymaster` on one sentinel ("num-slaves", ...).
  std::string master_field(std::size_t sentinel, const std::string& field) const {
    resp_connection c(sentinels[sentinel]->host(), sentinels[sentinel]->port(), std::chrono::milliseconds(1000));
    const resp::value reply = c.command("SENTINEL", "MASTER", sentinel_master_name);
    for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2)
      if (reply.elements[i].text == field) return reply.elements[i + 1].text;
    return {};
  }

  void wait_until_watching(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool all = true;
      for (std::size_t i = 0; i < sentinels.size() && all; ++i)
        all = master_field(i, "num-slaves") == "1" && master_field(i, "num-other-sentinels") == "2";
      if (all) return;
      if (std::chrono::steady_clock::now() > deadline)
        throw redis_server_error("the sentinels did not see the replica and each other; sentinel log:\n" +
                                 sentinels[0]->log_tail());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Polls until every sentinel names `address` ("host:port") as the master.
  bool wait_for_master(const std::string& address, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool all = true;
      for (std::size_t i = 0; i < sentinels.size() && all; ++i) {
        try {
          all = master_according_to(i) == address;
        } catch (const connection_error&) {
          all = false;
        }
      }
      if (all) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
};

}  // namespace lockscope::test
