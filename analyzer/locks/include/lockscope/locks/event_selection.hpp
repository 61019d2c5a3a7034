// `--lock GLOB` chooses what is written, not what is analysed: the timeline sees every
// lock's operations (a single try is known to have ended by its connection's next lock,
// a MultiLock by its other keys), and the events are chosen on their way out.
#pragma once

#include <functional>
#include <string_view>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

// Whether `e` concerns a lock `select` takes: its own lock or, for a MultiLock, any key it
// tried (a group's event is filed under its first key).
bool event_selected(const lock_event& e, const std::function<bool(std::string_view)>& select);

// Passes on the events event_selected takes (`select` empty: every event).
class selected_events final : public lock_event_sink {
 public:
  selected_events(std::function<bool(std::string_view)> select, lock_event_sink& next)
      : select_(std::move(select)), next_(next) {}
  void on_event(const lock_event& e) override {
    if (!select_ || event_selected(e, select_)) next_.on_event(e);
  }

 private:
  std::function<bool(std::string_view)> select_;
  lock_event_sink& next_;
};

}  // namespace lockscope::locks
