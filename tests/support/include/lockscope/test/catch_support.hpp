// Catch2 glue for the test support library: readable resp::value in failure
// messages, and a guard for tests that need redis-server.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "lockscope/resp/value.hpp"
#include "lockscope/test/redis_server.hpp"

namespace lockscope::test {

// Type, flags, text, attributes and elements, on one line, with C escapes:
//   push[bulk_string "invalidate", array[bulk_string "k"]]
//   null{null_bulk}
std::string debug_string(const resp::value& v);

}  // namespace lockscope::test

template <>
struct Catch::StringMaker<lockscope::resp::value> {
  static std::string convert(const lockscope::resp::value& v) { return lockscope::test::debug_string(v); }
};

// In a Catch2 test body: stops the test with a warning when redis-server is not
// installed, so that a machine without it skips rather than fails.
#define LOCKSCOPE_REQUIRE_REDIS_SERVER()                                          \
  do {                                                                            \
    if (!::lockscope::test::redis_server::available()) {                          \
      WARN("redis-server is not installed (set LOCKSCOPE_REDIS_SERVER to point " \
           "at one): skipping");                                                  \
      return;                                                                     \
    }                                                                             \
  } while (false)
