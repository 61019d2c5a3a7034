// Messages as JSON and as text lines.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "lockscope/ingest/message.hpp"
#include "lockscope/ingest/output.hpp"
#include "lockscope/resp/decoder.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

struct message_filler final : lockscope::resp::handler {
  message m;
  std::size_t max = 1u << 20;
  void on_node(const lockscope::resp::node& n) override { m.add(n, max); }
};

// Decodes one RESP message, fed one byte at a time (bulks arrive in pieces).
message decode(std::string_view wire, std::size_t max = 1u << 20) {
  lockscope::resp::decoder d;
  message_filler f;
  f.max = max;
  for (char c : wire) d.feed(std::string_view(&c, 1), f);
  REQUIRE_FALSE(d.error());
  return f.m;
}

std::string json(std::string_view wire) {
  std::string out;
  append_json(out, decode(wire));
  return out;
}

}  // namespace

TEST_CASE("RESP2 and RESP3 values as JSON", "[output]") {
  CHECK(json("+OK\r\n") == "\"OK\"");
  CHECK(json("-ERR no\r\n") == "\"ERR no\"");
  CHECK(json(":-42\r\n") == "-42");
  CHECK(json("$-1\r\n") == "null");
  CHECK(json("*-1\r\n") == "null");
  CHECK(json("_\r\n") == "null");
  CHECK(json("#t\r\n") == "true");
  CHECK(json(",3.25\r\n") == "3.25");
  CHECK(json(",inf\r\n") == "\"inf\"");
  CHECK(json(",-nan\r\n") == "\"-nan\"");
  CHECK(json("(12345678901234567890123\r\n") == "\"12345678901234567890123\"");
  CHECK(json("=8\r\ntxt:abcd\r\n") == "\"abcd\"");
  CHECK(json("!5\r\nERR x\r\n") == "\"ERR x\"");
  CHECK(json("*3\r\n:1\r\n*1\r\n$1\r\na\r\n_\r\n") == "[1,[\"a\"],null]");
  CHECK(json("%2\r\n$1\r\nk\r\n:1\r\n:2\r\n~1\r\n#f\r\n") == "{\"k\":1,\"2\":[false]}");
  CHECK(json(">2\r\n$7\r\nmessage\r\n$1\r\n0\r\n") == "[\"message\",\"0\"]");
  CHECK(json("|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n") == "\"v\"");  // attributes dropped
  CHECK(json("$?\r\n;2\r\nab\r\n;1\r\nc\r\n;0\r\n") == "\"abc\"");
  CHECK(json("*?\r\n:1\r\n:2\r\n.\r\n") == "[1,2]");
}

TEST_CASE("JSON strings escape quotes, controls and invalid UTF-8", "[output]") {
  std::string out;
  append_json_string(out, std::string_view("a\"b\\c\n\r\t\x01\x7f", 10));
  CHECK(out == "\"a\\\"b\\\\c\\n\\r\\t\\u0001\x7f\"");
  out.clear();
  append_json_string(out, "caf\xc3\xa9 \xe2\x86\x92 \xff\xc3");
  CHECK(out == "\"caf\xc3\xa9 \xe2\x86\x92 \\u00ff\\u00c3\"");
  // Long strings go through the word-at-a-time path and the repeat cache.
  const std::string long_text = std::string(200, 'x') + "\"" + std::string(100, 'y');
  for (int i = 0; i < 2; ++i) {
    out.clear();
    append_json_string(out, long_text);
    CHECK(out == "\"" + std::string(200, 'x') + "\\\"" + std::string(100, 'y') + "\"");
  }
  out.clear();
  append_json_string(out, std::string(150, 'z') + "\x80");
  CHECK(out == "\"" + std::string(150, 'z') + "\\u0080\"");
}

TEST_CASE("message text is capped per message and truncation is counted", "[output]") {
  const message m = decode("$10\r\n0123456789\r\n", 4);
  REQUIRE(m.root_node() != nullptr);
  CHECK(m.text(*m.root_node()) == "0123");
  CHECK(m.truncated_bytes() == 6);
  CHECK(m.root_node()->length == 10);
}

TEST_CASE("elements past the node cap are counted once each, even when they arrive in pieces", "[output]") {
  // Fed a byte at a time, every bulk string comes in several pieces: each dropped one is
  // still one element (its pieces were counted as elements of their own).
  std::string wire = "*40\r\n";
  for (int i = 0; i < 40; ++i) wire += "$3\r\nabc\r\n";
  const message m = decode(wire, 64);  // 64 / 16: the root and 3 elements
  CHECK(m.dropped_nodes() == 37);
  CHECK(m.truncated_bytes() == 37 * 3);
}

TEST_CASE("to_cli_line writes redis-cli's form on one line", "[output]") {
  CHECK(to_cli_line(decode("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n")) == "1) \"message\" 2) \"ch\" 3) \"0\"");
  CHECK(to_cli_line(decode(":7\r\n")) == "(integer) 7");
  CHECK(to_cli_line(decode("$-1\r\n")) == "(nil)");
}

TEST_CASE("exchanges as text and JSON lines", "[output]") {
  const endpoint client = ep("10.0.0.1", 52000);
  const endpoint server = ep("10.0.0.2", 16379);
  const message reply = decode("$-1\r\n");
  const std::string_view args[] = {"EVAL", "if (redis.call('exists', KEYS[1]) == 0) then return nil; end;", "1",
                                   "myLock", "6000", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"};
  exchange e;
  e.client = &client;
  e.server = &server;
  e.request_us = 1'700'000'000'123'456;
  e.reply_us = e.request_us + 71;
  e.command = args;
  e.reply = &reply;
  std::string text;
  append_text_line(text, e);
  CHECK(text == "2023-11-14 22:13:20.123456 10.0.0.1:52000 → 10.0.0.2:16379 EVAL \"if (redis.call('exists', KEYS[1]) == 0) …\" 1 "
                "myLock 6000 80e6…:12 ⇒ (nil) [71 µs]");
  std::string line;
  append_jsonl(line, e);
  CHECK(line == "{\"ts\":1700000000.123456,\"client\":\"10.0.0.1:52000\",\"server\":\"10.0.0.2:16379\",\"command\":[\"EVAL\","
                "\"if (redis.call('exists', KEYS[1]) == 0) then return nil; end;\",\"1\",\"myLock\",\"6000\","
                "\"80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12\"],\"reply_type\":\"null\",\"reply\":null,\"latency_us\":71,"
                "\"kind\":\"exchange\"}");
  e.reply = nullptr;
  e.reply_us = -1;
  line.clear();
  append_jsonl(line, e);
  CHECK_THAT(line, Catch::EndsWith(",\"reply_type\":\"none\",\"reply\":null,\"latency_us\":null,\"kind\":\"exchange\"}"));
  const message push = decode(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n");
  exchange p;
  p.kind = exchange_kind::push;
  p.client = &client;
  p.server = &server;
  p.request_us = 1'700'000'000'000'000;
  p.reply = &push;
  text.clear();
  append_text_line(text, p);
  CHECK(text == "2023-11-14 22:13:20.000000 10.0.0.1:52000 ← 10.0.0.2:16379 push: message ch 0");
  line.clear();
  append_jsonl(line, p);
  CHECK(line == "{\"ts\":1700000000.000000,\"client\":\"10.0.0.1:52000\",\"server\":\"10.0.0.2:16379\",\"command\":[],"
                "\"reply_type\":\"push\",\"reply\":[\"message\",\"ch\",\"0\"],\"latency_us\":null,\"kind\":\"push\"}");
}
