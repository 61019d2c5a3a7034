// Messages to stderr that cannot fail the command.
#pragma once

#include <cstdio>
#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace lockscope::live {

// Formats a message and writes it to stderr. fmt::print(stderr, …) throws when the write
// fails (stderr redirected to a full disk or a closed pipe), and a throw from a closing
// line aborted the process; a diagnostic that cannot be written is lost instead, and the
// command's work and exit status stand.
template <class... Args>
void print_diagnostic(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    fmt::memory_buffer text;
    fmt::format_to(std::back_inserter(text), format, std::forward<Args>(args)...);
    std::fwrite(text.data(), 1, text.size(), stderr);
  } catch (...) {  // only std::bad_alloc can come here
  }
}

}  // namespace lockscope::live
