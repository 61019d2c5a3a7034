#include "lockscope/locks/permit_text.hpp"

#include <fmt/format.h>

namespace lockscope::locks {

std::string permit_detail(const lock_event& e) {
  if (e.permits < 0 && e.permits_in_use < 0 && e.permit_limit < 0) return {};
  if (e.latch) return e.permits_in_use >= 0 ? fmt::format("count {}", e.permits_in_use) : std::string("count not known");
  std::string out;
  if (e.permits >= 0) out = fmt::format("{} permit{}", e.permits, e.permits == 1 ? "" : "s");
  if (e.permits_in_use >= 0) {
    if (!out.empty()) out += ", ";
    if (e.permit_limit >= 0) out += fmt::format("{}/{} in use", e.permits_in_use, e.permit_limit);
    else out += fmt::format("{} in use, limit not known", e.permits_in_use);
  }
  return out;
}

std::string permit_summary(const lock_stats& s) {
  if (s.permits_peak < 0) return {};
  if (s.latch) return s.permit_limit >= 0 ? fmt::format("latch, count {}", s.permit_limit) : std::string("latch");
  std::string out = s.permit_limit >= 0 ? fmt::format("{}/{} permits at most", s.permits_peak, s.permit_limit)
                                        : fmt::format("{} permits at most, limit not known", s.permits_peak);
  if (s.permit_refusals > 0) out += fmt::format(", {} refused", s.permit_refusals);
  return out;
}

}  // namespace lockscope::locks
