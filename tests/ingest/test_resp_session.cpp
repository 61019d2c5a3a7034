// The RESP session stage, driven through the whole pipeline with synthetic segments.
#include <catch2/catch.hpp>

#include <algorithm>

#include "helpers.hpp"
#include "lockscope/ingest/output.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using Catch::Matchers::Equals;
using strings = std::vector<std::string>;

namespace {

script new_script(std::uint16_t client_port = 52000, std::uint16_t server_port = 16379) {
  return script(ep("10.0.0.1", client_port), ep("10.0.0.2", server_port));
}

}  // namespace

TEST_CASE("a lock session is paired command by command, with latency and redaction", "[session]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"AUTH", "Root@123"})).server("+OK\r\n")
      .client(cmd({"PING"})).server("+PONG\r\n")
      .client(cmd({"EVAL", seed_acquire_script, "1", "myLock", "6000", seed_owner})).server("$-1\r\n")
      .client(cmd({"QUIT"})).server("+OK\r\n")
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(),
             Equals(strings{"AUTH **** => OK", "PING => PONG",
                            "EVAL " + seed_acquire_script + " 1 myLock 6000 " + seed_owner + " => (nil)", "QUIT => OK"}));
  REQUIRE(sink.items.size() == 4);
  CHECK(sink.items[0].client == "10.0.0.1:52000");
  CHECK(sink.items[0].server == "10.0.0.2:16379");
  CHECK(sink.items[2].latency_us == 100);
  CHECK(sink.items[2].reply_type == "null");
  CHECK(sink.events.empty());
}

TEST_CASE("pipelined commands pair FIFO across segment boundaries", "[session]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"SET", "a", "1"}) + cmd({"INCR", "n"}) + cmd({"GET", "a"}) + cmd({"LRANGE", "l", "0", "-1"}))
      .server("+OK\r\n:4")
      .server("2\r\n$1\r")
      .server("\n1\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n")
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(), Equals(strings{"SET a 1 => OK", "INCR n => 42", "GET a => 1", "LRANGE l 0 -1 => x y"}));
}

TEST_CASE("RESP2 subscribed mode - confirmations and messages are pushes", "[session][pubsub]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"SUBSCRIBE", "c1", "c2"}))
      .server("*3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nc2\r\n:2\r\n")
      .server("*3\r\n$7\r\nmessage\r\n$2\r\nc1\r\n$1\r\n0\r\n")
      .client(cmd({"PING"}))
      .server("*3\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nc2\r\n")  // (malformed pmessage: still a push)
      .server("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
      .client(cmd({"UNSUBSCRIBE"}))
      .server("*3\r\n$11\r\nunsubscribe\r\n$2\r\nc1\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$2\r\nc2\r\n:0\r\n")
      // Out of subscribed mode, an array starting with "message" is an ordinary reply.
      .client(cmd({"LRANGE", "l", "0", "-1"}))
      .server("*3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$1\r\ny\r\n")
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(),
             Equals(strings{"SUBSCRIBE c1 c2 => subscribe c1 1", "push: subscribe c2 2", "push: message c1 0",
                            "push: pmessage c* c2", "PING => pong \"\"", "UNSUBSCRIBE => unsubscribe c1 1",
                            "push: unsubscribe c2 0", "LRANGE l 0 -1 => message x y"}));
}

TEST_CASE("RESP3 - HELLO 3, push confirmations, and a push sharing a segment with a reply", "[session][pubsub]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"HELLO", "3"}))
      .server("%1\r\n$5\r\nproto\r\n:3\r\n")
      .client(cmd({"SUBSCRIBE", "ch"}))
      .server(">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
      .client(cmd({"GET", "k"}))
      .server(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n$1\r\nv\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n")
      .client(cmd({"GET", "k"}))
      .server("_\r\n")
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(),
             Equals(strings{"HELLO 3 => proto 3", "SUBSCRIBE ch => subscribe ch 1", "push: message ch hi",
                            "GET k => v", "push: invalidate [k]", "GET k => (nil)"}));
  REQUIRE(sink.items.size() == 6);
  CHECK(sink.items[2].reply_type == "push");
  CHECK(sink.items[2].latency_us == -1);
}

TEST_CASE("MULTI/EXEC pairs QUEUED replies and the EXEC array", "[session]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"MULTI"}) + cmd({"SET", "a", "1"}) + cmd({"INCR", "a"}) + cmd({"EXEC"}))
      .server("+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n")
      .close();
  CHECK_THAT(analyze(s.segments).summaries(),
             Equals(strings{"MULTI => OK", "SET a 1 => QUEUED", "INCR a => QUEUED", "EXEC => OK 2"}));
}

TEST_CASE("CLIENT REPLY OFF SKIP ON - commands without replies are not paired with later ones", "[session]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"CLIENT", "REPLY", "OFF"}) + cmd({"SET", "a", "1"}) + cmd({"CLIENT", "REPLY", "ON"}))
      .server("+OK\r\n")
      .client(cmd({"CLIENT", "REPLY", "SKIP"}) + cmd({"SET", "b", "2"}) + cmd({"GET", "b"}))
      .server("$1\r\n2\r\n")
      .close();
  CHECK_THAT(analyze(s.segments).summaries(),
             Equals(strings{"CLIENT REPLY OFF => (none)", "SET a 1 => (none)", "CLIENT REPLY ON => OK",
                            "CLIENT REPLY SKIP => (none)", "SET b 2 => (none)", "GET b => 2"}));
}

TEST_CASE("inline commands are decoded on the client side", "[session]") {
  auto s = new_script();
  s.handshake().client("PING\r\n").server("+PONG\r\n").client("SET k \"a b\"\r\n").server("+OK\r\n").close();
  CHECK_THAT(analyze(s.segments).summaries(), Equals(strings{"PING => PONG", "SET k a b => OK"}));
}

TEST_CASE("passwords are redacted unless show_secrets", "[session][redaction]") {
  auto s = new_script();
  s.handshake()
      .client(cmd({"AUTH", "default", "pw1"})).server("+OK\r\n")
      .client(cmd({"HELLO", "2", "AUTH", "user", "pw2", "SETNAME", "n"})).server("*0\r\n")
      .client(cmd({"MIGRATE", "h", "6379", "", "0", "5000", "AUTH2", "u", "pw3", "KEYS", "a"})).server("+NOKEY\r\n")
      .client(cmd({"MIGRATE", "h", "6379", "k", "0", "5000", "AUTH", "pw4"})).server("+OK\r\n")
      .client(cmd({"CONFIG", "SET", "requirepass", "pw5", "masterauth", "pw6", "maxmemory", "1"})).server("+OK\r\n")
      .close();
  const auto hidden = analyze(s.segments).summaries();
  CHECK_THAT(hidden, Equals(strings{"AUTH default **** => OK", "HELLO 2 AUTH user **** SETNAME n => []",
                                    "MIGRATE h 6379  0 5000 AUTH2 u **** KEYS a => NOKEY",
                                    "MIGRATE h 6379 k 0 5000 AUTH **** => OK",
                                    "CONFIG SET requirepass **** masterauth **** maxmemory 1 => OK"}));
  ingest_options show;
  show.session.show_secrets = true;
  const auto shown = analyze(s.segments, show).summaries();
  CHECK(shown[0] == "AUTH default pw1 => OK");
  CHECK(shown[4] == "CONFIG SET requirepass pw5 masterauth pw6 maxmemory 1 => OK");
}

TEST_CASE("a replication stream is recognised and skipped", "[session][replication]") {
  const bool diskless = GENERATE(false, true);
  CAPTURE(diskless);
  const std::string mark(40, 'm');
  std::string rdb = "REDIS0009\xfa\tredis-ver\x05" "7.0.15\r\n*3\r\n$3\r\nbad\xff\xfe";
  auto s = new_script(52000, 6379);
  s.handshake()
      .client(cmd({"PING"})).server("+PONG\r\n")
      .client(cmd({"REPLCONF", "listening-port", "6380"})).server("+OK\r\n")
      .client(cmd({"PSYNC", "?", "-1"}))
      .server("+FULLRESYNC 8de1787ba490483314a4d30f1c628bc5025eb761 0\r\n\n\n");
  if (diskless) {
    s.server("$EOF:" + mark + "\r\n" + rdb.substr(0, 10)).server(rdb.substr(10) + mark.substr(0, 15))
        .server(mark.substr(15));
  } else {
    s.server("$" + std::to_string(rdb.size()) + "\r\n" + rdb.substr(0, 7)).server(rdb.substr(7));
  }
  s.server(cmd({"SELECT", "0"}) + cmd({"SET", "k", "v"}))
      .client(cmd({"REPLCONF", "ACK", "0"}))
      .server(cmd({"PING"}))
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(),
             Equals(strings{"PING => PONG", "REPLCONF listening-port 6380 => OK",
                            "PSYNC ? -1 => FULLRESYNC 8de1787ba490483314a4d30f1c628bc5025eb761 0"}));
  CHECK(sink.count(session_event_kind::decode_error) == 0);
}

TEST_CASE("a replication link joined after its PSYNC is recognised by REPLCONF ACK", "[session][replication]") {
  auto s = script(ep("10.0.0.1", 41000), ep("10.0.0.2", 6379));
  s.server(cmd({"SET", "a", "1"}))
      .client(cmd({"REPLCONF", "ACK", "31"}))
      .server(cmd({"PING"}) + cmd({"SET", "b", "2"}))
      .client(cmd({"REPLCONF", "ACK", "62"}))
      .close();
  ingest_options options;
  options.ports = {6379};
  const auto sink = analyze(s.segments, options);
  CHECK(sink.items.empty());
  CHECK(sink.count(session_event_kind::decode_error) == 0);
}

TEST_CASE("a connection already open when the capture started is resynchronised", "[session][resync]") {
  // No handshake; the capture starts in the middle of a command and of a reply.
  auto s = new_script(41000, 6379);
  const std::string first = cmd({"EVAL", seed_acquire_script, "1", "myLock", "6000", seed_owner});
  s.client(first.substr(first.size() / 2) + cmd({"GET", "k"}))
      .server("k-of-an-earlier-reply\r\n$1\r\nv\r\n")
      .client(cmd({"EVAL", seed_acquire_script, "1", "myLock", "6000", seed_owner}))
      .server(":5713\r\n")
      .close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(),
             Equals(strings{"GET k => v", "EVAL " + seed_acquire_script + " 1 myLock 6000 " + seed_owner + " => 5713"}));
  CHECK(sink.count(session_event_kind::resync) == 2);
  REQUIRE(sink.items.size() == 2);
  CHECK(sink.items[0].client == "10.0.0.1:41000");
}

TEST_CASE("without ports or SYN, the side sending command arrays is the client", "[session][resync]") {
  // The server listens on the higher port here, so the port guess would be wrong.
  auto s = script(ep("10.0.0.1", 7000), ep("10.0.0.2", 50000));
  s.client(cmd({"GET", "k"})).server("$1\r\nv\r\n").close();
  auto sink = analyze(s.segments);
  REQUIRE(sink.items.size() == 1);
  CHECK(sink.items[0].server == "10.0.0.2:50000");
  // A subscriber caught mid-stream: only pushes from the server.
  auto sub = script(ep("10.0.0.1", 40000), ep("10.0.0.2", 6379));
  sub.server("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n").close();
  sink = analyze(sub.segments);
  CHECK_THAT(sink.summaries(), Equals(strings{"push: message ch 0"}));
  CHECK(sink.items[0].server == "10.0.0.2:6379");
}

TEST_CASE("the port option decides the server side", "[session]") {
  auto s = script(ep("10.0.0.1", 7000), ep("10.0.0.2", 50000));
  s.server("+OK\r\n");  // looks like a reply from the "client" side...
  s.client(cmd({"PING"})).server("+PONG\r\n").close();
  ingest_options options;
  options.ports = {50000};
  const auto sink = analyze(s.segments, options);
  CHECK_THAT(sink.summaries(), Equals(strings{"PING => PONG"}));
  CHECK(sink.items[0].server == "10.0.0.2:50000");
  options.ports = {1234};
  CHECK(analyze(s.segments, options).items.empty());
}

TEST_CASE("out-of-order, duplicated and wrapped segments still give every exchange", "[session][tcp]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379), 0xffffff00u, 0xfffffff0u);
  s.handshake();
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) {
    const auto n = static_cast<std::size_t>(i);
    const std::string key = "key" + std::to_string(i) + std::string(n * 7, 'x');
    const std::string request = cmd({"GET", key});
    const std::string reply = "$" + std::to_string(i) + "\r\n" + std::string(n, 'v') + "\r\n";
    // Each message in two segments, sent in the wrong order; every fifth duplicated.
    s.client(request.substr(0, 9)).client(request.substr(9));
    std::swap(s.segments[s.segments.size() - 1].spec, s.segments[s.segments.size() - 2].spec);
    s.server(reply.substr(0, 3)).server(reply.substr(3));
    std::swap(s.segments[s.segments.size() - 1].spec, s.segments[s.segments.size() - 2].spec);
    if (i % 5 == 4) s.segments.push_back(s.segments[s.segments.size() - 3]);
    expected.push_back("GET " + key + " => " + (i == 0 ? std::string("\"\"") : std::string(n, 'v')));
  }
  s.close();
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(), Equals(expected));
  CHECK(sink.count(session_event_kind::gap) == 0);
  CHECK(sink.count(session_event_kind::resync) == 0);
}

TEST_CASE("a missing segment is a gap, the session resyncs and later exchanges pair", "[session][tcp]") {
  auto s = new_script();
  s.handshake().client(cmd({"SET", "a", "1"})).server("+OK\r\n");
  const std::size_t lost = s.segments.size();
  s.client(cmd({"GET", "lost"}));
  s.server("$4\r\nmiss\r\n");
  s.client(cmd({"GET", "b"})).server("$1\r\n2\r\n").close();
  auto segments = s.segments;
  segments.erase(segments.begin() + static_cast<std::ptrdiff_t>(lost), segments.begin() + static_cast<std::ptrdiff_t>(lost) + 2);
  const auto sink = analyze(segments);
  CHECK_THAT(sink.summaries(), Equals(strings{"SET a 1 => OK", "GET b => 2"}));
  CHECK(sink.count(session_event_kind::gap) == 2);
}

TEST_CASE("a corrupt byte in one flow is reported and other flows decode completely", "[session][errors]") {
  auto good = script(ep("10.0.0.1", 50001), ep("10.0.0.2", 6379));
  auto bad = script(ep("10.0.0.3", 50002), ep("10.0.0.2", 6379));
  good.handshake();
  bad.handshake();
  std::vector<timed_segment> all;
  for (int i = 0; i < 10; ++i) {
    good.client(cmd({"INCR", "n"})).server(":" + std::to_string(i + 1) + "\r\n");
    bad.client(cmd({"INCR", "m"}));
    bad.server(i == 4 ? std::string("?oops\r\n") : ":" + std::to_string(i + 1) + "\r\n");
  }
  good.close();
  bad.close();
  all = good.segments;
  all.insert(all.end(), bad.segments.begin(), bad.segments.end());
  std::stable_sort(all.begin(), all.end(), [](const timed_segment& x, const timed_segment& y) { return x.ts_us < y.ts_us; });
  const auto sink = analyze(all);
  std::size_t good_count = 0;
  std::size_t bad_answered = 0;
  for (const recorded& r : sink.items) {
    if (r.client == "10.0.0.1:50001") {
      CHECK(r.reply.has_value());
      ++good_count;
    } else if (r.reply) {
      ++bad_answered;
    }
  }
  CHECK(good_count == 10);
  CHECK(bad_answered == 9);  // every reply but the corrupt one
  REQUIRE(sink.count(session_event_kind::decode_error) == 1);
  const auto it = std::find_if(sink.events.begin(), sink.events.end(),
                               [](const auto& e) { return e.kind == session_event_kind::decode_error; });
  CHECK(it->from_text == "10.0.0.2:6379");
  CHECK(it->to_text == "10.0.0.3:50002");
  CHECK_FALSE(it->from_client);
  CHECK(it->offset == 4 * 4);  // four ":N\r\n" replies precede the bad byte
  CHECK(it->error == lockscope::resp::errc::unknown_type);
}

TEST_CASE("a non-RESP connection is ignored", "[session]") {
  auto s = script(ep("10.0.0.1", 52000), ep("10.0.0.2", 80));
  s.handshake().client("GET / HTTP/1.1\r\nHost: x\r\n\r\n").server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").close();
  const auto sink = analyze(s.segments);
  CHECK(sink.items.empty());
  CHECK(sink.count(session_event_kind::not_resp) == 1);
  CHECK(sink.count(session_event_kind::decode_error) == 0);
}

TEST_CASE("commands without a captured reply are emitted at the end", "[session]") {
  auto s = new_script();
  s.handshake().client(cmd({"BLPOP", "q", "0"}));
  const auto sink = analyze(s.segments);
  CHECK_THAT(sink.summaries(), Equals(strings{"BLPOP q 0 => (none)"}));
}

TEST_CASE("a reply of millions of elements keeps its first ones, says how many more, and the next reply pairs",
          "[session][memory]") {
  // KEYS * or LRANGE 0 -1 on a big key: each element kept would cost a node (40 bytes)
  // whatever the text limit; a 20 MB capture of one such reply took 274 MB.
  constexpr std::size_t elements = 300'000;
  std::string reply = "*" + std::to_string(elements) + "\r\n";
  for (std::size_t i = 0; i < elements; ++i) reply += i % 2 == 0 ? ":7\r\n" : "$2\r\nab\r\n";
  auto s = new_script();
  s.handshake().client(cmd({"LRANGE", "l", "0", "-1"}));
  for (std::size_t at = 0; at < reply.size(); at += 60'000) s.server(reply.substr(at, 60'000));
  s.client(cmd({"GET", "k"})).server("$3\r\nval\r\n").close();
  const auto sink = analyze(s.segments);
  REQUIRE(sink.items.size() == 2);
  const std::size_t kept = (1u << 20) / message::bytes_per_kept_node - 1;  // the array node is one
  REQUIRE(sink.items[0].reply.has_value());
  CHECK(sink.items[0].reply->elements.size() == kept);
  CHECK(sink.items[0].reply->elements.back() == (kept % 2 == 1 ? lockscope::resp::value::number(7) : lockscope::resp::value::bulk("ab")));
  CHECK(sink.summaries()[1] == "GET k => val");

  // The text form says what was left out; a message short of the cap says nothing.
  message m;
  lockscope::resp::decoder d;
  struct to_message final : lockscope::resp::handler {
    message* out;
    void on_node(const lockscope::resp::node& n) override { out->add(n, 1u << 20); }
  } h;
  h.out = &m;
  CHECK(d.feed(reply, h) == reply.size());
  REQUIRE_FALSE(d.error());
  CHECK(m.dropped_nodes() == elements - kept);
  exchange e;
  const endpoint a = make_endpoint("10.0.0.1", 50000), b = make_endpoint("10.0.0.2", 6379);
  e.client = &a;
  e.server = &b;
  const std::vector<std::string_view> command{"LRANGE", "l", "0", "-1"};
  e.command = command;
  e.reply = &m;
  std::string line;
  append_text_line(line, e, {});
  CHECK_THAT(line, Catch::Contains(" (… " + std::to_string(elements - kept) + " more elements not kept) ["));
  m.clear();
  CHECK(m.dropped_nodes() == 0);
}

TEST_CASE("each exchange carries its place among its connection's exchanges, pushes not counted",
          "[session][sequence]") {
  auto a = new_script(52000);
  a.handshake()
      .client(cmd({"SET", "lock", "1", "NX"})).server("$-1\r\n")
      .client(cmd({"HSET", "job", "state", "busy"})).server(":1\r\n")
      .client(cmd({"SUBSCRIBE", "c1"})).server("*3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n")
      .server("*3\r\n$7\r\nmessage\r\n$2\r\nc1\r\n$1\r\n0\r\n")
      .client(cmd({"PING"})).server("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
      .close();
  auto b = new_script(52001);
  b.handshake().client(cmd({"SET", "lock", "2", "NX"})).server("+OK\r\n").close();
  std::vector<timed_segment> both = a.segments;
  both.insert(both.end(), b.segments.begin(), b.segments.end());
  const auto sink = analyze(both);
  std::vector<std::uint32_t> first, second;
  for (const recorded& r : sink.items) {
    if (r.kind == exchange_kind::push) continue;
    (r.client == "10.0.0.1:52000" ? first : second).push_back(r.connection_sequence);
  }
  CHECK(first == std::vector<std::uint32_t>{0, 1, 2, 3});  // SET, HSET, SUBSCRIBE, PING (the message: a push)
  CHECK(second == std::vector<std::uint32_t>{0});
}
