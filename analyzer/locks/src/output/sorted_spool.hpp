// The text output's overflow: runs of text records, each run sorted by lock, in an
// unlinked temporary file (in $TMPDIR, else /tmp), merged back lock by lock. The memory
// stays bounded however long the capture; the file holds about the text's size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockscope::locks {

// Records [lock index][size][text] (host byte order, 8-byte fields) back to back.
// Errors throw report_error (lock_report.hpp).
class sorted_spool {
 public:
  sorted_spool();
  ~sorted_spool();
  sorted_spool(const sorted_spool&) = delete;
  sorted_spool& operator=(const sorted_spool&) = delete;

  // Appends to the current run; locks in increasing order.
  void add(std::uint64_t lock, std::string_view text) {
    const std::uint64_t header[2] = {lock, text.size()};
    put({reinterpret_cast<const char*>(header), sizeof header});
    put(text);
  }
  void end_run();
  // Calls piece(lock, text) with every record's text, in pieces, by lock and then by
  // run (the order the lines were written in).
  template <class Piece>
  void merge(Piece&& piece);

 private:
  static constexpr std::size_t buffer_bytes = 1u << 16;
  struct cursor {
    std::uint64_t at = 0;   // file offset of buffer's end
    std::uint64_t end = 0;  // the run's end
    std::vector<char> buffer;
    std::size_t used = 0;   // consumed from the buffer
    std::size_t filled = 0;
  };
  [[noreturn]] static void fail(const std::string& what);
  [[noreturn]] static void ended_early();
  void put(std::string_view s) {
    if (out_.size() + s.size() > buffer_bytes) drain();
    if (s.size() > buffer_bytes) write_all(s);
    else out_.append(s);
  }
  void drain();
  void write_all(std::string_view s);
  // At least one unread byte in the buffer (up to `want`), when the run has any.
  std::string_view fill(cursor& c, std::uint64_t want);
  void read(cursor& c, char* to, std::size_t n);
  bool read_lock(cursor& c, std::uint64_t& lock);
  std::vector<cursor> cursors(std::size_t each) const;

  int fd_ = -1;
  std::string out_;
  std::uint64_t size_ = 0;
  std::uint64_t run_start_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs_;  // [start, end)
};

template <class Piece>
void sorted_spool::merge(Piece&& piece) {
  // Read buffers: 8 MiB in all, 4-64 KiB a run.
  const std::size_t each = std::clamp<std::size_t>((8u << 20) / std::max<std::size_t>(runs_.size(), 1), 4096, 65536);
  std::vector<cursor> runs = cursors(each);
  using key = std::pair<std::uint64_t, std::size_t>;  // next lock, run
  std::priority_queue<key, std::vector<key>, std::greater<>> next;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (std::uint64_t lock; read_lock(runs[r], lock)) next.emplace(lock, r);
  }
  while (!next.empty()) {
    const auto [lock, r] = next.top();
    next.pop();
    cursor& c = runs[r];
    std::uint64_t size = 0;
    read(c, reinterpret_cast<char*>(&size), sizeof size);
    while (size > 0) {
      const std::string_view s = fill(c, size);
      if (s.empty()) ended_early();
      piece(lock, s);
      c.used += s.size();
      size -= s.size();
    }
    if (std::uint64_t following; read_lock(c, following)) next.emplace(following, r);
  }
}

}  // namespace lockscope::locks
