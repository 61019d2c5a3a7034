#include "lockscope/locks/display_text.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lockscope/lock/naming.hpp"
#include "lockscope/resp/format.hpp"

namespace lockscope::locks {

namespace {

// Names come from the wire: control bytes would break the text layout (and an escape
// sequence would reach the terminal), and bytes that are not UTF-8 make the output
// unreadable to the tools it is piped to. Each such byte becomes '?', as do both bytes
// of a C1 control written as UTF-8 (U+0080 to U+009F: U+009B is CSI to some
// terminals): the length, and so the table's widths, stay as they were.
bool is_control(char c) noexcept { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }
bool is_plain_ascii(char c) noexcept { return !is_control(c) && static_cast<unsigned char>(c) < 0x80; }

}  // namespace

std::string_view printable(std::string_view s) {
  if (std::all_of(s.begin(), s.end(), is_plain_ascii)) return s;  // the usual case: no copy
  thread_local std::string scratch;
  scratch.assign(s);
  for (std::size_t i = 0; i < scratch.size(); ++i) {
    if (static_cast<unsigned char>(scratch[i]) >= 0x80) {
      // A C1 control gives 0 here, and its second byte alone is no UTF-8: both become '?'.
      if (const std::size_t n = resp::printable_utf8_sequence(scratch, i); n > 0) {
        i += n - 1;
        continue;
      }
      scratch[i] = '?';
    } else if (is_control(scratch[i])) {
      scratch[i] = '?';
    }
  }
  return scratch;
}

std::string short_owner(std::string_view owner) {
  if (auto parts = lock::parse_owner_id(owner)) {
    return std::string(parts->client_id.substr(0, 4)) + "…:" + std::string(parts->thread_id);
  }
  if (owner.size() > 12) return std::string(owner.substr(0, 8)) + "…";
  return std::string(owner);
}

std::string format_duration(std::int64_t us) {
  if (us < 0) return "-";
  if (us < 1000) return fmt::format("{}µs", us);
  if (us < 1'000'000) return fmt::format("{:.1f}ms", static_cast<double>(us) / 1e3);
  return fmt::format("{:.3f}s", static_cast<double>(us) / 1e6);
}

}  // namespace lockscope::locks
