// The session's rules for flows whose start was not captured: which end is the
// client (content, ports, corrections), inline commands anywhere, RESET / HELLO 2,
// other protocols named, and the pending-commands byte cap.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using Catch::Matchers::Equals;
using strings = std::vector<std::string>;

namespace {

struct notes final : flow_observer {
  struct item {
    flow_note_kind kind;
    side_reason reason;
    std::string client;
    std::string server;
    std::string detail;
    flow_protocol protocol;
  };
  std::vector<item> items;
  void on_flow_note(const flow_note& n) override {
    items.push_back({n.kind, n.reason, n.client->to_string(), n.server->to_string(), std::string(n.detail),
                     n.protocol});
  }
};

recording_sink run(const std::vector<timed_segment>& segments, ingest_options options, notes* observer = nullptr,
                   ingest_stats* stats = nullptr) {
  recording_sink sink;
  options.session.observer = observer;
  ingest_pipeline a(options, sink);
  run_frames(a, segments);
  a.finish();
  if (stats != nullptr) *stats = a.stats();
  return sink;
}

// A subscriber joined mid-stream. The client is on the lower port, and the first frame
// is the server's `pong` (an array of bulk strings, like a command).
script mid_stream_subscriber() {
  script s(ep("10.0.0.1", 40000), ep("10.0.0.2", 55555));
  s.server("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
      .server("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n")
      .client(cmd({"SUBSCRIBE", "c2"}))
      .server("*3\r\n$9\r\nsubscribe\r\n$2\r\nc2\r\n:2\r\n")
      .client(cmd({"UNSUBSCRIBE"}))
      .server("*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$2\r\nc2\r\n:0\r\n")
      .client(cmd({"GET", "k"}))
      .server("$-1\r\n")
      .close();
  return s;
}

}  // namespace

TEST_CASE("sides from content: a subscriber joined mid-stream, with and without --port", "[session][sides]") {
  const auto s = mid_stream_subscriber();
  const strings expected{"push: message ch 0", "SUBSCRIBE c2 => subscribe c2 2", "UNSUBSCRIBE => unsubscribe ch 1",
                         "push: unsubscribe c2 0", "GET k => (nil)"};
  notes seen;
  const auto without = run(s.segments, {}, &seen);
  CHECK_THAT(without.summaries(), Equals(expected));
  for (const recorded& r : without.items) CHECK(r.server == "10.0.0.2:55555");
  REQUIRE(seen.items.size() == 1);
  CHECK(seen.items[0].kind == flow_note_kind::sides_decided);
  CHECK(seen.items[0].reason == side_reason::content);
  CHECK(seen.items[0].detail == "a lower-case pub/sub frame");
  // The pong before the capture's first command is a reply to a command not captured.
  ingest_options with_port;
  with_port.ports = {55555};
  notes seen_port;
  const auto with = run(s.segments, with_port, &seen_port);
  CHECK(with.summaries() == without.summaries());
  REQUIRE(seen_port.items.size() == 1);
  CHECK(seen_port.items[0].reason == side_reason::port);
}

TEST_CASE("sides: bytes held until the content tells, then replayed in order", "[session][sides]") {
  // The client is on a well-known port and sends three commands before any reply:
  // the port guess would be wrong, the first `+OK` decides, and all three pair.
  script s(ep("10.0.0.1", 7001), ep("10.0.0.2", 45000));
  s.client(cmd({"SET", "a", "1"})).client(cmd({"SET", "b", "2"})).client(cmd({"INCR", "n"}));
  s.server("+OK\r\n+OK\r\n:7\r\n").close();
  notes seen;
  const auto sink = run(s.segments, {}, &seen);
  CHECK_THAT(sink.summaries(), Equals(strings{"SET a 1 => OK", "SET b 2 => OK", "INCR n => 7"}));
  REQUIRE(sink.items.size() == 3);
  CHECK(sink.items[0].server == "10.0.0.2:45000");
  CHECK(sink.items[0].latency_us == 300);  // held bytes keep their capture times
  REQUIRE(seen.items.size() == 1);
  CHECK(seen.items[0].reason == side_reason::content);
  CHECK(seen.items[0].detail == "a reply-only frame type");
}

TEST_CASE("sides: an array holding an integer is a reply, whatever the first word", "[session][sides]") {
  // A SUBSCRIBE confirmation in upper case, as a proxy might send it.
  script s(ep("10.0.0.1", 40000), ep("10.0.0.2", 55555));
  s.server("*3\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n:1\r\n").client(cmd({"PING"})).server("+PONG\r\n").close();
  notes seen;
  const auto sink = run(s.segments, {}, &seen);
  // (A confirmation with no SUBSCRIBE waiting is taken for a push.)
  CHECK_THAT(sink.summaries(), Equals(strings{"push: SUBSCRIBE ch 1", "PING => PONG"}));
  REQUIRE(!seen.items.empty());
  CHECK(seen.items[0].detail == "an array holding something other than bulk strings");
  CHECK(seen.items[0].server == "10.0.0.2:55555");
}

TEST_CASE("sides: without any telling frame, a well-known port decides, then the lower port", "[session][sides]") {
  // Only the client direction was captured.
  script s(ep("10.0.0.1", 6379), ep("10.0.0.2", 50000));
  s.server(cmd({"GET", "k"})).server(cmd({"GET", "j"})).close();
  notes seen;
  auto sink = run(s.segments, {}, &seen);
  CHECK_THAT(sink.summaries(), Equals(strings{"GET k => (none)", "GET j => (none)"}));
  CHECK(sink.items[0].server == "10.0.0.1:6379");
  REQUIRE(seen.items.size() == 1);
  CHECK(seen.items[0].reason == side_reason::well_known_port);

  script t(ep("10.0.0.1", 41000), ep("10.0.0.2", 52000));
  t.server(cmd({"GET", "k"})).close();
  seen.items.clear();
  sink = run(t.segments, {}, &seen);
  REQUIRE(seen.items.size() == 1);
  CHECK(seen.items[0].reason == side_reason::content_weak);  // only one end sent arrays
  CHECK(sink.items.at(0).server == "10.0.0.1:41000");
}

TEST_CASE("sides: a guess that later bytes contradict is corrected, not kept", "[session][sides]") {
  // A window this small forces a guess (the well-known port, wrong here) before the
  // server says anything; its first reply contradicts the guess.
  script s(ep("10.0.0.1", 6379), ep("10.0.0.2", 45000));
  s.client(cmd({"SET", "a", "1"}) + cmd({"SET", "b", "2"}) + cmd({"SET", "c", "3"}));
  s.server("+OK\r\n+OK\r\n+OK\r\n");
  s.client(cmd({"GET", "a"})).server("$1\r\n1\r\n");
  s.client(cmd({"INCR", "n"})).server(":1\r\n").close();
  ingest_options o;
  o.session.decide_window = 32;
  notes seen;
  ingest_stats stats;
  const auto sink = run(s.segments, o, &seen, &stats);
  REQUIRE(seen.items.size() == 2);
  CHECK(seen.items[0].kind == flow_note_kind::sides_decided);
  CHECK(seen.items[0].server == "10.0.0.1:6379");
  CHECK(seen.items[1].kind == flow_note_kind::sides_corrected);
  CHECK(seen.items[1].server == "10.0.0.2:45000");
  CHECK(stats.side_corrections == 1);
  // What was read under the wrong roles is not shown; everything after is right.
  CHECK_THAT(sink.summaries(), Equals(strings{"GET a => 1", "INCR n => 1"}));
  for (const recorded& r : sink.items) CHECK(r.server == "10.0.0.2:45000");
}

TEST_CASE("inline commands: quotes and escapes split as sdssplitargs, at a flow's start", "[session][inline]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake()
      .client("SET k \"a b\"\r\n")
      .server("+OK\r\n")
      .client("set \"k\\x41\" 'it\\'s' \"q\\\"\\n\\t\"\r\n")
      .server("+OK\r\n")
      .client("FAKE COMMAND\r\n")
      .server("|1\r\n+key\r\n+val\r\n-ERR unknown command 'FAKE'\r\n")
      .close();
  const auto sink = run(s.segments, {});
  REQUIRE(sink.items.size() == 3);
  CHECK(sink.items[0].command == strings{"SET", "k", "a b"});
  CHECK(sink.items[1].command == strings{"set", "kA", "it's", "q\"\n\t"});
  CHECK(sink.items[2].command == strings{"FAKE", "COMMAND"});
  CHECK(sink.items[2].reply_type == "error");
}

TEST_CASE("inline commands: a flow joined mid-stream and a resync after a gap", "[session][inline]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.client("SET k \"a b\"\r\nGET k\r\n").server("+OK\r\n$3\r\na b\r\n");
  s.conversation.client_sends("lost bytes\r\n");  // never delivered: a gap on the client side
  s.client("PING\r\n").server("+PONG\r\n").close();
  const auto sink = run(s.segments, {});
  CHECK_THAT(sink.summaries(), Equals(strings{"SET k a b => OK", "GET k => \"a b\"", "PING => PONG"}));
}

TEST_CASE("inline commands: an unbalanced quote is shown with redis-server's protocol error", "[session][inline]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake()
      .client("SET k v\r\n")
      .server("+OK\r\n")
      .client("AUTH \"s3cret\r\nGET k\r\n")
      .server("-ERR Protocol error: unbalanced quotes in request\r\n")
      .close();
  const auto sink = run(s.segments, {});
  REQUIRE(sink.items.size() == 3);
  CHECK(sink.items[1].command == strings{"AUTH", "****"});
  REQUIRE(sink.items[1].reply);
  CHECK(sink.items[1].reply->text == "ERR Protocol error: unbalanced quotes in request");
  // The server closed the connection: the pipelined GET is never answered.
  CHECK(sink.items[2].summary() == "GET k => (none)");
  CHECK(sink.count(session_event_kind::decode_error) == 0);
}

TEST_CASE("replies that turn into non-RESP bytes keep the exchanges before", "[session]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake()
      .client(cmd({"GET", "a"}))
      .server("$1\r\nx\r\n")
      .client(cmd({"GET", "b"}))
      .server("<html>not redis</html>\n")
      .close();
  const auto sink = run(s.segments, {});
  CHECK_THAT(sink.summaries(), Equals(strings{"GET a => x", "GET b => (none)"}));
}

TEST_CASE("RESET leaves subscribed mode and RESP3: HELLO 2 after HELLO 3 switches back", "[session][pubsub]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake()
      // RESP2 subscribed mode, then RESET: an array starting with "message" answers LRANGE.
      .client(cmd({"SUBSCRIBE", "ch"}))
      .server("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
      .client(cmd({"RESET"}))
      .server("+RESET\r\n")
      .client(cmd({"LRANGE", "l", "0", "-1"}))
      .server("*3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$1\r\ny\r\n")
      // HELLO 3, then RESET: back to RESP2, where a subscription is a mode again.
      .client(cmd({"HELLO", "3"}))
      .server("%1\r\n+proto\r\n:3\r\n")
      .client(cmd({"RESET"}))
      .server("+RESET\r\n")
      .client(cmd({"SUBSCRIBE", "ch"}))
      .server("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
      .client(cmd({"PING"}))
      .server("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n")
      .client(cmd({"RESET"}))
      .server("+RESET\r\n")
      // HELLO 3 then HELLO 2: RESP2 again.
      .client(cmd({"HELLO", "3"}))
      .server("%1\r\n+proto\r\n:3\r\n")
      .client(cmd({"HELLO", "2"}))
      .server("*2\r\n$5\r\nproto\r\n:2\r\n")
      .client(cmd({"SUBSCRIBE", "ch"}))
      .server("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
      .client(cmd({"PING"}))
      .server("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nho\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n")
      .close();
  const auto sink = run(s.segments, {});
  CHECK_THAT(sink.summaries(),
             Equals(strings{"SUBSCRIBE ch => subscribe ch 1", "RESET => RESET", "LRANGE l 0 -1 => message x y",
                            "HELLO 3 => proto 3", "RESET => RESET", "SUBSCRIBE ch => subscribe ch 1",
                            "push: message ch hi", "PING => pong \"\"", "RESET => RESET", "HELLO 3 => proto 3",
                            "HELLO 2 => proto 2", "SUBSCRIBE ch => subscribe ch 1", "push: message ch ho",
                            "PING => pong \"\""}));
}

TEST_CASE("other protocols on a Redis port are named and listed once each", "[session][protocols]") {
  std::vector<timed_segment> all;
  auto add = [&all](script s) { all.insert(all.end(), s.segments.begin(), s.segments.end()); };
  // A TLS ClientHello (record header, handshake type 1), seen from the SYN.
  const std::string hello("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03", 10);
  auto tls1 = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  tls1.handshake().client(hello).close();
  add(tls1);
  auto tls2 = script(ep("10.0.0.1", 52001), ep("10.0.0.2", 6379));
  tls2.handshake().client(hello).close();
  add(tls2);
  auto http = script(ep("10.0.0.1", 52002), ep("10.0.0.2", 6379));
  http.handshake().client("GET / HTTP/1.1\r\nHost: x\r\n\r\n").close();
  add(http);
  auto junk = script(ep("10.0.0.1", 52003), ep("10.0.0.2", 6379));
  junk.handshake().client(std::string("\x00\x01\x02\x03", 4)).close();
  add(junk);
  std::sort(all.begin(), all.end(), [](const timed_segment& a, const timed_segment& b) { return a.ts_us < b.ts_us; });
  notes seen;
  ingest_stats stats;
  const auto sink = run(all, {}, &seen, &stats);
  CHECK(sink.items.empty());
  CHECK(stats.not_resp_flows == 4);
  CHECK(stats.other_protocols[0].flows == 2);
  CHECK(stats.other_protocols[1].flows == 1);
  CHECK(stats.other_protocols[2].flows == 1);
  const auto lines = describe_other_protocols(stats);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "TLS: cannot decode; capture before the TLS terminator or on the server — 2 flows: "
        "10.0.0.1:52000 → 10.0.0.2:6379, 10.0.0.1:52001 → 10.0.0.2:6379");
  CHECK_THAT(lines[1], Catch::StartsWith("HTTP") && Catch::EndsWith("1 flow: 10.0.0.1:52002 → 10.0.0.2:6379"));
  CHECK_THAT(lines[2], Catch::StartsWith("unknown protocol"));
  std::size_t tls_notes = 0;
  for (const auto& n : seen.items) tls_notes += n.kind == flow_note_kind::other_protocol && n.protocol == flow_protocol::tls;
  CHECK(tls_notes == 2);
}

TEST_CASE("pending commands are capped in bytes: the overflow is counted", "[session][memory]") {
  // Only the client direction: nothing is ever answered.
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake();
  const std::string value(10000, 'v');
  for (int i = 0; i < 300; ++i) s.client(cmd({"SET", "k", value}));
  ingest_options o;
  o.session.max_pending_bytes = 256u << 10;
  ingest_stats stats;
  const auto sink = run(s.segments, o, nullptr, &stats);
  REQUIRE(sink.items.size() == 300);
  for (const recorded& r : sink.items) CHECK(!r.reply);
  // About 25 commands fit in 256 KiB; the rest were shown early, unanswered.
  CHECK(stats.pending_overflow >= 270);
  CHECK(stats.pending_overflow <= 280);
}
