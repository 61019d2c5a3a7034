// handler::on_bulk_array, the decoder's whole-array fast path, against the node path
// it short-cuts: a handler that takes arrays must end up knowing exactly what a handler
// of nodes knows (same nodes, same verdict, same error offset, same consumed bytes),
// for valid, split and malformed input under every limit.
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "helpers.hpp"

using namespace resp_test;
using lockscope::resp::decoder;
using lockscope::resp::decoder_options;
using lockscope::resp::type;
namespace flags = lockscope::resp::node_flags;

namespace {

// Takes whole arrays and records them as the nodes the general path would deliver.
class array_taker : public recorder {
 public:
  array_taker() { want_bulk_arrays(true); }

  bool on_bulk_array(std::string_view frame, std::span<const std::string_view> elements) override {
    ++arrays;
    if (decline) return false;
    // The views lie within the frame, and the frame within the fed buffer.
    for (std::string_view e : elements) {
      if (e.data() < frame.data() || e.data() + e.size() > frame.data() + frame.size()) ++outside_frame;
    }
    if (frame.data() < fed.data() || frame.data() + frame.size() > fed.data() + fed.size()) ++outside_frame;
    frames.emplace_back(frame);
    nodes.push_back(recorded_node{type::array, 0, 0, elements.size(), {}, 0, 0});
    for (std::size_t k = 0; k < elements.size(); ++k) {
      const std::uint8_t f = k + 1 == elements.size() ? flags::ends_message : 0;
      nodes.push_back(recorded_node{type::bulk_string, f, 1, elements[k].size(), std::string(elements[k]), 0, 0});
    }
    if (pause_after != nullptr) pause_after->pause();
    return true;
  }

  std::string_view fed;
  std::size_t arrays = 0;  // offered
  std::size_t outside_frame = 0;
  bool decline = false;
  decoder* pause_after = nullptr;
  std::vector<std::string> frames;
};

struct verdict {
  std::vector<recorded_node> nodes;
  std::error_code error;
  std::uint64_t error_offset = 0;
  std::uint64_t consumed = 0;
  bool at_boundary = false;
};

// Feeds `input` in the given chunks (each in its own buffer, so that ASan catches a
// view kept too long) to a decoder whose handler is `h`.
template <class Handler>
verdict feed_chunks(std::string_view input, const std::vector<std::size_t>& sizes, const decoder_options& options,
                    Handler& h) {
  decoder d(options);
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    auto chunk = std::make_unique<char[]>(n);
    std::copy_n(input.data() + at, n, chunk.get());
    const std::string_view piece(chunk.get(), n);
    if constexpr (std::is_same_v<Handler, array_taker>) h.fed = piece;
    const std::size_t used = d.feed(piece, h);
    at += n;
    if (d.error()) break;
    REQUIRE(used == n);
  }
  verdict v;
  bool contiguous = true;
  v.nodes = normalize(h.nodes, contiguous);
  CHECK(contiguous);
  v.error = d.error();
  v.error_offset = d.error_offset();
  v.consumed = d.offset();
  v.at_boundary = d.at_message_boundary();
  return v;
}

void same(const verdict& fast, const verdict& general) {
  CHECK(fast.nodes == general.nodes);
  CHECK(fast.error == general.error);
  CHECK(fast.error_offset == general.error_offset);
  CHECK(fast.consumed == general.consumed);
  CHECK(fast.at_boundary == general.at_boundary);
}

// The input whole, then split in two at every position, then byte by byte: the
// array-taking handler must agree with the plain one every time. Returns how many
// arrays the fast path took when fed whole.
std::size_t check_every_split(std::string_view input, const decoder_options& options = {}) {
  INFO("input: \"" << printable(input) << "\"");
  std::vector<std::vector<std::size_t>> splits;
  splits.push_back({input.size()});
  for (std::size_t cut = 1; cut < input.size(); ++cut) splits.push_back({cut, input.size() - cut});
  splits.push_back(std::vector<std::size_t>(input.size(), 1));
  std::size_t taken_whole = 0;
  for (std::size_t s = 0; s < splits.size(); ++s) {
    INFO("split " << s << " (0: whole, then a cut after byte s, last: byte by byte)");
    recorder general;
    const verdict g = feed_chunks(input, splits[s], options, general);
    array_taker fast;
    const verdict f = feed_chunks(input, splits[s], options, fast);
    same(f, g);
    CHECK(fast.outside_frame == 0);
    if (s == 0) taken_whole = fast.frames.size();
    // A handler that declines gets the node path's nodes.
    array_taker declining;
    declining.decline = true;
    same(feed_chunks(input, splits[s], options, declining), g);
  }
  return taken_whole;
}

const std::string acquire =
    "*6\r\n$4\r\nEVAL\r\n$20\r\nreturn redis.call(1)\r\n$1\r\n1\r\n$19\r\nmyLock:000000012345\r\n"
    "$5\r\n30000\r\n$39\r\n80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12\r\n";

}  // namespace

TEST_CASE("a whole command array is taken in one call and equals its nodes", "[resp][bulk_array]") {
  CHECK(check_every_split(acquire) == 1);
  CHECK(check_every_split(acquire + acquire + "*1\r\n$4\r\nPING\r\n") == 3);
  // Empty and binary elements, leading zeros in lengths (accepted by the node path too).
  static constexpr char binary[] = "*3\r\n$0\r\n\r\n$3\r\n\r\n\0\r\n$003\r\nabc\r\n";
  CHECK(check_every_split(std::string(binary, sizeof binary - 1)) == 1);  // the NUL inside kept
  decoder_options inline_ok;
  inline_ok.allow_inline = true;
  CHECK(check_every_split("PING\r\n" + acquire + "GET k\r\n", inline_ok) == 1);
}

TEST_CASE("arrays the fast path does not take are left to the node path unchanged", "[resp][bulk_array]") {
  // Not arrays of bulk strings, or not whole, or not at the top level.
  for (const std::string& input : {
           std::string("*0\r\n"),
           std::string("*-1\r\n"),
           std::string("*2\r\n$1\r\na\r\n$-1\r\n"),
           std::string("*2\r\n$1\r\na\r\n:1\r\n"),
           std::string("*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n"),
           std::string("*1\r\n$?\r\n;1\r\na\r\n;0\r\n"),
           std::string("|1\r\n+a\r\n+b\r\n*1\r\n$1\r\nc\r\n"),
           std::string("*?\r\n$1\r\na\r\n.\r\n"),
           std::string(">2\r\n$1\r\na\r\n$1\r\nb\r\n"),
           std::string("*+1\r\n$1\r\na\r\n"),
       }) {
    CHECK(check_every_split(input) == 0);
  }
  // More elements than the fast path takes at once.
  std::string many = "*" + std::to_string(lockscope::resp::max_bulk_array_elements + 1) + "\r\n";
  for (std::size_t k = 0; k <= lockscope::resp::max_bulk_array_elements; ++k) many += "$1\r\nx\r\n";
  CHECK(check_every_split(many) == 0);
  many = "*" + std::to_string(lockscope::resp::max_bulk_array_elements) + "\r\n";
  for (std::size_t k = 0; k < lockscope::resp::max_bulk_array_elements; ++k) many += "$1\r\nx\r\n";
  CHECK(check_every_split(many) == 1);
}

TEST_CASE("malformed arrays give the node path's error at the same offset", "[resp][bulk_array]") {
  const std::vector<std::string> bad = {
      "*2\r\n$1\r\na\r\n$1\r\nbX\r\n",            // body longer than its length
      "*2\r\n$1\r\na\r\n$2\r\nb\r\n+",            // body shorter
      "*2\r\n$1\r\na\r\n$1\r\nb\n",               // missing CR after a body
      "*2\r\n$1\r\na\r\n$1\rb\r\n",               // missing LF after a length
      "*2\r\n$1x\r\na\r\n$1\r\nb\r\n",            // junk in a length
      "*2\r\n$-2\r\na\r\n",                       // a negative length
      "*2\n$1\r\na\r\n$1\r\nb\r\n",               // missing CR after the count
      "*2x\r\n$1\r\na\r\n",                       // junk in the count
      "*2\r\n+a\r\n$1\r\nb\r\n",                  // a simple string (valid) then fine
      "*2\r\n$1\r\na\r\n%1\r\n",                  // an unfinished map
      "*1\r\n$99999999999999999999\r\na\r\n",     // a length that overflows
      "*1\r\n$1\r\na\r\n*1\r\n$1\r\n",            // a second frame cut short
  };
  for (const std::string& input : bad) check_every_split(input);
  decoder_options inline_ok;
  inline_ok.allow_inline = true;
  for (const std::string& input : bad) check_every_split(input, inline_ok);
}

TEST_CASE("the limits apply to a whole array exactly as to its nodes", "[resp][bulk_array]") {
  decoder_options o;
  o.limits.max_bulk_length = 38;  // the owner is 39 bytes
  CHECK(check_every_split(acquire, o) == 0);
  o.limits.max_bulk_length = 39;
  CHECK(check_every_split(acquire, o) == 1);

  decoder_options elements;
  elements.limits.max_aggregate_elements = 5;
  CHECK(check_every_split(acquire, elements) == 0);
  elements.limits.max_aggregate_elements = 6;
  CHECK(check_every_split(acquire, elements) == 1);

  decoder_options flat;
  flat.limits.max_depth = 0;
  CHECK(check_every_split(acquire, flat) == 0);

  decoder_options lines;
  lines.limits.max_line_length = 2;  // "$39\r" is one byte more than the limit allows
  CHECK(check_every_split(acquire, lines) == 0);
  lines.limits.max_line_length = 3;
  CHECK(check_every_split(acquire, lines) == 1);
  lines.limits.max_line_length = 1;
  check_every_split("*1\r\n$1\r\na\r\n", lines);
}

TEST_CASE("headers of one, two and three digits agree with the node path at every line limit",
          "[resp][bulk_array]") {
  // The fast path reads headers of up to two digits without bound checks when the line
  // limit and the bytes left allow it: at each limit around those sizes, and with the
  // frame ending right after a short header, it must decline and fail exactly where the
  // node path does.
  const std::string body100(100, 'x');
  const std::string input = "*3\r\n$1\r\na\r\n$12\r\nmyLock:12345\r\n$100\r\n" + body100 + "\r\n";
  for (std::size_t limit = 1; limit <= 9; ++limit) {
    INFO("max_line_length " << limit);
    decoder_options o;
    o.limits.max_line_length = limit;
    check_every_split(input, o);
    check_every_split("*2\r\n$1\r\na\r\n$12\r\n", o);  // cut after a two-digit header
    check_every_split("*1\r\n$12\r\nmyLock:1234\r\n", o);  // a body one byte short
    check_every_split("*1\r\n$12X\nmyLock:12345\r\n", o);  // no CR after two digits
    check_every_split("*1\r\n$1X\nm\r\n", o);               // no CR after one digit
  }
  CHECK(check_every_split(input) == 1);
}

TEST_CASE("mutated command arrays decode the same on both paths", "[resp][bulk_array]") {
  // Random byte changes, insertions and deletions of a pipelined pair of commands,
  // each split at every position, under the default and tight limits.
  const std::string base = "*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n";
  const char alphabet[] = "*$:\r\n0123-+?a";
  rng r(7);
  decoder_options tight;
  tight.limits.max_bulk_length = 4;
  tight.limits.max_aggregate_elements = 2;
  tight.limits.max_line_length = 3;
  std::size_t taken = 0;
  for (int round = 0; round < 300; ++round) {
    std::string input = base;
    const int edits = 1 + static_cast<int>(r.next() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = r.next() % input.size();
      const char c = alphabet[r.next() % (sizeof alphabet - 1)];
      switch (r.next() % 3) {
        case 0: input[at] = c; break;
        case 1: input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: input.erase(at, 1); break;
      }
    }
    taken += check_every_split(input);
    check_every_split(input, round % 2 == 0 ? tight : decoder_options{});
  }
  CHECK(taken > 100);  // most mutants keep one of the two frames intact
}

TEST_CASE("pause() inside on_bulk_array stops feed() right after the frame", "[resp][bulk_array]") {
  const std::string input = acquire + "*1\r\n$4\r\nPING\r\n";
  decoder d;
  array_taker h;
  h.fed = input;
  h.pause_after = &d;
  const std::size_t used = d.feed(input, h);
  CHECK(used == acquire.size());
  CHECK(d.at_message_boundary());
  REQUIRE(h.frames.size() == 1);
  CHECK(h.frames[0] == acquire);
  h.pause_after = nullptr;
  CHECK(d.feed(std::string_view(input).substr(used), h) == input.size() - used);
  CHECK(h.frames.size() == 2);
  CHECK(d.offset() == input.size());
}

TEST_CASE("a handler that did not ask for arrays is never offered one", "[resp][bulk_array]") {
  decoder d;
  array_taker h;
  h.want_bulk_arrays(false);
  h.fed = acquire;
  d.feed(acquire, h);
  CHECK(h.arrays == 0);
  CHECK(h.nodes.size() == 7);
}
