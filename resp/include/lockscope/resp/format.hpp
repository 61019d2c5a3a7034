// Human-readable forms of RESP values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "lockscope/resp/value.hpp"

namespace lockscope::resp {

// redis-cli's form, one element per line:
//   1) "message"
//   2) "redisson_lock__channel:{myLock}"
//   3) "0"
std::string to_cli(const value& v);

struct parsed_options {
  // Arguments longer than this are cut and end in "…" (0: never cut).
  std::size_t max_argument = 0;
  // Write Redisson owner ids `<uuid>:<thread>` as `80e6…:12`.
  bool shorten_owner_ids = false;
};

// The one-line "parsed" form the seeds use: words joined by spaces, an argument in
// double quotes (with C escapes) when it holds blanks, quotes or control bytes.
//   EVAL "if (redis.call('exists', ..." 1 myLock 6000 80e6…:12
//   message redisson_lock__channel:{myLock} 0
std::string to_parsed(const value& v, const parsed_options& options = {});

// One argument as to_parsed writes it.
void append_parsed_argument(std::string& out, std::string_view arg, const parsed_options& options);

// The length of the valid UTF-8 sequence at s[i] (2 to 4 bytes), or 0 (ASCII, or not
// valid UTF-8). The text forms keep valid sequences readable and escape other bytes
// above 0x7f as \xNN, so that what they print is always valid UTF-8.
std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept;
// utf8_sequence, but 0 for a C1 control written as UTF-8 (U+0080 to U+009F: U+009B is
// CSI to some terminals): the sequences a text form may print as they are.
std::size_t printable_utf8_sequence(std::string_view s, std::size_t i) noexcept;

}  // namespace lockscope::resp

// fmt::format("{}", v) gives the redis-cli form; "{:p}" the parsed form.
template <>
struct fmt::formatter<lockscope::resp::value> {
  bool parsed = false;
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == 'p') {
      parsed = true;
      ++it;
    }
    return it;
  }
  template <class Context>
  auto format(const lockscope::resp::value& v, Context& ctx) const {
    const std::string s = parsed ? lockscope::resp::to_parsed(v) : lockscope::resp::to_cli(v);
    return fmt::format_to(ctx.out(), "{}", s);
  }
};
