// Drives our lock client (lockscope::lock) against a real redis-server, for the
// tcpdump recordings in captures/recorded/ (see captures/record.sh):
//   record_lock_traffic SCENARIO PORT
// Scenarios:
//   contend   3 clients (own UUIDs and connections), reentrant holds, watchdog 900 ms
//             renewing every 300 ms, EVAL script mode
//   expiry    A takes a 300 ms lease and works 700 ms; B waits and gets the lock when
//             the lease runs out; A's unlock is then refused
//   resp3     2 RESP3 clients (HELLO 3, pushes) contending with the watchdog
//   evalsha   2 clients in EVALSHA mode; the scripts were loaded before the recording
//             started (a warm-up client loads them; record.sh starts tcpdump after it)
//   stress    4 clients x 40 lock/unlock rounds; a shared counter checks mutual
//             exclusion, and the analyzer must find no overlapping_holders
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lockscope/lock/client.hpp"

using namespace std::chrono_literals;
namespace lk = lockscope::lock;

namespace {

lk::client_config config(std::uint16_t port, int protocol = 2, lk::script_mode mode = lk::script_mode::eval,
                         std::chrono::milliseconds watchdog = 900ms) {
  lk::client_config c;
  c.port = port;
  c.protocol = protocol;
  c.scripts = mode;
  c.watchdog_timeout = watchdog;
  c.ping_interval = 0ms;
  c.on_unlock_error = [](const std::string& name, const std::string& message) {
    std::fprintf(stderr, "record: unlock of %s refused: %s\n", name.c_str(), message.c_str());
  };
  return c;
}

void contend(std::uint16_t port, int protocol, lk::script_mode mode, int rounds) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([=] {
      lk::client c(config(port, protocol, mode));
      c.connect();
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * i));
      auto lock = c.get_lock("orders:42");
      for (int r = 0; r < rounds; ++r) {
        lock.lock();
        lock.lock();  // reentrant
        std::this_thread::sleep_for(400ms);  // the watchdog renews at 300 ms
        lock.unlock();
        std::this_thread::sleep_for(50ms);
        lock.unlock();
        std::this_thread::sleep_for(30ms);
      }
      c.close();
    });
  }
  for (auto& t : threads) t.join();
}

void expiry(std::uint16_t port) {
  lk::client a(config(port));
  lk::client b(config(port));
  a.connect();
  b.connect();
  auto la = a.get_lock("report:daily");
  auto lb = b.get_lock("report:daily");
  la.lock(300ms);  // a lease, no watchdog
  std::thread waiter([&] {
    if (lb.try_lock(5s, 2s)) lb.unlock();
  });
  std::this_thread::sleep_for(700ms);  // longer than the lease
  la.unlock();                         // refused: not locked by current thread
  waiter.join();
  a.close();
  b.close();
}

void stress(std::uint16_t port) {
  std::atomic<int> inside{0};
  std::atomic<int> violations{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      lk::client c(config(port, 2, lk::script_mode::evalsha, 2000ms));
      c.connect();
      auto lock = c.get_lock("stress");
      for (int r = 0; r < 40; ++r) {
        lock.lock();
        if (inside.fetch_add(1) != 0) ++violations;
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        lock.unlock();
      }
      c.close();
    });
  }
  for (auto& t : threads) t.join();
  if (violations != 0) {
    std::fprintf(stderr, "record: %d mutual-exclusion violations\n", violations.load());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: record_lock_traffic contend|expiry|resp3|evalsha|evalsha-warmup|stress PORT\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const auto port = static_cast<std::uint16_t>(std::atoi(argv[2]));
  try {
    if (scenario == "contend") contend(port, 2, lk::script_mode::eval, 2);
    else if (scenario == "expiry") expiry(port);
    else if (scenario == "resp3") contend(port, 3, lk::script_mode::eval, 1);
    else if (scenario == "evalsha-warmup") {
      lk::client c(config(port, 2, lk::script_mode::evalsha));
      c.connect();
      auto l = c.get_lock("warmup");
      l.lock();
      l.lock();
      std::this_thread::sleep_for(400ms);  // long enough for a watchdog renewal (300 ms)
      l.unlock();
      l.unlock();
      l.force_unlock();
      c.close();
    } else if (scenario == "evalsha") contend(port, 2, lk::script_mode::evalsha, 1);
    else if (scenario == "stress") stress(port);
    else {
      std::fprintf(stderr, "record_lock_traffic: unknown scenario %s\n", scenario.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "record_lock_traffic: %s\n", e.what());
    return 1;
  }
  return 0;
}
