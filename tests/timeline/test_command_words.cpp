// The recognizer's fast paths for command names and integer arguments agree with the
// general ones: identify_command with resp::iequals against every name, parse_wire_int
// with std::from_chars, on the names and numbers clients send and on near misses.
#include <array>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "helpers.hpp"
#include "lockscope/locks/command_words.hpp"
#include "lockscope/lock/scripts.hpp"

using namespace lockscope;
using analyzer::command_word;

namespace {

constexpr std::array<std::pair<std::string_view, command_word>, 19> words{{
    {"ASKING", command_word::asking},
    {"CLUSTER", command_word::cluster},
    {"SELECT", command_word::select},
    {"RESET", command_word::reset},
    {"SET", command_word::set},
    {"SETNX", command_word::setnx},
    {"EXPIRE", command_word::expire},
    {"PEXPIRE", command_word::pexpire},
    {"DEL", command_word::del},
    {"UNLINK", command_word::unlink},
    {"SUBSCRIBE", command_word::subscribe},
    {"SSUBSCRIBE", command_word::ssubscribe},
    {"UNSUBSCRIBE", command_word::unsubscribe},
    {"SUNSUBSCRIBE", command_word::sunsubscribe},
    {"SCRIPT", command_word::script},
    {"EVAL", command_word::eval},
    {"EVAL_RO", command_word::eval_ro},
    {"EVALSHA", command_word::evalsha},
    {"EVALSHA_RO", command_word::evalsha_ro},
}};

// The general path: the name compared with each word in turn.
command_word by_iequals(std::string_view name) {
  for (const auto& [word, id] : words) {
    if (resp::iequals(name, word)) return id;
  }
  return command_word::other;
}

}  // namespace

TEST_CASE("identify_command names what resp::iequals names, case folded, and nothing else", "[recognizer][fast]") {
  for (const auto& [word, id] : words) {
    std::string upper(word), lower(word), mixed(word);
    for (std::size_t i = 0; i < word.size(); ++i) {
      lower[i] = resp::ascii_lower(word[i]);
      if (i % 2 == 1) mixed[i] = lower[i];
    }
    CHECK(analyzer::identify_command(upper) == id);
    CHECK(analyzer::identify_command(lower) == id);
    CHECK(analyzer::identify_command(mixed) == id);
  }
  // Every one-byte change, every prefix and every one-byte extension of every word (in
  // both cases), over all 256 byte values: near misses stay `other`, exactly as iequals says.
  std::size_t compared = 0;
  for (const auto& [word, id] : words) {
    for (const bool lower_case : {false, true}) {
      std::string w(word);
      if (lower_case) {
        for (char& c : w) c = resp::ascii_lower(c);
      }
      for (std::size_t n = 0; n <= w.size(); ++n) {
        const std::string prefix = w.substr(0, n);
        CHECK(analyzer::identify_command(prefix) == by_iequals(prefix));
        ++compared;
      }
      for (std::size_t i = 0; i <= w.size(); ++i) {
        for (int b = 0; b < 256; ++b) {
          std::string changed = w, extended = w;
          if (i < w.size()) changed[i] = static_cast<char>(b);
          extended.insert(i, 1, static_cast<char>(b));
          CHECK(analyzer::identify_command(changed) == by_iequals(changed));
          CHECK(analyzer::identify_command(extended) == by_iequals(extended));
          compared += 2;
        }
      }
    }
  }
  CHECK(compared > 100'000);
  for (std::string_view other : {"", "GET", "HSET", "PTTL", "PUBLISH", "EVALX", "EVAL RO", "EVALSHA-RO", "MULTI",
                                 "PSUBSCRIBE", "PUNSUBSCRIBE", "SPUBLISH", "HELLO", "AUTH", "CLIENT"}) {
    CHECK(analyzer::identify_command(other) == command_word::other);
    CHECK(by_iequals(other) == command_word::other);
  }
}

TEST_CASE("parse_wire_int reads what std::from_chars reads, and refuses what it refuses", "[recognizer][fast]") {
  auto same = [](std::string_view s) {
    std::int64_t fast = 11, general = 11;
    const bool fast_ok = analyzer::parse_wire_int(s, fast);
    const bool general_ok = analyzer::parse_wire_int_general(s, general);
    INFO("input \"" << std::string(s) << "\"");
    REQUIRE(fast_ok == general_ok);
    if (fast_ok) REQUIRE(fast == general);
    return fast_ok;
  };
  // The lease and numkeys Redisson sends, and the edges of the digit loop (18 digits)
  // and of int64.
  CHECK(same("30000"));
  CHECK(same("1"));
  CHECK(same("0"));
  CHECK(same("000000000000000000"));
  CHECK(same("999999999999999999"));
  CHECK(same("1000000000000000000"));
  CHECK(same("9223372036854775807"));
  CHECK(same("-9223372036854775808"));
  CHECK(same("-5"));
  CHECK(same("-0"));
  CHECK_FALSE(same(""));
  CHECK_FALSE(same("-"));
  CHECK_FALSE(same("+5"));
  CHECK_FALSE(same(" 5"));
  CHECK_FALSE(same("5 "));
  CHECK_FALSE(same("5x"));
  CHECK_FALSE(same("x5"));
  CHECK_FALSE(same("1.5"));
  CHECK_FALSE(same("9223372036854775808"));
  CHECK_FALSE(same("-9223372036854775809"));
  CHECK_FALSE(same("99999999999999999999"));
  CHECK_FALSE(same(std::string_view("1\0" "2", 3)));
  CHECK_FALSE(same("\xb0"));  // '0' + 128: no digit once unsigned
  CHECK_FALSE(same("/"));     // '0' - 1
  CHECK_FALSE(same(":"));     // '9' + 1
  // Random strings of digits and near-digits, every length up to 22.
  std::mt19937_64 rng(14);
  constexpr std::string_view alphabet = "0123456789012345678901234567890123456789-+ /:x\xb0";
  std::size_t accepted = 0;
  for (int i = 0; i < 200'000; ++i) {
    std::string s(rng() % 23, '0');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    if (rng() % 2 == 0) {
      for (char& c : s) {
        if (c < '0' || c > '9') c = static_cast<char>('0' + rng() % 10);  // all digits: mostly accepted
      }
    }
    accepted += same(s) ? 1 : 0;
  }
  CHECK(accepted > 50'000);
}

TEST_CASE("the recognizer reads an EVAL's integers alike on its fast path and off it", "[recognizer][fast]") {
  const std::string acquire(lock::script(lock::script_kind::acquire).text);
  // Leases the digit loop reads and ones it hands to from_chars: lease_ms is what
  // from_chars reads, -1 when it refuses.
  for (std::string lease : {"30000", "0", "-1", "-30000", "999999999999999999", "1000000000000000000",
                            "9223372036854775807", "9223372036854775808", "+30000", "30000 ", "3e4", ""}) {
    std::int64_t expected = -1;
    if (!analyzer::parse_wire_int_general(lease, expected)) expected = -1;
    timeline_test::op_recorder rec;
    analyzer::lock_recognizer r(rec);
    // The same script three times: the first is classified, the rest found as the last one.
    for (int i = 0; i < 3; ++i) {
      timeline_test::feed(r, {"EVAL", acquire, "1", "myLock", lease, "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"}, "$-1\r\n");
    }
    INFO("lease \"" << lease << "\"");
    REQUIRE(rec.ops.size() == 3);
    for (const auto& op : rec.ops) {
      CHECK(op.kind == analyzer::lock_op_kind::acquire);
      CHECK(op.lease_ms == expected);
      CHECK(op.lock == "myLock");
    }
  }
  // numkeys: a sign, spaces, or a count beyond the arguments are not an EVAL of a lock.
  for (std::string numkeys : {"+1", " 1", "1 ", "-1", "01", "2", "18446744073709551617"}) {
    timeline_test::op_recorder rec;
    analyzer::lock_recognizer r(rec);
    timeline_test::feed(r, {"EVAL", acquire, numkeys, "myLock", "30000", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"},
                        "$-1\r\n");
    INFO("numkeys \"" << numkeys << "\"");
    if (numkeys == "01") {
      REQUIRE(rec.ops.size() == 1);  // from_chars reads a leading zero
      CHECK(rec.ops[0].lease_ms == 30000);
    } else if (numkeys == "2") {
      REQUIRE(rec.ops.size() == 1);  // KEYS = [myLock, 30000], ARGV = [owner]: no lease
      CHECK(rec.ops[0].lease_ms == -1);
    } else {
      CHECK(rec.ops.empty());
    }
  }
}
