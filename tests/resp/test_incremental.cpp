// Incremental feeding: any split of the input gives the same nodes and verdict; large
// bulks stream through as pieces that point into the caller's buffer; pause() and
// at_message_boundary() behave as documented.
#include <string>

#include "helpers.hpp"

using namespace resp_test;
using lockscope::resp::decoder;
using lockscope::resp::decoder_options;
using lockscope::resp::errc;
using lockscope::resp::node;
using lockscope::resp::type;
namespace flags = lockscope::resp::node_flags;

namespace {

// Valid inputs covering every type, placed so that headers, bodies and CRLFs fall on
// chunk boundaries somewhere across the strategies.
std::vector<std::string> valid_corpus() {
  std::vector<std::string> corpus = {
      "+OK\r\n",
      "-ERR wrong\r\n",
      ":-9223372036854775808\r\n",
      "$5\r\nhello\r\n$0\r\n\r\n$-1\r\n",
      "*-1\r\n*0\r\n",
      "*2\r\n*2\r\n:1\r\n$2\r\n\r\n\r\n%1\r\n+k\r\n~1\r\n_\r\n",
      "_\r\n,1.5\r\n,-inf\r\n#t\r\n#f\r\n(123456789012345678901234567890\r\n",
      "!21\r\nSYNTAX invalid syntax\r\n=15\r\ntxt:Some string\r\n",
      ">3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n",
      "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
      "*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n",
      "$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;1\r\nd\r\n;0\r\n",
      "*?\r\n:1\r\n~?\r\n+a\r\n.\r\n%?\r\n+k\r\n$?\r\n;3\r\nabc\r\n;0\r\n.\r\n.\r\n",
  };
  // Bulks larger than one segment and larger than 16 KiB.
  std::string big(40000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) % 256);
  corpus.push_back("*2\r\n$40000\r\n" + big + "\r\n$3000\r\n" + big.substr(0, 3000) + "\r\n");
  corpus.push_back("$?\r\n;20000\r\n" + big.substr(0, 20000) + "\r\n;20000\r\n" + big.substr(20000) + "\r\n;0\r\n");
  // Everything above back to back, as one stream.
  std::string all;
  for (const auto& s : corpus) all += s;
  corpus.push_back(all);
  return corpus;
}

std::vector<std::string> invalid_corpus() {
  return {
      "+OK\r\n$3\r\nabcXY",
      "*2\r\n$40000\r\n" + std::string(40000, 'a') + "XY",
      "+OK\r\n:12a\r\n",
      "%?\r\n+k\r\n.\r\n",
      "*1\r\n>1\r\n:1\r\n",
      "+" + std::string(70000, 'x'),
      "$?\r\n;3\r\nabc\r\n+x\r\n",
      "=5\r\ntxtxa\r\n",
  };
}

}  // namespace

TEST_CASE("every split of a valid input yields the same nodes", "[resp][incremental]") {
  for (const std::string& input : valid_corpus()) {
    const outcome o = decode_every_way(input);
    CHECK_FALSE(o.error);
    CHECK(o.at_boundary);
    CHECK_FALSE(o.nodes.empty());
    CHECK(o.consumed == input.size());
  }
}

TEST_CASE("every split of an invalid input yields the same error and offset", "[resp][incremental]") {
  for (const std::string& input : invalid_corpus()) {
    const outcome o = decode_every_way(input);
    CHECK(o.error);
  }
}

TEST_CASE("every split of a truncated input leaves the same pending state", "[resp][incremental]") {
  const std::string full = "*3\r\n$5\r\nhello\r\n%1\r\n+k\r\n:1\r\n$?\r\n;2\r\nab\r\n;0\r\n";
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    const outcome o = decode_every_way(std::string_view(full).substr(0, cut));
    CHECK_FALSE(o.error);
    CHECK(o.at_boundary == (cut == 0));
  }
}

namespace {

// Checks that every piece of a bulk lies within the chunk being fed: the decoder hands
// out views of the caller's buffer and never copies the body.
class piece_checker : public lockscope::resp::handler {
 public:
  void on_node(const node& n) override {
    if (n.type != type::bulk_string) return;
    ++pieces;
    if (!n.value.empty()) {
      const char* begin = n.value.data();
      const char* end = begin + n.value.size();
      if (begin < chunk.data() || end > chunk.data() + chunk.size()) ++outside_chunk;
    }
    if (n.value_offset != received) ++gaps;
    received += n.value.size();
    for (char c : n.value) checksum = checksum * 31 + static_cast<unsigned char>(c);
    if (!n.is_partial()) {
      ++finals;
      final_length = n.length;
      ended = n.ends_message();
    }
  }
  std::string_view chunk;
  std::size_t pieces = 0, outside_chunk = 0, gaps = 0, finals = 0;
  std::uint64_t received = 0, final_length = 0, checksum = 0;
  bool ended = false;
};

}  // namespace

TEST_CASE("a 1 MiB bulk in 1460-byte segments arrives as unbuffered contiguous pieces", "[resp][incremental]") {
  const std::size_t size = 1024 * 1024;
  std::string body(size, '\0');
  std::uint64_t expected_checksum = 0;
  for (std::size_t i = 0; i < size; ++i) {
    body[i] = static_cast<char>((i * 7 + i / 251) % 256);
    expected_checksum = expected_checksum * 31 + static_cast<unsigned char>(body[i]);
  }
  const std::string wire = "$" + std::to_string(size) + "\r\n" + body + "\r\n";

  decoder d;
  piece_checker checker;
  std::size_t segments = 0;
  for (std::size_t at = 0; at < wire.size(); at += 1460) {
    // A fresh buffer per segment, as a capture loop would have.
    const std::string segment = wire.substr(at, 1460);
    checker.chunk = segment;
    REQUIRE(d.feed(segment, checker) == segment.size());
    ++segments;
    if (at + 1460 < wire.size()) CHECK((d.at_message_boundary() == false));
  }
  CHECK_FALSE(d.error());
  CHECK(d.at_message_boundary());
  CHECK(checker.outside_chunk == 0);
  CHECK(checker.gaps == 0);
  CHECK(checker.finals == 1);
  CHECK(checker.ended);
  CHECK(checker.received == size);
  CHECK(checker.final_length == size);
  CHECK(checker.checksum == expected_checksum);
  // One piece per segment that carries body bytes (at most one extra for the CRLF).
  CHECK(checker.pieces >= segments - 1);
  CHECK(checker.pieces <= segments + 1);
}

TEST_CASE("a bulk fed whole is one node viewing the fed buffer", "[resp][incremental]") {
  const std::string wire = "$5\r\nhello\r\n";
  struct : lockscope::resp::handler {
    void on_node(const node& n) override { data = n.value.data(); }
    const char* data = nullptr;
  } h;
  decoder d;
  d.feed(wire, h);
  CHECK(h.data == wire.data() + 4);
}

namespace {

// Records nodes and calls pause() on the node whose index is `pause_at`.
class pausing_recorder : public lockscope::resp::handler {
 public:
  explicit pausing_recorder(decoder& d) : d_(d) {}
  void on_node(const node& n) override {
    if (nodes.size() == pause_at) d_.pause();
    nodes.push_back(record(n));
  }
  std::size_t pause_at = SIZE_MAX;
  std::vector<recorded_node> nodes;

 private:
  decoder& d_;
};

}  // namespace

TEST_CASE("pause() stops feed right after the node, and the rest resumes", "[resp][incremental]") {
  const std::string input = "+A\r\n*2\r\n:1\r\n$3\r\nabc\r\n+B\r\n";
  const auto expected = nodes_of(input);
  REQUIRE(expected.size() == 5);

  SECTION("pause at a message end") {
    decoder d;
    pausing_recorder rec(d);
    rec.pause_at = 0;
    const std::size_t used = d.feed(input, rec);
    CHECK(used == 4);
    CHECK(rec.nodes.size() == 1);
    CHECK(d.at_message_boundary());
    CHECK(d.offset() == 4);
    CHECK(d.feed(std::string_view(input).substr(used), rec) == input.size() - used);
    CHECK(rec.nodes == expected);
  }

  SECTION("pause inside an aggregate, at every node in turn") {
    for (std::size_t k = 0; k < expected.size(); ++k) {
      INFO("pause at node " << k);
      decoder d;
      pausing_recorder rec(d);
      rec.pause_at = k;
      std::string_view rest = input;
      const std::size_t used = d.feed(rest, rec);
      CHECK(rec.nodes.size() == k + 1);
      CHECK(d.offset() == used);
      rest.remove_prefix(used);
      // A pause lasts for one feed() call only.
      CHECK(d.feed(rest, rec) == rest.size());
      CHECK(rec.nodes == expected);
      CHECK(d.at_message_boundary());
    }
  }

  SECTION("pause on a partial piece of a bulk") {
    decoder d;
    pausing_recorder rec(d);
    rec.pause_at = 0;
    // The body ends in this feed but only the CR follows it: the body goes out as a
    // partial piece, and the pause leaves the CR unconsumed.
    CHECK(d.feed("$3\r\nabc\r", rec) == 7);
    REQUIRE(rec.nodes.size() == 1);
    CHECK(rec.nodes[0].has(flags::partial));
    CHECK(d.feed("\r\n", rec) == 2);
    bool contiguous = false;
    CHECK(normalize(rec.nodes, contiguous) == std::vector{nd(type::bulk_string, 0, 3, "abc", kEnd)});
    CHECK(contiguous);
    CHECK(d.at_message_boundary());
  }
}

TEST_CASE("pause() lets the caller switch to another reader mid-stream", "[resp][incremental]") {
  // E.g. after +FULLRESYNC a replica reads an RDB payload that is not RESP.
  const std::string input = "+FULLRESYNC abc 0\r\n$5\r\nRDB..\r\n+OK\r\n";
  decoder d;
  pausing_recorder rec(d);
  rec.pause_at = 0;
  const std::size_t used = d.feed(input, rec);
  CHECK(std::string_view(input).substr(used) == "$5\r\nRDB..\r\n+OK\r\n");
  CHECK(d.at_message_boundary());
}

TEST_CASE("at_message_boundary() tracks pending values", "[resp][incremental]") {
  decoder d;
  recorder rec;
  CHECK(d.at_message_boundary());
  auto step = [&](std::string_view bytes) {
    CHECK(d.feed(bytes, rec) == bytes.size());
    return d.at_message_boundary();
  };
  CHECK_FALSE(step("+O"));        // half a header line
  CHECK(step("K\r\n"));           // complete
  CHECK_FALSE(step("*2\r\n"));    // aggregate open
  CHECK_FALSE(step(":1\r\n"));    // one element of two
  CHECK_FALSE(step("$4\r\nab"));  // bulk body pending
  CHECK_FALSE(step("cd"));        // body done, CRLF pending
  CHECK_FALSE(step("\r"));
  CHECK(step("\n"));
  CHECK_FALSE(step("|1\r\n+a\r\n+b\r\n"));  // attribute waiting for its value
  CHECK(step("#t\r\n"));
  CHECK_FALSE(step("$?\r\n;1\r\nx\r\n"));
  CHECK(step(";0\r\n"));
  CHECK_FALSE(step("%?\r\n+k\r\n+v\r\n"));
  CHECK(step(".\r\n"));
  d.feed("@\r\n", rec);
  CHECK(d.error());
  CHECK_FALSE(d.at_message_boundary());
}

TEST_CASE("offset() counts every consumed byte, including split header lines", "[resp][incremental]") {
  decoder d;
  recorder rec;
  d.feed("+hel", rec);
  CHECK(d.offset() == 4);
  d.feed("lo\r\n$3\r", rec);
  CHECK(d.offset() == 11);
  d.feed("\nabc\r\n", rec);
  CHECK(d.offset() == 17);
  CHECK(rec.nodes.size() == 2);
}
