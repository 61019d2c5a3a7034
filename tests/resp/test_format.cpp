// Formatters. The to_cli expectations were captured from redis-cli 7.0.15 (--no-raw, -3)
// against redis-server 7.0.15 with Lua replies such as
//   EVAL "redis.setresp(3); return {map={a={1,2},b='x'}}" 0
// and have redis-cli's trailing newline removed.
#include <string>

#include <fmt/format.h>

#include "helpers.hpp"
#include "lockscope/resp/format.hpp"

using namespace resp_test;
using lockscope::resp::parsed_options;
using lockscope::resp::to_cli;
using lockscope::resp::to_parsed;
using lockscope::resp::type;
using lockscope::resp::value;

namespace {

value one(std::string_view wire) {
  const auto values = values_of(wire);
  REQUIRE(values.size() == 1);
  return values[0];
}

std::string cli(std::string_view wire) { return to_cli(one(wire)); }
std::string parsed(std::string_view wire, const parsed_options& options = {}) { return to_parsed(one(wire), options); }

const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";

}  // namespace

// ---------------------------------------------------------------- to_cli

TEST_CASE("to_cli: scalars as redis-cli prints them", "[resp][format]") {
  CHECK(cli("+OK\r\n") == "OK");
  CHECK(cli("-ERR x\r\n") == "(error) ERR x");
  CHECK(cli("!5\r\nERR y\r\n") == "(error) ERR y");
  CHECK(cli(":1\r\n") == "(integer) 1");
  CHECK(cli(":-42\r\n") == "(integer) -42");
  CHECK(cli("$1\r\nc\r\n") == "\"c\"");
  CHECK(cli("$-1\r\n") == "(nil)");
  CHECK(cli("*-1\r\n") == "(nil)");
  CHECK(cli("_\r\n") == "(nil)");
  CHECK(cli("#t\r\n") == "(true)");
  CHECK(cli("#f\r\n") == "(false)");
  CHECK(cli(",1.5\r\n") == "(double) 1.5");
  CHECK(cli("=13\r\ntxt:two words\r\n") == "two words");
  // redis-cli 7.0 has no case for big numbers; ours follows the (double) pattern.
  CHECK(cli("(123\r\n") == "(big number) 123");
}

TEST_CASE("to_cli: bulk strings are quoted with sdscatrepr escapes", "[resp][format]") {
  CHECK(cli("$0\r\n\r\n") == "\"\"");
  CHECK(cli("$3\r\na\\b\r\n") == "\"a\\\\b\"");
  CHECK(cli(std::string("$5\r\nx\0y\r\n\r\n", 11)) == "\"x\\x00y\\r\\n\"");
  // Bytes outside printable ASCII are escaped, UTF-8 included.
  CHECK(cli("$9\r\nh\xc3\xa9 \"q\"\t\x01\r\n") == "\"h\\xc3\\xa9 \\\"q\\\"\\t\\x01\"");
  CHECK(cli("$2\r\n\a\b\r\n") == "\"\\a\\b\"");
  CHECK(cli("$1\r\n\x7f\r\n") == "\"\\x7f\"");
}

TEST_CASE("to_cli: nested arrays indent by the index width", "[resp][format]") {
  // redis-cli: EVAL "return {{'a','b'},'c',{},1,false}" 0
  CHECK(cli("*5\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n*0\r\n:1\r\n$-1\r\n") ==
        "1) 1) \"a\"\n"
        "   2) \"b\"\n"
        "2) \"c\"\n"
        "3) (empty array)\n"
        "4) (integer) 1\n"
        "5) (nil)");
  // redis-cli: EVAL "return {{1,{2,3}},{}}" 0
  CHECK(cli("*2\r\n*2\r\n:1\r\n*2\r\n:2\r\n:3\r\n*0\r\n") ==
        "1) 1) (integer) 1\n"
        "   2) 1) (integer) 2\n"
        "      2) (integer) 3\n"
        "2) (empty array)");
}

TEST_CASE("to_cli: two-digit indexes are right-aligned", "[resp][format]") {
  // redis-cli: EVAL "return {1,2,3,4,5,6,7,8,9,10,{1,2}}" 0
  std::string wire = "*11\r\n";
  for (int i = 1; i <= 10; ++i) wire += ":" + std::to_string(i) + "\r\n";
  wire += "*2\r\n:1\r\n:2\r\n";
  CHECK(cli(wire) ==
        " 1) (integer) 1\n"
        " 2) (integer) 2\n"
        " 3) (integer) 3\n"
        " 4) (integer) 4\n"
        " 5) (integer) 5\n"
        " 6) (integer) 6\n"
        " 7) (integer) 7\n"
        " 8) (integer) 8\n"
        " 9) (integer) 9\n"
        "10) (integer) 10\n"
        "11) 1) (integer) 1\n"
        "    2) (integer) 2");
}

TEST_CASE("to_cli: maps use '#' and '=>', multi-line values start on a new line", "[resp][format]") {
  // redis-cli -3: HGETALL h
  CHECK(cli("%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n") ==
        "1# \"f1\" => \"v1\"\n"
        "2# \"f2\" => \"v2\"");
  // {map={a={1,2},b='x'}}
  CHECK(cli("%2\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n$1\r\nb\r\n$1\r\nx\r\n") ==
        "1# \"a\" => \n"
        "   1) (integer) 1\n"
        "   2) (integer) 2\n"
        "2# \"b\" => \"x\"");
  // {map={a={1}}}: a one-element value stays on the key's line.
  CHECK(cli("%1\r\n$1\r\na\r\n*1\r\n:1\r\n") == "1# \"a\" => 1) (integer) 1");
  // {map={k={map={a=1,b=2}}}}
  CHECK(cli("%1\r\n$1\r\nk\r\n%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:2\r\n") ==
        "1# \"k\" => \n"
        "   1# \"a\" => (integer) 1\n"
        "   2# \"b\" => (integer) 2");
  // {map={k={map={a={1,2}}}}}
  CHECK(cli("%1\r\n$1\r\nk\r\n%1\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n") ==
        "1# \"k\" => \n"
        "   1# \"a\" => \n"
        "      1) (integer) 1\n"
        "      2) (integer) 2");
  // {map={k={map={a=1}}}}
  CHECK(cli("%1\r\n$1\r\nk\r\n%1\r\n$1\r\na\r\n:1\r\n") == "1# \"k\" => 1# \"a\" => (integer) 1");
  // {map={a={}}}
  CHECK(cli("%1\r\n$1\r\na\r\n*0\r\n") == "1# \"a\" => (empty array)");
}

TEST_CASE("to_cli: sets, empty aggregates and push", "[resp][format]") {
  CHECK(cli("~2\r\n$1\r\na\r\n$1\r\nb\r\n") == "1~ \"a\"\n2~ \"b\"");
  // {1,{set={x=true}},{map={}}}
  CHECK(cli("*3\r\n:1\r\n~1\r\n$1\r\nx\r\n%0\r\n") ==
        "1) (integer) 1\n"
        "2) 1~ \"x\"\n"
        "3) (empty hash)");
  CHECK(cli("*0\r\n") == "(empty array)");
  CHECK(cli("%0\r\n") == "(empty hash)");
  CHECK(cli("~0\r\n") == "(empty set)");
  CHECK(cli(">0\r\n") == "(empty push)");
  CHECK(cli(">3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n") ==
        "1) \"message\"\n"
        "2) \"redisson_lock__channel:{myLock}\"\n"
        "3) \"0\"");
  // Streamed forms print like their fixed-length equivalents.
  CHECK(cli("*?\r\n:1\r\n$?\r\n;1\r\na\r\n;1\r\nb\r\n;0\r\n.\r\n") == "1) (integer) 1\n2) \"ab\"");
}

TEST_CASE("to_cli: attributes print before the value they annotate", "[resp][format][attribute]") {
  CHECK(cli("|1\r\n+ttl\r\n:3600\r\n:1\r\n") == "|1# ttl => (integer) 3600\n(integer) 1");
  CHECK(cli("*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n") ==
        "1) (integer) 1\n"
        "2) |1# ttl => (integer) 3600\n"
        "   (integer) 2");
}

// ---------------------------------------------------------------- to_parsed

TEST_CASE("to_parsed: words joined by spaces", "[resp][format]") {
  CHECK(parsed("*3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n") ==
        "message redisson_lock__channel:{myLock} 0");
  CHECK(parsed("+OK\r\n") == "OK");
  CHECK(parsed(":-3\r\n") == "-3");
  CHECK(parsed("$-1\r\n") == "(nil)");
  CHECK(parsed("_\r\n") == "(nil)");
  CHECK(parsed("-ERR wrong\r\n") == "(error) ERR wrong");
  CHECK(parsed("#t\r\n") == "true");
  CHECK(parsed("#f\r\n") == "false");
  CHECK(parsed(",1.5\r\n") == "1.5");
  CHECK(parsed("(123\r\n") == "123");
  CHECK(parsed("=9\r\ntxt:hello\r\n") == "hello");
  CHECK(parsed("*0\r\n") == "[]");
  CHECK(parsed("%0\r\n") == "{}");
  CHECK(parsed("%1\r\n+k\r\n:1\r\n") == "k 1");
}

TEST_CASE("to_parsed: nested aggregates in brackets", "[resp][format]") {
  CHECK(parsed("*3\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n*0\r\n") == "[a b] c []");
  CHECK(parsed("*2\r\n%0\r\n*1\r\n*1\r\n:1\r\n") == "{} [[1]]");
}

TEST_CASE("to_parsed: arguments with blanks, quotes or control bytes are quoted", "[resp][format]") {
  CHECK(parsed("*2\r\n$4\r\nECHO\r\n$3\r\na b\r\n") == "ECHO \"a b\"");
  CHECK(parsed("$8\r\nsay \"hi\"\r\n") == "\"say \\\"hi\\\"\"");
  CHECK(parsed("$4\r\nit's\r\n") == "\"it's\"");
  CHECK(parsed("$3\r\na\\b\r\n") == "\"a\\\\b\"");
  CHECK(parsed("$0\r\n\r\n") == "\"\"");
  CHECK(parsed("$4\r\na\r\nb\r\n") == "\"a\\r\\nb\"");
  CHECK(parsed("$3\r\n\x01\t\x7f\r\n") == "\"\\x01\\t\\x7f\"");
  // UTF-8 text is printable in the parsed form.
  CHECK(parsed("$6\r\nh\xc3\xa9llo\r\n") == "h\xc3\xa9llo");
  CHECK(parsed("$7\r\nh\xc3\xa9 llo\r\n") == "\"h\xc3\xa9 llo\"");
  // Other bytes above 0x7f are escaped, so that the line stays valid UTF-8 (binary values,
  // and the cluster bus's frames on a port read as RESP, printed them raw): a lone
  // continuation byte, a cut sequence, an overlong form, a surrogate.
  CHECK(parsed("$4\r\na\x87" "bc\r\n") == "\"a\\x87bc\"");
  CHECK(parsed("$3\r\nab\xc3\r\n") == "\"ab\\xc3\"");
  CHECK(parsed("$3\r\n\xc0\xafx\r\n") == "\"\\xc0\\xafx\"");
  CHECK(parsed("$3\r\n\xed\xa0\x80\r\n") == "\"\\xed\\xa0\\x80\"");
  CHECK(parsed("$5\r\n\xe2\x80\xa6\x87 \r\n") == "\"\xe2\x80\xa6\\x87 \"");
}

TEST_CASE("both forms: C1 controls written as UTF-8 are escaped like other control bytes", "[resp][format]") {
  // U+009B is CSI to some terminals; U+00A0 (no-break space) is text.
  CHECK(parsed("$3\r\na\xc2\x9b\r\n") == "\"a\\xc2\\x9b\"");
  CHECK(parsed("$3\r\na\xc2\x80\r\n") == "\"a\\xc2\\x80\"");
  CHECK(parsed("$3\r\na\xc2\xa0\r\n") == "a\xc2\xa0");
  CHECK(cli("$3\r\na\xc2\x9b\r\n") == "\"a\\xc2\\x9b\"");
}

TEST_CASE("both forms: statuses, errors and other unquoted texts with control bytes or bytes that are not UTF-8 are "
          "quoted and escaped",
          "[resp][format]") {
  // redis-server echoes an unknown command in its error: what a client sent reaches the
  // text forms, and a terminal must not act on it.
  const std::string echoed = "-ERR unknown command 'x\x1b[2J', with args beginning with: \r\n";
  CHECK(parsed(echoed) == "(error) \"ERR unknown command 'x\\x1b[2J', with args beginning with: \"");
  CHECK(cli(echoed) == parsed(echoed));
  CHECK(parsed("-ERR a\x87\r\n") == "(error) \"ERR a\\x87\"");
  CHECK(parsed("-ERR a\xc2\x9b\r\n") == "(error) \"ERR a\\xc2\\x9b\"");
  CHECK(parsed("!7\r\nERR \x07\\x\r\n") == "(error) \"ERR \\a\\\\x\"");  // a bulk error; \ escaped once quoted
  CHECK(parsed("+OK\x1b]0;t\x07\r\n") == "\"OK\\x1b]0;t\\a\"");
  CHECK(cli("+OK\x7f\r\n") == "\"OK\\x7f\"");
  CHECK(cli("|1\r\n+k\x1b\r\n:1\r\n+OK\r\n") == "|1# \"k\\x1b\" => (integer) 1\nOK");
  // Plain text, UTF-8 included, stays as it was: unquoted, backslashes and quotes raw.
  CHECK(parsed("-ERR it's a \\ \"b\" \xc3\xa9\r\n") == "(error) ERR it's a \\ \"b\" \xc3\xa9");
  CHECK(cli("+PONG\r\n") == "PONG");
  CHECK(cli(",1.5\r\n") == "(double) 1.5");
  CHECK(cli("(123\r\n") == "(big number) 123");
  // A verbatim string's lines stay lines in the cli form, unless another byte needs escaping.
  CHECK(cli("=12\r\ntxt:l1\r\nl2\tx\r\n") == "l1\r\nl2\tx");
  CHECK(cli("=9\r\ntxt:l1\nl\x1b\r\n") == "\"l1\\nl\\x1b\"");
  CHECK(cli("=9\r\ntxt:ok\rno\r\n") == "\"ok\\rno\"");  // a lone CR
  CHECK(parsed("=9\r\ntxt:l1\nl\x1b\r\n") == "\"l1\\nl\\x1b\"");
}

TEST_CASE("to_parsed: max_argument cuts long arguments with an ellipsis", "[resp][format]") {
  parsed_options options;
  options.max_argument = 10;
  CHECK(parsed("$12\r\nabcdefghijkl\r\n", options) == "abcdefghij\xe2\x80\xa6");
  CHECK(parsed("$10\r\nabcdefghij\r\n", options) == "abcdefghij");
  // A quoted argument keeps the ellipsis inside the quotes.
  CHECK(parsed("$19\r\nif (redis.call('exi\r\n", options) == "\"if (redis.\xe2\x80\xa6\"");
  // Never cut inside a UTF-8 character.
  options.max_argument = 3;
  CHECK(parsed("$6\r\n\xc3\xa9\xc3\xa9\xc3\xa9\r\n", options) == "\xc3\xa9\xe2\x80\xa6");
  // max_argument 0 means never cut.
  CHECK(parsed("$12\r\nabcdefghijkl\r\n", {}) == "abcdefghijkl");
}

TEST_CASE("to_parsed: shorten_owner_ids abbreviates Redisson owner ids", "[resp][format]") {
  parsed_options options;
  options.shorten_owner_ids = true;
  const std::string wire = "$39\r\n" + owner + "\r\n";
  CHECK(parsed(wire, options) == "80e6\xe2\x80\xa6:12");
  CHECK(parsed(wire) == owner);
  // Not owner ids: left alone.
  CHECK(parsed("$36\r\n80e6bb0b-b3bb-4ce0-b120-9c7ce917b767\r\n", options) == "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767");
  CHECK(parsed("$39\r\n80e6bb0b-b3bb-4ce0-b120-9c7ce917b76x:12\r\n", options) ==
        "80e6bb0b-b3bb-4ce0-b120-9c7ce917b76x:12");
  CHECK(parsed("$39\r\n80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1x\r\n", options) ==
        "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1x");
  CHECK(parsed("$37\r\n80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:\r\n", options) ==
        "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:");
  CHECK(parsed("$40\r\n80E6BB0B-B3BB-4CE0-B120-9C7CE917B767:123\r\n", options) == "80E6\xe2\x80\xa6:123");
}

TEST_CASE("append_parsed_argument writes one argument", "[resp][format]") {
  std::string out = "EVAL ";
  lockscope::resp::append_parsed_argument(out, "a b", {});
  CHECK(out == "EVAL \"a b\"");
}

// ---------------------------------------------------------------- fmt

TEST_CASE("fmt formatter: {} is the redis-cli form, {:p} the parsed form", "[resp][format]") {
  const value v = one("*2\r\n$1\r\na\r\n*2\r\n:1\r\n$3\r\nb c\r\n");
  CHECK(fmt::format("{}", v) == to_cli(v));
  CHECK(fmt::format("{}", v) == "1) \"a\"\n2) 1) (integer) 1\n   2) \"b c\"");
  CHECK(fmt::format("{:p}", v) == to_parsed(v));
  CHECK(fmt::format("{:p}", v) == "a [1 \"b c\"]");
  CHECK(fmt::format("<{:p}>", value::simple("PONG")) == "<PONG>");
}
