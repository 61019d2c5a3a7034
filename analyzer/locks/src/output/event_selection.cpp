#include "lockscope/locks/event_selection.hpp"

namespace lockscope::locks {

bool event_selected(const lock_event& e, const std::function<bool(std::string_view)>& select) {
  if (select(e.lock)) return true;
  if (e.event != lock_event_kind::multilock || e.group == nullptr) return false;
  for (const std::string_view key : e.group->tried) {
    if (select(key)) return true;
  }
  for (const std::string_view key : e.group->acquired_on) {
    if (select(key)) return true;
  }
  return false;
}

}  // namespace lockscope::locks
