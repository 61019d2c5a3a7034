// Every RESP2 and RESP3 type: the exact node stream the decoder emits (checked under
// every split strategy) and the value tree value_builder makes of it.
#include <cmath>
#include <string>

#include "helpers.hpp"

using namespace resp_test;
using lockscope::resp::type;
namespace flags = lockscope::resp::node_flags;
using lockscope::resp::unknown_length;
using lockscope::resp::value;

using nodes = std::vector<recorded_node>;

// ---------------------------------------------------------------- RESP2 types

TEST_CASE("RESP2 simple string, including empty", "[resp][types]") {
  CHECK(nodes_of("+OK\r\n") == nodes{nd(type::simple_string, 0, 2, "OK", kEnd)});
  CHECK(nodes_of("+\r\n") == nodes{nd(type::simple_string, 0, 0, "", kEnd)});
  // Any byte but CR and LF is text.
  CHECK(nodes_of("+a b\tc\x01\xff\r\n") == nodes{nd(type::simple_string, 0, 7, "a b\tc\x01\xff", kEnd)});
}

TEST_CASE("RESP2 simple error", "[resp][types]") {
  CHECK(nodes_of("-ERR unknown command 'foo'\r\n") ==
        nodes{nd(type::simple_error, 0, 25, "ERR unknown command 'foo'", kEnd)});
  CHECK(nodes_of("-\r\n") == nodes{nd(type::simple_error, 0, 0, "", kEnd)});
}

TEST_CASE("RESP2 integers up to the int64 limits", "[resp][types]") {
  CHECK(nodes_of(":0\r\n") == nodes{nd(type::integer, 0, 1, "0", kEnd, 0)});
  CHECK(nodes_of(":-1\r\n") == nodes{nd(type::integer, 0, 2, "-1", kEnd, -1)});
  CHECK(nodes_of(":1000\r\n") == nodes{nd(type::integer, 0, 4, "1000", kEnd, 1000)});
  CHECK(nodes_of(":9223372036854775807\r\n") ==
        nodes{nd(type::integer, 0, 19, "9223372036854775807", kEnd, INT64_MAX)});
  CHECK(nodes_of(":-9223372036854775808\r\n") ==
        nodes{nd(type::integer, 0, 20, "-9223372036854775808", kEnd, INT64_MIN)});
  // The documented grammar allows a '+' sign and leading zeros.
  CHECK(nodes_of(":+5\r\n") == nodes{nd(type::integer, 0, 2, "+5", kEnd, 5)});
  CHECK(nodes_of(":007\r\n") == nodes{nd(type::integer, 0, 3, "007", kEnd, 7)});
}

TEST_CASE("RESP2 bulk strings: empty, binary, CRLF inside the body", "[resp][types]") {
  CHECK(nodes_of("$5\r\nhello\r\n") == nodes{nd(type::bulk_string, 0, 5, "hello", kEnd)});
  CHECK(nodes_of("$0\r\n\r\n") == nodes{nd(type::bulk_string, 0, 0, "", kEnd)});
  CHECK(nodes_of("$4\r\n\r\n\r\n\r\n") == nodes{nd(type::bulk_string, 0, 4, "\r\n\r\n", kEnd)});
  const std::string binary("\0\x01\xfe\xff", 4);
  CHECK(nodes_of("$4\r\n" + binary + "\r\n") == nodes{nd(type::bulk_string, 0, 4, binary, kEnd)});
}

TEST_CASE("RESP2 null bulk string $-1 and null array *-1", "[resp][types]") {
  CHECK(nodes_of("$-1\r\n") == nodes{nd(type::null, 0, 0, "", flags::null_bulk | kEnd)});
  CHECK(nodes_of("*-1\r\n") == nodes{nd(type::null, 0, 0, "", flags::null_array | kEnd)});
  CHECK(nodes_of("*3\r\n$-1\r\n*-1\r\n:1\r\n") == nodes{
                                                      nd(type::array, 0, 3),
                                                      nd(type::null, 1, 0, "", flags::null_bulk),
                                                      nd(type::null, 1, 0, "", flags::null_array),
                                                      nd(type::integer, 1, 1, "1", kEnd, 1),
                                                  });
  const auto values = values_of("$-1\r\n*-1\r\n");
  REQUIRE(values.size() == 2);
  CHECK(values[0].is_null());
  CHECK(values[0].flags == flags::null_bulk);
  CHECK(values[1].is_null());
  CHECK(values[1].flags == flags::null_array);
}

TEST_CASE("RESP2 arrays: flat, empty, nested", "[resp][types]") {
  CHECK(nodes_of("*2\r\n$3\r\nfoo\r\n:1\r\n") == nodes{
                                                     nd(type::array, 0, 2),
                                                     nd(type::bulk_string, 1, 3, "foo"),
                                                     nd(type::integer, 1, 1, "1", kEnd, 1),
                                                 });
  // An empty array is a whole message on its own.
  CHECK(nodes_of("*0\r\n") == nodes{nd(type::array, 0, 0, "", kEnd)});
  CHECK(nodes_of("*0\r\n*0\r\n") == nodes{nd(type::array, 0, 0, "", kEnd), nd(type::array, 0, 0, "", kEnd)});
  CHECK(nodes_of("*2\r\n*2\r\n:1\r\n+a\r\n*0\r\n") == nodes{
                                                            nd(type::array, 0, 2),
                                                            nd(type::array, 1, 2),
                                                            nd(type::integer, 2, 1, "1", 0, 1),
                                                            nd(type::simple_string, 2, 1, "a"),
                                                            nd(type::array, 1, 0, "", kEnd),
                                                        });
  // The message ends with the innermost last element, however deep.
  CHECK(nodes_of("*1\r\n*1\r\n*1\r\n:7\r\n") == nodes{
                                                      nd(type::array, 0, 1),
                                                      nd(type::array, 1, 1),
                                                      nd(type::array, 2, 1),
                                                      nd(type::integer, 3, 1, "7", kEnd, 7),
                                                  });
}

TEST_CASE("several messages in one buffer each end separately", "[resp][types]") {
  const auto n = nodes_of("+OK\r\n*1\r\n:1\r\n$1\r\nx\r\n");
  REQUIRE(n.size() == 4);
  CHECK(n[0].has(kEnd));
  CHECK_FALSE(n[1].has(kEnd));
  CHECK(n[2].has(kEnd));
  CHECK(n[3].has(kEnd));
  CHECK(values_of("+OK\r\n*1\r\n:1\r\n$1\r\nx\r\n").size() == 3);
}

// ---------------------------------------------------------------- RESP3 types

TEST_CASE("RESP3 null _", "[resp][types]") {
  CHECK(nodes_of("_\r\n") == nodes{nd(type::null, 0, 0, "", kEnd)});
  const auto values = values_of("_\r\n");
  REQUIRE(values.size() == 1);
  CHECK(values[0] == value::nil());
}

TEST_CASE("RESP3 doubles: decimals, exponents, inf and nan", "[resp][types]") {
  for (const char* text : {"1.5", "-1e10", "0", "-0", "10", "1.23E+5", "inf", "-inf", "+inf", "nan", "-nan", "NAN",
                           "INF", "Infinity", "1.", ".5"}) {
    INFO(text);
    const std::string s = text;
    CHECK(nodes_of("," + s + "\r\n") == nodes{nd(type::double_, 0, s.size(), s, kEnd)});
  }
  const auto values = values_of(",1.5\r\n,-1e10\r\n,inf\r\n,-inf\r\n,nan\r\n,-nan\r\n,INF\r\n");
  REQUIRE(values.size() == 7);
  CHECK(values[0].as_double() == 1.5);
  CHECK(values[1].as_double() == -1e10);
  CHECK(values[2].as_double() == INFINITY);
  CHECK(values[3].as_double() == -INFINITY);
  CHECK(std::isnan(values[4].as_double()));
  CHECK(std::isnan(values[5].as_double()));
  CHECK(values[6].as_double() == INFINITY);
  CHECK_THROWS_AS(value::bulk("1").as_double(), std::logic_error);
}

TEST_CASE("RESP3 booleans", "[resp][types]") {
  CHECK(nodes_of("#t\r\n") == nodes{nd(type::boolean, 0, 1, "t", kEnd)});
  CHECK(nodes_of("#f\r\n") == nodes{nd(type::boolean, 0, 1, "f", kEnd)});
  const auto values = values_of("#t\r\n#f\r\n");
  REQUIRE(values.size() == 2);
  CHECK(values[0].boolean());
  CHECK_FALSE(values[1].boolean());
}

TEST_CASE("RESP3 blob error !", "[resp][types]") {
  CHECK(nodes_of("!21\r\nSYNTAX invalid syntax\r\n") ==
        nodes{nd(type::bulk_error, 0, 21, "SYNTAX invalid syntax", kEnd)});
  CHECK(nodes_of("!0\r\n\r\n") == nodes{nd(type::bulk_error, 0, 0, "", kEnd)});
  const auto values = values_of("!3\r\nERR\r\n-ERR\r\n");
  REQUIRE(values.size() == 2);
  CHECK(values[0].is_error());
  CHECK(values[1].is_error());
}

TEST_CASE("RESP3 verbatim string =", "[resp][types]") {
  CHECK(nodes_of("=15\r\ntxt:Some string\r\n") == nodes{nd(type::verbatim_string, 0, 15, "txt:Some string", kEnd)});
  // The smallest verbatim string: a format and an empty text.
  CHECK(nodes_of("=4\r\nmkd:\r\n") == nodes{nd(type::verbatim_string, 0, 4, "mkd:", kEnd)});
  const auto values = values_of("=15\r\ntxt:Some string\r\n");
  REQUIRE(values.size() == 1);
  CHECK(values[0].verbatim_format() == "txt");
  CHECK(values[0].verbatim_text() == "Some string");
  CHECK(values[0].is_string());
}

TEST_CASE("RESP3 big number (", "[resp][types]") {
  const std::string big = "3492890328409238509324850943850943825024385";
  CHECK(nodes_of("(" + big + "\r\n") == nodes{nd(type::big_number, 0, big.size(), big, kEnd)});
  CHECK(nodes_of("(-1\r\n") == nodes{nd(type::big_number, 0, 2, "-1", kEnd)});
  CHECK(nodes_of("(0\r\n") == nodes{nd(type::big_number, 0, 1, "0", kEnd)});
}

TEST_CASE("RESP3 map: length counts pairs, children are flattened", "[resp][types]") {
  CHECK(nodes_of("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n") == nodes{
                                                                      nd(type::map, 0, 2),
                                                                      nd(type::simple_string, 1, 5, "first"),
                                                                      nd(type::integer, 1, 1, "1", 0, 1),
                                                                      nd(type::simple_string, 1, 6, "second"),
                                                                      nd(type::integer, 1, 1, "2", kEnd, 2),
                                                                  });
  CHECK(nodes_of("%0\r\n") == nodes{nd(type::map, 0, 0, "", kEnd)});
  const auto values = values_of("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n");
  REQUIRE(values.size() == 1);
  CHECK(values[0] == value::aggregate(type::map, {value::simple("first"), value::number(1), value::simple("second"),
                                                  value::number(2)}));
}

TEST_CASE("RESP3 set ~", "[resp][types]") {
  CHECK(nodes_of("~3\r\n+a\r\n:1\r\n#t\r\n") == nodes{
                                                      nd(type::set, 0, 3),
                                                      nd(type::simple_string, 1, 1, "a"),
                                                      nd(type::integer, 1, 1, "1", 0, 1),
                                                      nd(type::boolean, 1, 1, "t", kEnd),
                                                  });
  CHECK(nodes_of("~0\r\n") == nodes{nd(type::set, 0, 0, "", kEnd)});
}

TEST_CASE("RESP3 push > at the top level", "[resp][types]") {
  CHECK(nodes_of(">3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$5\r\nhello\r\n") ==
        nodes{
            nd(type::push, 0, 3),
            nd(type::bulk_string, 1, 7, "message"),
            nd(type::bulk_string, 1, 3, "ch1"),
            nd(type::bulk_string, 1, 5, "hello", kEnd),
        });
  CHECK(nodes_of(">0\r\n") == nodes{nd(type::push, 0, 0, "", kEnd)});
}

TEST_CASE("RESP3 nested aggregates of every kind", "[resp][types]") {
  const std::string input =
      "*3\r\n"
      "%1\r\n+k\r\n~2\r\n:1\r\n_\r\n"
      "*1\r\n%0\r\n"
      "~1\r\n*2\r\n,2.5\r\n(9\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::array, 0, 3),
                               nd(type::map, 1, 1),
                               nd(type::simple_string, 2, 1, "k"),
                               nd(type::set, 2, 2),
                               nd(type::integer, 3, 1, "1", 0, 1),
                               nd(type::null, 3, 0),
                               nd(type::array, 1, 1),
                               nd(type::map, 2, 0),
                               nd(type::set, 1, 1),
                               nd(type::array, 2, 2),
                               nd(type::double_, 3, 3, "2.5"),
                               nd(type::big_number, 3, 1, "9", kEnd),
                           });
}

// ---------------------------------------------------------------- attributes

TEST_CASE("attribute at top level annotates the next value and does not end the message", "[resp][types][attribute]") {
  // The example from the RESP3 specification.
  const std::string input =
      "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
      "*2\r\n:2039123\r\n:9543892\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::attribute, 0, 1),
                               nd(type::simple_string, 1, 14, "key-popularity"),
                               nd(type::map, 1, 2),
                               nd(type::bulk_string, 2, 1, "a"),
                               nd(type::double_, 2, 6, "0.1923"),
                               nd(type::bulk_string, 2, 1, "b"),
                               nd(type::double_, 2, 6, "0.0012"),
                               nd(type::array, 0, 2),
                               nd(type::integer, 1, 7, "2039123", 0, 2039123),
                               nd(type::integer, 1, 7, "9543892", kEnd, 9543892),
                           });

  const auto values = values_of(input);
  REQUIRE(values.size() == 1);  // the attribute is not a message of its own
  CHECK(values[0].type == type::array);
  REQUIRE(values[0].attributes.size() == 2);
  CHECK(values[0].attributes[0] == value::simple("key-popularity"));
  CHECK(values[0].attributes[1].type == type::map);
  CHECK(values[0].elements == std::vector<value>{value::number(2039123), value::number(9543892)});
}

TEST_CASE("an attribute alone is not a complete message", "[resp][types][attribute]") {
  const outcome o = decode_every_way("|1\r\n+ttl\r\n:3600\r\n");
  CHECK_FALSE(o.error);
  CHECK_FALSE(o.at_boundary);
  for (const auto& n : o.nodes) CHECK_FALSE(n.has(kEnd));
  std::error_code ec;
  CHECK(lockscope::resp::parse("|1\r\n+ttl\r\n:3600\r\n", ec).empty());
  CHECK_FALSE(ec);
}

TEST_CASE("attribute inside an array is not counted as an element", "[resp][types][attribute]") {
  // The RESP3 specification's example: the array still has three elements.
  const std::string input = "*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::array, 0, 3),
                               nd(type::integer, 1, 1, "1", 0, 1),
                               nd(type::integer, 1, 1, "2", 0, 2),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 3, "ttl"),
                               nd(type::integer, 2, 4, "3600", 0, 3600),
                               nd(type::integer, 1, 1, "3", kEnd, 3),
                           });
  const auto values = values_of(input);
  REQUIRE(values.size() == 1);
  REQUIRE(values[0].elements.size() == 3);
  CHECK(values[0].elements[0].attributes.empty());
  CHECK(values[0].elements[2].attributes == std::vector<value>{value::simple("ttl"), value::number(3600)});
}

TEST_CASE("attribute on the last element of an array does not close the array", "[resp][types][attribute]") {
  const outcome o = decode_every_way("*1\r\n|1\r\n+a\r\n+b\r\n");
  CHECK_FALSE(o.error);
  CHECK_FALSE(o.at_boundary);
  CHECK(nodes_of("*1\r\n|1\r\n+a\r\n+b\r\n:5\r\n+next\r\n") == nodes{
                                                                      nd(type::array, 0, 1),
                                                                      nd(type::attribute, 1, 1),
                                                                      nd(type::simple_string, 2, 1, "a"),
                                                                      nd(type::simple_string, 2, 1, "b"),
                                                                      nd(type::integer, 1, 1, "5", kEnd, 5),
                                                                      nd(type::simple_string, 0, 4, "next", kEnd),
                                                                  });
}

TEST_CASE("attributes on map keys and map values", "[resp][types][attribute]") {
  const std::string input = "%1\r\n|1\r\n+kk\r\n+kv\r\n+key\r\n|1\r\n+vk\r\n+vv\r\n:1\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::map, 0, 1),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 2, "kk"),
                               nd(type::simple_string, 2, 2, "kv"),
                               nd(type::simple_string, 1, 3, "key"),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 2, "vk"),
                               nd(type::simple_string, 2, 2, "vv"),
                               nd(type::integer, 1, 1, "1", kEnd, 1),
                           });
  const auto values = values_of(input);
  REQUIRE(values.size() == 1);
  REQUIRE(values[0].elements.size() == 2);
  CHECK(values[0].elements[0].attributes == std::vector<value>{value::simple("kk"), value::simple("kv")});
  CHECK(values[0].elements[1].attributes == std::vector<value>{value::simple("vk"), value::simple("vv")});
}

TEST_CASE("empty attribute and an attribute whose values are aggregates", "[resp][types][attribute]") {
  CHECK(nodes_of("|0\r\n:1\r\n") == nodes{nd(type::attribute, 0, 0), nd(type::integer, 0, 1, "1", kEnd, 1)});
  const outcome pending = decode_every_way("|0\r\n");
  CHECK_FALSE(pending.at_boundary);
  CHECK(nodes_of("*1\r\n|0\r\n:1\r\n") ==
        nodes{nd(type::array, 0, 1), nd(type::attribute, 1, 0), nd(type::integer, 1, 1, "1", kEnd, 1)});
  // An attribute annotating a push message, with an aggregate inside the attribute.
  CHECK(nodes_of("|1\r\n+a\r\n*1\r\n:1\r\n>1\r\n+x\r\n") == nodes{
                                                                   nd(type::attribute, 0, 1),
                                                                   nd(type::simple_string, 1, 1, "a"),
                                                                   nd(type::array, 1, 1),
                                                                   nd(type::integer, 2, 1, "1", 0, 1),
                                                                   nd(type::push, 0, 1),
                                                                   nd(type::simple_string, 1, 1, "x", kEnd),
                                                               });
}

TEST_CASE("an attribute inside an attribute", "[resp][types][attribute]") {
  const std::string input = "|1\r\n|1\r\n+a\r\n+b\r\n+k\r\n+v\r\n:1\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::attribute, 0, 1),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 1, "a"),
                               nd(type::simple_string, 2, 1, "b"),
                               nd(type::simple_string, 1, 1, "k"),
                               nd(type::simple_string, 1, 1, "v"),
                               nd(type::integer, 0, 1, "1", kEnd, 1),
                           });
  const auto values = values_of(input);
  REQUIRE(values.size() == 1);
  REQUIRE(values[0].attributes.size() == 2);
  CHECK(values[0].attributes[0].attributes == std::vector<value>{value::simple("a"), value::simple("b")});
}

TEST_CASE("two attributes in a row both annotate the next value", "[resp][types][attribute]") {
  const std::string input = "*1\r\n|1\r\n+a\r\n+1\r\n|0\r\n|1\r\n+b\r\n+2\r\n:7\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::array, 0, 1),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 1, "a"),
                               nd(type::simple_string, 2, 1, "1"),
                               nd(type::attribute, 1, 0),
                               nd(type::attribute, 1, 1),
                               nd(type::simple_string, 2, 1, "b"),
                               nd(type::simple_string, 2, 1, "2"),
                               nd(type::integer, 1, 1, "7", kEnd, 7),
                           });
  const auto values = values_of(input + "|1\r\n+c\r\n+3\r\n:8\r\n");
  REQUIRE(values.size() == 2);
  REQUIRE(values[0].elements.size() == 1);
  CHECK(values[0].elements[0].attributes ==
        std::vector<value>{value::simple("a"), value::simple("1"), value::simple("b"), value::simple("2")});
  // Nothing carries over to the next message.
  CHECK(values[1].attributes == std::vector<value>{value::simple("c"), value::simple("3")});
}

// ---------------------------------------------------------------- streamed forms

TEST_CASE("streamed string $? with length-prefixed chunks and the zero-length terminator", "[resp][types][streamed]") {
  const std::string input = "$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;1\r\nd\r\n;0\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::bulk_string, 0, unknown_length, "", kStreamed),
                               nd(type::streamed_string_part, 1, 4, "Hell"),
                               nd(type::streamed_string_part, 1, 5, "o wor"),
                               nd(type::streamed_string_part, 1, 1, "d"),
                               nd(type::streamed_string_part, 1, 0, "", kEnd),
                           });
  const auto values = values_of(input);
  REQUIRE(values.size() == 1);
  CHECK(values[0].type == type::bulk_string);
  CHECK(values[0].flags == kStreamed);
  CHECK(values[0].text == "Hello word");
  REQUIRE(values[0].elements.size() == 3);
  CHECK(values[0].elements[1] == value::make(type::streamed_string_part, "o wor"));
}

TEST_CASE("empty streamed string and a streamed string with CRLF in a chunk", "[resp][types][streamed]") {
  CHECK(nodes_of("$?\r\n;0\r\n") == nodes{
                                        nd(type::bulk_string, 0, unknown_length, "", kStreamed),
                                        nd(type::streamed_string_part, 1, 0, "", kEnd),
                                    });
  CHECK(nodes_of("*2\r\n$?\r\n;2\r\n\r\n\r\n;0\r\n:1\r\n") ==
        nodes{
            nd(type::array, 0, 2),
            nd(type::bulk_string, 1, unknown_length, "", kStreamed),
            nd(type::streamed_string_part, 2, 2, "\r\n"),
            nd(type::streamed_string_part, 2, 0, ""),
            nd(type::integer, 1, 1, "1", kEnd, 1),
        });
}

TEST_CASE("streamed array *? ends with .", "[resp][types][streamed]") {
  CHECK(nodes_of("*?\r\n:1\r\n:2\r\n.\r\n") == nodes{
                                                   nd(type::array, 0, unknown_length, "", kStreamed),
                                                   nd(type::integer, 1, 1, "1", 0, 1),
                                                   nd(type::integer, 1, 1, "2", 0, 2),
                                                   nd(type::stream_end, 1, 0, "", kEnd),
                                               });
  CHECK(nodes_of("*?\r\n.\r\n") ==
        nodes{nd(type::array, 0, unknown_length, "", kStreamed), nd(type::stream_end, 1, 0, "", kEnd)});
  const auto values = values_of("*?\r\n:1\r\n.\r\n");
  REQUIRE(values.size() == 1);
  CHECK(values[0].flags == kStreamed);
  CHECK(values[0].elements == std::vector<value>{value::number(1)});
}

TEST_CASE("streamed set ~? and map %?", "[resp][types][streamed]") {
  CHECK(nodes_of("~?\r\n+a\r\n+b\r\n.\r\n") == nodes{
                                                   nd(type::set, 0, unknown_length, "", kStreamed),
                                                   nd(type::simple_string, 1, 1, "a"),
                                                   nd(type::simple_string, 1, 1, "b"),
                                                   nd(type::stream_end, 1, 0, "", kEnd),
                                               });
  CHECK(nodes_of("%?\r\n+a\r\n:1\r\n+b\r\n:2\r\n.\r\n") == nodes{
                                                               nd(type::map, 0, unknown_length, "", kStreamed),
                                                               nd(type::simple_string, 1, 1, "a"),
                                                               nd(type::integer, 1, 1, "1", 0, 1),
                                                               nd(type::simple_string, 1, 1, "b"),
                                                               nd(type::integer, 1, 1, "2", 0, 2),
                                                               nd(type::stream_end, 1, 0, "", kEnd),
                                                           });
  CHECK(nodes_of("%?\r\n.\r\n") ==
        nodes{nd(type::map, 0, unknown_length, "", kStreamed), nd(type::stream_end, 1, 0, "", kEnd)});
}

TEST_CASE("streamed aggregates nested in each other and in fixed ones", "[resp][types][streamed]") {
  const std::string input = "*2\r\n*?\r\n%?\r\n+k\r\n$?\r\n;1\r\nv\r\n;0\r\n.\r\n.\r\n*?\r\n.\r\n";
  CHECK(nodes_of(input) == nodes{
                               nd(type::array, 0, 2),
                               nd(type::array, 1, unknown_length, "", kStreamed),
                               nd(type::map, 2, unknown_length, "", kStreamed),
                               nd(type::simple_string, 3, 1, "k"),
                               nd(type::bulk_string, 3, unknown_length, "", kStreamed),
                               nd(type::streamed_string_part, 4, 1, "v"),
                               nd(type::streamed_string_part, 4, 0, ""),
                               nd(type::stream_end, 3, 0),
                               nd(type::stream_end, 2, 0),
                               nd(type::array, 1, unknown_length, "", kStreamed),
                               nd(type::stream_end, 2, 0, "", kEnd),
                           });
}

TEST_CASE("attribute inside a streamed map keeps key/value pairing", "[resp][types][streamed][attribute]") {
  // The attribute precedes the value; '.' is still legal after the value.
  CHECK(nodes_of("%?\r\n+k\r\n|1\r\n+a\r\n+b\r\n+v\r\n.\r\n") == nodes{
                                                                      nd(type::map, 0, unknown_length, "", kStreamed),
                                                                      nd(type::simple_string, 1, 1, "k"),
                                                                      nd(type::attribute, 1, 1),
                                                                      nd(type::simple_string, 2, 1, "a"),
                                                                      nd(type::simple_string, 2, 1, "b"),
                                                                      nd(type::simple_string, 1, 1, "v"),
                                                                      nd(type::stream_end, 1, 0, "", kEnd),
                                                                  });
}

// ---------------------------------------------------------------- values at configured limits

TEST_CASE("a bulk exactly at max_bulk_length is accepted", "[resp][types][limits]") {
  lockscope::resp::decoder_options options;
  options.limits.max_bulk_length = 16;
  const std::string body(16, 'x');
  CHECK(nodes_of("$16\r\n" + body + "\r\n", options) == nodes{nd(type::bulk_string, 0, 16, body, kEnd)});
  CHECK(nodes_of("!16\r\n" + body + "\r\n", options) == nodes{nd(type::bulk_error, 0, 16, body, kEnd)});
  CHECK(nodes_of("=16\r\ntxt:" + body.substr(4) + "\r\n", options) ==
        nodes{nd(type::verbatim_string, 0, 16, "txt:" + body.substr(4), kEnd)});
  CHECK(nodes_of("$?\r\n;16\r\n" + body + "\r\n;0\r\n", options) ==
        nodes{nd(type::bulk_string, 0, unknown_length, "", kStreamed), nd(type::streamed_string_part, 1, 16, body),
              nd(type::streamed_string_part, 1, 0, "", kEnd)});
  // Line length does not apply to bulk bodies.
  options.limits.max_line_length = 4;
  CHECK(nodes_of("$16\r\n" + body + "\r\n", options) == nodes{nd(type::bulk_string, 0, 16, body, kEnd)});
}

TEST_CASE("aggregates with exactly max_aggregate_elements are accepted", "[resp][types][limits]") {
  lockscope::resp::decoder_options options;
  options.limits.max_aggregate_elements = 3;
  CHECK(nodes_of("*3\r\n:1\r\n:2\r\n:3\r\n", options).size() == 4);
  CHECK(nodes_of("~3\r\n:1\r\n:2\r\n:3\r\n", options).size() == 4);
  CHECK(nodes_of(">3\r\n:1\r\n:2\r\n:3\r\n", options).size() == 4);
  // Maps and attributes are limited by their pair count, like hiredis does.
  CHECK(nodes_of("%3\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n", options).size() == 7);
  CHECK(nodes_of("|3\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n+v\r\n", options).size() == 8);
  // Streamed aggregates have no count, and are not limited by it.
  CHECK(nodes_of("*?\r\n:1\r\n:2\r\n:3\r\n:4\r\n.\r\n", options).size() == 6);
}

TEST_CASE("a line exactly at max_line_length is accepted", "[resp][types][limits]") {
  lockscope::resp::decoder_options options;
  options.limits.max_line_length = 8;  // the type byte and content; CRLF not counted
  CHECK(nodes_of("+abcdefg\r\n", options) == nodes{nd(type::simple_string, 0, 7, "abcdefg", kEnd)});
  CHECK(nodes_of(":1234567\r\n", options) == nodes{nd(type::integer, 0, 7, "1234567", kEnd, 1234567)});
}
