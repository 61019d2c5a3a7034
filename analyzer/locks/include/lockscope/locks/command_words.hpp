// The recognizer's reading of command words and integer arguments, on its hot path
// (one call per exchange): which of the commands it handles a name is, and an integer
// argument's value. Each has a fast path and the general one it must agree with
// (tests/locks/test_fast_paths.cpp compares them).
//
//   switch (identify_command(args[0])) { case command_word::eval: ... }
//   std::int64_t lease;  if (parse_wire_int(args[4], lease)) ...
#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "lockscope/resp/ascii.hpp"

namespace lockscope::locks {

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
  // PSUBSCRIBE / PUNSUBSCRIBE: a waiter on keyspace notifications may listen by pattern
  psubscribe,
  punsubscribe,
  script,
  eval,
  eval_ro,
  evalsha,
  evalsha_ro,
  zrem,  // a sorted-set semaphore's release (of a key its acquire script named)
  get,   // a client's check of its value before a plain DEL or EXPIRE
  pubsub,  // PUBSUB NUMSUB: a lock held by a subscription is checked by its count
  // RPOPLPUSH, BRPOPLPUSH, LMOVE, BLMOVE: a job queue's worker taking a job id itself
  // before the script that locks it (the traced shadow's lists follow the move)
  list_move,
  // Redis 8.4 / Valkey 9: a compare-and-delete (DELEX key IFEQ value, DELIFEQ key value)
  // releases a lock with no script
  delex,
  delifeq,
  // Redis Functions: FUNCTION LOAD / DELETE / FLUSH, and the calls of a loaded function
  function,
  fcall,
  fcall_ro,
};

namespace command_words_detail {

// A word of up to 16 bytes as two little-endian 64-bit words, letters lower-cased, and
// the bits to OR into a name's bytes before comparing: 0x20 on the letters. A byte b
// ORed with 0x20 is a lower-case letter l exactly when b is l or its upper case, which
// is what resp::iequals accepts there; other bytes ('_') must be equal.
struct pattern {
  std::uint64_t value[2] = {0, 0};
  std::uint64_t fold[2] = {0, 0};
};
constexpr pattern pattern_of(std::string_view word) noexcept {
  pattern p;
  for (std::size_t i = 0; i < word.size() && i < 16; ++i) {
    const char c = resp::ascii_lower(word[i]);
    const bool letter = c >= 'a' && c <= 'z';
    p.value[i / 8] |= std::uint64_t{static_cast<unsigned char>(c)} << (8 * (i % 8));
    if (letter) p.fold[i / 8] |= std::uint64_t{0x20} << (8 * (i % 8));
  }
  return p;
}

// `name` (N bytes) as two little-endian words, zero beyond N.
template <std::size_t N>
inline void load(const char* name, std::uint64_t (&w)[2]) noexcept {
  static_assert(N <= 16);
  unsigned char bytes[16] = {};
  std::memcpy(bytes, name, N);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(w, bytes, 16);
  } else {
    w[0] = w[1] = 0;
    for (std::size_t i = 0; i < 16; ++i) w[i / 8] |= std::uint64_t{bytes[i]} << (8 * (i % 8));
  }
}
inline bool matches(const std::uint64_t (&w)[2], const pattern& p) noexcept {
  return ((w[0] | p.fold[0]) == p.value[0]) & ((w[1] | p.fold[1]) == p.value[1]);
}

}  // namespace command_words_detail

// The command `name` names, compared as Redis does (ASCII case folded): the same
// answer as trying resp::iequals against each name in turn (what
// identify_command_general does), but only the names of name's length are compared,
// a word at a time.
inline command_word identify_command(std::string_view name) noexcept {
  namespace d = command_words_detail;
  std::uint64_t w[2];
  switch (name.size()) {
    case 3: {
      static constexpr d::pattern set = d::pattern_of("SET"), del = d::pattern_of("DEL"), get = d::pattern_of("GET");
      d::load<3>(name.data(), w);
      if (d::matches(w, set)) return command_word::set;
      if (d::matches(w, del)) return command_word::del;
      if (d::matches(w, get)) return command_word::get;
      break;
    }
    case 4: {
      static constexpr d::pattern eval = d::pattern_of("EVAL"), zrem = d::pattern_of("ZREM");
      d::load<4>(name.data(), w);
      if (d::matches(w, eval)) return command_word::eval;
      if (d::matches(w, zrem)) return command_word::zrem;
      break;
    }
    case 5: {
      static constexpr d::pattern setnx = d::pattern_of("SETNX"), reset = d::pattern_of("RESET"),
                                  lmove = d::pattern_of("LMOVE"), delex = d::pattern_of("DELEX"),
                                  fcall = d::pattern_of("FCALL");
      d::load<5>(name.data(), w);
      if (d::matches(w, setnx)) return command_word::setnx;
      if (d::matches(w, reset)) return command_word::reset;
      if (d::matches(w, lmove)) return command_word::list_move;
      if (d::matches(w, delex)) return command_word::delex;
      if (d::matches(w, fcall)) return command_word::fcall;
      break;
    }
    case 6: {
      static constexpr d::pattern expire = d::pattern_of("EXPIRE"), select = d::pattern_of("SELECT"),
                                  asking = d::pattern_of("ASKING"), unlink = d::pattern_of("UNLINK"),
                                  script = d::pattern_of("SCRIPT"), pubsub = d::pattern_of("PUBSUB"),
                                  blmove = d::pattern_of("BLMOVE");
      d::load<6>(name.data(), w);
      if (d::matches(w, expire)) return command_word::expire;
      if (d::matches(w, select)) return command_word::select;
      if (d::matches(w, asking)) return command_word::asking;
      if (d::matches(w, unlink)) return command_word::unlink;
      if (d::matches(w, script)) return command_word::script;
      if (d::matches(w, pubsub)) return command_word::pubsub;
      if (d::matches(w, blmove)) return command_word::list_move;
      break;
    }
    case 7: {
      static constexpr d::pattern evalsha = d::pattern_of("EVALSHA"), pexpire = d::pattern_of("PEXPIRE"),
                                  cluster = d::pattern_of("CLUSTER"), eval_ro = d::pattern_of("EVAL_RO"),
                                  delifeq = d::pattern_of("DELIFEQ");
      d::load<7>(name.data(), w);
      if (d::matches(w, evalsha)) return command_word::evalsha;
      if (d::matches(w, pexpire)) return command_word::pexpire;
      if (d::matches(w, cluster)) return command_word::cluster;
      if (d::matches(w, eval_ro)) return command_word::eval_ro;
      if (d::matches(w, delifeq)) return command_word::delifeq;
      break;
    }
    case 8: {
      static constexpr d::pattern function = d::pattern_of("FUNCTION"), fcall_ro = d::pattern_of("FCALL_RO");
      d::load<8>(name.data(), w);
      if (d::matches(w, function)) return command_word::function;
      if (d::matches(w, fcall_ro)) return command_word::fcall_ro;
      break;
    }
    case 9: {
      static constexpr d::pattern subscribe = d::pattern_of("SUBSCRIBE"), rpoplpush = d::pattern_of("RPOPLPUSH");
      d::load<9>(name.data(), w);
      if (d::matches(w, subscribe)) return command_word::subscribe;
      if (d::matches(w, rpoplpush)) return command_word::list_move;
      break;
    }
    case 10: {
      static constexpr d::pattern ssubscribe = d::pattern_of("SSUBSCRIBE"), evalsha_ro = d::pattern_of("EVALSHA_RO"),
                                  brpoplpush = d::pattern_of("BRPOPLPUSH"), psubscribe = d::pattern_of("PSUBSCRIBE");
      d::load<10>(name.data(), w);
      if (d::matches(w, ssubscribe)) return command_word::ssubscribe;
      if (d::matches(w, psubscribe)) return command_word::psubscribe;
      if (d::matches(w, evalsha_ro)) return command_word::evalsha_ro;
      if (d::matches(w, brpoplpush)) return command_word::list_move;
      break;
    }
    case 11: {
      static constexpr d::pattern unsubscribe = d::pattern_of("UNSUBSCRIBE");
      d::load<11>(name.data(), w);
      if (d::matches(w, unsubscribe)) return command_word::unsubscribe;
      break;
    }
    case 12: {
      static constexpr d::pattern sunsubscribe = d::pattern_of("SUNSUBSCRIBE"), punsubscribe = d::pattern_of("PUNSUBSCRIBE");
      d::load<12>(name.data(), w);
      if (d::matches(w, sunsubscribe)) return command_word::sunsubscribe;
      if (d::matches(w, punsubscribe)) return command_word::punsubscribe;
      break;
    }
    default:
      break;
  }
  return command_word::other;
}

// The general path: `name` compared with each word by resp::iequals, in turn.
inline command_word identify_command_general(std::string_view name) noexcept {
  using resp::iequals;
  constexpr std::pair<std::string_view, command_word> words[] = {
      {"ASKING", command_word::asking},         {"CLUSTER", command_word::cluster},
      {"SELECT", command_word::select},         {"RESET", command_word::reset},
      {"SET", command_word::set},               {"SETNX", command_word::setnx},
      {"EXPIRE", command_word::expire},         {"PEXPIRE", command_word::pexpire},
      {"DEL", command_word::del},               {"UNLINK", command_word::unlink},
      {"SUBSCRIBE", command_word::subscribe},   {"SSUBSCRIBE", command_word::ssubscribe},
      {"UNSUBSCRIBE", command_word::unsubscribe}, {"SUNSUBSCRIBE", command_word::sunsubscribe},
      {"PSUBSCRIBE", command_word::psubscribe}, {"PUNSUBSCRIBE", command_word::punsubscribe},
      {"SCRIPT", command_word::script},         {"EVAL", command_word::eval},
      {"EVAL_RO", command_word::eval_ro},       {"EVALSHA", command_word::evalsha},
      {"EVALSHA_RO", command_word::evalsha_ro}, {"ZREM", command_word::zrem},
      {"GET", command_word::get},               {"PUBSUB", command_word::pubsub},
      {"RPOPLPUSH", command_word::list_move},   {"BRPOPLPUSH", command_word::list_move},
      {"LMOVE", command_word::list_move},       {"BLMOVE", command_word::list_move},
      {"DELEX", command_word::delex},           {"DELIFEQ", command_word::delifeq},
      {"FUNCTION", command_word::function},     {"FCALL", command_word::fcall},
      {"FCALL_RO", command_word::fcall_ro},
  };
  for (const auto& [word, id] : words) {
    if (iequals(name, word)) return id;
  }
  return command_word::other;
}

// A whole decimal integer as Redis sends it: std::from_chars over all of `s` (an
// optional '-', digits; no '+', no spaces), false when empty, when anything is left
// over, or when it overflows; `out` is then unspecified.
// (Not inlined: parse_wire_int's fast path is, and stays small.)
[[gnu::noinline]] inline bool parse_wire_int_general(std::string_view s, std::int64_t& out) noexcept {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// parse_wire_int_general, with the usual case (1 to 18 digits, which cannot overflow)
// read by a plain digit loop; everything else (a sign, more digits, garbage) goes to
// the general path.
inline bool parse_wire_int(std::string_view s, std::int64_t& out) noexcept {
  if (s.size() - 1 < 18) {  // 1 to 18 bytes (an empty s wraps around)
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

}  // namespace lockscope::locks
