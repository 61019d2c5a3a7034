#include "anomaly_file_names.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

// "myLock:{a/b}" → "myLock__a_b_": letters, digits, '.', '_' and '-' kept, at most 80
// bytes, never starting with '.'.
std::string file_name_part(std::string_view lock) {
  std::string out;
  for (const char c : lock.substr(0, 80)) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
  return out;
}

// 20261123T001530.123456Z
std::string utc_stamp(std::int64_t ts_us) {
  const std::time_t t = static_cast<std::time_t>(ts_us / 1'000'000);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%S", &utc);
  return fmt::format("{}.{:06}Z", buffer, ts_us % 1'000'000);
}

// A name this recorder gives its files: <utc_stamp>-<lock>-<kind>[-N].pcap|.json. Only
// these count towards --save-max-mb and may be deleted: DIR may be shared, and a
// capture someone left there is not ours to delete.
bool is_saved_anomaly_name(std::string_view name) {
  if (!name.ends_with(".pcap") && !name.ends_with(".json")) return false;
  name.remove_suffix(5);
  auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  // 20261123T001530.123456Z-
  if (name.size() < 24 || !digits(name.substr(0, 8)) || name[8] != 'T' || !digits(name.substr(9, 6)) ||
      name[15] != '.' || !digits(name.substr(16, 6)) || name[22] != 'Z' || name[23] != '-') {
    return false;
  }
  name.remove_prefix(24);
  auto ends_with_kind = [](std::string_view rest) {
    for (std::size_t k = 0; k < locks::anomaly_kind_count; ++k) {
      const std::string_view kind = to_string(static_cast<anomaly_kind>(k));
      if (rest.size() > kind.size() + 1 && rest.ends_with(kind) && rest[rest.size() - kind.size() - 1] == '-') return true;
    }
    return false;
  };
  if (ends_with_kind(name)) return true;
  const std::size_t dash = name.rfind('-');  // a second anomaly at the same instant: -2, -3, ...
  return dash != std::string_view::npos && digits(name.substr(dash + 1)) && ends_with_kind(name.substr(0, dash));
}

}  // namespace lockscope::live
