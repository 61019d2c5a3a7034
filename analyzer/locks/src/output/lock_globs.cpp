#include "lockscope/locks/lock_globs.hpp"

namespace lockscope::locks {

bool glob_match(std::string_view p, std::string_view t) noexcept {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
      continue;
    }
    if (pi < p.size() && p[pi] == '[') {
      const std::size_t close = p.find(']', pi + 1);
      if (close != std::string_view::npos) {
        bool negate = pi + 1 < close && (p[pi + 1] == '!' || p[pi + 1] == '^');
        bool found = false;
        for (std::size_t k = pi + 1 + (negate ? 1 : 0); k < close; ++k) {
          if (k + 2 < close && p[k + 1] == '-') {
            if (t[ti] >= p[k] && t[ti] <= p[k + 2]) found = true;
            k += 2;
          } else if (p[k] == t[ti]) {
            found = true;
          }
        }
        if (found != negate) {
          pi = close + 1;
          ++ti;
          continue;
        }
      }
    } else if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
      continue;
    }
    if (star == std::string_view::npos) return false;
    pi = star + 1;
    ti = ++mark;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

bool matches_any_glob(std::span<const std::string> globs, std::string_view name) noexcept {
  for (const std::string& g : globs) {
    if (glob_match(g, name)) return true;
  }
  return false;
}

}  // namespace lockscope::locks
