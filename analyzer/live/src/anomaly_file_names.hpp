// The names of the flight recorder's files: DIR/<utc time>-<lock>-<kind>[-N].pcap|.json.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockscope::live {

// "myLock:{a/b}" → "myLock__a_b_": letters, digits, '.', '_' and '-' kept, at most 80
// bytes, never starting with '.'.
std::string file_name_part(std::string_view lock);

// 20261123T001530.123456Z
std::string utc_stamp(std::int64_t ts_us);

// A name this recorder gives its files: <utc_stamp>-<lock>-<kind>[-N].pcap|.json. Only
// these count towards --save-max-mb and may be deleted: DIR may be shared, and a
// capture someone left there is not ours to delete.
bool is_saved_anomaly_name(std::string_view name);

}  // namespace lockscope::live
