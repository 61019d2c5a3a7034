// The timeline's flat map of ids (flat_id_map.hpp, private to the locks library) against
// std::unordered_map under random finds, emplaces and erases: the same answers, including
// for the key that marks its empty slots, through growth and shrinking.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "timeline/flat_id_map.hpp"

using lockscope::locks::timeline_detail::flat_id_map;

TEST_CASE("flat_id_map answers as std::unordered_map under random finds, emplaces, assignments and erases", "[flat_id_map]") {
  std::mt19937 random(43);
  for (const std::uint32_t key_range : {8u, 300u, 40'000u}) {
    flat_id_map<std::uint64_t> flat;
    std::unordered_map<std::uint32_t, std::uint64_t> truth;
    std::size_t largest = 0;
    for (int step = 0; step < 200'000; ++step) {
      // Keys near 0 and the empty-slot key itself; runs of growth, then of shrinking.
      std::uint32_t key = static_cast<std::uint32_t>(random() % key_range);
      if (random() % 97 == 0) key = 0xffffffffu;
      const bool growing = (step / 20'000) % 2 == 0;
      const unsigned op = static_cast<unsigned>(random() % 10);
      if (op < 3) {
        const auto it = flat.find(key);
        const auto t = truth.find(key);
        REQUIRE((it == flat.end()) == (t == truth.end()));
        if (t != truth.end()) REQUIRE(it->second == t->second);
      } else if (op < (growing ? 8u : 4u)) {
        const std::uint64_t value = random();
        if (op % 2 == 0) {
          flat.emplace(key, value);  // keeps an existing entry, as std::unordered_map does
          truth.emplace(key, value);
        } else {
          flat.insert_or_assign(key, value);  // replaces it
          truth.insert_or_assign(key, value);
        }
      } else {
        const auto it = flat.find(key);
        const auto t = truth.find(key);
        REQUIRE((it == flat.end()) == (t == truth.end()));
        if (it != flat.end()) {
          flat.erase(it);
          truth.erase(t);
        }
      }
      REQUIRE(flat.size() == truth.size());
      largest = std::max(largest, truth.size());
    }
    for (const auto& [key, value] : truth) {
      const auto it = flat.find(key);
      REQUIRE(it != flat.end());
      REQUIRE(it->second == value);
    }
    flat.clear();
    REQUIRE(flat.size() == 0);
    REQUIRE(flat.find(1) == flat.end());
    CHECK(largest > 0);
  }
}
