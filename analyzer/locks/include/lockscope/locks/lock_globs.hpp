// Choosing locks by name (`--lock GLOB`, repeatable): fnmatch-style patterns.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace lockscope::locks {

// fnmatch-style: `*`, `?`, `[...]` (`[!...]` or `[^...]` negated, `a-z` ranges).
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

// Whether `name` matches one of `globs` (none: false; callers that select every lock
// when no glob is given test for that first).
bool matches_any_glob(std::span<const std::string> globs, std::string_view name) noexcept;

}  // namespace lockscope::locks
