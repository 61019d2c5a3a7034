#include "output/sorted_spool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lockscope/locks/lock_report.hpp"

namespace lockscope::locks {

sorted_spool::sorted_spool() {
  const char* dir = std::getenv("TMPDIR");
  if (dir == nullptr || *dir == '\0') dir = "/tmp";
  std::string path = std::string(dir) + "/lockscope-text-XXXXXX";
  fd_ = ::mkstemp(path.data());
  if (fd_ < 0) fail("cannot create a temporary file in " + std::string(dir) + " (set TMPDIR)");
  ::unlink(path.c_str());
  out_.reserve(buffer_bytes);
}

sorted_spool::~sorted_spool() { ::close(fd_); }

void sorted_spool::end_run() {
  drain();
  runs_.emplace_back(run_start_, size_);
  run_start_ = size_;
}

void sorted_spool::fail(const std::string& what) {
  throw report_error("text output: " + what + ": " + std::strerror(errno));
}

void sorted_spool::ended_early() { throw report_error("text output: the temporary file ended early"); }

void sorted_spool::drain() {
  write_all(out_);
  out_.clear();
}

void sorted_spool::write_all(std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd_, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write the temporary file");
    s.remove_prefix(static_cast<std::size_t>(n));
    size_ += static_cast<std::uint64_t>(n);
  }
}

std::vector<sorted_spool::cursor> sorted_spool::cursors(std::size_t each) const {
  std::vector<cursor> c(runs_.size());
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    c[r].at = runs_[r].first;
    c[r].end = runs_[r].second;
    c[r].buffer.resize(each);
  }
  return c;
}

std::string_view sorted_spool::fill(cursor& c, std::uint64_t want) {
  if (c.used == c.filled) {
    c.used = 0;
    c.filled = 0;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(c.buffer.size(), c.end - c.at));
    while (c.filled < n) {
      const ssize_t got = ::pread(fd_, c.buffer.data() + c.filled, n - c.filled, static_cast<off_t>(c.at));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) fail("cannot read the temporary file back");
      c.filled += static_cast<std::size_t>(got);
      c.at += static_cast<std::uint64_t>(got);
    }
  }
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(c.filled - c.used, want));
  return {c.buffer.data() + c.used, n};
}

void sorted_spool::read(cursor& c, char* to, std::size_t n) {
  while (n > 0) {
    const std::string_view s = fill(c, n);
    if (s.empty()) ended_early();
    std::memcpy(to, s.data(), s.size());
    c.used += s.size();
    to += s.size();
    n -= s.size();
  }
}

bool sorted_spool::read_lock(cursor& c, std::uint64_t& lock) {
  if (c.used == c.filled && c.at == c.end) return false;
  read(c, reinterpret_cast<char*>(&lock), sizeof lock);
  return true;
}

}  // namespace lockscope::locks
