// `lockscope analyze - --format html|svg`: the report reads its input twice (rank, then
// draw), and standard input can be read once. Its bytes are copied to a temporary file
// first, in $TMPDIR (else /tmp), unlinked as soon as it is opened so that nothing is left
// behind however the run ends, and read back through /proc/self/fd/N.
#pragma once

#include <cstdint>
#include <string>

namespace lockscope::cli {

class stdin_spool {
 public:
  // Copies standard input, at most `max_bytes`. On failure (the limit reached, no room,
  // no temporary directory) error() says why, naming the limit's option.
  explicit stdin_spool(std::uint64_t max_bytes);
  ~stdin_spool();
  stdin_spool(const stdin_spool&) = delete;
  stdin_spool& operator=(const stdin_spool&) = delete;

  bool ok() const noexcept { return error_.empty(); }
  const std::string& error() const noexcept { return error_; }
  // The path that reads the spooled bytes (valid while this object lives).
  const std::string& path() const noexcept { return path_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  // `text` with every mention of path() put back as "-" (messages name the input as given).
  std::string shown_as_stdin(std::string text) const;

 private:
  int fd_ = -1;
  std::string path_;
  std::string error_;
  std::uint64_t bytes_ = 0;
};

}  // namespace lockscope::cli
