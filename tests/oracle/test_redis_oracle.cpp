// Real redis-server as the oracle for the decoder: every RESP3 type DEBUG PROTOCOL
// can produce, their RESP2 degradations, and a client-tracking invalidation push.
//
// For each reply the test pins the exact bytes redis 7.0.15 sends, then checks that
//  - the decoded value is exactly the expected one (type, text, flags, elements,
//    attributes),
//  - decoding the same bytes one byte at a time gives the same result as decoding
//    them at once,
//  - encoding the decoded values reproduces redis's bytes.
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/resp/encoder.hpp"
#include "lockscope/resp/value.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/decode.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using lockscope::resp::type;
using lockscope::resp::value;
using lockscope::test::resp_connection;

namespace {

// One server for the whole binary: each test uses fresh connections.
lockscope::test::redis_server& shared_server() {
  static lockscope::test::redis_server server;
  return server;
}

value attributed(value v, std::vector<value> attributes) {
  v.attributes = std::move(attributes);
  return v;
}

value resp2_null() {
  value v = value::nil();
  v.flags = lockscope::resp::node_flags::null_bulk;
  return v;
}

value boolean(bool b) { return value::make(type::boolean, b ? "t" : "f"); }

struct expectation {
  std::string_view name;       // the DEBUG PROTOCOL argument
  std::string_view wire;       // exactly what redis 7.0.15 sends
  std::vector<value> values;   // what it decodes to, in order
};

// Decodes `wire` as the test saw it arrive, at once and byte by byte.
void check_wire(std::string_view wire, const std::vector<value>& expected) {
  const auto whole = lockscope::test::decode_in_chunks(wire, 0);
  REQUIRE_FALSE(whole.error);
  CHECK(whole.at_message_boundary);
  CHECK(whole.consumed == wire.size());
  CHECK(whole.values == expected);

  const auto bytewise = lockscope::test::decode_in_chunks(wire, 1);
  CHECK_FALSE(bytewise.error);
  CHECK(bytewise.values == whole.values);
  CHECK(bytewise == whole);

  std::string reencoded;
  for (const value& v : whole.values) lockscope::resp::encode(reencoded, v);
  CHECK(reencoded == wire);
}

// Sends DEBUG PROTOCOL <name> and checks every value it produces.
void check_debug_protocol(resp_connection& c, const expectation& e) {
  c.send_command("DEBUG", "PROTOCOL", e.name);
  std::vector<value> received;
  std::string wire;
  for (std::size_t i = 0; i < e.values.size(); ++i) {
    received.push_back(c.read_value());
    wire += c.last_value_bytes();
  }
  CHECK(received == e.values);
  CHECK(wire == e.wire);
  // Nothing else follows: a second value would be decoded as part of the next check.
  CHECK(c.buffered_bytes() == 0);
  check_wire(wire, received);
}

const std::vector<expectation>& resp3_expectations() {
  static const std::vector<expectation> table = {
      {"string", "$11\r\nHello World\r\n", {value::bulk("Hello World")}},
      {"integer", ":12345\r\n", {value::number(12345)}},
      {"double", ",3.141\r\n", {value::make(type::double_, "3.141")}},
      {"bignum",
       "(1234567999999999999999999999999999999\r\n",
       {value::make(type::big_number, "1234567999999999999999999999999999999")}},
      {"null", "_\r\n", {value::nil()}},
      {"array",
       "*3\r\n:0\r\n:1\r\n:2\r\n",
       {value::aggregate(type::array, {value::number(0), value::number(1), value::number(2)})}},
      {"set",
       "~3\r\n:0\r\n:1\r\n:2\r\n",
       {value::aggregate(type::set, {value::number(0), value::number(1), value::number(2)})}},
      {"map",
       "%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
       {value::aggregate(type::map, {value::number(0), boolean(false), value::number(1), boolean(true),
                                     value::number(2), boolean(false)})}},
      {"attrib",
       "|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
       "$39\r\nSome real reply following the attribute\r\n",
       {attributed(value::bulk("Some real reply following the attribute"),
                   {value::bulk("key-popularity"),
                    value::aggregate(type::array, {value::bulk("key:123"), value::number(90)})})}},
      // A push, then the command's own reply: two top-level values.
      {"push",
       ">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n",
       {value::aggregate(type::push, {value::bulk("server-cpu-usage"), value::number(42)}),
        value::bulk("Some real reply following the push reply")}},
      {"verbatim",
       "=29\r\ntxt:This is a verbatim\nstring\r\n",
       {value::make(type::verbatim_string, "txt:This is a verbatim\nstring")}},
      {"true", "#t\r\n", {boolean(true)}},
      {"false", "#f\r\n", {boolean(false)}},
  };
  return table;
}

// Without HELLO 3 the same replies degrade to RESP2 shapes.
const std::vector<expectation>& resp2_expectations() {
  static const std::vector<expectation> table = {
      {"string", "$11\r\nHello World\r\n", {value::bulk("Hello World")}},
      {"integer", ":12345\r\n", {value::number(12345)}},
      {"double", "$5\r\n3.141\r\n", {value::bulk("3.141")}},
      {"bignum",
       "$37\r\n1234567999999999999999999999999999999\r\n",
       {value::bulk("1234567999999999999999999999999999999")}},
      {"null", "$-1\r\n", {resp2_null()}},
      {"array",
       "*3\r\n:0\r\n:1\r\n:2\r\n",
       {value::aggregate(type::array, {value::number(0), value::number(1), value::number(2)})}},
      {"set",
       "*3\r\n:0\r\n:1\r\n:2\r\n",
       {value::aggregate(type::array, {value::number(0), value::number(1), value::number(2)})}},
      // A flat key, value array; the booleans become integers.
      {"map",
       "*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
       {value::aggregate(type::array, {value::number(0), value::number(0), value::number(1), value::number(1),
                                       value::number(2), value::number(0)})}},
      // The attribute is dropped.
      {"attrib", "$39\r\nSome real reply following the attribute\r\n",
       {value::bulk("Some real reply following the attribute")}},
      // RESP2 has no push type: the command refuses.
      {"push", "-ERR RESP2 is not supported by this command\r\n",
       {value::error("ERR RESP2 is not supported by this command")}},
      // The format prefix is dropped.
      {"verbatim", "$25\r\nThis is a verbatim\nstring\r\n", {value::bulk("This is a verbatim\nstring")}},
      {"true", ":1\r\n", {value::number(1)}},
      {"false", ":0\r\n", {value::number(0)}},
  };
  return table;
}

value map_lookup(const value& map, std::string_view key) {
  REQUIRE(map.type == type::map);
  for (std::size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (map.elements[i].text == key) return map.elements[i + 1];
  }
  FAIL("no key " << key << " in " << lockscope::test::debug_string(map));
  return {};
}

}  // namespace

TEST_CASE("HELLO 3 switches the connection to RESP3", "[oracle][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  resp_connection c(shared_server().host(), shared_server().port());
  const value hello = c.command("HELLO", 3);
  CHECK(map_lookup(hello, "server") == value::bulk("redis"));
  CHECK(map_lookup(hello, "proto") == value::number(3));
  CHECK(map_lookup(hello, "modules") == value::aggregate(type::array, {}));
  check_wire(c.last_value_bytes(), {hello});
  // Versions other than the one the wire bytes below were recorded from may differ.
  WARN("redis-server version " << map_lookup(hello, "version").text);
}

TEST_CASE("DEBUG PROTOCOL over RESP3 decodes exactly", "[oracle][redis][resp3]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  REQUIRE(resp3_expectations().size() == 13);
  for (const expectation& e : resp3_expectations()) {
    DYNAMIC_SECTION("DEBUG PROTOCOL " << e.name) {
      resp_connection c(shared_server().host(), shared_server().port());
      REQUIRE(c.command("HELLO", 3).type == type::map);
      check_debug_protocol(c, e);
      // The connection is still in step: the next reply is the next command's.
      CHECK(c.command("PING") == value::simple("PONG"));
    }
  }
}

TEST_CASE("DEBUG PROTOCOL over RESP2 degrades to RESP2 shapes", "[oracle][redis][resp2]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  REQUIRE(resp2_expectations().size() == 13);
  for (const expectation& e : resp2_expectations()) {
    DYNAMIC_SECTION("DEBUG PROTOCOL " << e.name) {
      resp_connection c(shared_server().host(), shared_server().port());
      check_debug_protocol(c, e);
      CHECK(c.command("PING") == value::simple("PONG"));
    }
  }
}

TEST_CASE("every DEBUG PROTOCOL reply on one RESP3 connection, decoded as one stream", "[oracle][redis][resp3]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  resp_connection c(shared_server().host(), shared_server().port());
  REQUIRE(c.command("HELLO", 3).type == type::map);
  // Pipelined: the replies arrive back to back and must be split correctly.
  std::vector<value> expected;
  for (const expectation& e : resp3_expectations()) {
    c.send_command("DEBUG", "PROTOCOL", e.name);
    expected.insert(expected.end(), e.values.begin(), e.values.end());
  }
  std::string wire;
  std::vector<value> received;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    received.push_back(c.read_value());
    wire += c.last_value_bytes();
  }
  CHECK(received == expected);
  check_wire(wire, expected);
  for (std::size_t chunk : {2, 3, 7, 64}) {
    CAPTURE(chunk);
    CHECK(lockscope::test::decode_in_chunks(wire, chunk) == lockscope::test::decode_in_chunks(wire, 0));
  }
}

TEST_CASE("client tracking sends an invalidate push when a read key changes", "[oracle][redis][resp3]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const std::string key = "tracked:{lock}:key";
  resp_connection tracker(shared_server().host(), shared_server().port());
  resp_connection writer(shared_server().host(), shared_server().port());
  REQUIRE(tracker.command("HELLO", 3).type == type::map);
  REQUIRE(tracker.command("CLIENT", "TRACKING", "on") == value::simple("OK"));
  REQUIRE(tracker.command("GET", key).is_null());
  CHECK(tracker.last_value_bytes() == "_\r\n");

  REQUIRE(writer.command("SET", key, "v") == value::simple("OK"));

  const value push = tracker.read_value();
  const value expected =
      value::aggregate(type::push, {value::bulk("invalidate"), value::aggregate(type::array, {value::bulk(key)})});
  CHECK(push == expected);
  CHECK(tracker.last_value_bytes() ==
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n");
  check_wire(tracker.last_value_bytes(), {expected});

  // Tracking is one-shot: a second SET without a new GET sends nothing.
  REQUIRE(writer.command("SET", key, "w") == value::simple("OK"));
  CHECK(tracker.command("PING") == value::simple("PONG"));
}
