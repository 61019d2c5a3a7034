// Writing classic pcap files (microsecond timestamps, as tcpdump -w writes them), and
// `--write FILE` rotated like tcpdump's -C / -G.
//
//   savefile_writer f;
//   if (auto err = f.open("x.pcap", link_type::en10mb)) ... err names the file ...
//   f.write(ts_us, frame, wire_length);
//
//   rotating_pcap_writer w({.pattern = "cap-%H%M.pcap", .rotate_bytes = 10'000'000, .rotate_us = 60'000'000});
//   w.write(packet, now_us);   // opens, rotates and names files as tcpdump does
//
// Any pcap reader (tshark, tcpdump -r, lockscope) reads the files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {


class savefile_writer {
 public:
  static constexpr std::uint32_t snaplen = 262144;

  savefile_writer() = default;
  ~savefile_writer();
  savefile_writer(const savefile_writer&) = delete;
  savefile_writer& operator=(const savefile_writer&) = delete;

  // Creates (truncates) `path` and writes the file header; returns "" or the error,
  // naming the file.
  std::string open(const std::string& path, int link_type);
  // Returns "" or the error naming the file (a full disk, an I/O error).
  std::string write(std::int64_t ts_us, std::string_view frame, std::uint32_t wire_length);
  // Flushes and closes; "" or the error.
  std::string close();
  bool is_open() const noexcept { return file_ != nullptr; }
  int link_type() const noexcept { return link_type_; }
  std::uint64_t bytes() const noexcept { return bytes_; }  // header included
  const std::string& path() const noexcept { return path_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  int link_type_ = 0;
  std::uint64_t bytes_ = 0;
};

struct rotation_options {
  std::string pattern;              // FILE; with rotate_us, a strftime pattern (local time)
  std::uint64_t rotate_bytes = 0;   // -C: a new file once the current one is larger (0: never)
  std::int64_t rotate_us = 0;       // -G: a new file name every this long (0: never)
};

// The name tcpdump gives the `index`-th file of a -C series (FILE, FILE1, FILE2, …),
// after strftime of the pattern at `at_us` when rotate_us is set.
std::string rotated_file_name(const rotation_options& o, std::int64_t at_us, std::uint64_t index);

// How long a name made from `pattern` by strftime can stay the same: the longest span of
// one value of its finest time conversion (%S: 1 s, %M: 60 s, %H: 3600 s, %d: a day, %m:
// 31 days, …), in seconds, or 0 when it has none. -G intervals shorter than this may get
// the same name as the interval before, whose file would then be overwritten.
double strftime_name_span_s(std::string_view pattern);

class rotating_pcap_writer {
 public:
  explicit rotating_pcap_writer(rotation_options options) : options_(std::move(options)) {}

  // Writes one packet; `now_us` is the loop's clock (the -G interval runs on it).
  // Returns "" or the error (naming the file). A packet of another link type than the
  // current file's starts a new file.
  std::string write(const captured_packet& p, std::int64_t now_us);
  std::string close() { return file_.close(); }
  std::uint64_t files() const noexcept { return files_; }
  std::uint64_t packets() const noexcept { return packets_; }
  const std::string& current_path() const noexcept { return file_.path(); }

 private:
  std::string open_next(int link_type, std::int64_t now_us);

  rotation_options options_;
  savefile_writer file_;
  std::int64_t interval_start_us_ = -1;
  std::uint64_t index_ = 0;  // within the current -G interval
  std::uint64_t files_ = 0;
  std::uint64_t packets_ = 0;
};

}  // namespace lockscope::live
