// Real traffic: redis-cli and a test client against a real redis-server 7, recorded
// with `tcpdump -i lo` inside the test, then decoded. Cross-checked with tshark.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "helpers.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/real_capture.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace lockscope::test;
using namespace std::chrono_literals;
namespace ltest = lockscope::test;

namespace {

struct recorded_session {
  ltest::redis_server server;
  temp_dir dir;
  std::filesystem::path file = dir / "real.pcap";
};

// Runs `client` with /usr/bin/python3 (python3-redis) against the session's server while
// tcpdump records it: its arguments are the port, then the Lua file of each of `scripts`
// (`lockscope scripts NAME`), then `extra`. False (with a warning) when tcpdump cannot
// capture.
bool record_python_client(const std::string& binary, recorded_session& r, const char* client,
                          std::initializer_list<const char*> scripts, const std::string& extra = {}) {
  std::ofstream(r.dir / "client.py") << client;
  std::string command = "/usr/bin/python3 " + (r.dir / "client.py").string() + " " + std::to_string(r.server.port());
  for (const char* name : scripts) {
    const auto lua = r.dir / (std::string(name) + ".lua");
    REQUIRE(lockscope::test::run(binary + " scripts " + name + " > " + lua.string()) == 0);
    command += " " + lua.string();
  }
  if (!extra.empty()) command += " " + extra;
  tcpdump_recording rec(r.file, r.server.port());
  if (!rec.ready()) {
    WARN("tcpdump could not capture on lo (needs CAP_NET_RAW): skipping");
    return false;
  }
  REQUIRE(lockscope::test::run(command) == 0);
  return true;
}

bool contains(const std::vector<std::string>& all, const std::string& s) {
  return std::find(all.begin(), all.end(), s) != all.end();
}

}  // namespace

TEST_CASE("real redis-cli RESP2 and RESP3 traffic decodes, and tshark agrees on requests", "[real][tshark]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  recorded_session r;
  const std::uint16_t port = r.server.port();
  {
    tcpdump_recording rec(r.file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo (needs CAP_NET_RAW): skipping");
      return;
    }
    REQUIRE(run(cli(port, "SET k v")) == 0);
    REQUIRE(run(cli(port, "GET k")) == 0);
    REQUIRE(run(cli(port, "RPUSH l a b c")) == 0);
    REQUIRE(run(cli(port, "LRANGE l 0 -1")) == 0);
    REQUIRE(run(cli(port, "EVAL \"return redis.call('pttl', KEYS[1])\" 1 k")) == 0);
    REQUIRE(run(cli(port, "-3 HSET h f1 v1 f2 v2")) == 0);
    REQUIRE(run(cli(port, "-3 HGETALL h")) == 0);
    REQUIRE(run(cli(port, "-3 SMEMBERS nosuchset")) == 0);
    // Pipelined: many commands on one connection in as few segments as possible.
    REQUIRE(run("sh -c 'for i in $(seq 1 50); do printf \"*2\\r\\n\\$4\\r\\nINCR\\r\\n\\$7\\r\\ncounter\\r\\n\"; done' | redis-cli -p " +
                std::to_string(port) + " --pipe >/dev/null 2>&1") == 0);
    ltest::resp_connection c(r.server.host(), port);
    c.command("MULTI");
    c.command("SET", "m", "1");
    c.command("INCR", "m");
    c.command("EXEC");
  }
  ingest_stats stats;
  const auto sink = analyze_files({r.file.string()}, {}, nullptr, &stats);
  const auto all = sink.summaries();
  CHECK(contains(all, "SET k v => OK"));
  CHECK(contains(all, "GET k => v"));
  CHECK(contains(all, "LRANGE l 0 -1 => a b c"));
  CHECK(contains(all, "EVAL return redis.call('pttl', KEYS[1]) 1 k => -1"));
  CHECK(contains(all, "HELLO 3 => server redis version 7.0.15 proto 3 id " +
                          std::string("")) == false);  // (id varies: checked below)
  CHECK(contains(all, "HGETALL h => f1 v1 f2 v2"));
  CHECK(contains(all, "SMEMBERS nosuchset => []"));
  CHECK(contains(all, "EXEC => OK 2"));
  std::size_t incr = 0, hello = 0;
  for (const recorded& e : sink.items) {
    if (!e.command.empty() && e.command[0] == "INCR" && e.command[1] == "counter") {
      ++incr;
      CHECK(e.reply_type == "integer");
    }
    if (!e.command.empty() && e.command[0] == "HELLO") {
      ++hello;
      CHECK(e.reply_type == "map");
    }
    if (!e.command.empty() && e.command[0] == "HGETALL") CHECK(e.reply_type == "map");
    CHECK(e.server == "127.0.0.1:" + std::to_string(port));
    if (e.kind == exchange_kind::exchange && e.reply) CHECK(e.latency_us >= 0);
  }
  CHECK(incr == 50);
  CHECK(hello == 3);
  CHECK(stats.gaps == 0);
  CHECK(stats.decode_errors == 0);
  CHECK(stats.resp_flows == stats.flows);

  if (!on_path("tshark")) {
    WARN("tshark is not installed: cross-check skipped");
    return;
  }
  // tshark's RESP dissector: one resp.array.length per request array sent to the server.
  const std::string out = read_command_output(
      "tshark -r " + r.file.string() + " -d tcp.port==" + std::to_string(port) +
      ",resp -Y 'resp && tcp.dstport==" + std::to_string(port) +
      "' -T fields -e tcp.srcport -e resp.array.length -E occurrence=a 2>/dev/null");
  std::map<std::string, std::size_t> theirs, ours;
  std::size_t line_start = 0;
  while (line_start < out.size()) {
    const std::size_t end = out.find('\n', line_start);
    const std::string line = out.substr(line_start, end - line_start);
    line_start = end == std::string::npos ? out.size() : end + 1;
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string lengths = line.substr(tab + 1);
    if (lengths.empty()) continue;
    theirs[line.substr(0, tab)] += static_cast<std::size_t>(std::count(lengths.begin(), lengths.end(), ',')) + 1;
  }
  for (const recorded& e : sink.items) {
    if (e.kind == exchange_kind::exchange) ++ours[e.client.substr(e.client.rfind(':') + 1)];
  }
  auto render = [](const std::map<std::string, std::size_t>& m) {
    std::string text;
    for (const auto& [client_port, n] : m) text += client_port + ":" + std::to_string(n) + " ";
    return text;
  };
  CHECK(theirs.size() == stats.flows);
  CHECK(render(ours) == render(theirs));
}

TEST_CASE("real pub/sub in RESP2 and RESP3", "[real][pubsub]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  recorded_session r;
  const std::uint16_t port = r.server.port();
  {
    tcpdump_recording rec(r.file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    ltest::resp_connection sub2(r.server.host(), port);
    ltest::resp_connection sub3(r.server.host(), port);
    sub2.send_command("SUBSCRIBE", "redisson_lock__channel:{myLock}");
    sub2.read_value();
    sub3.command("HELLO", "3");
    sub3.send_command("SUBSCRIBE", "redisson_lock__channel:{myLock}");
    sub3.read_value();
    REQUIRE(run(cli(port, "PUBLISH redisson_lock__channel:{myLock} 0")) == 0);
    sub2.read_value();
    sub3.read_value();
    sub3.send_command("GET", "k");  // RESP3 allows commands while subscribed
    sub3.read_value();
    sub2.send_command("PING");
    sub2.read_value();
    sub2.send_command("UNSUBSCRIBE");
    sub2.read_value();
    sub2.command("GET", "k");  // out of subscribed mode again
  }
  const auto sink = analyze_files({r.file.string()});
  std::map<std::string, std::vector<std::string>> by_client;
  for (const recorded& e : sink.items) by_client[e.client].push_back(e.summary());
  REQUIRE(by_client.size() == 3);
  const std::vector<std::string> resp2{
      "SUBSCRIBE redisson_lock__channel:{myLock} => subscribe redisson_lock__channel:{myLock} 1",
      "push: message redisson_lock__channel:{myLock} 0", "PING => pong \"\"",
      "UNSUBSCRIBE => unsubscribe redisson_lock__channel:{myLock} 0", "GET k => (nil)"};
  const std::vector<std::string> resp3{
      "HELLO 3 => server redis version 7.0.15 proto 3 id", "SUBSCRIBE redisson_lock__channel:{myLock} => subscribe redisson_lock__channel:{myLock} 1",
      "push: message redisson_lock__channel:{myLock} 0", "GET k => (nil)"};
  bool saw2 = false, saw3 = false;
  for (auto& [client, lines] : by_client) {
    if (lines.size() == resp2.size() && lines[0] == resp2[0]) {
      CHECK(lines == resp2);
      saw2 = true;
    } else if (!lines.empty() && lines[0].rfind("HELLO 3", 0) == 0) {
      REQUIRE(lines.size() == resp3.size());
      CHECK(lines[0].rfind(resp3[0], 0) == 0);
      for (std::size_t i = 1; i < lines.size(); ++i) CHECK(lines[i] == resp3[i]);
      saw3 = true;
    } else {
      CHECK(lines == std::vector<std::string>{"PUBLISH redisson_lock__channel:{myLock} 0 => 2"});
    }
  }
  CHECK(saw2);
  CHECK(saw3);
}

TEST_CASE("a real 1 MB value crosses many segments and decodes whole", "[real]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  recorded_session r;
  const std::uint16_t port = r.server.port();
  std::string big(1u << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7 + i / 1000) % 26);
  {
    std::ofstream f(r.dir / "big.txt", std::ios::binary);
    f << big;
  }
  {
    tcpdump_recording rec(r.file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    REQUIRE(run("redis-cli -p " + std::to_string(port) + " -x SET big < " + (r.dir / "big.txt").string() +
                " >/dev/null") == 0);
    ltest::resp_connection c(r.server.host(), port);
    CHECK(c.command("GET", "big").text == big);
    CHECK(c.command("STRLEN", "big").integer == static_cast<std::int64_t>(big.size()));
  }
  ingest_stats stats;
  ingest_options options;
  options.session.max_message_bytes = 2u << 20;  // the 1 MiB argument plus the command
  const auto sink = analyze_files({r.file.string()}, options, nullptr, &stats);
  CHECK(stats.gaps == 0);
  bool set_seen = false, get_seen = false;
  for (const recorded& e : sink.items) {
    if (e.command.size() == 3 && e.command[0] == "SET") {
      CHECK(e.command[2] == big);
      set_seen = true;
    }
    if (e.command.size() == 2 && e.command[0] == "GET") {
      REQUIRE(e.reply.has_value());
      CHECK(e.reply->text == big);
      get_seen = true;
    }
  }
  CHECK(set_seen);
  CHECK(get_seen);
}

TEST_CASE("real values and arrays past the message limits say how much was not kept, in text and JSONL",
          "[real][cli]") {
  // A message keeps 1 MiB of text and 65,536 nodes. What was cut must be said: before,
  // JSONL held the first 1 MiB of a 3 MB value (and the first elements of an array) as
  // if they were all of it, and text said nothing of a cut value. The server's STRLEN
  // and LLEN are the truth.
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  LOCKSCOPE_REQUIRE_CLI(binary);
  recorded_session r;
  const std::string cli = "redis-cli -p " + std::to_string(r.server.port());
  constexpr std::int64_t value_size = 3'000'000, list_size = 100'000;
  std::ofstream(r.dir / "big.txt", std::ios::binary) << std::string(value_size, 'v');
  {
    tcpdump_recording rec(r.file, r.server.port());
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    REQUIRE(run(cli + " -x SET big < " + (r.dir / "big.txt").string() + " >/dev/null") == 0);
    REQUIRE(run(cli + " GET big >/dev/null") == 0);
    REQUIRE(run(cli + " RPUSH list $(seq 0 " + std::to_string(list_size - 1) + ") >/dev/null") == 0);
    REQUIRE(run(cli + " LRANGE list 0 -1 >/dev/null") == 0);
    ltest::resp_connection c(r.server.host(), r.server.port());
    CHECK(c.command("STRLEN", "big").integer == value_size);
    CHECK(c.command("LLEN", "list").integer == list_size);
  }
  std::map<std::string, int> seen;
  const std::string jsonl = read_command_output(binary + " decode --format jsonl " + r.file.string());
  CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::exchange_line_errors) == "");
  std::istringstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const auto v = boost::json::parse(line).as_object();
    const auto& command = v.at("command").as_array();
    const std::string name(command.at(0).as_string());
    CAPTURE(name);
    const auto count = [&](const char* key) {
      return v.contains("not_kept") ? v.at("not_kept").as_object().at(key).as_int64() : std::int64_t{0};
    };
    if (name == "SET") {
      CHECK(static_cast<std::int64_t>(command.at(2).as_string().size()) + count("command_bytes") == value_size);
      CHECK(count("command_bytes") > 0);
    } else if (name == "GET") {
      CHECK(static_cast<std::int64_t>(v.at("reply").as_string().size()) + count("reply_bytes") == value_size);
      CHECK(count("reply_bytes") > 0);
    } else if (name == "RPUSH") {
      CHECK(static_cast<std::int64_t>(command.size()) - 2 + count("command_arguments") == list_size);
      CHECK(count("command_arguments") > 0);
    } else if (name == "LRANGE") {
      CHECK(static_cast<std::int64_t>(v.at("reply").as_array().size()) + count("reply_elements") == list_size);
      CHECK(count("reply_elements") > 0);
    } else {
      CHECK(!v.contains("not_kept"));  // nothing cut: the schema's fields alone
    }
    ++seen[name];
  }
  CHECK(seen["SET"] == 1);
  CHECK(seen["GET"] == 1);
  CHECK(seen["RPUSH"] == 1);
  CHECK(seen["LRANGE"] == 1);
  CHECK(seen["STRLEN"] == 1);
  const std::string text = read_command_output(binary + " decode " + r.file.string());
  CHECK(text.find("(… " + std::to_string(value_size - (1 << 20)) + " more bytes not kept) [") != std::string::npos);
  CHECK(text.find("(… " + std::to_string(list_size - 65'533) + " more arguments not kept) ⇒ (integer) 100000") !=
        std::string::npos);
  CHECK(text.find("(… " + std::to_string(list_size - 65'535) + " more elements not kept) [") != std::string::npos);
}

// SREs often capture with a short snapshot length (tcpdump -s 96) to keep files small.
// Then the commands are gone, and the gaps alone would not say why: both commands name
// the cause and the fix. The truth is the file's own records, as tcpdump wrote them: a
// record whose wire length exceeds its captured length lost that much payload here (the
// 66 bytes of Ethernet, IPv4 and TCP headers with timestamps fit in 96).
TEST_CASE("a capture cut by its snapshot length: the gaps are put down to it, with the fix", "[real][cli]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  LOCKSCOPE_REQUIRE_CLI(binary);
  recorded_session r;
  const std::uint16_t port = r.server.port();
  {
    tcpdump_recording rec(r.file, port, 96);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    ltest::resp_connection c(r.server.host(), port);
    for (int i = 0; i < 3; ++i) c.command("SET", "snapKey" + std::to_string(i), std::string(400, 'v'));
    c.command("GET", "snapKey0");
  }
  std::size_t cut = 0;
  std::uint64_t cut_bytes = 0;
  {
    std::ifstream f(r.file, std::ios::binary);
    char header[24];
    REQUIRE(f.read(header, sizeof header));
    char record[16];
    while (f.read(record, sizeof record)) {
      std::uint32_t captured = 0, wire = 0;
      std::memcpy(&captured, record + 8, 4);
      std::memcpy(&wire, record + 12, 4);
      if (wire > captured) {
        ++cut;
        cut_bytes += wire - captured;
      }
      f.seekg(captured, std::ios::cur);
    }
  }
  REQUIRE(cut >= 4);  // the three SETs and the GET's reply, at least
  const std::string expected = std::to_string(cut) + " packets were cut short by the capture's snapshot length (" +
                               std::to_string(cut_bytes) + " bytes of TCP payload missing";
  for (const std::string command : {"decode", "analyze"}) {
    const std::string out = read_command_output(binary + " " + command + " " + r.file.string() + " 2>&1");
    INFO(out);
    CHECK_THAT(out, Catch::Contains("lockscope " + command + ": " + expected) &&
                        Catch::Contains("Capture whole packets (tcpdump -s 0, its default)"));
  }
  ingest_stats stats;
  analyze_files({r.file.string()}, ingest_options{}, nullptr, &stats);
  CHECK(stats.snaplen_cut_segments == cut);
  CHECK(stats.snaplen_cut_bytes == cut_bytes);
  CHECK(stats.gap_bytes >= cut_bytes);

  // The same traffic captured whole: nothing of the kind is said.
  const std::filesystem::path whole = r.dir / "whole.pcap";
  {
    tcpdump_recording rec(whole, port);
    REQUIRE(rec.ready());
    ltest::resp_connection c(r.server.host(), port);
    for (int i = 0; i < 3; ++i) c.command("SET", "snapKey" + std::to_string(i), std::string(400, 'v'));
    c.command("GET", "snapKey0");
  }
  const std::string out = read_command_output(binary + " decode " + whole.string() + " 2>&1");
  CHECK_THAT(out, Catch::Contains(" 4 exchanges, ") && !Catch::Contains("snapshot length"));
}

TEST_CASE("lockscope decode - text and jsonl output, filters, stdin", "[real][cli]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = LOCKSCOPE_CLI_PATH;
  if (binary.empty() || !std::filesystem::exists(binary)) {
    WARN("the lockscope binary is not built: skipping");
    return;
  }
  recorded_session r;
  const std::uint16_t port = r.server.port();
  {
    tcpdump_recording rec(r.file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    ltest::resp_connection c(r.server.host(), port);
    c.command("CONFIG", "SET", "requirepass", "s3cret");
    c.command("AUTH", "s3cret");
    c.command("EVAL", "return nil", "1", "myLock");
    c.command("SET", "quote\"d", "line\nbreak");
    c.command("CONFIG", "SET", "requirepass", "");
  }
  const std::string base = binary + " decode ";
  const std::string jsonl = read_command_output(base + "--format jsonl " + r.file.string() + " 2>/dev/null");
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < jsonl.size();) {
    const std::size_t end = jsonl.find('\n', at);
    lines.push_back(jsonl.substr(at, end - at));
    at = end + 1;
  }
  REQUIRE(lines.size() == 5);
  CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::exchange_line_errors) == "");
  const std::string prefix = "{\"ts\":";
  for (const std::string& l : lines) {
    CHECK(l.rfind(prefix, 0) == 0);
    CHECK_THAT(l, Catch::Contains(",\"client\":\"127.0.0.1:") && Catch::Contains(",\"server\":\"127.0.0.1:" + std::to_string(port) + "\"") &&
                      Catch::Contains(",\"command\":[") && Catch::Contains(",\"reply_type\":\"") &&
                      Catch::Contains(",\"reply\":") && Catch::Contains(",\"latency_us\":") &&
                      Catch::EndsWith(",\"kind\":\"exchange\"}"));
    CHECK_THAT(l, !Catch::Contains("s3cret"));
  }
  CHECK_THAT(lines[0], Catch::Contains("\"command\":[\"CONFIG\",\"SET\",\"requirepass\",\"****\"],\"reply_type\":\"simple_string\",\"reply\":\"OK\""));
  CHECK_THAT(lines[1], Catch::Contains("\"command\":[\"AUTH\",\"****\"]"));
  CHECK_THAT(lines[2], Catch::Contains("\"reply_type\":\"null\",\"reply\":null"));
  CHECK_THAT(lines[3], Catch::Contains("\"command\":[\"SET\",\"quote\\\"d\",\"line\\nbreak\"]"));

  const std::string shown = read_command_output(base + "--show-secrets " + r.file.string() + " 2>/dev/null");
  CHECK_THAT(shown, Catch::Contains("AUTH s3cret ⇒ OK"));

  const std::string text = read_command_output(base + "--command eval - < " + r.file.string() + " 2>&1");
  CHECK_THAT(text, Catch::Contains("→ 127.0.0.1:" + std::to_string(port) + " EVAL \"return nil\" 1 myLock ⇒ (nil) ["));
  CHECK_THAT(text, !Catch::Contains("AUTH"));
  CHECK_THAT(text, Catch::Contains("lockscope decode: ") && Catch::Contains("1 printed") &&
                       Catch::Contains("decode errors 0"));
  const std::string grep = read_command_output(base + "--grep break " + r.file.string() + " 2>/dev/null");
  CHECK(std::count(grep.begin(), grep.end(), '\n') == 1);
  CHECK_THAT(grep, Catch::Contains("SET \"quote\\\"d\" \"line\\nbreak\" ⇒ OK"));

  const std::string missing = read_command_output(base + (r.dir / "none.pcap").string() + " 2>&1; echo rc=$?");
  CHECK_THAT(missing, Catch::Contains("none.pcap") && Catch::Contains("rc=2"));
}

TEST_CASE("lockscope decode -i lo - live capture prints exchanges as they happen", "[real][cli][live]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = LOCKSCOPE_CLI_PATH;
  if (binary.empty() || !std::filesystem::exists(binary)) {
    WARN("the lockscope binary is not built: skipping");
    return;
  }
  recorded_session r;
  const std::uint16_t port = r.server.port();
  const auto out_path = r.dir / "live.out";
  const auto err_path = r.dir / "live.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* out = std::fopen(out_path.c_str(), "w");
    std::FILE* err = std::fopen(err_path.c_str(), "w");
    if (out != nullptr) ::dup2(::fileno(out), 1);
    if (err != nullptr) ::dup2(::fileno(err), 2);
    const std::string port_text = std::to_string(port);
    ::execl(binary.c_str(), binary.c_str(), "decode", "-i", "lo", "--port", port_text.c_str(), "--format", "jsonl",
            "--stats-interval", "0.5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto file_text = [](const std::filesystem::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  ltest::resp_connection c(r.server.host(), port);
  // Until the capture is active, pings are not seen: ping until one is.
  bool live = false;
  for (int attempt = 0; attempt < 50 && !live; ++attempt) {
    c.command("PING");
    std::this_thread::sleep_for(100ms);
    live = file_text(out_path).find("\"PING\"") != std::string::npos;
  }
  if (!live) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    const std::string err = file_text(err_path);
    if (err.find("CAP_NET_RAW") != std::string::npos) {
      WARN("no permission to capture: skipping");
      return;
    }
    FAIL("live capture printed nothing; stderr: " << err);
  }
  c.command("SET", "live", "yes");
  bool seen = false;
  for (int attempt = 0; attempt < 50 && !seen; ++attempt) {
    std::this_thread::sleep_for(50ms);
    seen = file_text(out_path).find("[\"SET\",\"live\",\"yes\"]") != std::string::npos;
  }
  CHECK(seen);  // printed before the capture ends: line-buffered
  std::this_thread::sleep_for(600ms);  // at least one periodic drop report
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string err = file_text(err_path);
  CHECK_THAT(err, Catch::Contains("lockscope decode: kernel: ") && Catch::Contains("kernel drops 0"));
}

TEST_CASE("lockscope decode -i - a missing interface or capability is a one-line error", "[cli][live]") {
  const std::string binary = LOCKSCOPE_CLI_PATH;
  if (binary.empty() || !std::filesystem::exists(binary)) {
    WARN("the lockscope binary is not built: skipping");
    return;
  }
  const std::string missing = read_command_output(binary + " decode -i nosuchif0 2>&1; echo rc=$?");
  CHECK_THAT(missing, Catch::StartsWith("lockscope decode: nosuchif0: ") && Catch::Contains("rc=2"));
  CHECK(std::count(missing.begin(), missing.end(), '\n') == 2);
  if (!on_path("capsh")) {
    WARN("capsh is not installed: the CAP_NET_RAW case is not checked");
    return;
  }
  const std::string denied = read_command_output("capsh --drop=cap_net_raw -- -c '" + binary + " decode -i lo' 2>&1; echo rc=$?");
  CHECK_THAT(denied, Catch::Contains("CAP_NET_RAW") && Catch::Contains("rc=2"));
  CHECK(std::count(denied.begin(), denied.end(), '\n') == 2);
}

TEST_CASE("real redis-cli traffic carrying passwords: lockscope decode hides them unless --show-secrets",
          "[real][cli][redaction]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  LOCKSCOPE_REQUIRE_CLI(binary);
  recorded_session r;
  const std::uint16_t port = r.server.port();
  const std::string hash(64, 'c');  // a SHA-256 in hex, as ACL SETUSER #hash takes it
  std::string many_rules;           // the password comes after position 64
  for (int i = 0; i < 70; ++i) many_rules += " '~far" + std::to_string(i) + "'";
  const std::vector<std::string> secrets = {"s3cret-req", "s3cret-alice", "s3cret-far", hash, "s3cret-master",
                                            "s3cret-migrate", "s3cret-auth2"};
  {
    tcpdump_recording rec(r.file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo (needs CAP_NET_RAW): skipping");
      return;
    }
    const std::string authed = "--no-auth-warning -a s3cret-req ";
    REQUIRE(run(cli(port, "CONFIG SET requirepass s3cret-req")) == 0);
    REQUIRE(run(cli(port, authed + "ACL SETUSER alice on '>s3cret-alice' '~*' '+@all'")) == 0);
    REQUIRE(run(cli(port, authed + "HELLO 3 AUTH alice s3cret-alice SETNAME probe")) == 0);
    REQUIRE(run(cli(port, authed + "ACL SETUSER alice" + many_rules + " '>s3cret-far'")) == 0);
    REQUIRE(run(cli(port, authed + "ACL SETUSER alice '<s3cret-alice' '#" + hash + "'")) == 0);
    REQUIRE(run(cli(port, authed + "CONFIG SET masterauth s3cret-master")) == 0);
    REQUIRE(run(cli(port, authed + "MIGRATE 127.0.0.1 1 '' 0 100 AUTH s3cret-migrate KEYS nosuchkey")) == 0);
    REQUIRE(run(cli(port, authed + "MIGRATE 127.0.0.1 1 '' 0 100 AUTH2 alice s3cret-auth2 KEYS nosuchkey")) == 0);
    REQUIRE(run(cli(port, authed + "CONFIG SET requirepass ''")) == 0);
  }
  const std::string file = r.file.string();
  for (const std::string format : {"text", "jsonl"}) {
    CAPTURE(format);
    const std::string hidden =
        read_command_output(binary + " decode --max-argument 0 --format " + format + " " + file + " 2>/dev/null");
    // The commands are there (the test sees the traffic), their passwords are not.
    CHECK_THAT(hidden, Catch::Contains("SETUSER") && Catch::Contains("HELLO") && Catch::Contains("MIGRATE") &&
                           Catch::Contains("masterauth") && Catch::Contains("~far69") && Catch::Contains("****"));
    for (const std::string& secret : secrets) {
      CAPTURE(secret);
      CHECK(hidden.find(secret) == std::string::npos);
    }
    const std::string shown = read_command_output(binary + " decode --show-secrets --max-argument 0 --format " +
                                                  format + " " + file + " 2>/dev/null");
    for (const std::string& secret : secrets) {
      CAPTURE(secret);
      CHECK(shown.find(secret) != std::string::npos);
    }
  }
}

namespace {

// A python3-redis client that puts terminal escapes, C1 controls and bytes that are
// not UTF-8 in every field a lock client or a stranger can fill: lock names, owners,
// channels and messages (Redisson's scripts, contended), an unknown command (redis-server
// echoes it in its error), an unknown script's arguments, AUTH, CLIENT SETNAME, and a
// connection that sends no RESP at all.
constexpr const char* hostile_client = R"py(
import redis, socket, sys, time
port, acquire, unlock = int(sys.argv[1]), open(sys.argv[2]).read(), open(sys.argv[3]).read()
hostile = [b'esc\x1b[31mRED\x1b[0m', b'bel\x07title\x1b]0;pwned\x07', b'bad\x87utf', b'cr\rlf\nnul\x00',
           b'del\x7fc1\x9bx', b'\xff\xfe', b'c1\xc2\x9b[31mX']
a, b = redis.Redis(port=port), redis.Redis(port=port)
for h in hostile:
    name, channel = b'lock:' + h, b'redisson_lock__channel:{lock:' + h + b'}'
    a.execute_command('EVAL', acquire, 1, name, 30000, b'owner' + h + b':1')
    b.execute_command('EVAL', acquire, 1, name, 30000, b'other' + h + b':2')
    for _ in range(2):  # the second is refused
        a.execute_command('EVAL', unlock, 2, name, channel, 0, 30000, b'owner' + h + b':1')
    for command in ([b'BOGUS' + h, b'arg' + h], ['EVALSHA', b'0' * 40, 1, name, h], ['AUTH', b'user' + h, b'pass' + h],
                    ['CLIENT', 'SETNAME', b'n' + h]):
        try:
            a.execute_command(*command)
        except redis.ResponseError:
            pass
    a.publish(channel, b'msg' + h)
p = a.pubsub()
p.subscribe(*[b'redisson_lock__channel:{lock:' + h + b'}' for h in hostile])
time.sleep(0.2)
for h in hostile:
    a.publish(b'redisson_lock__channel:{lock:' + h + b'}', b'\x1b[2J' + h)
time.sleep(0.2)
s = socket.create_connection(('127.0.0.1', port))
s.sendall(b'\x1b[31mGARBAGE\x87\xc2\x9b\x00\r\n' * 3)
time.sleep(0.1)
s.close()
)py";

// Python's reading of a text output (independent of lockscope's own UTF-8 code): its
// first problem, or "ok". Valid UTF-8, and no control character but line feed and tab:
// no C0 byte, no DEL, no C1 (U+0080 to U+009F).
constexpr const char* printable_check = R"py(
import sys
data = open(sys.argv[1], 'rb').read()
try:
    text = data.decode('utf-8')
except UnicodeDecodeError as e:
    print('not UTF-8 at byte', e.start, repr(data[max(0, e.start - 40):e.start + 8])); sys.exit()
for i, ch in enumerate(text):
    if (ord(ch) < 0x20 and ch not in '\n\t') or 0x7f <= ord(ch) <= 0x9f:
        print('control U+%04X in' % ord(ch), repr(text[max(0, i - 40):i + 8])); sys.exit()
print('ok')
)py";

}  // namespace

TEST_CASE("real traffic carrying terminal escapes and bytes that are not UTF-8: every text output is printable UTF-8",
          "[real][cli][escapes]") {
  // redis-server echoes an unknown command in its error, so whatever a client on the
  // port sends reaches `decode`'s output: an SRE running it in a terminal must not have
  // escape sequences from the wire acted on (a window title set, the screen cleared).
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with_python_redis();
  if (binary.empty()) return;
  recorded_session r;
  const std::uint16_t port = r.server.port();
  std::ofstream(r.dir / "check.py") << printable_check;
  if (!record_python_client(binary, r, hostile_client, {"acquire", "unlock"})) return;
  const std::string file = r.file.string();
  const auto output = r.dir / "output.txt";
  auto run_to_file = [&](const std::string& args) {
    REQUIRE(run(binary + " " + args + " > " + output.string() + " 2>&1") == 0);
    std::ifstream in(output, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string p = " --port " + std::to_string(port);
  for (const std::string& args : std::vector<std::string>{
           "decode " + file, "decode --max-argument 0 " + file, "decode --show-secrets --max-argument 0 " + file,
        "decode " + file + p, "analyze " + file, "analyze --summary " + file,
        "analyze --summary --top 3 " + file}) {
    CAPTURE(args);
    const std::string out = run_to_file(args);
    CHECK(read_command_output("/usr/bin/python3 " + (r.dir / "check.py").string() + " " + output.string()) == "ok\n");
    // The bytes were there to escape: each hostile field is shown, escaped.
    if (args.starts_with("decode")) {
      CHECK_THAT(out, Catch::Contains(R"("BOGUSesc\x1b[31mRED\x1b[0m")") &&
                          Catch::Contains(R"((error) "ERR unknown command 'BOGUSbel\atitle\x1b]0;pwned\a')") &&
                          Catch::Contains(R"(BOGUSc1\xc2\x9b[31mX)") && Catch::Contains(R"("lock:bad\x87utf")") &&
                          Catch::Contains(R"(\x1b[2J)"));
    } else if (args.find("--summary") == std::string::npos) {
      CHECK_THAT(out, Catch::Contains("== lock:esc?[31mRED?[0m") && Catch::Contains("== lock:c1??[31mX") &&
                          Catch::Contains("== lock:cr?lf?nul?") && Catch::Contains("== lock:??\n"));
    } else {
      CHECK_THAT(out, Catch::Contains("lock:bel?title?]0;pwned?"));
    }
  }
}

namespace {

// redis-py waiters whose subscriber connection leaves the lock's channel while they
// wait, in the ways clients do it: unsubscribe() with no channel (one connection
// subscribed to two locks' channels), RESET, and a named UNSUBSCRIBE (the control).
// The holder then releases (its publish reaches nobody) and each waiter retries when
// its TTL runs out. The client logs what the server confirmed: the channels left.
constexpr const char* leaving_client = R"py(
import json, redis, sys, time, uuid
port, acquire, unlock = int(sys.argv[1]), open(sys.argv[2]).read(), open(sys.argv[3]).read()
log = open(sys.argv[4], 'w')
def channel(lock): return 'redisson_lock__channel:{%s}' % lock
locks = {'bare': ['left:a', 'left:b'], 'reset': ['left:c'], 'named': ['left:d']}
# Named connections (one name for the waiter's process, its pub/sub connections too): the
# analyzer links each subscriber to its waiter for certain, which subscription_lost rests on.
holder, waiter = redis.Redis(port=port, client_name='holder'), redis.Redis(port=port, client_name='waiter')
owners = {}
first = {}
waiter_client = str(uuid.uuid4())
for mode, names in locks.items():
    for i, lock in enumerate(names):
        h, w = str(uuid.uuid4()) + ':1', waiter_client + ':%d' % (7 + i)
        owners[lock] = (h, w)
        assert holder.execute_command('EVAL', acquire, 1, lock, 1500, h) is None
        ttl = waiter.execute_command('EVAL', acquire, 1, lock, 1500, w)
        assert ttl is not None
        first[lock] = time.time() + ttl / 1000.0
subscribers = {}
for mode, names in locks.items():
    p = redis.Redis(port=port, client_name='waiter').pubsub()
    p.subscribe(*[channel(l) for l in names])
    for _ in names:
        m = p.get_message(timeout=1)
        assert m['type'] == 'subscribe', m
    subscribers[mode] = p
time.sleep(0.2)
for mode, p in subscribers.items():
    if mode == 'bare':
        p.unsubscribe()
    elif mode == 'reset':
        p.connection.send_command('RESET')
    else:
        p.unsubscribe(*[channel(l) for l in locks[mode]])
    if mode == 'reset':
        assert p.connection.read_response() in (b'RESET', 'RESET')
        left = list(locks[mode])
    else:
        left = []
        for _ in locks[mode]:
            m = p.get_message(timeout=1)
            assert m['type'] == 'unsubscribe', m
            left.append(m['channel'].decode()[len('redisson_lock__channel:{'):-1])
    log.write(json.dumps({'event': 'left', 'mode': mode, 'locks': left}) + '\n')
time.sleep(0.2)
for lock, (h, w) in owners.items():
    assert holder.execute_command('EVAL', unlock, 2, lock, channel(lock), 0, 1500, h) == 1
time.sleep(max(0, max(first.values()) - time.time()))
for lock, (h, w) in owners.items():
    assert waiter.execute_command('EVAL', acquire, 1, lock, 1500, w) is None
    log.write(json.dumps({'event': 'acquired', 'lock': lock, 'owner': w}) + '\n')
    waiter.execute_command('EVAL', unlock, 2, lock, channel(lock), 0, 1500, w)
)py";

}  // namespace

// (No ": " in the name: Catch2 v2 indents a wrapped name there, and loops when that is
// past the line's width.)
TEST_CASE("real redis-py subscribers leaving by unsubscribe() with no channel, or by RESET, are unsubscribed, and "
          "their waiters' wake-ups lost",
          "[real][cli][pubsub]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with_python_redis();
  if (binary.empty()) return;
  recorded_session r;
  const auto truth_file = r.dir / "truth.jsonl";
  if (!record_python_client(binary, r, leaving_client, {"acquire", "unlock"}, truth_file.string())) return;
  // The client's log: the locks whose channels the server confirmed left, per mode.
  std::map<std::string, std::string> mode_of;
  std::ifstream truth(truth_file);
  for (std::string line; std::getline(truth, line);) {
    const auto v = boost::json::parse(line).as_object();
    if (v.at("event").as_string() != "left") continue;
    for (const auto& lock : v.at("locks").as_array()) mode_of[std::string(lock.as_string())] = std::string(v.at("mode").as_string());
  }
  REQUIRE(mode_of.size() == 4);
  const std::string jsonl = read_command_output(binary + " analyze --format jsonl " + r.file.string());
  std::map<std::string, int> unsubscribed, lost;
  std::istringstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const auto v = boost::json::parse(line).as_object();
    const std::string lock(v.at("lock").as_string());
    if (v.at("event").as_string() == "unsubscribed") ++unsubscribed[lock];
    if (v.at("event").as_string() == "anomaly" && v.at("kind").as_string() == "subscription_lost") ++lost[lock];
  }
  for (const auto& [lock, mode] : mode_of) {
    CAPTURE(lock, mode);
    CHECK(unsubscribed[lock] == 1);
    CHECK(lost[lock] == 1);
  }
  // Nobody was subscribed when the locks went free: no wake-up was missed by a subscriber.
  const std::string text = read_command_output(binary + " analyze " + r.file.string());
  CHECK(text.find("while a subscribed waiter waits") == std::string::npos);
  CHECK(text.find("while an unsubscribed waiter waited") != std::string::npos);
}

namespace {

// A watchdog renewing just as the lease ends: 240 locks taken with a 30 ms lease, each
// renewed 29.4 to 30.6 ms after the acquisition's reply. Redis sets an expiry from its
// clock in whole milliseconds, so some renewals sent after reply + lease still find the
// key: the server's answer (logged) is the truth.
// A busy server can run a command and write its reply later. DEBUG SLEEP pipelined behind
// a command delays its reply by that much after it ran, on demand:
// - slow_renewal_reply: the renewal sent 22 to 29 ms after the acquisition's reply and its
//   reply 10 ms late, so always after the lease would have ended had the renewal not run
//   in time (it did when the server answers 1). Sent earlier than the plain renewals
//   because a loaded machine preempts the busy-wait: at 29.4 ms and later, one CI run had
//   1 of 80 accepted in each of three recordings;
// - slow_acquisition_reply: the acquisition's reply 20 ms late, the renewal timed from
//   when the acquisition was sent (the lease ran from then): refused ~10 ms before
//   reply + lease, and yet an expiry.
constexpr const char* edge_client = R"py(
import json, redis, sys, time, uuid
port, acquire, renew = int(sys.argv[1]), open(sys.argv[2]).read(), open(sys.argv[3]).read()
log = open(sys.argv[4], 'w')
c = redis.Redis(port=port)
owner = str(uuid.uuid4()) + ':1'
def then_sleep(seconds, *command):
    p = c.pipeline(transaction=False)
    p.execute_command(*command)
    p.execute_command('DEBUG', 'SLEEP', seconds)
    return p.execute()[0]
for i in range(240):
    lock = 'edge:%d' % i
    mode = ('plain', 'slow_renewal_reply', 'slow_acquisition_reply')[i % 3]
    sent = time.monotonic()
    if mode == 'slow_acquisition_reply':
        assert then_sleep('0.02', 'EVAL', acquire, 1, lock, 30, owner) is None
        start, offset = sent, (30.4 + (i % 40) * 0.03) / 1000.0
    elif mode == 'slow_renewal_reply':
        assert c.execute_command('EVAL', acquire, 1, lock, 30, owner) is None
        start, offset = time.monotonic(), (22.0 + (i % 40) * 0.175) / 1000.0
    else:
        assert c.execute_command('EVAL', acquire, 1, lock, 30, owner) is None
        start, offset = time.monotonic(), (29.4 + (i % 40) * 0.03) / 1000.0
    while time.monotonic() < start + offset:
        pass
    if mode == 'slow_renewal_reply':
        answer = then_sleep('0.01', 'EVAL', renew, 1, lock, 5000, owner)
    else:
        answer = c.execute_command('EVAL', renew, 1, lock, 5000, owner)
    log.write(json.dumps({'lock': lock, 'mode': mode, 'renewed': answer == 1}) + '\n')
    if answer == 1:
        c.delete(lock)
)py";

// Checks one recording of edge_client against the server's answers it logged; returns
// how many of each mode and answer it holds.
std::map<std::string, int> check_edge_recording(const std::string& binary, const std::filesystem::path& file,
                                                const std::filesystem::path& truth_file) {
  std::map<std::string, std::vector<std::string>> events;  // per lock, in order
  const std::string jsonl = read_command_output(binary + " analyze --format jsonl " + file.string());
  std::istringstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const auto v = boost::json::parse(line).as_object();
    std::string name(v.at("event").as_string());
    if (name == "anomaly") name += ":" + std::string(v.at("kind").as_string());
    events[std::string(v.at("lock").as_string())].push_back(name);
  }
  std::ifstream truth(truth_file);
  int accepted = 0, refused = 0, contradicted = 0;
  std::map<std::string, int> cases;  // mode + the server's answer
  for (std::string line; std::getline(truth, line);) {
    const auto v = boost::json::parse(line).as_object();
    const std::string lock(v.at("lock").as_string());
    const std::vector<std::string>& e = events[lock];
    const auto has = [&](std::string_view name) { return std::find(e.begin(), e.end(), name) != e.end(); };
    ++cases[std::string(v.at("mode").as_string()) + (v.at("renewed").as_bool() ? " accepted" : " refused")];
    bool ok = false;
    if (v.at("renewed").as_bool()) {
      ++accepted;
      ok = has("renewed") && !has("expired") && !has("anomaly:expired_while_held");
    } else {
      ++refused;
      ok = has("expired") && has("anomaly:expired_while_held") && !has("renewed");
    }
    if (!ok) {
      ++contradicted;
      std::string shown;
      for (const std::string& name : e) shown += " " + name;
      UNSCOPED_INFO(lock << (v.at("renewed").as_bool() ? " renewed (server: 1)" : " refused (server: 0)") << ", analyzer:"
                         << shown);
    }
  }
  INFO(accepted << " renewals accepted, " << refused << " refused");
  CHECK(accepted + refused == 240);
  CHECK(contradicted == 0);
  return cases;
}

}  // namespace

TEST_CASE("real Redis and a watchdog renewing as the lease ends, every renewal the server accepted is renewed, "
          "and every refused one expired",
          "[real][cli][expiry]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with_python_redis();
  if (binary.empty()) return;
  // The edge cases come from the client's timing: on a loaded machine (CI runs tests two
  // per core) its busy-wait is preempted, the renewals go out late and the server refuses
  // them all (5 of 80 accepted slow_renewal_reply in one such run, about 70 otherwise).
  // Every recording must agree with the server; one is recorded again, up to three in
  // all, until both edge cases happened often enough to mean something.
  std::map<std::string, int> cases;  // mode + the server's answer, of the last recording
  for (int attempt = 1; attempt <= 3; ++attempt) {
    CAPTURE(attempt);
    recorded_session r;
    const auto truth_file = r.dir / "truth.jsonl";
    if (!record_python_client(binary, r, edge_client, {"acquire", "renew"}, truth_file.string())) return;
    cases = check_edge_recording(binary, r.file, truth_file);
    if (cases["slow_renewal_reply accepted"] >= 10 && cases["slow_acquisition_reply refused"] >= 10) break;
  }
  // The cases the late replies are there for happened (about 70 of the 80 each, in practice).
  CHECK(cases["slow_renewal_reply accepted"] >= 10);
  CHECK(cases["slow_acquisition_reply refused"] >= 10);
}

TEST_CASE("a real recording cut to start mid-stream marks the waits it cannot have seen begin as lower bounds",
          "[real][cli][midstream]") {
  // node-redisson's recording (captures/thirdparty/, checked against the clients' log
  // elsewhere) and the stress recording, each cut at several points: an acquisition's
  // wait in the cut capture is at most its wait in the whole one, and when it is shorter
  // (the wait began before the cut) it must say so (wait_at_least).
  LOCKSCOPE_REQUIRE_CLI(binary);
  const auto captures = std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "captures";
  temp_dir dir;
  struct wait {
    double ms = 0;
    bool at_least = false;
  };
  auto waits_of = [&](const std::filesystem::path& file) {
    std::map<std::string, wait> out;  // by "ts lock owner"
    std::istringstream in(read_command_output(binary + " analyze --format jsonl " + file.string() + " 2>/dev/null"));
    for (std::string line; std::getline(in, line);) {
      const auto v = boost::json::parse(line).as_object();
      if (v.at("event").as_string() != "acquired" || !v.contains("wait_ms")) continue;
      const std::string key = boost::json::serialize(v.at("ts")) + " " + std::string(v.at("lock").as_string()) + " " +
                              std::string(v.at("owner").as_string());
      out[key] = {v.at("wait_ms").to_number<double>(), v.contains("wait_at_least")};
    }
    return out;
  };
  int shorter = 0, marked_whole = 0, compared = 0;
  for (const char* name : {"thirdparty/redisson.pcap", "recorded/stress.pcap"}) {
    const auto whole_file = captures / name;
    const auto whole = waits_of(whole_file);
    REQUIRE(whole.size() > 30);
    for (const std::size_t skip : {200u, 500u, 900u}) {
      CAPTURE(name, skip);
      const auto cut = dir / "cut.pcap";
      cut_pcap(whole_file, cut, skip);
      for (const auto& [key, w] : waits_of(cut)) {
        CAPTURE(key);
        const auto it = whole.find(key);
        REQUIRE(it != whole.end());
        ++compared;
        CHECK(w.ms <= it->second.ms + 0.001);
        if (w.ms < it->second.ms - 0.001) {
          ++shorter;
          CHECK(w.at_least);
        } else if (w.at_least) {
          ++marked_whole;  // the whole wait, still marked: allowed (it could not be known)
        }
      }
    }
  }
  INFO(compared << " waits compared, " << shorter << " cut short, " << marked_whole << " whole but marked");
  CHECK(shorter > 0);
  CHECK(marked_whole * 10 <= compared);  // marking stays the exception (0 of 447 when written)
}
