// The English sentence of an anomaly event, for the outputs that show one (text, the
// HTML report's tooltips). The timeline reports anomalies as data (lock_event: kind and
// fields); only the outputs put them into words.
#pragma once

#include <string>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

// Appends what the anomaly event `e` found, in a short sentence; nothing for an event
// that is not an anomaly or carries nothing to say.
void append_anomaly_detail(std::string& out, const lock_event& e);

}  // namespace lockscope::locks
