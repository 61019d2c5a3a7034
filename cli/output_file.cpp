#include "output_file.hpp"

#include <cerrno>
#include <cstring>

#include <climits>
#include <cstdlib>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace lockscope::cli {

output_file::output_file(std::string path) : path_(path == "-" ? std::string() : std::move(path)) {
  if (path_.empty()) {
    file_ = stdout;
    return;
  }
  struct stat st {};
  std::string write_to = path_;
  int flags = O_WRONLY | O_CLOEXEC;
  // A device, FIFO or socket (`-o /dev/null`, `-o /dev/stdout`, a named pipe) is written
  // in place: renaming a file over it would replace the device node itself.
  const bool in_place = ::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  if (!in_place) {
    // A symlink to a file: the file it names is replaced, and the link stays.
    rename_to_ = path_;
    if (char resolved[PATH_MAX]; ::lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
                                 ::realpath(path_.c_str(), resolved) != nullptr) {
      rename_to_ = resolved;
    }
    tmp_path_ = write_to = rename_to_ + ".tmp";
    // O_EXCL would refuse a FILE.tmp left by a killed run; it is ours to replace.
    flags |= O_CREAT | O_TRUNC;
  }
  const int fd = ::open(write_to.c_str(), flags, 0644);
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
    if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
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
    if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
    fail("cannot write", err);
  }
  if (tmp_path_.empty()) return;  // written in place
  if (::rename(tmp_path_.c_str(), rename_to_.c_str()) != 0) {
    const int rename_err = errno;
    ::unlink(tmp_path_.c_str());
    fail("cannot write", rename_err);
  }
}

}  // namespace lockscope::cli
