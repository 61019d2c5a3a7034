// A master and its replica, both real redis-server processes on free loopback ports,
// for the replica sync tests. The constructor returns once a write to the master is
// acknowledged by the replica (WAIT 1), so later WAITs see it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

namespace lockscope::test {

inline std::string info_replication(const redis_server& s) {
  resp_connection c(s.host(), s.port());
  return c.command("INFO", "replication").text;
}

// Puts `replica` to sleep (DEBUG SLEEP) and returns once it is asleep: a PING on a
// second connection goes unanswered. The returned connection gets the sleep's +OK.
inline resp_connection put_to_sleep(const redis_server& replica, const std::string& seconds) {
  resp_connection sleeper(replica.host(), replica.port());
  sleeper.send_command("DEBUG", "SLEEP", seconds);
  for (int i = 0; i < 100; ++i) {
    resp_connection probe(replica.host(), replica.port());
    probe.send_command("PING");
    if (!probe.try_read_value(std::chrono::milliseconds(50))) return sleeper;
  }
  throw redis_server_error("DEBUG SLEEP " + seconds + " did not put the replica to sleep");
}

struct replicated_pair {
  // No diskless-sync delay: the replica's first full sync takes milliseconds, not 5 s.
  redis_server master{std::vector<std::string>{"--repl-diskless-sync-delay", "0"}};
  std::unique_ptr<redis_server> replica;

  replicated_pair() {
    replica = std::make_unique<redis_server>(
        std::vector<std::string>{"--replicaof", master.host(), std::to_string(master.port())});
    wait_for_link(std::chrono::seconds(20));
  }

  // Up means a write is acknowledged: after a diskless full sync the master lists the
  // replica online at once, but Redis 7 starts its command stream only at the
  // replica's first REPLCONF ACK, up to a second later, and WAITs get 0 until then.
  void wait_for_link(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    resp_connection probe(master.host(), master.port());
    for (;;) {
      probe.command("SET", "replicated_pair:probe", "1");
      if (probe.command("WAIT", 1, 100).integer >= 1) {
        probe.command("DEL", "replicated_pair:probe");
        if (probe.command("WAIT", 1, 5000).integer >= 1) return;
      }
      const std::string on_replica = info_replication(*replica);
      const std::string on_master = info_replication(master);
      if (std::chrono::steady_clock::now() > deadline)
        throw redis_server_error("the replica's link did not come up:\n" + on_replica + "\nmaster:\n" + on_master +
                                 "\nreplica log:\n" + replica->log_tail());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

}  // namespace lockscope::test
