#include "lockscope/live/capture_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>

#include "lockscope/ingest/capture.hpp"

namespace lockscope::live {

savefile_writer::~savefile_writer() { close(); }

std::string savefile_writer::open(const std::string& path, int link_type) {
  close();
  path_ = path;
  file_ = std::fopen(path.c_str(), "wbe");
  if (file_ == nullptr) return path + ": " + std::strerror(errno);
  link_type_ = link_type;
  // The classic header, in host byte order as libpcap writes it: version 2.4,
  // microsecond timestamps.
  const std::uint32_t magic = 0xa1b2c3d4u;
  const std::uint16_t version[2] = {2, 4};
  const std::int32_t zone = 0;
  const std::uint32_t sigfigs = 0, caplen = snaplen, network = static_cast<std::uint32_t>(link_type);
  char header[24];
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, version, 4);
  std::memcpy(header + 8, &zone, 4);
  std::memcpy(header + 12, &sigfigs, 4);
  std::memcpy(header + 16, &caplen, 4);
  std::memcpy(header + 20, &network, 4);
  bytes_ = 0;
  if (std::fwrite(header, 1, sizeof header, file_) != sizeof header) return path + ": " + std::strerror(errno);
  bytes_ = sizeof header;
  return {};
}

std::string savefile_writer::write(std::int64_t ts_us, std::string_view frame, std::uint32_t wire_length) {
  if (file_ == nullptr) return path_ + ": not open";
  if (frame.size() > snaplen) frame = frame.substr(0, snaplen);
  const std::uint32_t record[4] = {static_cast<std::uint32_t>(ts_us / 1'000'000),
                                   static_cast<std::uint32_t>(ts_us % 1'000'000),
                                   static_cast<std::uint32_t>(frame.size()),
                                   std::max<std::uint32_t>(wire_length, static_cast<std::uint32_t>(frame.size()))};
  if (std::fwrite(record, 1, sizeof record, file_) != sizeof record ||
      std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size()) {
    return path_ + ": " + std::strerror(errno);
  }
  bytes_ += sizeof record + frame.size();
  return {};
}

std::string savefile_writer::close() {
  if (file_ == nullptr) return {};
  const bool failed = std::fflush(file_) != 0;
  const int saved = errno;
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (failed || close_failed) return path_ + ": " + std::strerror(failed ? saved : errno);
  return {};
}

std::string rotated_file_name(const rotation_options& o, std::int64_t at_us, std::uint64_t index) {
  std::string name = o.pattern;
  if (o.rotate_us > 0) {
    const std::time_t t = static_cast<std::time_t>(at_us / 1'000'000);
    std::tm local{};
    ::localtime_r(&t, &local);
    char buffer[4096];
    const std::size_t n = std::strftime(buffer, sizeof buffer, o.pattern.c_str(), &local);
    if (n > 0) name.assign(buffer, n);
  }
  if (index > 0) name += std::to_string(index);
  return name;
}

double strftime_name_span_s(std::string_view pattern) {
  constexpr double day = 86400;
  double finest = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    // glibc's flags and field width (%-H, %_3d), then C's E and O modifiers (%Ec, %OH).
    ++i;
    while (i < pattern.size() && std::string_view("_-0^#").find(pattern[i]) != std::string_view::npos) ++i;
    while (i < pattern.size() && pattern[i] >= '0' && pattern[i] <= '9') ++i;
    if (i < pattern.size() && (pattern[i] == 'E' || pattern[i] == 'O')) ++i;
    if (i >= pattern.size()) break;
    double span = 0;  // %%, %n, %t, %z, %Z and unknown conversions: no time
    switch (pattern[i]) {
      case 'S': case 's': case 'T': case 'r': case 'X': case 'c': case '+': span = 1; break;
      case 'M': case 'R': span = 60; break;
      case 'H': case 'I': case 'k': case 'l': span = 3600; break;
      case 'p': case 'P': span = day / 2; break;
      case 'd': case 'e': case 'j': case 'a': case 'A': case 'u': case 'w': case 'D': case 'F': case 'x':
        span = day;
        break;
      case 'U': case 'W': case 'V': span = 7 * day; break;
      case 'm': case 'b': case 'B': case 'h': span = 31 * day; break;
      case 'y': case 'Y': case 'G': case 'g': span = 366 * day; break;
      case 'C': span = 100 * 366 * day; break;
      default: break;
    }
    if (span > 0 && (finest == 0 || span < finest)) finest = span;
  }
  return finest;
}

std::string rotating_pcap_writer::open_next(int link_type, std::int64_t now_us) {
  const std::string name = rotated_file_name(options_, interval_start_us_ < 0 ? now_us : interval_start_us_, index_);
  ++files_;
  return file_.open(name, link_type);
}

std::string rotating_pcap_writer::write(const captured_packet& p, std::int64_t now_us) {
  bool rotate = !file_.is_open() || p.link_type != file_.link_type();
  if (interval_start_us_ < 0) interval_start_us_ = now_us;
  if (options_.rotate_us > 0 && now_us - interval_start_us_ >= options_.rotate_us) {
    // tcpdump -G: a new interval starts its -C count again.
    interval_start_us_ = now_us;
    index_ = 0;
    rotate = true;
  } else if (options_.rotate_bytes > 0 && file_.is_open() && file_.bytes() > options_.rotate_bytes) {
    ++index_;
    rotate = true;
  } else if (file_.is_open() && p.link_type != file_.link_type()) {
    ++index_;
  }
  if (rotate) {
    if (std::string err = file_.close(); !err.empty()) return err;
    if (std::string err = open_next(p.link_type, now_us); !err.empty()) return err;
  }
  if (std::string err = file_.write(p.ts_us, p.data, p.wire_length); !err.empty()) return err;
  ++packets_;
  return {};
}

}  // namespace lockscope::live
