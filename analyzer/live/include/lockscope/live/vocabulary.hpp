// The live stage reads the earlier stages' vocabulary unqualified (packets, endpoints,
// lock events), as the lock stages read the ingest's (lock_operation.hpp).
#pragma once

#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_event.hpp"

namespace lockscope::live {

using namespace lockscope::locks;  // and, through it, lockscope::ingest

}  // namespace lockscope::live
