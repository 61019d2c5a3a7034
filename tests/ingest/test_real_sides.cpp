// Real recordings that start mid-connection, inline commands typed through nc, and
// RESET / HELLO 2, against a real redis-server. Checked against what the clients
// themselves logged and what redis-server answered, and with tshark; every JSON line
// is parsed with Boost.JSON.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <sys/stat.h>

#include <map>
#include <set>

#include "helpers.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/real_capture.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace lockscope::test;
namespace json = boost::json;
namespace ltest = lockscope::test;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    out.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

// Each line parsed as one JSON object.
std::vector<json::object> objects(const std::string& text) {
  std::vector<json::object> out;
  for (const std::string& line : lines_of(text)) {
    json::error_code ec;
    json::value v = json::parse(line, ec);
    INFO(line);
    REQUIRE(!ec);
    REQUIRE(v.is_object());
    out.push_back(std::move(v.as_object()));
  }
  return out;
}

// `decode --format jsonl` lines, each checked against the README's schema.
std::vector<json::object> decoded(const std::string& text) {
  for (const std::string& line : lines_of(text)) {
    INFO(line);
    CHECK(lockscope::test::exchange_line_errors(line) == "");
  }
  return objects(text);
}

// `analyze --format jsonl` event lines, each checked against the README's schema.
std::vector<json::object> events(const std::string& text) {
  for (const std::string& line : lines_of(text)) {
    INFO(line);
    CHECK(lockscope::test::event_line_errors(line) == "");
  }
  return objects(text);
}

std::string command_text(const json::object& o) {
  std::string out;
  for (const json::value& a : o.at("command").as_array()) {
    if (!out.empty()) out += ' ';
    out += a.as_string().c_str();
  }
  return out;
}

std::string text_of(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Connects python3-redis clients, waits, then runs a Redisson-style contention and a
// subscriber's SUBSCRIBE / message / UNSUBSCRIBE, logging each command it sends.
const char* const mid_stream_client = R"PY(
import json, sys, redis
port, log_path, acquire, unlock = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read(), open(sys.argv[4]).read()
log = open(log_path, 'w')
holder, waiter, sub = redis.Redis(port=port), redis.Redis(port=port), redis.Redis(port=port)
holder.ping(); waiter.ping()
p = sub.pubsub()
p.subscribe('warmup')
p.get_message(timeout=2)
print('ready', flush=True)
sys.stdin.readline()
def run(conn, name, *args):
    reply = conn.execute_command(*args)
    log.write(json.dumps({'conn': name, 'command': [str(a) for a in args]}) + '\n')
    return reply
channel = 'redisson_lock__channel:{myLock}'
run(holder, 'holder', 'SET', 'k', 'v')
run(holder, 'holder', 'GET', 'k')
run(holder, 'holder', 'RPUSH', 'l', 'a', 'b')
run(holder, 'holder', 'LRANGE', 'l', '0', '-1')
run(holder, 'holder', 'EVAL', acquire, '1', 'myLock', '30000', 'owner-a:1')
assert run(waiter, 'waiter', 'EVAL', acquire, '1', 'myLock', '30000', 'owner-b:1') is not None
p.subscribe(channel)
log.write(json.dumps({'conn': 'sub', 'command': ['SUBSCRIBE', channel]}) + '\n')
assert p.get_message(timeout=2)['type'] == 'subscribe'
run(holder, 'holder', 'EVAL', unlock, '2', 'myLock', channel, '0', '30000', 'owner-a:1')
m = p.get_message(timeout=2)
assert m['type'] == 'message' and m['data'] == b'0', m
p.unsubscribe(channel)
log.write(json.dumps({'conn': 'sub', 'command': ['UNSUBSCRIBE', channel]}) + '\n')
assert p.get_message(timeout=2)['type'] == 'unsubscribe'
run(waiter, 'waiter', 'EVAL', acquire, '1', 'myLock', '30000', 'owner-b:1')
log.close()
)PY";

}  // namespace

TEST_CASE("a real capture started mid-connection: same sides and events with and without --port",
          "[real][sides][cli]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with_python_redis();
  if (binary.empty()) return;
  ltest::redis_server server;
  temp_dir dir;
  const std::uint16_t port = server.port();
  const std::string p = std::to_string(port);
  std::ofstream(dir / "client.py") << mid_stream_client;
  REQUIRE(run(binary + " scripts acquire > " + (dir / "acquire.lua").string()) == 0);
  REQUIRE(run(binary + " scripts unlock > " + (dir / "unlock.lua").string()) == 0);
  const auto file = dir / "mid.pcap";
  {
    // The clients connect first; the recording starts once they are connected.
    const std::string fifo = (dir / "go").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::FILE* client = ::popen(("/usr/bin/python3 " + (dir / "client.py").string() + " " + p + " " +
                                 (dir / "client.log").string() + " " + (dir / "acquire.lua").string() + " " +
                                 (dir / "unlock.lua").string() + " < " + fifo)
                                    .c_str(),
                                "r");
    REQUIRE(client != nullptr);
    std::FILE* go = std::fopen(fifo.c_str(), "w");
    REQUIRE(go != nullptr);
    char ready[16] = {};
    REQUIRE(std::fgets(ready, sizeof ready, client) != nullptr);
    REQUIRE(std::string(ready) == "ready\n");
    tcpdump_recording rec(file, port);
    if (!rec.ready()) {
      std::fclose(go);
      ::pclose(client);
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    std::fputs("go\n", go);
    std::fclose(go);
    REQUIRE(::pclose(client) == 0);
  }
  const std::string decode = binary + " decode --format jsonl " + file.string();
  const std::string without_text = read_command_output(decode + " 2>/dev/null");
  const std::string with_text = read_command_output(decode + " --port " + p + " 2>/dev/null");
  CHECK(without_text == with_text);
  const auto without = decoded(without_text);

  // Every command the clients logged is decoded once, from a client, to the server.
  std::multiset<std::string> logged, ours;
  for (const std::string& line : lines_of(text_of(dir / "client.log"))) {
    const json::value entry = json::parse(line);
    std::string c;
    for (const json::value& a : entry.as_object().at("command").as_array()) {
      if (!c.empty()) c += ' ';
      c += a.as_string().c_str();
    }
    logged.insert(c);
  }
  std::size_t messages = 0;
  for (const json::object& o : without) {
    CHECK(o.at("server").as_string() == "127.0.0.1:" + p);
    if (o.at("kind").as_string() == "exchange") ours.insert(command_text(o));
    const json::value& reply = o.at("reply");
    if (o.at("kind").as_string() == "push" && reply.is_array() && reply.as_array().at(0).is_string() &&
        reply.as_array().at(0).as_string() == "message") {
      ++messages;
    }
  }
  CHECK(ours == logged);
  CHECK(messages == 1);

  // -v says how each flow was decided: by content here (no SYN in the recording).
  const std::string verbose = read_command_output(binary + " decode -v " + file.string() + " 2>&1 >/dev/null");
  CHECK_THAT(verbose, Catch::Contains("by content") && Catch::Contains("→ server 127.0.0.1:" + p));
  CHECK_THAT(verbose, !Catch::Contains("by lower port") && !Catch::Contains("corrected"));

  // analyze: the same events either way, subscriber included.
  const std::string analyze = binary + " analyze --format jsonl --no-summary " + file.string();
  const std::string events_without = read_command_output(analyze + " 2>/dev/null");
  CHECK(events_without == read_command_output(analyze + " --port " + p + " 2>/dev/null"));
  std::set<std::string> kinds;
  for (const json::object& e : events(events_without)) {
    kinds.insert(e.at("event").as_string().c_str());
    if (e.contains("server") && e.at("server").is_string()) CHECK(e.at("server").as_string() == "127.0.0.1:" + p);
  }
  for (const char* k : {"acquired", "contended", "subscribed", "notified", "unsubscribed", "released"}) {
    INFO(k);
    CHECK(kinds.count(k) == 1);
  }

  // tshark's RESP dissector counts the requests sent to the server (our exchanges).
  if (!on_path("tshark")) {
    WARN("tshark is not installed: cross-check skipped");
    return;
  }
  const std::string t = read_command_output("tshark -r " + file.string() + " -d tcp.port==" + p +
                                            ",resp -Y 'resp && tcp.dstport==" + p +
                                            "' -T fields -e resp.array.length -E occurrence=a 2>/dev/null");
  std::size_t theirs = 0;
  for (const std::string& l : lines_of(t)) {
    if (!l.empty()) theirs += static_cast<std::size_t>(std::count(l.begin(), l.end(), ',')) + 1;
  }
  CHECK(theirs == ours.size());
}

TEST_CASE("real inline commands through nc: quotes, escapes, unknown names, unbalanced quotes, RESET, HELLO 2",
          "[real][inline][cli]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with("nc");
  if (binary.empty()) return;
  ltest::redis_server server;
  temp_dir dir;
  const std::uint16_t port = server.port();
  const std::string p = std::to_string(port);
  const auto file = dir / "inline.pcap";
  // Each session's lines, typed one at a time; redis-server's own answers (from nc)
  // are kept to compare.
  const std::vector<std::vector<std::string>> inputs{
      {"SET k \"a b\"\r\n", "GET k\r\n", "SET e \"x\\x41\\n\\\"q\\\"\" \r\n", "GET e\r\n", "SET s 'it\\'s'\r\n",
       "FAKE COMMAND\r\n"},
      {"HELLO 3\r\n", "SUBSCRIBE ch\r\n", "RESET\r\n", "SUBSCRIBE ch\r\n", "PING\r\n", "RESET\r\n", "HELLO 3\r\n",
       "HELLO 2\r\n", "GET k\r\n"},
      {"SET u v\r\n", "SET k \"abc\r\n", "GET k\r\n"}};
  std::vector<std::string> answers;
  {
    tcpdump_recording rec(file, port);
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::string feed = "(";
      for (std::size_t j = 0; j < inputs[i].size(); ++j) {
        const auto line = dir / ("in" + std::to_string(i) + "_" + std::to_string(j));
        std::ofstream(line, std::ios::binary) << inputs[i][j];
        feed += "cat " + line.string() + "; sleep 0.05; ";
      }
      feed += ")";
      answers.push_back(read_command_output("sh -c '" + feed + " | timeout 10 nc -q 1 127.0.0.1 " + p + "'"));
    }
  }
  // redis-server itself: the unbalanced quote is answered, then the connection closed.
  CHECK(answers[2] == "+OK\r\n-ERR Protocol error: unbalanced quotes in request\r\n");

  for (const std::string& cut : {std::string("whole"), std::string("mid")}) {
    // The cut recording starts after the first session's handshake: its first bytes
    // are an inline command, and nothing says which end is the server but the content.
    const auto used = cut == "whole" ? file : dir / "cut.pcap";
    if (cut == "mid") cut_pcap(file, used, 3);
    INFO(cut);
    const auto out = decoded(read_command_output(binary + " decode --format jsonl " + used.string() + " 2>/dev/null"));
    // The sessions ran one after the other: number them by first appearance.
    std::map<std::string, std::size_t> index;
    std::vector<std::vector<std::string>> sessions;
    std::vector<std::vector<std::string>> session_replies;
    for (const json::object& o : out) {
      CHECK(o.at("server").as_string() == "127.0.0.1:" + p);
      const std::string c = o.at("client").as_string().c_str();
      if (index.emplace(c, sessions.size()).second) {
        sessions.emplace_back();
        session_replies.emplace_back();
      }
      sessions[index[c]].push_back(o.at("kind").as_string() == "push" ? "push" : command_text(o));
      session_replies[index[c]].push_back(json::serialize(o.at("reply")));
    }
    REQUIRE(sessions.size() == 3);
    const std::vector<std::string> first{"SET k a b", "GET k", "SET e xA\n\"q\"", "GET e", "SET s it's", "FAKE COMMAND"};
    CHECK(sessions[0] == first);
    CHECK(session_replies[0].back() == "\"ERR unknown command 'FAKE', with args beginning with: 'COMMAND' \"");
    REQUIRE(sessions[1] == std::vector<std::string>{"HELLO 3", "SUBSCRIBE ch", "RESET", "SUBSCRIBE ch", "PING", "RESET",
                                                    "HELLO 3", "HELLO 2", "GET k"});
    // After RESET, RESP2 subscribed mode: PING answers as an array; HELLO 2 gives a flat array.
    CHECK(session_replies[1][4] == "[\"pong\",\"\"]");
    CHECK(session_replies[1][8] == "\"a b\"");
    REQUIRE(sessions[2] == std::vector<std::string>{"SET u v", "SET k \"abc", "GET k"});
    CHECK(session_replies[2][1] == "\"ERR Protocol error: unbalanced quotes in request\"");
    CHECK(session_replies[2][2] == "null");  // never answered: the server closed
  }
}

TEST_CASE("real TLS and HTTP on a Redis port are named once each in the summary", "[real][protocols][cli]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with("nc");
  if (binary.empty()) return;
  ltest::redis_server server;
  temp_dir dir;
  const std::string p = std::to_string(server.port());
  const auto file = dir / "other.pcap";
  {
    tcpdump_recording rec(file, server.port());
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    // A TLS client against the plain-text server, twice; an HTTP request once.
    for (int i = 0; i < 2; ++i) {
      run("sh -c 'echo | timeout 1 openssl s_client -connect 127.0.0.1:" + p + " >/dev/null 2>&1 || true'");
    }
    run("sh -c 'printf \"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\" | nc -q 1 127.0.0.1 " + p + " >/dev/null'");
    run(cli(server.port(), "PING"));
  }
  for (const char* command : {"decode", "analyze"}) {
    const std::string err = read_command_output(binary + " " + command + " " + file.string() + " 2>&1 >/dev/null");
    INFO(err);
    const bool openssl = on_path("openssl");
    if (openssl) {
      CHECK_THAT(err, Catch::Contains("TLS: cannot decode; capture before the TLS terminator or on the server — 2 flows: 127.0.0.1:"));
    }
    CHECK_THAT(err, Catch::Contains("HTTP: not Redis — 1 flow: 127.0.0.1:"));
    // Once each.
    CHECK(err.find("TLS:") == err.rfind("TLS:"));
    CHECK(err.find("HTTP:") == err.rfind("HTTP:"));
  }
}
