// The encoder: exact bytes of every writer method, append_command's argument
// conversions, encode(value) round trips, and misuse errors.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "helpers.hpp"
#include "lockscope/resp/encoder.hpp"

using namespace resp_test;
using lockscope::resp::append_command;
using lockscope::resp::encode;
using lockscope::resp::type;
using lockscope::resp::value;
using lockscope::resp::writer;
namespace flags = lockscope::resp::node_flags;

namespace {
template <class F>
std::string written(F&& f) {
  std::string out;
  writer w(out);
  f(w);
  return out;
}
}  // namespace

TEST_CASE("writer: RESP2 types, exact bytes", "[resp][encoder]") {
  CHECK(written([](writer& w) { w.simple_string("OK"); }) == "+OK\r\n");
  CHECK(written([](writer& w) { w.simple_string(""); }) == "+\r\n");
  CHECK(written([](writer& w) { w.simple_error("ERR no"); }) == "-ERR no\r\n");
  CHECK(written([](writer& w) { w.integer(0); }) == ":0\r\n");
  CHECK(written([](writer& w) { w.integer(INT64_MAX); }) == ":9223372036854775807\r\n");
  CHECK(written([](writer& w) { w.integer(INT64_MIN); }) == ":-9223372036854775808\r\n");
  CHECK(written([](writer& w) { w.bulk_string("hello"); }) == "$5\r\nhello\r\n");
  CHECK(written([](writer& w) { w.bulk_string(""); }) == "$0\r\n\r\n");
  CHECK(written([](writer& w) { w.bulk_string(std::string_view("a\0\r\n", 4)); }) ==
        std::string("$4\r\na\0\r\n\r\n", 10));
  CHECK(written([](writer& w) { w.null_bulk(); }) == "$-1\r\n");
  CHECK(written([](writer& w) { w.null_array(); }) == "*-1\r\n");
  CHECK(written([](writer& w) { w.array(0); }) == "*0\r\n");
  CHECK(written([](writer& w) { w.array(UINT64_MAX); }) == "*18446744073709551615\r\n");
}

TEST_CASE("writer: RESP3 types, exact bytes", "[resp][encoder]") {
  CHECK(written([](writer& w) { w.null(); }) == "_\r\n");
  CHECK(written([](writer& w) { w.boolean(true).boolean(false); }) == "#t\r\n#f\r\n");
  CHECK(written([](writer& w) { w.bulk_error("SYNTAX x"); }) == "!8\r\nSYNTAX x\r\n");
  CHECK(written([](writer& w) { w.verbatim_string("txt", "Some string"); }) == "=15\r\ntxt:Some string\r\n");
  CHECK(written([](writer& w) { w.verbatim_string("mkd", ""); }) == "=4\r\nmkd:\r\n");
  CHECK(written([](writer& w) { w.big_number("-3492890328409238509324850943850943825024385"); }) ==
        "(-3492890328409238509324850943850943825024385\r\n");
  CHECK(written([](writer& w) { w.map(2); }) == "%2\r\n");
  CHECK(written([](writer& w) { w.set(3); }) == "~3\r\n");
  CHECK(written([](writer& w) { w.attribute(1); }) == "|1\r\n");
  CHECK(written([](writer& w) { w.push(3); }) == ">3\r\n");
}

TEST_CASE("writer: doubles in shortest round-trip form", "[resp][encoder]") {
  CHECK(written([](writer& w) { w.double_(1.5); }) == ",1.5\r\n");
  CHECK(written([](writer& w) { w.double_(0.1); }) == ",0.1\r\n");
  CHECK(written([](writer& w) { w.double_(-1e10); }) == ",-1e+10\r\n");
  CHECK(written([](writer& w) { w.double_(-12345.5); }) == ",-12345.5\r\n");
  CHECK(written([](writer& w) { w.double_(1e300); }) == ",1e+300\r\n");
  CHECK(written([](writer& w) { w.double_(0.0); }) == ",0\r\n");
  CHECK(written([](writer& w) { w.double_(std::numeric_limits<double>::infinity()); }) == ",inf\r\n");
  CHECK(written([](writer& w) { w.double_(-std::numeric_limits<double>::infinity()); }) == ",-inf\r\n");
  CHECK(written([](writer& w) { w.double_(std::nan("")); }) == ",nan\r\n");
  CHECK(written([](writer& w) { w.double_text("1.23E+5"); }) == ",1.23E+5\r\n");
  CHECK(written([](writer& w) { w.double_text("-nan"); }) == ",-nan\r\n");
  // Whatever double_ writes, the decoder reads back as the same number.
  for (double d : {1.5, -0.25, 1e-300, 123456789.125, 2.0 / 3.0, 5e-324, 1.7976931348623157e308}) {
    INFO(d);
    const auto values = values_of(written([d](writer& w) { w.double_(d); }));
    REQUIRE(values.size() == 1);
    CHECK(values[0].as_double() == d);
  }
}

TEST_CASE("writer: streamed forms, exact bytes", "[resp][encoder][streamed]") {
  CHECK(written([](writer& w) {
          w.streamed_string_begin().streamed_string_chunk("Hell").streamed_string_chunk("o").streamed_string_end();
        }) == "$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n");
  CHECK(written([](writer& w) { w.streamed_aggregate_begin(type::array).integer(1).stream_end(); }) ==
        "*?\r\n:1\r\n.\r\n");
  CHECK(written([](writer& w) { w.streamed_aggregate_begin(type::set).stream_end(); }) == "~?\r\n.\r\n");
  CHECK(written([](writer& w) { w.streamed_aggregate_begin(type::map).stream_end(); }) == "%?\r\n.\r\n");
}

TEST_CASE("writer appends to what the string already holds", "[resp][encoder]") {
  std::string out = "prefix:";
  writer(out).push(3).bulk_string("message").bulk_string("ch").bulk_string("0");
  CHECK(out == "prefix:>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n");
}

TEST_CASE("writer misuse throws std::invalid_argument", "[resp][encoder]") {
  std::string out;
  writer w(out);
  CHECK_THROWS_AS(w.simple_string("a\r\nb"), std::invalid_argument);
  CHECK_THROWS_AS(w.simple_string("a\rb"), std::invalid_argument);
  CHECK_THROWS_AS(w.simple_string("a\nb"), std::invalid_argument);
  CHECK_THROWS_AS(w.simple_error("ERR\r"), std::invalid_argument);
  CHECK_THROWS_AS(w.streamed_string_chunk(""), std::invalid_argument);
  CHECK_THROWS_AS(w.verbatim_string("tx", "a"), std::invalid_argument);
  CHECK_THROWS_AS(w.verbatim_string("txtx", "a"), std::invalid_argument);
  CHECK_THROWS_AS(w.verbatim_string("t:t", "a"), std::invalid_argument);
  CHECK_THROWS_AS(w.verbatim_string("t\nt", "a"), std::invalid_argument);
  CHECK_THROWS_AS(w.double_text("abc"), std::invalid_argument);
  CHECK_THROWS_AS(w.double_text(""), std::invalid_argument);
  CHECK_THROWS_AS(w.big_number("12a"), std::invalid_argument);
  CHECK_THROWS_AS(w.big_number(""), std::invalid_argument);
  CHECK_THROWS_AS(w.streamed_aggregate_begin(type::push), std::invalid_argument);
  CHECK_THROWS_AS(w.streamed_aggregate_begin(type::bulk_string), std::invalid_argument);
  // A rejected call writes nothing.
  CHECK(out.empty());
}

TEST_CASE("append_command with string views, strings and literals", "[resp][encoder]") {
  std::string out;
  const std::string key = "myLock";
  const std::string_view channel = "redisson_lock__channel:{myLock}";
  append_command(out, "PUBLISH", channel, key);
  CHECK(out == "*3\r\n$7\r\nPUBLISH\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$6\r\nmyLock\r\n");
  out.clear();
  append_command(out, {"SET", "k", ""});
  CHECK(out == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
  out.clear();
  append_command(out, std::initializer_list<std::string_view>{});
  CHECK(out == "*0\r\n");
}

TEST_CASE("append_command renders integers and doubles in decimal", "[resp][encoder]") {
  std::string out;
  append_command(out, "PEXPIRE", "myLock", 30000);
  CHECK(out == "*3\r\n$7\r\nPEXPIRE\r\n$6\r\nmyLock\r\n$5\r\n30000\r\n");
  out.clear();
  append_command(out, "X", -1, INT64_MIN, UINT64_MAX, std::uint8_t{7});
  CHECK(out ==
        "*5\r\n$1\r\nX\r\n$2\r\n-1\r\n$20\r\n-9223372036854775808\r\n$20\r\n18446744073709551615\r\n$1\r\n7\r\n");
  out.clear();
  append_command(out, "INCRBYFLOAT", "k", 1.5, -0.1, std::numeric_limits<double>::infinity());
  CHECK(out == "*5\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nk\r\n$3\r\n1.5\r\n$4\r\n-0.1\r\n$3\r\ninf\r\n");
}

TEST_CASE("append_command output decodes back to the arguments", "[resp][encoder]") {
  std::string out;
  const std::string script = "return redis.call('get', KEYS[1])\r\n-- CRLF inside";
  append_command(out, "EVAL", script, 1, "myLock", 6000, "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12");
  const auto values = values_of(out);
  REQUIRE(values.size() == 1);
  CHECK(values[0] == value::aggregate(type::array, {value::bulk("EVAL"), value::bulk(script), value::bulk("1"),
                                                    value::bulk("myLock"), value::bulk("6000"),
                                                    value::bulk("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12")}));
}

TEST_CASE("encode re-creates canonical wire bytes exactly", "[resp][encoder]") {
  // Each of these is in the form the writer produces, so decode + encode is the identity.
  const char* canonical[] = {
      "+OK\r\n",
      "-ERR x\r\n",
      ":-42\r\n",
      "$5\r\nhello\r\n",
      "$0\r\n\r\n",
      "$-1\r\n",
      "*-1\r\n",
      "_\r\n",
      "#t\r\n",
      "#f\r\n",
      ",1.5\r\n",
      ",-nan\r\n",
      ",INF\r\n",
      "(12345678901234567890\r\n",
      "!3\r\nERR\r\n",
      "=15\r\ntxt:Some string\r\n",
      "*0\r\n",
      "%0\r\n",
      "~0\r\n",
      ">0\r\n",
      "*2\r\n$-1\r\n*-1\r\n",
      "%1\r\n+k\r\n~2\r\n:1\r\n_\r\n",
      ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n",
      "|1\r\n+ttl\r\n:3600\r\n:1\r\n",
      "*2\r\n|1\r\n+a\r\n|1\r\n+b\r\n+c\r\n:1\r\n:2\r\n:3\r\n",
      "%1\r\n|1\r\n+k\r\n+v\r\n+key\r\n*?\r\n.\r\n",
      "|2\r\n+a\r\n*0\r\n+b\r\n%1\r\n+x\r\n+y\r\n>1\r\n+p\r\n",
      "$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n",
      "$?\r\n;0\r\n",
      "*?\r\n:1\r\n~?\r\n.\r\n%?\r\n+k\r\n$?\r\n;1\r\nv\r\n;0\r\n.\r\n.\r\n",
  };
  for (const char* wire : canonical) {
    INFO("wire: " << printable(wire));
    const auto values = values_of(wire);
    REQUIRE(values.size() == 1);
    std::string out;
    encode(out, values[0]);
    CHECK(out == wire);
  }
}

TEST_CASE("encode of hand-built values", "[resp][encoder]") {
  std::string out;
  value v = value::aggregate(type::map, {value::simple("k"), value::number(-5)});
  v.attributes = {value::bulk("meta"), value::nil()};
  encode(out, v);
  CHECK(out == "|1\r\n$4\r\nmeta\r\n_\r\n%1\r\n+k\r\n:-5\r\n");

  out.clear();
  value streamed = value::bulk("abcd");
  streamed.flags = flags::streamed;
  streamed.elements = {value::make(type::streamed_string_part, "ab"), value::make(type::streamed_string_part, "cd")};
  encode(out, streamed);
  CHECK(out == "$?\r\n;2\r\nab\r\n;2\r\ncd\r\n;0\r\n");

  out.clear();
  value null_bulk = value::nil();
  null_bulk.flags = flags::null_bulk;
  encode(out, null_bulk);
  encode(out, value::nil());
  CHECK(out == "$-1\r\n_\r\n");
}

TEST_CASE("encode rejects values that cannot be written", "[resp][encoder]") {
  std::string out;
  CHECK_THROWS_AS(encode(out, value::simple("a\r\nb")), std::invalid_argument);
  CHECK_THROWS_AS(encode(out, value::make(type::verbatim_string, "tx")), std::invalid_argument);
  CHECK_THROWS_AS(encode(out, value::make(type::double_, "one")), std::invalid_argument);
  CHECK_THROWS_AS(encode(out, value::make(type::attribute, "")), std::invalid_argument);
  CHECK_THROWS_AS(encode(out, value::make(type::stream_end, "")), std::invalid_argument);
  value streamed_push = value::aggregate(type::push, {});
  streamed_push.flags = flags::streamed;
  CHECK_THROWS_AS(encode(out, streamed_push), std::invalid_argument);
  value empty_chunk = value::bulk("");
  empty_chunk.flags = flags::streamed;
  empty_chunk.elements = {value::make(type::streamed_string_part, "")};
  CHECK_THROWS_AS(encode(out, empty_chunk), std::invalid_argument);
}
