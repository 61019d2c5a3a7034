// Strict validation: each malformed input gets its own errc and the exact stream offset
// of the byte it blames, the same whichever way the input is split. Payload errors
// (numbers, booleans, lengths) blame the first byte of the payload; structural errors
// blame the byte where the structure breaks.
#include <string>

#include "helpers.hpp"

using namespace resp_test;
using lockscope::resp::decoder;
using lockscope::resp::decoder_options;
using lockscope::resp::errc;
using lockscope::resp::type;

// ---------------------------------------------------------------- integers

TEST_CASE("integer: sign only, junk and empty are invalid_integer", "[resp][errors]") {
  CHECK(failure_of(":\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":-\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":+\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":12a\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(": 1\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":1 \r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":1.0\r\n") == fails(errc::invalid_integer, 1));
  CHECK(failure_of(":--1\r\n") == fails(errc::invalid_integer, 1));
  // The offset is in the whole stream, not in the message.
  CHECK(failure_of("+OK\r\n:x\r\n") == fails(errc::invalid_integer, 6));
  CHECK(failure_of("*2\r\n:1\r\n:1x\r\n") == fails(errc::invalid_integer, 9));
}

TEST_CASE("integer: LLONG_MAX and LLONG_MIN pass, one past each is integer_overflow", "[resp][errors][hiredis]") {
  CHECK(failure_of(":9223372036854775807\r\n") == failure{});
  CHECK(failure_of(":-9223372036854775808\r\n") == failure{});
  CHECK(failure_of(":9223372036854775808\r\n") == fails(errc::integer_overflow, 1));
  CHECK(failure_of(":-9223372036854775809\r\n") == fails(errc::integer_overflow, 1));
  CHECK(failure_of(":99999999999999999999999999\r\n") == fails(errc::integer_overflow, 1));
  CHECK(failure_of(":18446744073709551616\r\n") == fails(errc::integer_overflow, 1));
}

// ---------------------------------------------------------------- doubles, booleans, null, big numbers

TEST_CASE("double: malformed values are invalid_double", "[resp][errors]") {
  for (const char* text : {"", "abc", "1e", "1e+", "-", "+", ".", "e5", "1.5.1", "1e5.5", "1x", " 1", "1 ", "0x10",
                           "nan(1)", "infi", "--1", "1,5", "in f"}) {
    INFO("double payload: \"" << text << "\"");
    CHECK(failure_of("," + std::string(text) + "\r\n") == fails(errc::invalid_double, 1));
  }
  CHECK(failure_of(":1\r\n,abc\r\n") == fails(errc::invalid_double, 5));
}

TEST_CASE("boolean: anything but t or f is invalid_boolean", "[resp][errors]") {
  for (const char* text : {"", "x", "T", "F", "1", "0", "tt", "true", " t"}) {
    INFO("boolean payload: \"" << text << "\"");
    CHECK(failure_of("#" + std::string(text) + "\r\n") == fails(errc::invalid_boolean, 1));
  }
}

TEST_CASE("null with a payload is invalid_null", "[resp][errors]") {
  CHECK(failure_of("_x\r\n") == fails(errc::invalid_null, 1));
  CHECK(failure_of("_ \r\n") == fails(errc::invalid_null, 1));
  CHECK(failure_of("*1\r\n_0\r\n") == fails(errc::invalid_null, 5));
}

TEST_CASE("big number: an optional sign and digits only", "[resp][errors]") {
  for (const char* text : {"", "-", "+", "12a", "1.5", " 1", "1e3", "--1"}) {
    INFO("big number payload: \"" << text << "\"");
    CHECK(failure_of("(" + std::string(text) + "\r\n") == fails(errc::invalid_big_number, 1));
  }
  CHECK(failure_of("(+123\r\n") == failure{});
}

// ---------------------------------------------------------------- CRLF and text

TEST_CASE("the CRLF after every bulk body is checked", "[resp][errors][peers]") {
  // Offset of the first byte that is not the expected CR, or of the byte after the CR.
  CHECK(failure_of("$3\r\nabcXY") == fails(errc::missing_crlf, 7));
  CHECK(failure_of("$3\r\nabc\rX") == fails(errc::missing_crlf, 8));
  CHECK(failure_of("$3\r\nabc\n\r") == fails(errc::missing_crlf, 7));
  CHECK(failure_of("$3\r\nabcd\r\n") == fails(errc::missing_crlf, 7));
  CHECK(failure_of("$0\r\nX\r\n") == fails(errc::missing_crlf, 4));
  CHECK(failure_of("!3\r\nERRXY") == fails(errc::missing_crlf, 7));
  CHECK(failure_of("=5\r\ntxt:aXY") == fails(errc::missing_crlf, 9));
  CHECK(failure_of("*2\r\n$1\r\na\r\n$1\r\nbc\r\n") == fails(errc::missing_crlf, 16));
  CHECK(failure_of("$?\r\n;3\r\nabcX\r\n") == fails(errc::missing_crlf, 11));
}

TEST_CASE("a header line must end in CRLF, not a bare LF", "[resp][errors]") {
  CHECK(failure_of("+OK\n") == fails(errc::missing_crlf, 3));
  CHECK(failure_of(":1\n") == fails(errc::missing_crlf, 2));
  CHECK(failure_of("*1\n:1\r\n") == fails(errc::missing_crlf, 2));
  CHECK(failure_of("$3\nabc\r\n") == fails(errc::missing_crlf, 2));
  // An LF inside a simple string ends the line early.
  CHECK(failure_of("+O\nK\r\n") == fails(errc::missing_crlf, 2));
}

TEST_CASE("a CR inside a simple string or error is invalid_simple_string", "[resp][errors]") {
  CHECK(failure_of("+O\rK\r\n") == fails(errc::invalid_simple_string, 2));
  CHECK(failure_of("-E\rRR\r\n") == fails(errc::invalid_simple_string, 2));
  CHECK(failure_of("+\r\r\n") == fails(errc::invalid_simple_string, 1));
  CHECK(failure_of("*1\r\n+abc\rd\r\n") == fails(errc::invalid_simple_string, 8));
}

TEST_CASE("verbatim string: three format bytes then ':'", "[resp][errors]") {
  CHECK(failure_of("=5\r\ntxt:a\r\n") == failure{});
  CHECK(failure_of("=5\r\ntxtxa\r\n") == fails(errc::invalid_verbatim, 7));
  CHECK(failure_of("=5\r\n:xt:a\r\n") == fails(errc::invalid_verbatim, 4));
  CHECK(failure_of("=5\r\nt t:a\r\n") == fails(errc::invalid_verbatim, 5));
  CHECK(failure_of("=6\r\nt\rt:ab\r\n") == fails(errc::invalid_verbatim, 5));
  // Shorter than "xxx:" cannot hold a format.
  CHECK(failure_of("=3\r\ntxt\r\n") == fails(errc::invalid_verbatim, 1));
  CHECK(failure_of("=0\r\n\r\n") == fails(errc::invalid_verbatim, 1));
  CHECK(failure_of("+x\r\n=3\r\ntxt\r\n") == fails(errc::invalid_verbatim, 5));
}

TEST_CASE("an unknown type byte is unknown_type at that byte", "[resp][errors]") {
  CHECK(failure_of("@foo\r\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of("+OK\r\n?\r\n") == fails(errc::unknown_type, 5));
  CHECK(failure_of("*1\r\nx\r\n") == fails(errc::unknown_type, 4));
  CHECK(failure_of("\r\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of("\n") == fails(errc::unknown_type, 0));
  // ';' is only meaningful inside a streamed string.
  CHECK(failure_of(";3\r\nabc\r\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of(std::string("\0\r\n", 3)) == fails(errc::unknown_type, 0));
  // The bad type byte is blamed before the missing CR at the end of its line.
  CHECK(failure_of("GET k\n") == fails(errc::unknown_type, 0));
  CHECK(failure_of("+OK\r\nx\n") == fails(errc::unknown_type, 5));
}

// ---------------------------------------------------------------- streamed forms

TEST_CASE("'.' outside a streamed aggregate is unexpected_stream_end", "[resp][errors][streamed]") {
  CHECK(failure_of(".\r\n") == fails(errc::unexpected_stream_end, 0));
  CHECK(failure_of("*2\r\n:1\r\n.\r\n") == fails(errc::unexpected_stream_end, 8));
  CHECK(failure_of("*?\r\n*1\r\n.\r\n") == fails(errc::unexpected_stream_end, 8));
  CHECK(failure_of("*?\r\n.x\r\n") == fails(errc::unexpected_stream_end, 4));
  CHECK(failure_of("*?\r\n:1\r\n.\r\n.\r\n") == fails(errc::unexpected_stream_end, 11));
}

TEST_CASE("'.' after a map key in %? is unexpected_stream_end", "[resp][errors][streamed]") {
  CHECK(failure_of("%?\r\n+k\r\n.\r\n") == fails(errc::unexpected_stream_end, 8));
  CHECK(failure_of("%?\r\n+k\r\n+v\r\n+k2\r\n.\r\n") == fails(errc::unexpected_stream_end, 17));
  CHECK(failure_of("%?\r\n+k\r\n+v\r\n.\r\n") == failure{});
}

TEST_CASE("'.' right after an attribute is unexpected_stream_end", "[resp][errors][streamed][attribute]") {
  // The attribute must annotate a value; the aggregate cannot end in between.
  CHECK(failure_of("*?\r\n|1\r\n+a\r\n+b\r\n.\r\n") == fails(errc::unexpected_stream_end, 16));
  CHECK(failure_of("%?\r\n+k\r\n+v\r\n|1\r\n+a\r\n+b\r\n.\r\n") == fails(errc::unexpected_stream_end, 24));
  CHECK(failure_of("~?\r\n|0\r\n.\r\n") == fails(errc::unexpected_stream_end, 8));
  CHECK(failure_of("*?\r\n|1\r\n+a\r\n+b\r\n:1\r\n.\r\n") == failure{});
}

TEST_CASE("inside $? only length-prefixed chunks are allowed", "[resp][errors][streamed]") {
  CHECK(failure_of("$?\r\n+x\r\n") == fails(errc::invalid_stream_chunk, 4));
  CHECK(failure_of("$?\r\n$1\r\nx\r\n") == fails(errc::invalid_stream_chunk, 4));
  CHECK(failure_of("$?\r\n.\r\n") == fails(errc::invalid_stream_chunk, 4));
  CHECK(failure_of("$?\r\n;x\r\n") == fails(errc::invalid_stream_chunk, 5));
  CHECK(failure_of("$?\r\n;\r\n") == fails(errc::invalid_stream_chunk, 5));
  CHECK(failure_of("$?\r\n;-1\r\n") == fails(errc::invalid_stream_chunk, 5));
  CHECK(failure_of("$?\r\n;1\r\na\r\n:1\r\n") == fails(errc::invalid_stream_chunk, 11));
  // The wrong type byte is blamed before the missing CR.
  CHECK(failure_of("$?\r\n+x\n") == fails(errc::invalid_stream_chunk, 4));
  CHECK(failure_of("$?\r\n;18446744073709551616\r\n") == fails(errc::length_overflow, 5));
  decoder_options small;
  small.limits.max_bulk_length = 4;
  CHECK(failure_of("$?\r\n;5\r\nabcde\r\n;0\r\n", small) == fails(errc::bulk_too_long, 5));
}

TEST_CASE("only arrays, sets and maps can be streamed", "[resp][errors][streamed]") {
  CHECK(failure_of(">?\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("|?\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("!?\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("=?\r\n") == fails(errc::invalid_length, 1));
}

// ---------------------------------------------------------------- push placement

TEST_CASE("push inside an aggregate is push_not_top_level", "[resp][errors]") {
  CHECK(failure_of("*1\r\n>1\r\n:1\r\n") == fails(errc::push_not_top_level, 4));
  CHECK(failure_of("%1\r\n+k\r\n>0\r\n") == fails(errc::push_not_top_level, 8));
  CHECK(failure_of("*?\r\n>0\r\n") == fails(errc::push_not_top_level, 4));
  CHECK(failure_of("|1\r\n>0\r\n") == fails(errc::push_not_top_level, 4));
  // After a top-level attribute the push is still at the top level.
  CHECK(failure_of("|1\r\n+a\r\n+b\r\n>1\r\n+x\r\n") == failure{});
}

// ---------------------------------------------------------------- lengths (hiredis parity)

TEST_CASE("lengths below -1 are invalid_length", "[resp][errors][hiredis]") {
  CHECK(failure_of("$-2\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("*-2\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("$-100\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("$-0\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("+OK\r\n*-2\r\n") == fails(errc::invalid_length, 6));
}

TEST_CASE("malformed lengths are invalid_length", "[resp][errors]") {
  CHECK(failure_of("$\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("$1a\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("$+1\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("$ 1\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("*\r\n") == fails(errc::invalid_length, 1));
  CHECK(failure_of("%x\r\n") == fails(errc::invalid_length, 1));
}

TEST_CASE("a length of -1 is a null only after $ and *, not other types", "[resp][errors]") {
  for (const char* prefix : {"%", "~", ">", "|", "!", "="}) {
    INFO("prefix " << prefix);
    CHECK(failure_of(std::string(prefix) + "-1\r\n") == fails(errc::invalid_length, 1));
  }
  CHECK(failure_of("$-1\r\n") == failure{});
  CHECK(failure_of("*-1\r\n") == failure{});
}

TEST_CASE("lengths above 64 bits are length_overflow", "[resp][errors][hiredis]") {
  CHECK(failure_of("$18446744073709551616\r\n") == fails(errc::length_overflow, 1));
  CHECK(failure_of("*18446744073709551616\r\n") == fails(errc::length_overflow, 1));
  CHECK(failure_of("%99999999999999999999999\r\n") == fails(errc::length_overflow, 1));
  // UINT64_MAX itself fits, and is then over the configured limits.
  CHECK(failure_of("$18446744073709551615\r\n") == fails(errc::bulk_too_long, 1));
  CHECK(failure_of("*18446744073709551615\r\n") == fails(errc::too_many_elements, 1));
}

TEST_CASE("bulk lengths above max_bulk_length are bulk_too_long", "[resp][errors][hiredis]") {
  CHECK(failure_of("$9223372036854775808\r\n") == fails(errc::bulk_too_long, 1));
  CHECK(failure_of("$536870913\r\n") == fails(errc::bulk_too_long, 1));  // 512 MiB + 1
  CHECK(failure_of("$536870912\r\n") == failure{});                     // exactly 512 MiB, body pending
  decoder_options small;
  small.limits.max_bulk_length = 16;
  CHECK(failure_of("$17\r\n", small) == fails(errc::bulk_too_long, 1));
  CHECK(failure_of("!17\r\n", small) == fails(errc::bulk_too_long, 1));
  CHECK(failure_of("=17\r\n", small) == fails(errc::bulk_too_long, 1));
  CHECK(failure_of("*1\r\n$100\r\n", small) == fails(errc::bulk_too_long, 5));
}

TEST_CASE("aggregate counts above max_aggregate_elements are too_many_elements", "[resp][errors]") {
  CHECK(failure_of("*4294967296\r\n") == fails(errc::too_many_elements, 1));  // default limit 2^32-1
  CHECK(failure_of("*4294967295\r\n") == failure{});                          // at the limit, elements pending
  decoder_options small;
  small.limits.max_aggregate_elements = 3;
  CHECK(failure_of("*4\r\n", small) == fails(errc::too_many_elements, 1));
  CHECK(failure_of("~4\r\n", small) == fails(errc::too_many_elements, 1));
  CHECK(failure_of("%4\r\n", small) == fails(errc::too_many_elements, 1));
  CHECK(failure_of(">4\r\n", small) == fails(errc::too_many_elements, 1));
  CHECK(failure_of("|4\r\n", small) == fails(errc::too_many_elements, 1));
  CHECK(failure_of("*1\r\n*10\r\n", small) == fails(errc::too_many_elements, 5));
}

// ---------------------------------------------------------------- nesting (hiredis parity)

namespace {
std::string nested_arrays(int levels, const std::string& innermost = ":1\r\n") {
  std::string s;
  for (int i = 0; i < levels; ++i) s += "*1\r\n";
  return s + innermost;
}
}  // namespace

TEST_CASE("128 nested arrays decode, 129 are nesting_too_deep", "[resp][errors][hiredis]") {
  const auto ok = nodes_of(nested_arrays(128));
  REQUIRE(ok.size() == 129);
  CHECK(ok.back().depth == 128);
  CHECK(ok.back().has(kEnd));
  CHECK(failure_of(nested_arrays(129)) == fails(errc::nesting_too_deep, 128 * 4));
  // Every aggregate kind opens a level; streamed ones too.
  CHECK(failure_of(nested_arrays(128, "%1\r\n")) == fails(errc::nesting_too_deep, 512));
  CHECK(failure_of(nested_arrays(128, "*?\r\n")) == fails(errc::nesting_too_deep, 512));
  CHECK(failure_of(nested_arrays(128, "|1\r\n")) == fails(errc::nesting_too_deep, 512));
  // Empty and null aggregates open nothing.
  CHECK(failure_of(nested_arrays(128, "*0\r\n")) == failure{});
  CHECK(failure_of(nested_arrays(128, "*-1\r\n")) == failure{});
}

TEST_CASE("a custom smaller max_depth", "[resp][errors][hiredis]") {
  decoder_options options;
  options.limits.max_depth = 3;
  CHECK(failure_of(nested_arrays(3), options) == failure{});
  CHECK(failure_of(nested_arrays(4), options) == fails(errc::nesting_too_deep, 12));
  // A streamed string's chunks sit one level below it, so it needs a level too.
  CHECK(failure_of(nested_arrays(2, "$?\r\n;1\r\na\r\n;0\r\n"), options) == failure{});
  CHECK(failure_of(nested_arrays(3, "$?\r\n"), options) == fails(errc::nesting_too_deep, 12));
  // The limit applies to depth, not to the number of aggregates in a message.
  CHECK(failure_of("*3\r\n*1\r\n*1\r\n:1\r\n*1\r\n*1\r\n:1\r\n*0\r\n", options) == failure{});
  options.limits.max_depth = 0;
  CHECK(failure_of(":1\r\n+a\r\n", options) == failure{});
  CHECK(failure_of("*1\r\n:1\r\n", options) == fails(errc::nesting_too_deep, 0));
}

// ---------------------------------------------------------------- line length

TEST_CASE("a header line longer than max_line_length is line_too_long", "[resp][errors][hiredis]") {
  decoder_options options;
  options.limits.max_line_length = 8;
  // The offset is the line start + max_line_length + 1: the first byte that proves
  // the line cannot end in time.
  CHECK(failure_of("+abcdefgh\r\n", options) == fails(errc::line_too_long, 9));
  CHECK(failure_of("+abcdefghi", options) == fails(errc::line_too_long, 9));
  CHECK(failure_of("+abcdefghijklmnop", options) == fails(errc::line_too_long, 9));
  CHECK(failure_of("+OK\r\n$123456789012\r\n", options) == fails(errc::line_too_long, 14));
  // Nine bytes without a newline could still be "+abcdefg\r": not an error yet.
  CHECK(failure_of("+abcdefg\r", options) == failure{});
  CHECK(failure_of("+abcdefgh", options) == failure{});
}

TEST_CASE("line_too_long with the default limit when no newline ever comes", "[resp][errors][hiredis]") {
  const std::string endless = "+" + std::string(70000, 'a');
  // decode_every_way feeds it whole, byte by byte, in 1460-byte and 16 KiB chunks.
  CHECK(failure_of(endless) == fails(errc::line_too_long, 64 * 1024 + 1));
  CHECK(failure_of("+" + std::string(64 * 1024 - 1, 'a') + "\r\n") == failure{});
  CHECK(failure_of("+" + std::string(64 * 1024, 'a') + "\r\n") == fails(errc::line_too_long, 64 * 1024 + 1));
}

// ---------------------------------------------------------------- CRLF split across feeds

TEST_CASE("a CRLF split across feeds", "[resp][errors][hiredis][incremental]") {
  lockscope::resp::decoder d;
  recorder rec;
  SECTION("after a simple string") {
    CHECK(d.feed("+OK\r", rec) == 4);
    CHECK(rec.nodes.empty());
    CHECK_FALSE(d.at_message_boundary());
    CHECK(d.feed("\n", rec) == 1);
    REQUIRE(rec.nodes.size() == 1);
    CHECK(rec.nodes[0] == nd(type::simple_string, 0, 2, "OK", kEnd));
    CHECK(d.at_message_boundary());
  }
  SECTION("after a bulk body") {
    CHECK(d.feed("$3\r\nabc\r", rec) == 8);
    // The body is delivered as a partial piece; the final node waits for the LF.
    REQUIRE(rec.nodes.size() == 1);
    CHECK(rec.nodes[0].has(lockscope::resp::node_flags::partial));
    CHECK(rec.nodes[0].value == "abc");
    CHECK(d.feed("\n", rec) == 1);
    REQUIRE(rec.nodes.size() == 2);
    CHECK(rec.nodes[1].value.empty());
    CHECK(rec.nodes[1].value_offset == 3);
    CHECK(rec.nodes[1].flags == kEnd);
    CHECK(d.at_message_boundary());
  }
  SECTION("a bad byte after the split CR") {
    d.feed("$3\r\nabc\r", rec);
    CHECK_FALSE(d.error());
    d.feed("x", rec);
    CHECK(d.error() == errc::missing_crlf);
    CHECK(d.error_offset() == 8);
  }
}

// ---------------------------------------------------------------- sticky errors

TEST_CASE("errors are sticky until reset, and reset restarts offsets at zero", "[resp][errors][hiredis]") {
  decoder d;
  recorder rec;
  CHECK(d.feed("+OK\r\n@\r\n+more\r\n", rec) > 0);
  CHECK(d.error() == errc::unknown_type);
  CHECK(d.error_offset() == 5);
  CHECK_FALSE(d.at_message_boundary());
  const auto before = rec.nodes.size();
  CHECK(before == 1);

  // Nothing is consumed while the error stands.
  CHECK(d.feed("+OK\r\n", rec) == 0);
  CHECK(d.feed(":1\r\n", rec) == 0);
  CHECK(rec.nodes.size() == before);
  CHECK(d.error() == errc::unknown_type);
  CHECK(d.error_offset() == 5);

  d.reset();
  CHECK_FALSE(d.error());
  CHECK(d.offset() == 0);
  CHECK(d.at_message_boundary());
  CHECK(d.feed("+OK\r\n", rec) == 5);
  CHECK(rec.nodes.back() == nd(type::simple_string, 0, 2, "OK", kEnd));
  CHECK(d.offset() == 5);
  d.feed(":1x\r\n", rec);
  CHECK(d.error() == errc::invalid_integer);
  CHECK(d.error_offset() == 6);  // counted from the reset
}

TEST_CASE("reset in the middle of a message starts from a clean state", "[resp][errors]") {
  decoder d;
  recorder rec;
  d.feed("*3\r\n$10\r\nabc", rec);
  CHECK_FALSE(d.at_message_boundary());
  d.reset();
  CHECK(d.at_message_boundary());
  rec.nodes.clear();
  CHECK(d.feed("+OK\r\n", rec) == 5);
  REQUIRE(rec.nodes.size() == 1);
  CHECK(rec.nodes[0] == nd(type::simple_string, 0, 2, "OK", kEnd));
  // A half header line is forgotten too.
  d.feed("$12", rec);
  d.reset();
  CHECK(d.feed(":3\r\n", rec) == 4);
  CHECK(rec.nodes.back() == nd(type::integer, 0, 1, "3", kEnd, 3));
}

TEST_CASE("error codes carry a category and readable messages", "[resp][errors]") {
  const std::error_code ec = errc::missing_crlf;
  CHECK(ec.category() == lockscope::resp::category());
  CHECK(std::string(ec.category().name()) == "lockscope.resp");
  CHECK(ec.message() == "expected CRLF");
  for (int e = static_cast<int>(errc::unknown_type); e <= static_cast<int>(errc::unexpected_stream_end); ++e) {
    INFO("errc " << e);
    CHECK(lockscope::resp::category().message(e) != "unknown lockscope.resp error");
  }
  CHECK(lockscope::resp::category().message(999) == "unknown lockscope.resp error");
}

// ---------------------------------------------------------------- cases other decoders get wrong

TEST_CASE("peers are wrong: bulk CRLF, $-1, *? and attributes", "[resp][errors][peers]") {
  // Some decoders skip the two bytes after a bulk body without looking at them.
  CHECK(failure_of("$3\r\nabcXY") == fails(errc::missing_crlf, 7));
  // Some treat $-1 as a zero-length string or an error.
  CHECK(nodes_of("$-1\r\n") == std::vector{nd(type::null, 0, 0, "", lockscope::resp::node_flags::null_bulk | kEnd)});
  // Some reject streamed aggregates.
  CHECK(failure_of("*?\r\n:1\r\n.\r\n") == failure{});
  // Some end the message at the attribute.
  const outcome o = decode_every_way("|1\r\n+a\r\n+b\r\n");
  CHECK_FALSE(o.at_boundary);
  REQUIRE(o.nodes.size() == 3);
  CHECK_FALSE(o.nodes.back().has(kEnd));
}

// ---------------------------------------------------------------- value_builder and hostile counts

TEST_CASE("parse() does not reserve memory from untrusted lengths and counts", "[resp][errors][limits]") {
  // The headers alone announce gigabytes; nothing may be allocated for them up front
  // (under ASan an attempt aborts the test, elsewhere it throws std::bad_alloc).
  std::error_code ec;
  CHECK(lockscope::resp::parse("*4294967295\r\n:1\r\n", ec).empty());
  CHECK_FALSE(ec);
  CHECK(lockscope::resp::parse("%4294967295\r\n+k\r\n", ec).empty());
  CHECK_FALSE(ec);
  CHECK(lockscope::resp::parse("$536870912\r\nabc", ec).empty());
  CHECK_FALSE(ec);
  CHECK(lockscope::resp::parse("*1\r\n$536870912\r\nabc", ec).empty());
  CHECK_FALSE(ec);
}
