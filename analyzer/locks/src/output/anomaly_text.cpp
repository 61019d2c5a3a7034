#include "lockscope/locks/anomaly_text.hpp"

namespace lockscope::locks {

void append_anomaly_detail(std::string& out, const lock_event& e) { out += e.detail; }

}  // namespace lockscope::locks
