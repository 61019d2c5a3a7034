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

// keep_first_listings (a connection's waits at its end) against a plain first-seen scan:
// the same ids in the same order, for short lists (the look back) and long ones (the set),
// including id 0 and the largest ids.
TEST_CASE("keep_first_listings keeps each id's first listing in order", "[flat_id_map]") {
  using lockscope::locks::timeline_detail::keep_first_listings;
  std::mt19937 random(44);
  for (const std::size_t length : {0u, 1u, 2u, 16u, 17u, 100u, 1'700u, 40'000u}) {
    for (const std::uint32_t id_range : {1u, 5u, 1'000u, 0xffffffffu}) {
      std::vector<std::uint32_t> ids(length);
      for (std::uint32_t& id : ids) {
        id = static_cast<std::uint32_t>(random() % (std::uint64_t{id_range} + 1));
        if (random() % 50 == 0) id = 0xffffffffu - static_cast<std::uint32_t>(random() % 2);
      }
      std::vector<std::uint32_t> expected;
      std::unordered_map<std::uint32_t, bool> seen;
      for (const std::uint32_t id : ids) {
        if (seen.emplace(id, true).second) expected.push_back(id);
      }
      keep_first_listings(ids);
      REQUIRE(ids == expected);
    }
  }
}
