// Keep what is valid: a flow that turns into bytes that are not RESP keeps the exchanges
// decoded before them (the rest is counted and named by flow and offset), and stray
// line ends between messages are skipped and counted, not fatal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

std::string ping() { return "*1\r\n$4\r\nPING\r\n"; }

struct keep_valid_run {
  recording_sink sink;
  ingest_stats totals;
};

keep_valid_run run_script(script& s, bool with_handshake = true) {
  (void)with_handshake;
  keep_valid_run r;
  ingest_options o;
  ingest_pipeline a(o, r.sink);
  run_frames(a, s.segments);
  a.finish();
  r.totals = a.stats();
  return r;
}

}  // namespace

TEST_CASE("keep valid: +OK +OK then lines that are not RESP keeps the two exchanges", "[keep-valid]") {
  std::string junk;
  for (int i = 0; i < 200; ++i) junk += "this is not RESP at all, line " + std::to_string(i) + "\r\n";
  for (const bool syn : {true, false}) {
    for (const bool one_segment : {true, false}) {
      for (const int port_number : {6379, 7777}) {
        const auto port = static_cast<std::uint16_t>(port_number);
        CAPTURE(syn, one_segment, port);
        script s(ep("10.0.0.1", 52000), ep("10.0.0.2", port));
        if (syn) s.handshake();
        s.client(ping() + ping());
        if (one_segment) {
          s.server("+OK\r\n+OK\r\n" + junk.substr(0, 1000));
        } else {
          s.server("+OK\r\n+OK\r\n").server(junk.substr(0, 1000));
        }
        if (syn) s.close();
        keep_valid_run r = run_script(s);
        CHECK(r.sink.summaries() == std::vector<std::string>{"PING => OK", "PING => OK"});
        std::string events;
        for (const auto& e : r.sink.events) {
          events += std::to_string(static_cast<int>(e.kind)) + "@" + std::to_string(e.offset) + "+" +
                    std::to_string(e.bytes) + " from " + e.from_text + "; ";
        }
        CAPTURE(events);
        // The bad byte is named: the server's stream, right after the two replies.
        REQUIRE(r.sink.count(session_event_kind::decode_error) == 1);
        const auto bad = std::find_if(r.sink.events.begin(), r.sink.events.end(),
                                      [](const auto& e) { return e.kind == session_event_kind::decode_error; });
        CHECK(bad->offset == 10);
        CHECK(!bad->from_client);
        CHECK(bad->from_text == "10.0.0.2:" + std::to_string(port));
        // The rest is counted as skipped, not decoded.
        CHECK(r.totals.skipped_bytes >= 900);
        CHECK(r.totals.exchanges == 2);
      }
    }
  }
}

TEST_CASE("keep valid: a stray LF after a RESP3 reply with attributes is skipped and counted", "[keep-valid]") {
  for (const bool syn : {true, false}) {
    CAPTURE(syn);
    script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
    if (syn) s.handshake();
    s.client("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n").server("%1\r\n+proto\r\n:3\r\n");
    s.client(ping() + ping() + ping());
    s.server("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.5\r\n+PONG\r\n\n+PONG\r\n\r\n\r\n+PONG\r\n");
    if (syn) s.close();
    keep_valid_run r = run_script(s);
    CHECK(r.sink.summaries().size() == 4);
    if (r.sink.summaries().size() == 4) {
      CHECK(r.sink.summaries()[1] == "PING => PONG");
      CHECK(r.sink.summaries()[2] == "PING => PONG");
      CHECK(r.sink.summaries()[3] == "PING => PONG");
    }
    CHECK(r.sink.count(session_event_kind::not_resp) == 0);
    CHECK(r.sink.count(session_event_kind::decode_error) == 0);
    CHECK(r.totals.stray_bytes == 5);  // "\n" and "\r\n\r\n"
    CHECK(r.totals.resyncs == 0);
  }
}

TEST_CASE("keep valid: stray line ends between pipelined replies keep every reply with its command", "[keep-valid]") {
  // Split anywhere: the stray bytes at a segment's start, its end, or alone.
  const std::string replies = ":1\r\n\n:2\r\n\r\n:3\r\n\n\n";
  for (std::size_t cut = 1; cut < replies.size(); ++cut) {
    CAPTURE(cut);
    script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
    s.handshake().client("*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n");
    s.server(replies.substr(0, cut)).server(replies.substr(cut)).close();
    keep_valid_run r = run_script(s);
    CHECK(r.sink.summaries() == std::vector<std::string>{"INCR a => 1", "INCR b => 2", "INCR c => 3"});
    CHECK(r.totals.stray_bytes + r.totals.skipped_bytes == 5);
  }
}

TEST_CASE("keep valid: a reply that is not RESP halfway is not taken, the next is", "[keep-valid]") {
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake().client(ping() + ping() + ping());
  // The second reply breaks inside an array: a decode error, then the third is found.
  s.server("+PONG\r\n*2\r\n:1\r\n\n+PONG\r\n").close();
  keep_valid_run r = run_script(s);
  CHECK(r.sink.summaries().front() == "PING => PONG");
  CHECK(r.sink.count(session_event_kind::decode_error) == 1);
  CHECK(r.totals.stray_bytes == 0);
}

TEST_CASE("keep valid: lockscope decode on a crafted capture keeps the exchanges and names the bad byte",
          "[keep-valid][cli]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  temp_dir dir;
  const auto file = dir / "garbage.pcap";
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake().client(ping() + ping()).server("+OK\r\n+OK\r\nHTTP/1.1 400 Bad Request\r\nnot RESP either\r\n");
  s.client(ping()).server("\n+PONG\r\n").close();
  write_pcap(file, s.segments);
  const std::string out = read_command_output(binary + " decode " + file.string() + " 2>&1");
  CHECK_THAT(out, Catch::Contains("PING ⇒ OK") && Catch::Contains("10.0.0.2:6379 → 10.0.0.1:52000: server stream offset 10"));
  CHECK(std::count(out.begin(), out.end(), '\n') >= 4);
  CHECK_THAT(out, Catch::Contains("lockscope decode: 1 resync (44 bytes not RESP, skipped)"));
  const std::string jsonl = read_command_output(binary + " decode --format jsonl " + file.string() + " 2>/dev/null");
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') >= 2);
}

TEST_CASE("keep valid: every byte that was not RESP is counted", "[keep-valid]") {
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  const std::string junk = "HTTP/1.1 400 Bad Request\r\nnot RESP either\r\n";
  s.handshake().client(ping() + ping()).server("+OK\r\n+OK\r\n" + junk);
  s.client(ping()).server("\n+PONG\r\n").close();
  keep_valid_run r = run_script(s);
  CHECK(r.sink.summaries() == std::vector<std::string>{"PING => OK", "PING => OK", "PING => PONG"});
  CHECK(r.totals.skipped_bytes == junk.size() + 1);
  REQUIRE(r.sink.count(session_event_kind::resync) == 1);
  for (const auto& e : r.sink.events) {
    if (e.kind != session_event_kind::resync) continue;
    CHECK(e.offset == 10 + junk.size() + 1);  // where +PONG starts
    CHECK(e.bytes == junk.size() + 1);
  }
}
