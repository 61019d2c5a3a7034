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
// These print what they did on stdout (record.sh keeps it as NAME.driver.txt), the
// truth the tests compare the analyzer's timeline with:
//   fair      a holder, then 3 clients queued on the fair lock in a known order;
//             "acquired OWNER" per acquisition, in the order they happened
//   fenced    3 clients x 2 fenced acquisitions; "token OWNER N" per acquisition
//   rwlock    2 readers hold together, a writer waits for them, a third reader waits
//             for the writer; "read|write acquired|released OWNER" in order
//   redlock   record_lock_traffic redlock PORT1 PORT2 PORT3: 2 clients x 3 RedLock
//             holds over three servers; "held OWNER1 OWNER2 OWNER3" per hold (the
//             owner on each server, in port order)
#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/multi_lock.hpp"

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


// One line of the driver's log, in the order the calls returned.
void log_line(const std::string& line) {
  static std::mutex m;
  std::scoped_lock hold(m);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void fair(std::uint16_t port) {
  lk::client holder_client(config(port));
  holder_client.connect();
  auto holder = holder_client.get_fair_lock("fair:queue");
  holder.lock();
  log_line("acquired " + holder.owner());
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([port] {
      lk::client c(config(port));
      c.connect();
      auto l = c.get_fair_lock("fair:queue");
      l.lock();
      log_line("acquired " + l.owner());
      std::this_thread::sleep_for(20ms);
      l.unlock();
      c.close();
    });
    std::this_thread::sleep_for(150ms);  // each waiter is in the queue before the next starts
  }
  holder.unlock();
  for (auto& t : waiters) t.join();
  holder_client.close();
}

void fenced(std::uint16_t port) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([port] {
      lk::client c(config(port));
      c.connect();
      auto l = c.get_fenced_lock("fenced:job");
      for (int r = 0; r < 2; ++r) {
        const std::int64_t token = l.lock_and_get_token();
        log_line("token " + l.owner() + " " + std::to_string(token));
        std::this_thread::sleep_for(30ms);
        l.unlock();
        std::this_thread::sleep_for(10ms);
      }
      c.close();
    });
  }
  for (auto& t : threads) t.join();
}

void rwlock(std::uint16_t port) {
  std::barrier both_readers(2);
  auto reader = [port, &both_readers](bool first_two, std::chrono::milliseconds start) {
    std::this_thread::sleep_for(start);
    lk::client c(config(port));
    c.connect();
    auto l = c.get_read_write_lock("rw:config").read_lock();
    l.lock();
    log_line("read acquired " + l.owner());
    if (first_two) both_readers.arrive_and_wait();  // both hold before either lets go
    std::this_thread::sleep_for(200ms);
    log_line("read released " + l.owner());
    l.unlock();
    c.close();
  };
  std::thread r1(reader, true, 0ms), r2(reader, true, 0ms);
  std::thread writer([port] {
    std::this_thread::sleep_for(80ms);  // the readers hold by now
    lk::client c(config(port));
    c.connect();
    auto l = c.get_read_write_lock("rw:config").write_lock();
    l.lock();
    log_line("write acquired " + l.owner());
    std::this_thread::sleep_for(150ms);
    log_line("write released " + l.owner());
    l.unlock();
    c.close();
  });
  std::thread r3(reader, false, 280ms);  // while the writer holds
  for (auto* t : {&r1, &r2, &writer, &r3}) t->join();
}

void redlock(const std::vector<std::uint16_t>& ports) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&ports, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(15 * i));
      std::vector<std::unique_ptr<lk::client>> clients;
      std::vector<lk::rlock> parts;
      std::string owners;
      for (std::uint16_t port : ports) {
        auto cfg = config(port);
        cfg.command_timeout = 1000ms;
        clients.push_back(std::make_unique<lk::client>(cfg));
        clients.back()->connect();
        parts.push_back(clients.back()->get_lock("red:job"));
        owners += " " + parts.back().owner();
      }
      auto red = lk::get_red_lock(std::move(parts));
      for (int r = 0; r < 3; ++r) {
        red.lock(2000ms);
        log_line("held" + owners);
        std::this_thread::sleep_for(40ms);
        red.unlock();
        std::this_thread::sleep_for(20ms);
      }
      for (auto& c : clients) c->close();
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[1]) == "redlock")) {
    std::fprintf(stderr,
                 "usage: record_lock_traffic contend|expiry|resp3|evalsha|evalsha-warmup|stress|fair|fenced|rwlock PORT\n"
                 "       record_lock_traffic redlock PORT1 PORT2 PORT3\n");
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
    else if (scenario == "fair") fair(port);
    else if (scenario == "fenced") fenced(port);
    else if (scenario == "rwlock") rwlock(port);
    else if (scenario == "redlock") {
      redlock({port, static_cast<std::uint16_t>(std::atoi(argv[3])), static_cast<std::uint16_t>(std::atoi(argv[4]))});
    }
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
