// A separate process for the cross-process tests.
//
//   lock_test_helper hold PORT NAME WATCHDOG_MS   lock NAME (watchdog), print "locked", sleep
//   lock_test_helper fenced PORT NAME WATCHDOG_MS fenced lock NAME, print "token <n>", sleep
//   lock_test_helper critical DIR                 one critical section on DIR/counter, logged
//                                                 to DIR/log as "<start ns> <end ns>"
//   lock_test_helper reader DIR                   a 2 ms read section, logged to DIR/readlog
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "lockscope/lock/client.hpp"

namespace {

long long monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int hold(int port, const std::string& name, int watchdog_ms) {
  lockscope::lock::client_config config;
  config.port = static_cast<std::uint16_t>(port);
  config.watchdog_timeout = std::chrono::milliseconds(watchdog_ms);
  lockscope::lock::client client(config);
  auto lock = client.get_lock(name);
  lock.lock();
  std::printf("locked\n");
  std::fflush(stdout);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

int hold_fenced(int port, const std::string& name, int watchdog_ms) {
  lockscope::lock::client_config config;
  config.port = static_cast<std::uint16_t>(port);
  config.watchdog_timeout = std::chrono::milliseconds(watchdog_ms);
  lockscope::lock::client client(config);
  auto lock = client.get_fenced_lock(name);
  std::printf("token %lld\n", static_cast<long long>(lock.lock_and_get_token()));
  std::fflush(stdout);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

bool append_interval(const std::string& path, long long start, long long end) {
  const std::string line = std::to_string(start) + " " + std::to_string(end) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return false;
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return ok;
}

int reader(const std::string& dir) {
  const long long start = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return append_interval(dir + "/readlog", start, monotonic_ns()) ? 0 : 1;
}

// Read, increment and write a counter with a pause in the middle: without mutual
// exclusion, concurrent runs lose increments and their logged intervals overlap.
int critical(const std::string& dir) {
  const long long start = monotonic_ns();
  long long value = 0;
  {
    std::ifstream in(dir + "/counter");
    in >> value;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  {
    std::ofstream out(dir + "/counter", std::ios::trunc);
    out << value + 1 << '\n';
  }
  return append_interval(dir + "/log", start, monotonic_ns()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "hold" && argc == 5) return hold(std::atoi(argv[2]), argv[3], std::atoi(argv[4]));
  if (mode == "fenced" && argc == 5) return hold_fenced(std::atoi(argv[2]), argv[3], std::atoi(argv[4]));
  if (mode == "critical" && argc == 3) return critical(argv[2]);
  if (mode == "reader" && argc == 3) return reader(argv[2]);
  std::fprintf(stderr, "usage: lock_test_helper hold|fenced PORT NAME WATCHDOG_MS | critical|reader DIR\n");
  return 2;
}
