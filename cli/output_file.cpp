#include "output_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace lockscope::cli {

output_file::output_file(std::string path) : path_(path == "-" ? std::string() : std::move(path)) {
  if (path_.empty()) {
    file_ = stdout;
    return;
  }
  tmp_path_ = path_ + ".tmp";
  // O_EXCL would refuse a FILE.tmp left by a killed run; it is ours to replace.
  const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write", errno);
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    fail("cannot write", err);
  }
}

output_file::~output_file() {
  if (file_ != nullptr && file_ != stdout) {
    std::fclose(file_);
    ::unlink(tmp_path_.c_str());
  }
}

void output_file::fail(const char* what, int err) {
  throw output_error(fmt::format("{} {}: {}", what, path_.empty() ? std::string("stdout") : path_, std::strerror(err)));
}

void output_file::write(std::string_view s) {
  if (s.empty()) return;
  if (std::fwrite(s.data(), 1, s.size(), file_) != s.size()) fail("cannot write", errno);
}

void output_file::flush() {
  if (std::fflush(file_) != 0) fail("cannot write", errno);
}

void output_file::commit() {
  flush();
  if (file_ == stdout) return;
  std::FILE* f = file_;
  file_ = nullptr;
  const bool closed = std::fclose(f) == 0;
  const int err = errno;
  if (!closed) {
    ::unlink(tmp_path_.c_str());
    fail("cannot write", err);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int rename_err = errno;
    ::unlink(tmp_path_.c_str());
    fail("cannot write", rename_err);
  }
}

}  // namespace lockscope::cli
