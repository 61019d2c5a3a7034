// The session's whole-array path (resp::handler::on_bulk_array into
// resp_session::whole_command) against its node path (session_options::whole_arrays
// off). A frame is offered whole only when it lies within one feed, so the client's
// bytes are fed whole, cut in two at every byte position, and one byte at a time: each
// way, both paths must give the same exchanges, events and stats.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lockscope/ingest/resp_session.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

std::string acquire(int key) {
  return cmd({"EVAL", seed_acquire_script, "1", "myLock:" + std::to_string(key), "30000", seed_owner});
}

// What a run of a session shows: every exchange and event in order, then the stats.
struct run_result {
  std::vector<std::string> lines;
  session_stats stats;
};

std::string describe(const session_stats& s) {
  return "commands " + std::to_string(s.commands) + " exchanges " + std::to_string(s.exchanges) + " pushes " +
         std::to_string(s.pushes) + " unpaired " + std::to_string(s.unpaired_replies) + " errors " +
         std::to_string(s.decode_errors) + " resyncs " + std::to_string(s.resyncs) + " skipped " +
         std::to_string(s.skipped_bytes) + " overflow " + std::to_string(s.pending_overflow) + " corrections " +
         std::to_string(s.side_corrections);
}

class line_sink final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    std::string line = e.kind == exchange_kind::push ? "push" : "exchange";
    line += " " + std::string(e.client_text) + ">" + std::string(e.server_text);
    line += " at " + std::to_string(e.request_us) + "/" + std::to_string(e.reply_us);
    line += e.client_from_start ? " from-start" : "";
    for (std::string_view a : e.command) line += " [" + std::string(a) + "]";
    if (e.reply != nullptr) {
      line += " => " + lockscope::resp::to_parsed(e.reply->to_value());
      line += " truncated " + std::to_string(e.reply->truncated_bytes());
    }
    lines.push_back(std::move(line));
  }
  void on_session_event(const session_event& ev) override {
    lines.push_back("event " + std::to_string(static_cast<int>(ev.kind)) + " from-client " +
                    std::to_string(ev.from_client) + " at " + std::to_string(ev.offset) + " bytes " +
                    std::to_string(ev.bytes) + " " + ev.error.message());
  }
  std::vector<std::string> lines;
};

struct conversation {
  std::string client;  // side 0
  std::string server;  // side 1
  std::size_t client_prefix = 0;  // client bytes always fed alone first
};

// Feeds the client's bytes in the given pieces, all at one instant (when a command
// completes must not depend on the split), then the server's replies, then finishes.
run_result run(const conversation& c, const std::vector<std::size_t>& client_pieces, const session_options& options,
               std::optional<int> client_side, side_reason reason, std::array<std::uint16_t, 2> ports) {
  line_sink sink;
  resp_session s(options, 1, {make_endpoint("10.0.0.1", ports[0]), make_endpoint("10.0.0.2", ports[1])}, client_side,
                 sink, reason);
  s.set_stream_start_seen(0);
  s.set_stream_start_seen(1);
  std::size_t at = 0;
  for (std::size_t size : client_pieces) {
    // A copy per piece: a view kept past its feed would read freed memory under ASan.
    const std::string piece = c.client.substr(at, size);
    s.on_data(0, piece, at, 1000);
    at += piece.size();
  }
  const std::string replies = c.server;
  s.on_data(1, replies, 0, 2000);
  s.finish(3000);
  return {std::move(sink.lines), s.stats()};
}

// The client stream whole, cut in two at every byte, and byte by byte: each way gives
// the same with and without whole arrays. Returns the whole feed's result.
run_result check_every_split(const conversation& c, session_options options = {},
                             std::optional<int> client_side = 0, side_reason reason = side_reason::syn,
                             std::array<std::uint16_t, 2> ports = {52000, 6379}) {
  const std::size_t rest = c.client.size() - c.client_prefix;
  std::vector<std::vector<std::size_t>> splits;
  splits.push_back({rest});
  for (std::size_t cut = 1; cut < rest; ++cut) splits.push_back({cut, rest - cut});
  splits.push_back(std::vector<std::size_t>(rest, 1));
  run_result whole;
  for (std::size_t k = 0; k < splits.size(); ++k) {
    INFO("split " << k << " (0: whole, then the rest cut after byte k, last: byte by byte)");
    std::vector<std::size_t> pieces = splits[k];
    if (c.client_prefix > 0) pieces.insert(pieces.begin(), c.client_prefix);
    options.whole_arrays = true;
    run_result fast = run(c, pieces, options, client_side, reason, ports);
    options.whole_arrays = false;
    const run_result nodes = run(c, pieces, options, client_side, reason, ports);
    CHECK(fast.lines == nodes.lines);
    CHECK(describe(fast.stats) == describe(nodes.stats));
    if (k == 0) whole = std::move(fast);
  }
  return whole;
}

}  // namespace

TEST_CASE("pipelined lock commands pair the same whole, split at every byte, and byte by byte",
          "[session][bulk_array]") {
  conversation c;
  for (int k = 0; k < 4; ++k) c.client += acquire(12345 + k);
  c.server = "$-1\r\n:29998\r\n$-1\r\n:1234\r\n";
  const run_result whole = check_every_split(c);
  REQUIRE(whole.lines.size() == 4);
  CHECK(whole.lines[1] == "exchange 10.0.0.1:52000>10.0.0.2:6379 at 1000/2000 from-start [EVAL] [" + seed_acquire_script +
                              "] [1] [myLock:12346] [30000] [" + seed_owner + "] => 29998 truncated 0");
  CHECK(whole.stats.exchanges == 4);
}

TEST_CASE("connection state, secrets and inline commands are the same on the array path", "[session][bulk_array]") {
  conversation c;
  c.client = cmd({"AUTH", "default", "s3cret"}) + cmd({"HELLO", "3", "AUTH", "u", "pw"}) + acquire(1) +
             "PING\r\n" + cmd({"CLIENT", "REPLY", "OFF"}) + cmd({"SET", "k", "v"}) + cmd({"CLIENT", "REPLY", "ON"}) +
             cmd({"SUBSCRIBE", "ch"}) + cmd({"PING"});
  c.server = "+OK\r\n%1\r\n$6\r\nserver\r\n$5\r\nredis\r\n_\r\n+PONG\r\n+OK\r\n>3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
             ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n+PONG\r\n";
  const run_result whole = check_every_split(c);
  std::string all;
  for (const std::string& line : whole.lines) all += line.substr(0, 120) + "\n";
  INFO(all);
  REQUIRE(whole.lines.size() >= 4);
  CHECK(whole.lines[2].find("[AUTH] [default] [****]") != std::string::npos);
  CHECK(whole.lines[3].find("[HELLO] [3] [AUTH] [u] [****]") != std::string::npos);
  session_options shown;
  shown.show_secrets = true;
  check_every_split(c, shown);
}

TEST_CASE("truncation and the pending limits count an array's bytes as its nodes do", "[session][bulk_array]") {
  conversation c;
  for (int k = 0; k < 6; ++k) c.client += acquire(k);
  c.client += cmd({"GET", "k"});
  c.server = "$-1\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n$1\r\nv\r\n";
  session_options cut;
  cut.max_message_bytes = 100;  // the script is cut; GET k is not
  check_every_split(c, cut);
  session_options few;
  few.max_pending = 2;
  check_every_split(c, few);
  // Room for three acquires by the bytes add() counts (nodes and text, not framing).
  session_options bytes;
  bytes.max_pending_bytes = 3 * (7 * sizeof(message_node) + seed_acquire_script.size() + 4 + 1 + 8 + 5 + seed_owner.size());
  CHECK(check_every_split(c, bytes).stats.pending_overflow > 0);
}

TEST_CASE("a corrupt frame among whole arrays is reported at the same offset", "[session][bulk_array]") {
  conversation c;
  c.client = acquire(1) + "*2\r\n$3\r\nGET\r\n$1\r\nkX\r\n" + acquire(2) + acquire(3);
  c.server = "$-1\r\n$-1\r\n$-1\r\n";
  c.client_prefix = acquire(1).size();  // a stream that starts clean is in sync
  CHECK(check_every_split(c).stats.decode_errors == 1);
}

TEST_CASE("a guessed client that sends a reply is corrected the same on the array path", "[session][bulk_array]") {
  // No SYN and no usual port, and a one-byte window: the sides are guessed on the
  // first byte (the lower port, side 1, is taken for the server), so the real server's
  // array replies go to the "client" decoder, whole, until the first `$-1` contradicts
  // the guess.
  session_options guess;
  guess.decide_window = 1;
  conversation c;
  c.client = "*2\r\n$1\r\na\r\n$1\r\nb\r\n*1\r\n$1\r\nc\r\n$-1\r\n*1\r\n$1\r\nd\r\n";
  c.server = cmd({"LRANGE", "l", "0", "1"}) + cmd({"LRANGE", "m", "0", "0"}) + cmd({"GET", "x"}) +
             cmd({"LRANGE", "n", "0", "0"});
  c.client_prefix = 1;
  CHECK(check_every_split(c, guess, std::nullopt, side_reason::undecided, {50000, 40000}).stats.side_corrections ==
        1);
  // The first word of an array can contradict too (a lower-case push frame).
  conversation push;
  push.client = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nho\r\n";
  push.server = cmd({"SUBSCRIBE", "ch"});
  push.client_prefix = 1;
  CHECK(check_every_split(push, guess, std::nullopt, side_reason::undecided, {50000, 40000})
            .stats.side_corrections == 1);
}
