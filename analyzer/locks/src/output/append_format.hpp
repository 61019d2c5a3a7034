// The outputs' way of formatting onto a string they are building.
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

namespace lockscope::locks {

// fmt into a memory_buffer (its fast contiguous path), then one append.
template <class... Args>
void append_format(std::string& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::memory_buffer b;
  fmt::format_to(fmt::appender(b), f, std::forward<Args>(args)...);
  out.append(b.data(), b.size());
}

}  // namespace lockscope::locks
