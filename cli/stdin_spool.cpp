#include "stdin_spool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace lockscope::cli {

namespace {

std::string spool_directory() {
  const char* dir = std::getenv("TMPDIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string("/tmp");
}

bool spool_write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

stdin_spool::stdin_spool(std::uint64_t max_bytes) {
  const std::string dir = spool_directory();
  std::string name = dir + "/lockscope-stdin-XXXXXX";
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    error_ = fmt::format("-: cannot spool standard input for the two passes of the report: {}: {} (set TMPDIR to a "
                         "writable directory, or give the capture as a file)",
                         dir, std::strerror(errno));
    return;
  }
  ::unlink(name.c_str());  // gone from the directory at once: nothing left however the run ends
  path_ = fmt::format("/proc/self/fd/{}", fd_);
  std::vector<char> buffer(1u << 20);
  for (;;) {
    const ssize_t r = ::read(STDIN_FILENO, buffer.data(), buffer.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      error_ = fmt::format("-: read error at byte {}: {}", bytes_, std::strerror(errno));
      return;
    }
    if (r == 0) break;
    const auto n = static_cast<std::uint64_t>(r);
    if (bytes_ + n > max_bytes) {
      error_ = fmt::format("-: standard input is larger than --stdin-spool-max ({} bytes), which the report copies to "
                           "{} to read it twice: raise it, or give the capture as a file",
                           max_bytes, dir);
      return;
    }
    if (!spool_write_all(fd_, buffer.data(), static_cast<std::size_t>(r))) {
      error_ = fmt::format("-: cannot spool standard input to {} after {} bytes: {}", dir, bytes_,
                           std::strerror(errno != 0 ? errno : ENOSPC));
      return;
    }
    bytes_ += n;
  }
}

stdin_spool::~stdin_spool() {
  if (fd_ >= 0) ::close(fd_);
}

std::string stdin_spool::shown_as_stdin(std::string text) const {
  if (path_.empty()) return text;
  for (std::size_t at = text.find(path_); at != std::string::npos; at = text.find(path_, at + 1)) {
    text.replace(at, path_.size(), "-");
  }
  return text;
}

}  // namespace lockscope::cli
