// The capture's port filter as one bit per port, against a plain search of the list it
// was made from: random lists (empty, one port, many, repeated, the ends of the range),
// every port asked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "lockscope/ingest/port_set.hpp"

using lockscope::ingest::port_set;

TEST_CASE("port set: membership equals a search of its list for every port", "[ports]") {
  std::mt19937 rng(43);
  for (int round = 0; round < 60; ++round) {
    std::vector<std::uint16_t> ports;
    const int count = round == 0 ? 0 : static_cast<int>(rng() % 9);
    for (int k = 0; k < count; ++k) {
      switch (rng() % 4) {
        case 0: ports.push_back(static_cast<std::uint16_t>(rng())); break;
        case 1: ports.push_back(static_cast<std::uint16_t>(rng() % 2 == 0 ? 0 : 65535)); break;
        case 2: ports.push_back(static_cast<std::uint16_t>(6379 + rng() % 130)); break;  // neighbours share a word
        default: if (!ports.empty()) ports.push_back(ports[rng() % ports.size()]); break;  // repeated
      }
    }
    const port_set set(ports);
    std::size_t members = 0;
    for (std::uint32_t p = 0; p <= 65535; ++p) {
      const auto port = static_cast<std::uint16_t>(p);
      const bool listed = std::find(ports.begin(), ports.end(), port) != ports.end();
      if (set.contains(port) != listed) FAIL("port " << p << " of a list of " << ports.size());
      members += listed ? 1 : 0;
    }
    std::sort(ports.begin(), ports.end());
    CHECK(members == static_cast<std::size_t>(std::unique(ports.begin(), ports.end()) - ports.begin()));
  }
}
