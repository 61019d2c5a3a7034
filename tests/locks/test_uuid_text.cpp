// The timeline's UUID test (uuid_text.hpp, eight digits at a time) against
// lockscope::lock::is_uuid (a byte at a time): the same answer for UUIDs of either case,
// for every single byte of one changed to each of the 256 values, and for other lengths.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <string>

#include "lockscope/lock/naming.hpp"
#include "timeline/uuid_text.hpp"

using lockscope::locks::timeline_detail::is_uuid_text;

TEST_CASE("is_uuid_text answers what lock::is_uuid answers, at every byte and value", "[timeline][fast]") {
  std::mt19937_64 random(43);
  const std::string digits = "0123456789abcdefABCDEF";
  for (int round = 0; round < 40; ++round) {
    std::string u(36, '-');
    for (std::size_t i = 0; i < 36; ++i) {
      if (i != 8 && i != 13 && i != 18 && i != 23) u[i] = digits[random() % digits.size()];
    }
    REQUIRE(is_uuid_text(u));
    REQUIRE(lockscope::lock::is_uuid(u));
    for (std::size_t i = 0; i < 36; ++i) {
      for (int v = 0; v < 256; ++v) {
        std::string m = u;
        m[i] = static_cast<char>(v);
        REQUIRE(is_uuid_text(m) == lockscope::lock::is_uuid(m));
      }
    }
    REQUIRE(is_uuid_text(u.substr(0, 35)) == lockscope::lock::is_uuid(u.substr(0, 35)));
    REQUIRE(is_uuid_text(u + "0") == lockscope::lock::is_uuid(u + "0"));
  }
  REQUIRE_FALSE(is_uuid_text(""));
}

// The client key of a UUID reads all of its 36 bytes: every change of one digit to
// another gives another key, and 200,000 random UUIDs (a storm's clients) have as many.
TEST_CASE("uuid_client_key tells every UUID from those one digit away, top bit set", "[timeline][fast]") {
  using lockscope::locks::timeline_detail::uuid_client_key;
  std::mt19937_64 random(44);
  const std::string digits = "0123456789abcdef";
  const auto random_uuid = [&] {
    std::string u(36, '-');
    for (std::size_t i = 0; i < 36; ++i) {
      if (i != 8 && i != 13 && i != 18 && i != 23) u[i] = digits[random() % digits.size()];
    }
    return u;
  };
  for (int round = 0; round < 40; ++round) {
    const std::string u = random_uuid();
    const std::uint64_t key = uuid_client_key(u);
    REQUIRE((key >> 63) == 1);
    REQUIRE(uuid_client_key(std::string(u)) == key);
    for (std::size_t i = 0; i < 36; ++i) {
      if (u[i] == '-') continue;
      for (const char d : digits) {
        if (d == u[i]) continue;
        std::string m = u;
        m[i] = d;
        REQUIRE(uuid_client_key(m) != key);
      }
    }
  }
  std::set<std::uint64_t> keys;
  for (int i = 0; i < 200'000; ++i) keys.insert(uuid_client_key(random_uuid()));
  REQUIRE(keys.size() == 200'000);
}
