// Damaged input never crashes or hangs the pipeline: random byte flips, cuts, drops,
// duplicates and reordering of the frames of a busy synthetic capture.
#include <catch2/catch.hpp>

#include <random>

#include "helpers.hpp"
#include "lockscope/ingest/output.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

struct checking_sink final : exchange_sink {
  std::size_t exchanges = 0;
  std::size_t events = 0;
  void on_exchange(const exchange& e) override {
    ++exchanges;
    REQUIRE(e.client != nullptr);
    REQUIRE(e.server != nullptr);
    if (e.kind == exchange_kind::push) REQUIRE(e.reply != nullptr);
    std::string line;
    append_jsonl(line, e);  // rendering must cope with whatever was decoded
    append_text_line(line, e);
  }
  void on_session_event(const session_event& ev) override {
    ++events;
    REQUIRE(ev.from != nullptr);
  }
};

std::vector<std::string> busy_capture_frames() {
  script s(ep("10.0.0.1", 50000), ep("10.0.0.2", 6379), 0xfffff000u, 77);
  s.handshake()
      .client(cmd({"HELLO", "3"})).server("%1\r\n$5\r\nproto\r\n:3\r\n")
      .client(cmd({"SUBSCRIBE", "a"})).server(">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n")
      .client(cmd({"GET", "k"}) + cmd({"MULTI"}) + cmd({"INCR", "n"}) + cmd({"EXEC"}))
      .server("$1\r\nv\r\n+OK\r\n+QUEUED\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n0\r\n*1\r\n:1\r\n")
      .client(cmd({"EVAL", std::string(300, 'x'), "1", "lock", "30000", "owner:1"})).server(":25000\r\n")
      .client("PING\r\n").server("+PONG\r\n")
      .client(cmd({"GET", "big"})).server("$5000\r\n" + std::string(5000, 'b') + "\r\n")
      .client(cmd({"HGETALL", "h"})).server("|1\r\n+a\r\n:1\r\n%2\r\n+f\r\n,1.5\r\n+g\r\n(123\r\n")
      .client(cmd({"PSYNC", "?", "-1"})).server("+FULLRESYNC x 0\r\n$10\r\n0123456789" + cmd({"SET", "a", "b"}))
      .close();
  std::vector<std::string> frames;
  for (const auto& seg : s.segments) frames.push_back(make_frame(link_type::en10mb, seg.spec));
  return frames;
}

}  // namespace

TEST_CASE("random damage to frames never crashes the pipeline", "[robustness]") {
  const auto frames = busy_capture_frames();
  std::mt19937_64 random(20261121);
  for (int round = 0; round < 300; ++round) {
    auto damaged = frames;
    const int edits = 1 + static_cast<int>(random() % 6);
    for (int e = 0; e < edits; ++e) {
      const std::size_t i = random() % damaged.size();
      switch (random() % 5) {
        case 0:  // flip bytes anywhere, headers included
          for (int k = 0; k < 4 && !damaged[i].empty(); ++k) {
            damaged[i][random() % damaged[i].size()] ^= static_cast<char>(1 + random() % 255);
          }
          break;
        case 1: damaged[i].resize(random() % (damaged[i].size() + 1)); break;  // cut
        case 2: damaged.erase(damaged.begin() + static_cast<std::ptrdiff_t>(i)); break;
        case 3: damaged.insert(damaged.begin() + static_cast<std::ptrdiff_t>(random() % damaged.size()), damaged[i]); break;
        default: std::swap(damaged[i], damaged[random() % damaged.size()]); break;
      }
      if (damaged.empty()) damaged = frames;
    }
    checking_sink sink;
    ingest_options options;
    options.tcp.max_buffer = 1024 + random() % 8192;
    options.session.max_message_bytes = 64 + random() % 4096;
    ingest_pipeline a(options, sink);
    std::int64_t t = 1'700'000'000'000'000;
    for (const std::string& f : damaged) a.on_packet(t += 10, link_type::en10mb, f);
    a.finish();
    const ingest_stats stats = a.stats();
    CHECK(stats.packets == damaged.size());
    CHECK(a.active_flows() == 0);
  }
}

TEST_CASE("undamaged, the busy capture decodes without errors", "[robustness]") {
  recording_sink sink;
  ingest_pipeline a({}, sink);
  std::int64_t t = 1'700'000'000'000'000;
  for (const std::string& f : busy_capture_frames()) a.on_packet(t += 10, link_type::en10mb, f);
  a.finish();
  CHECK(sink.count(session_event_kind::decode_error) == 0);
  const auto all = sink.summaries();
  REQUIRE(all.size() == 12);
  CHECK(all[4] == "INCR n => QUEUED");
  CHECK(all[5] == "push: message a 0");  // a RESP3 push between EXEC's replies
  CHECK(all[6] == "EXEC => 1");
  CHECK(all[7].rfind("EVAL ", 0) == 0);
  CHECK(all[10] == "HGETALL h => f 1.5 g 123");
  CHECK(all[11] == "PSYNC ? -1 => FULLRESYNC x 0");
}

namespace {

// Exchanges and connection ends, in the order the pipeline reports them.
class end_log final : public exchange_sink, public connection_end_sink {
 public:
  void on_exchange(const exchange& e) override {
    log.push_back("x" + std::to_string(e.connection) + " " + std::string(e.command.empty() ? "" : e.command[0]));
  }
  void on_connection_end(std::uint64_t connection, std::int64_t at_us) override {
    log.push_back("end" + std::to_string(connection) + " @" + std::to_string(at_us));
  }
  std::vector<std::string> log;
};

}  // namespace

TEST_CASE("ingest: the flow cap ends the connection silent the longest, counts it, and reports every end",
          "[robustness][memory]") {
  end_log sink;
  ingest_options options;
  options.max_flows = 3;
  ingest_pipeline a(options, sink, &sink);
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  std::vector<tcp_conversation> conns;
  auto packet = [&](std::int64_t t, const tcp_segment_spec& s) { a.on_packet(t, link_type::en10mb, make_frame(link_type::en10mb, s)); };
  // Connection k (1-based id k): a handshake and a command left without a reply.
  auto open = [&](std::int64_t t) {
    tcp_conversation& c = conns.emplace_back(make_endpoint("10.0.0.2", static_cast<std::uint16_t>(50000 + conns.size())), server);
    for (const tcp_segment_spec& s : c.handshake()) packet(t, s);
    packet(t, c.client_sends("*1\r\n$4\r\nPING\r\n"));
  };
  open(1);
  open(2);
  open(3);
  CHECK(a.active_flows() == 3);
  packet(4, conns[0].server_sends("+PONG\r\n"));  // connection 1 is the most recent now
  open(5);  // ends connection 2, silent since t=2
  open(6);  // ends connection 3
  CHECK(a.active_flows() == 3);
  CHECK(a.stats().capped_flows == 2);
  CHECK(a.stats().evicted_flows == 0);
  CHECK(a.stats().flows == 5);
  const std::vector<std::string> so_far{"x1 PING", "x2 PING", "end2 @5", "x3 PING", "end3 @6"};
  CHECK(sink.log == so_far);
  a.finish();
  CHECK(a.active_flows() == 0);
  CHECK(a.stats().capped_flows == 2);
  // finish() ends the rest, oldest first; each unanswered command comes before its end.
  const std::vector<std::string> all{"x1 PING", "x2 PING", "end2 @5", "x3 PING", "end3 @6",
                                     "end1 @6", "x4 PING", "end4 @6", "x5 PING", "end5 @6"};
  CHECK(sink.log == all);
}

TEST_CASE("ingest: connections closed by FIN, RST or the idle timeout are reported ended", "[robustness][memory]") {
  end_log sink;
  ingest_options options;
  options.flow_timeout_us = 1'000'000;
  ingest_pipeline a(options, sink, &sink);
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  auto packet = [&](std::int64_t t, const tcp_segment_spec& s) { a.on_packet(t, link_type::en10mb, make_frame(link_type::en10mb, s)); };
  tcp_conversation fin(make_endpoint("10.0.0.2", 50001), server);
  tcp_conversation rst(make_endpoint("10.0.0.2", 50002), server);
  tcp_conversation idle(make_endpoint("10.0.0.2", 50003), server);
  for (tcp_conversation* c : {&fin, &rst, &idle}) {
    for (const tcp_segment_spec& s : c->handshake()) packet(10, s);
  }
  packet(20, fin.client_fin());
  packet(30, fin.server_fin());
  packet(40, rst.client_rst());
  packet(2'000'000, rst.client_sends("*1\r\n$4\r\nPING\r\n"));  // a stray segment: sweeps the idle flow
  a.finish();
  REQUIRE(sink.log.size() >= 3);
  CHECK(sink.log[0] == "end1 @30");
  CHECK(sink.log[1] == "end2 @40");
  CHECK(sink.log[2] == "end3 @2000000");
  CHECK(a.stats().evicted_flows == 1);
}

namespace {

// Exchanges as "command => reply" per connection, and the count of unanswered ones.
class pairing_log final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    if (e.kind != exchange_kind::exchange || e.command.size() < 2) return;
    if (e.reply == nullptr) {
      ++unanswered;
      return;
    }
    const auto v = e.reply->to_value();
    answered.push_back(std::string(e.command[1]) + " => " + v.text);
  }
  std::vector<std::string> answered;
  std::size_t unanswered = 0;
};

}  // namespace

TEST_CASE("ingest: a capture of one direction over many connections stays within --max-buffer-total",
          "[robustness][memory]") {
  // A SPAN port that sees only requests: every command waits for a reply that never
  // comes. Each connection holds up to its own limits (4,096 commands): about 1 MB each
  // here, 2.4 MB at worst, before the cap on all of them together.
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  std::string batch;
  for (int i = 0; i < 40; ++i) batch += "*2\r\n$3\r\nGET\r\n$6\r\nk" + std::to_string(10000 + i) + "\r\n";
  auto run = [&](std::size_t budget, bool port_known) {
    pairing_log sink;
    ingest_options options;
    options.max_buffer_total = budget;
    if (port_known) options.ports = {6379};  // else each connection's sides wait for evidence
    ingest_pipeline a(options, sink);
    std::vector<tcp_conversation> conns;
    for (int c = 0; c < 120; ++c) conns.emplace_back(make_endpoint("10.0.0.2", static_cast<std::uint16_t>(20000 + c)), server);
    std::int64_t t = 1;
    for (int round = 0; round < 60; ++round) {  // 2,400 commands per connection
      for (tcp_conversation& c : conns) a.on_packet(t++, link_type::en10mb, make_frame(link_type::en10mb, c.client_sends(batch)));
    }
    const ingest_stats s = a.stats();
    a.finish();
    CHECK(sink.unanswered == 120u * 2400u);  // every command shown, none lost
    return s;
  };
  constexpr std::size_t budget = 2u << 20;
  for (const bool port_known : {true, false}) {
    CAPTURE(port_known);
    const ingest_stats capped = run(budget, port_known);
    CHECK(capped.buffer_sheds > 0);
    CHECK(capped.pending_shed > 0);
    // Past the budget only by what one segment adds (40 commands, a ring doubling).
    CHECK(capped.held_bytes_peak <= budget + (1u << 20));
    CHECK(capped.held_bytes <= budget + (1u << 20));
    const ingest_stats uncapped = run(0, port_known);
    CHECK(uncapped.buffer_sheds == 0);
    CHECK(uncapped.held_bytes_peak > 3 * budget);  // what the cap prevents
  }
}

TEST_CASE("ingest: commands shed for --max-buffer-total, or past a connection's own limit, have their late replies "
          "skipped, the others pair",
          "[robustness][memory]") {
  // A deep pipeline whose replies come late: the connection that grows past the budget
  // (or past its own max_pending) emits its oldest waiting commands unanswered. Their
  // replies still come, in order: they must be skipped, not paired with the commands
  // sent after them.
  const bool own_limit = GENERATE(false, true);
  CAPTURE(own_limit);
  pairing_log sink;
  ingest_options options;
  options.max_buffer_total = own_limit ? 0 : 256u << 10;
  if (own_limit) options.session.max_pending = 700;
  ingest_pipeline a(options, sink);
  tcp_conversation c(make_endpoint("10.0.0.2", 50001), make_endpoint("10.0.0.1", 6379));
  std::int64_t t = 1;
  auto packet = [&](const tcp_segment_spec& s) { a.on_packet(t++, link_type::en10mb, make_frame(link_type::en10mb, s)); };
  for (const tcp_segment_spec& s : c.handshake()) packet(s);
  auto send = [&](int from, int to) {
    for (int i = from; i < to; i += 10) {
      std::string ten;
      for (int k = i; k < std::min(i + 10, to); ++k) ten += "*2\r\n$3\r\nGET\r\n$6\r\nk" + std::to_string(10000 + k) + "\r\n";
      packet(c.client_sends(ten));
    }
  };
  auto answer = [&](int from, int to) {  // each reply names its command's key
    for (int i = from; i < to; i += 10) {
      std::string ten;
      for (int k = i; k < std::min(i + 10, to); ++k) ten += "+v" + std::to_string(10000 + k) + "\r\n";
      packet(c.server_sends(ten));
    }
  };
  constexpr int commands = 3000;
  send(0, 1237);
  answer(0, 1001);
  send(1237, commands);
  answer(1001, commands);
  const std::size_t shed = own_limit ? a.stats().pending_overflow : a.stats().pending_shed;
  REQUIRE(shed > 0);
  REQUIRE(shed + 50 <= commands);  // and some pair after the sheds
  a.finish();
  CHECK(sink.unanswered == shed);
  CHECK(sink.answered.size() == commands - shed);
  for (const std::string& line : sink.answered) {
    CAPTURE(line);
    CHECK(line.substr(1, 5) == line.substr(line.size() - 5));  // "kNNNNN => vNNNNN"
  }
  CHECK(a.stats().unpaired_replies == 0);
}

TEST_CASE("ingest: out-of-order segments held by many connections stay within --max-buffer-total, tiny ones counted "
          "for what they cost",
          "[robustness][memory]") {
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  auto run = [&](std::size_t budget, std::size_t segment_bytes) {
    pairing_log sink;
    ingest_options options;
    options.max_buffer_total = budget;
    ingest_pipeline a(options, sink);
    std::int64_t t = 1;
    const std::string filler(segment_bytes, 'x');
    for (int f = 0; f < 20; ++f) {
      tcp_conversation c(make_endpoint("10.0.0.2", static_cast<std::uint16_t>(30000 + f)), server);
      for (const tcp_segment_spec& s : c.handshake()) a.on_packet(t++, link_type::en10mb, make_frame(link_type::en10mb, s));
      c.client_sends(filler);  // lost: every segment after it waits for it
      for (std::size_t sent = 0; sent < (256u << 10); sent += segment_bytes) {
        a.on_packet(t++, link_type::en10mb, make_frame(link_type::en10mb, c.client_sends(filler)));
      }
    }
    const ingest_stats s = a.stats();
    a.finish();
    return s;
  };
  constexpr std::size_t budget = 1u << 20;
  for (const std::size_t segment_bytes : {std::size_t{1400}, std::size_t{8}}) {
    CAPTURE(segment_bytes);
    const ingest_stats capped = run(budget, segment_bytes);
    CHECK(capped.buffer_sheds > 0);
    CHECK(capped.held_bytes_peak <= budget + (64u << 10));
    CHECK(capped.gaps > 0);
  }
  // Uncapped, 20 connections each hold their 256 KiB: 5 MiB of 1,400-byte segments, and
  // 13 times the bytes in 8-byte ones (each costs a map node too).
  CHECK(run(0, 1400).held_bytes_peak > 5 * budget);
  CHECK(run(0, 8).held_bytes_peak > 60 * budget);
}

TEST_CASE("ingest: connections that read a large value, or resynchronised through one, keep no large buffer",
          "[robustness][memory]") {
  // A busy port: every connection once reads a 40 KB value, then small ones. Joined
  // mid-stream, each connection's first server bytes are the middle of a value, then
  // that 40 KB reply, whose start is a candidate that takes 16 KB to prove. Either way,
  // once the value is shown, no connection needs to keep tens of KB.
  const std::string value(40000, 'v');
  for (const bool mid_stream : {false, true}) {
    CAPTURE(mid_stream);
    pairing_log sink;
    ingest_options options;
    options.ports = {6379};
    ingest_pipeline a(options, sink);
    std::int64_t t = 1;
    auto packet = [&](const tcp_segment_spec& spec) { a.on_packet(t++, link_type::en10mb, make_frame(link_type::en10mb, spec)); };
    constexpr int connections = 100;
    for (int c = 0; c < connections; ++c) {
      tcp_conversation conv(make_endpoint("10.0.0.2", static_cast<std::uint16_t>(22000 + c)), make_endpoint("10.0.0.1", 6379));
      std::string server_bytes = "$40000\r\n" + value + "\r\n";
      if (mid_stream) {
        server_bytes = "tail of something\r\n" + server_bytes;
      } else {
        for (const tcp_segment_spec& spec : conv.handshake()) packet(spec);
        packet(conv.client_sends("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n"));
      }
      for (std::size_t at = 0; at < server_bytes.size(); at += 1400) packet(conv.server_sends(server_bytes.substr(at, 1400)));
      packet(conv.client_sends("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"));
      packet(conv.server_sends("$1\r\nv\r\n"));
    }
    const ingest_stats s = a.stats();
    if (mid_stream) CHECK(s.resyncs >= static_cast<std::uint64_t>(connections));
    CHECK(sink.answered.size() == (mid_stream ? 1 : 2) * connections);  // in sync: each GET paired
    INFO("held " << s.held_bytes);
    CHECK(s.held_bytes < connections * (8u << 10));  // about 1.9 KB each
    a.finish();
  }
}

TEST_CASE("lockscope decode and analyze --max-buffer-total: the summary says when the connections gave back",
          "[robustness][memory][cli]") {
  LOCKSCOPE_REQUIRE_CLI(cli);
  temp_dir dir;
  std::vector<timed_segment> segments;
  std::int64_t t = 1'700'000'000'000'000;
  std::string batch;
  for (int i = 0; i < 40; ++i) batch += "*2\r\n$3\r\nGET\r\n$6\r\nk" + std::to_string(10000 + i) + "\r\n";
  for (int c = 0; c < 20; ++c) {  // requests only, as a SPAN port of one direction gives
    tcp_conversation conv(make_endpoint("10.0.0.2", static_cast<std::uint16_t>(21000 + c)), make_endpoint("10.0.0.1", 6379));
    for (int round = 0; round < 50; ++round) segments.push_back({t++, conv.client_sends(batch)});
  }
  const auto file = dir / "one-direction.pcap";
  write_pcap(file, segments);
  for (const std::string command : {"decode", "analyze --summary"}) {
    CAPTURE(command);
    const std::string capped = read_command_output(cli + " " + command + " --port 6379 --max-buffer-total 64KiB " +
                                                   file.string() + " 2>&1 >/dev/null");
    CHECK_THAT(capped, Catch::Contains("the connections together held more than --max-buffer-total (") &&
                           Catch::Contains("commands were shown without a reply"));
    // Which connections lost data to the budget: named (the first 8), client first.
    CHECK_THAT(capped, Catch::Contains("20 connections gave back: 10.0.0.2:21000 → 10.0.0.1:6379, "
                                       "10.0.0.2:21001 → 10.0.0.1:6379, ") &&
                           Catch::Contains("10.0.0.2:21007 → 10.0.0.1:6379, …\n"));
    const std::string uncapped = read_command_output(cli + " " + command + " --port 6379 " + file.string() + " 2>&1 >/dev/null");
    CHECK_THAT(uncapped, !Catch::Contains("--max-buffer-total"));
    CHECK(read_command_output(cli + " " + command + " --max-buffer-total lots " + file.string() + " 2>&1 >/dev/null")
              .find("--max-buffer-total") != std::string::npos);  // a bad size is named
  }
}
