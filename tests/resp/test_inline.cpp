// Inline commands (redis-server's sdssplitargs grammar), accepted only with
// decoder_options::allow_inline.
#include <string>

#include "helpers.hpp"

using namespace resp_test;
using lockscope::resp::decoder_options;
using lockscope::resp::errc;
using lockscope::resp::type;
using lockscope::resp::value;
namespace flags = lockscope::resp::node_flags;

namespace {

decoder_options inline_options() {
  decoder_options o;
  o.allow_inline = true;
  return o;
}

using nodes = std::vector<recorded_node>;

recorded_node head(std::uint64_t args) { return nd(type::array, 0, args, "", flags::inline_command); }
recorded_node arg(std::string_view a, bool last = false) {
  return nd(type::bulk_string, 1, a.size(), a, last ? kEnd : std::uint8_t{0});
}

// The arguments of every inline command in `input`.
std::vector<std::vector<std::string>> commands(std::string_view input) {
  std::vector<std::vector<std::string>> out;
  for (const value& v : values_of(input, inline_options())) {
    CHECK(v.type == type::array);
    CHECK(v.flags == flags::inline_command);
    auto& args = out.emplace_back();
    for (const value& e : v.elements) {
      CHECK(e.type == type::bulk_string);
      args.push_back(e.text);
    }
  }
  return out;
}

using cmds = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("inline PING with CRLF", "[resp][inline]") {
  CHECK(nodes_of("PING\r\n", inline_options()) == nodes{head(1), arg("PING", true)});
}

TEST_CASE("inline command ending in a bare LF", "[resp][inline]") {
  CHECK(nodes_of("SET k v\n", inline_options()) == nodes{head(3), arg("SET"), arg("k"), arg("v", true)});
}

TEST_CASE("inline arguments separated by runs of spaces and tabs", "[resp][inline]") {
  CHECK(commands("  SET \t k   v  \r\n") == cmds{{"SET", "k", "v"}});
}

TEST_CASE("inline double quotes with C and hex escapes", "[resp][inline]") {
  CHECK(commands("SET k \"a\\x41\\n\"\r\n") == cmds{{"SET", "k", "aA\n"}});
  CHECK(commands("ECHO \"\\t\\r\\b\\a\\\\\\\"\"\r\n") == cmds{{"ECHO", "\t\r\b\a\\\""}});
  // Unknown escapes keep the character; an incomplete \x is a literal x.
  CHECK(commands("ECHO \"\\q\\xZZ\"\r\n") == cmds{{"ECHO", "qxZZ"}});
  CHECK(commands("ECHO \"with space\" \"\"\r\n") == cmds{{"ECHO", "with space", ""}});
  CHECK(commands("ECHO \"\\xff\\x00\"\r\n") == cmds{{"ECHO", std::string("\xff\0", 2)}});
}

TEST_CASE("inline single quotes unescape only the escaped quote", "[resp][inline]") {
  CHECK(commands("SET k 'it\\'s'\r\n") == cmds{{"SET", "k", "it's"}});
  CHECK(commands("SET k 'a\\nb \"q\"'\r\n") == cmds{{"SET", "k", "a\\nb \"q\""}});
  CHECK(commands("SET k ''\r\n") == cmds{{"SET", "k", ""}});
}

TEST_CASE("inline quotes may open inside a word, as in redis-server", "[resp][inline]") {
  // sdssplitargs joins the bare prefix and the quoted part into one argument.
  CHECK(commands("SET k foo\"bar\"\r\n") == cmds{{"SET", "k", "foobar"}});
  CHECK(commands("SET k a'b c'\r\n") == cmds{{"SET", "k", "ab c"}});
  CHECK(commands("SET k\"1\" v\r\n") == cmds{{"SET", "k1", "v"}});
}

TEST_CASE("blank inline lines are ignored", "[resp][inline]") {
  CHECK(commands("\r\n\n   \r\n\t\nPING\r\n\r\n") == cmds{{"PING"}});
  const outcome o = decode_every_way("\r\n  \r\n", inline_options());
  CHECK(o.nodes.empty());
  CHECK(o.at_boundary);
}

TEST_CASE("inline and multibulk requests mix on one connection", "[resp][inline]") {
  const auto values = values_of("PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nQUIT\n", inline_options());
  REQUIRE(values.size() == 3);
  CHECK(values[0].flags == flags::inline_command);
  CHECK(values[1].flags == 0);
  CHECK(values[1].elements == std::vector<value>{value::bulk("ECHO"), value::bulk("hi")});
  CHECK(values[2].elements == std::vector<value>{value::bulk("QUIT")});
}

TEST_CASE("inline unbalanced quotes report the offending offset", "[resp][inline][errors]") {
  const auto o = inline_options();
  // Unterminated: blamed at the end of the line.
  CHECK(failure_of("SET k \"abc\r\n", o) == fails(errc::unbalanced_quotes, 10));
  CHECK(failure_of("SET k 'abc\n", o) == fails(errc::unbalanced_quotes, 10));
  // A closing quote must be followed by a blank or the end of the line.
  CHECK(failure_of("SET k \"abc\"x\r\n", o) == fails(errc::unbalanced_quotes, 11));
  CHECK(failure_of("SET k 'a'b\r\n", o) == fails(errc::unbalanced_quotes, 9));
  // A quote opened in the middle of a word must still be closed.
  CHECK(failure_of("SET k abc\"\r\n", o) == fails(errc::unbalanced_quotes, 10));
  // After earlier commands the offset is in the whole stream.
  CHECK(failure_of("PING\r\nECHO \"x\r\n", o) == fails(errc::unbalanced_quotes, 13));
  // An escaped quote does not close the argument.
  CHECK(failure_of("ECHO \"a\\\"\r\n", o) == fails(errc::unbalanced_quotes, 9));
}

TEST_CASE("inline line over max_line_length is line_too_long", "[resp][inline][errors]") {
  decoder_options o = inline_options();
  o.limits.max_line_length = 8;
  CHECK(failure_of("PING1234\r\n", o) == failure{});
  CHECK(failure_of("PING1234\n", o) == failure{});
  CHECK(failure_of("PING12345\r\n", o) == fails(errc::line_too_long, 9));
  CHECK(failure_of("PING12345\n", o) == fails(errc::line_too_long, 9));
  CHECK(failure_of("PING\r\nSET k vvvvvvvvvvvvvvv\r\n", o) == fails(errc::line_too_long, 15));
  // With no newline at all, split or not.
  CHECK(failure_of("SET k vvvvvvvvvvvvvvvvvvvv", o) == fails(errc::line_too_long, 9));
}

TEST_CASE("without allow_inline the same lines are unknown_type", "[resp][inline][errors]") {
  CHECK(failure_of("PING\r\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of("SET k v\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of("*1\r\n$4\r\nPING\r\nPING\r\n") == fails(errc::unknown_type, 14));
}

TEST_CASE("with allow_inline, lines inside a multibulk are still typed", "[resp][inline]") {
  const auto o = inline_options();
  CHECK(failure_of("*1\r\nPING\r\n", o) == fails(errc::unknown_type, 4));
  CHECK(failure_of("*1\r\n$4\r\nPING\r\n", o) == failure{});
}
