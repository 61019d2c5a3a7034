// How the outputs put a semaphore's or latch's figures into words (lock_event's
// permits, permits_in_use, permit_limit; lock_stats' permit fields).
#pragma once

#include <string>

#include "lockscope/locks/lock_event.hpp"
#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

// "1 permit, 2/3 in use" / "2 in use, limit not known" / "count 2"; empty for an event
// that is not a permit family's.
std::string permit_detail(const lock_event& e);
// The summary's note for a semaphore or latch row: "3/3 permits at most, 41 refused" /
// "latch, count 0"; empty for a lock.
std::string permit_summary(const lock_stats& s);

}  // namespace lockscope::locks
