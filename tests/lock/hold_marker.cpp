// The command a `lockscope lock` runs in the Redisson interop test: appends
// `<label> <start ns> <end ns>` (CLOCK_MONOTONIC, the clock Java's System.nanoTime reads)
// to a log, holding the lock for <hold ms> in between, then ` - <token>` when
// LOCKSCOPE_FENCE_TOKEN is set (`lockscope lock --fenced`). A process that starts in a
// millisecond, so that its start is close to the acquisition.
//   lock_hold_marker LOG LABEL HOLD_MS
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
long long monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: lock_hold_marker LOG LABEL HOLD_MS\n");
    return 2;
  }
  const long long start = monotonic_ns();
  const long hold_ms = std::strtol(argv[3], nullptr, 10);
  timespec hold{hold_ms / 1000, (hold_ms % 1000) * 1000000L};
  while (nanosleep(&hold, &hold) != 0) {
  }
  const long long end = monotonic_ns();
  std::string line = std::string(argv[2]) + " " + std::to_string(start) + " " + std::to_string(end);
  if (const char* token = std::getenv("LOCKSCOPE_FENCE_TOKEN")) line += std::string(" - ") + token;
  line += "\n";
  const int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return 1;
  // One write with O_APPEND: lines of concurrent holders never interleave.
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  return ok ? 0 : 1;
}
