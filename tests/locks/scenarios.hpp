// The synthetic conversations behind captures/: the seed article's documented flow
// (000_*.txt §4.1/§4.2) and one crafted conversation per anomaly kind, plus
// EVALSHA-only variants. Each is built with capture_builder, so `make_timeline_captures`
// can write them to captures/ and the tests can rebuild them byte for byte.
#pragma once

#include <string>
#include <vector>

#include "capture_builder.hpp"

namespace lockscope::timeline_test {

inline constexpr std::string_view owner_a = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";  // the seed's
inline constexpr std::string_view owner_b = "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:15";
inline constexpr std::int64_t capture_epoch_us = 1717209303000000;  // 2024-06-01 02:35:03 UTC

struct scenario {
  std::string name;  // file stem under captures/
  std::string description;
  void (*build)(capture_builder&);
};

// Every bundled synthetic capture: "seed-redisson" first, then "crafted/<kind>".
const std::vector<scenario>& scenarios();
const scenario& find_scenario(std::string_view name);

}  // namespace lockscope::timeline_test
