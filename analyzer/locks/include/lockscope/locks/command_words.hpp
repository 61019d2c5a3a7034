// The recognizer's reading of command words and integer arguments, on its hot path
// (one call per exchange): which of the commands it handles a name is, and an integer
// argument's value. Each has a fast path and the general one it must agree with
// (tests/timeline/test_command_words.cpp compares them).
//
//   switch (identify_command(args[0])) { case command_word::eval: ... }
//   std::int64_t lease;  if (parse_wire_int(args[4], lease)) ...
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

#include "lockscope/resp/ascii.hpp"

namespace lockscope::analyzer {

// The commands the recognizer looks at; `other` for every other name.
enum class command_word : std::uint8_t {
  other,
  asking,
  cluster,
  select,
  reset,
  set,
  setnx,
  expire,
  pexpire,
  del,
  unlink,
  subscribe,
  ssubscribe,
  unsubscribe,
  sunsubscribe,
  script,
  eval,
  eval_ro,
  evalsha,
  evalsha_ro,
};

// The command `name` names, compared as Redis does (ASCII case folded): the same
// answer as trying resp::iequals against each name in turn, but only the names of
// name's length are compared.
constexpr command_word identify_command(std::string_view name) noexcept {
  using resp::iequals;
  switch (name.size()) {
    case 3:
      if (iequals(name, "SET")) return command_word::set;
      if (iequals(name, "DEL")) return command_word::del;
      break;
    case 4:
      if (iequals(name, "EVAL")) return command_word::eval;
      break;
    case 5:
      if (iequals(name, "SETNX")) return command_word::setnx;
      if (iequals(name, "RESET")) return command_word::reset;
      break;
    case 6:
      if (iequals(name, "EXPIRE")) return command_word::expire;
      if (iequals(name, "SELECT")) return command_word::select;
      if (iequals(name, "ASKING")) return command_word::asking;
      if (iequals(name, "UNLINK")) return command_word::unlink;
      if (iequals(name, "SCRIPT")) return command_word::script;
      break;
    case 7:
      if (iequals(name, "EVALSHA")) return command_word::evalsha;
      if (iequals(name, "PEXPIRE")) return command_word::pexpire;
      if (iequals(name, "CLUSTER")) return command_word::cluster;
      if (iequals(name, "EVAL_RO")) return command_word::eval_ro;
      break;
    case 9:
      if (iequals(name, "SUBSCRIBE")) return command_word::subscribe;
      break;
    case 10:
      if (iequals(name, "SSUBSCRIBE")) return command_word::ssubscribe;
      if (iequals(name, "EVALSHA_RO")) return command_word::evalsha_ro;
      break;
    case 11:
      if (iequals(name, "UNSUBSCRIBE")) return command_word::unsubscribe;
      break;
    case 12:
      if (iequals(name, "SUNSUBSCRIBE")) return command_word::sunsubscribe;
      break;
    default:
      break;
  }
  return command_word::other;
}

// A whole decimal integer as Redis sends it: std::from_chars over all of `s` (an
// optional '-', digits; no '+', no spaces), false when empty, when anything is left
// over, or when it overflows; `out` is then unspecified.
inline bool parse_wire_int_general(std::string_view s, std::int64_t& out) noexcept {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// parse_wire_int_general, with the usual case (1 to 18 digits, which cannot overflow)
// read by a plain digit loop; everything else (a sign, more digits, garbage) goes to
// the general path.
inline bool parse_wire_int(std::string_view s, std::int64_t& out) noexcept {
  if (!s.empty() && s.size() <= 18) {
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < s.size(); ++i) {
      const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(s[i])) - unsigned{'0'};
      if (d > 9) break;
      v = v * 10 + d;
    }
    if (i == s.size()) {
      out = static_cast<std::int64_t>(v);
      return true;
    }
  }
  return parse_wire_int_general(s, out);
}

}  // namespace lockscope::analyzer
