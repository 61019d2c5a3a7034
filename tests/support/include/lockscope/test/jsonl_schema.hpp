// The README's JSONL schemas, checked with a real JSON parser (Boost.JSON) rather than
// by comparing text: every line must parse, hold exactly the documented fields in the
// documented order, each of its documented type.
//
//   CHECK(lockscope::test::exchange_line_errors(line) == "");   // lockscope decode --format jsonl
//   CHECK(lockscope::test::event_line_errors(line) == "");      // lockscope analyze --format jsonl
#pragma once

#include <string>
#include <string_view>

namespace lockscope::test {

// "" when `line` is one valid `lockscope decode --format jsonl` object; else what is wrong.
std::string exchange_line_errors(std::string_view line);

// "" when `line` is one valid `lockscope analyze --format jsonl` event; else what is wrong.
std::string event_line_errors(std::string_view line);

// Every non-empty line of `text` checked with `check`; "" or the first failure with its
// line number.
std::string jsonl_errors(std::string_view text, std::string (*check)(std::string_view));

}  // namespace lockscope::test
