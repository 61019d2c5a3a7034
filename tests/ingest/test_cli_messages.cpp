// The CLI's small promises: an unknown option names the nearest one, --lock that matches
// nothing fails the same way in every format, decode --command EVAL shows every script
// call, counts agree with their nouns, and the HTML report has a legend.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

std::string command_array(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string seed_capture = std::string(LOCKSCOPE_SOURCE_DIR) + "/captures/seed-redisson.pcap";

}  // namespace

TEST_CASE("cli: an unknown option is named with the nearest known one, after the command's name", "[cli][messages]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  CHECK(read_command_output(binary + " analyze --fromat html x.pcap 2>&1; echo rc=$?") ==
        "lockscope analyze: unknown option --fromat (did you mean --format?)\n"
        "Run 'lockscope analyze --help' for the options.\nrc=2\n");
  CHECK(read_command_output(binary + " decode --comand=EVAL x.pcap 2>&1; echo rc=$?") ==
        "lockscope decode: unknown option --comand (did you mean --command?)\n"
        "Run 'lockscope decode --help' for the options.\nrc=2\n");
  // Nothing near: no guess.
  CHECK(read_command_output(binary + " decode --zzzzzz x.pcap 2>&1; echo rc=$?") ==
        "lockscope decode: unknown option --zzzzzz\nRun 'lockscope decode --help' for the options.\nrc=2\n");
  // Other usage errors keep CLI11's text, with the prefix.
  CHECK_THAT(read_command_output(binary + " analyze --format pdf x.pcap 2>&1"), Catch::StartsWith("lockscope analyze: --format"));
}

TEST_CASE("cli: --lock matching no lock fails the same way in every format", "[cli][messages]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  for (const std::string format : {"text", "jsonl", "trace", "html", "svg"}) {
    CAPTURE(format);
    const std::string base = binary + " analyze " + seed_capture + " --format " + format;
    const std::string none = read_command_output(base + " --lock nosuch 2>&1 >/dev/null; echo rc=$?");
    CHECK_THAT(none, Catch::Contains("lockscope analyze: --lock nosuch: no lock of that name in the capture\n") &&
                         Catch::EndsWith("rc=2\n"));
    const std::string two = read_command_output(base + " --lock nosuch,other 2>&1 >/dev/null; echo rc=$?");
    if (format != "svg") {  // svg takes one --lock
      CHECK_THAT(two, Catch::Contains("--lock nosuch,other: no lock of those names in the capture") &&
                          Catch::EndsWith("rc=2\n"));
    }
    const std::string found = read_command_output(base + " --lock 'my*' 2>&1 >/dev/null; echo rc=$?");
    CHECK_THAT(found, Catch::EndsWith("rc=0\n") && !Catch::Contains("no lock"));
  }
}

TEST_CASE("cli: decode --command EVAL shows EVAL, EVALSHA and their read-only forms", "[cli][messages]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  temp_dir dir;
  const auto file = dir / "scripts.pcap";
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake()
      .client(command_array({"EVAL", "return 1", "0"}) + command_array({"EVALSHA", std::string(40, 'a'), "0"}) +
              command_array({"evalsha_ro", std::string(40, 'b'), "0"}) + command_array({"EVAL_RO", "return 2", "0"}) +
              command_array({"GET", "EVAL"}))
      .server(":1\r\n-NOSCRIPT No matching script.\r\n-NOSCRIPT No matching script.\r\n:2\r\n$-1\r\n")
      .close();
  write_pcap(file, s.segments);
  auto lines = [&](const std::string& filter) {
    const std::string out = read_command_output(binary + " decode --command " + filter + " " + file.string() + " 2>/dev/null");
    return static_cast<int>(std::count(out.begin(), out.end(), '\n'));
  };
  CHECK(lines("EVAL") == 4);
  CHECK(lines("eval") == 4);
  CHECK(lines("EVALSHA") == 2);
  CHECK(lines("EVAL_RO") == 1);
  CHECK(lines("GET") == 1);
  CHECK(lines("EVAL,GET") == 5);
}

TEST_CASE("cli: counts agree with their nouns in text output", "[cli][messages]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  const std::string decode = read_command_output(binary + " decode " + seed_capture + " 2>&1 >/dev/null");
  CHECK_THAT(decode, Catch::Contains(", 1 push, ") && !Catch::Contains("1 pushes"));
  const std::string analyze = read_command_output(binary + " analyze " + seed_capture + " 2>&1 >/dev/null");
  CHECK_THAT(analyze, Catch::Contains(", 1 lock, 9 events;") && !Catch::Contains("1 locks"));
  const std::string html = read_command_output(binary + " analyze " + seed_capture + " --format html -o /dev/null 2>&1");
  CHECK_THAT(html, Catch::Contains("; 1 lock (1 drawn, 0 left out)"));
  temp_dir dir;
  const auto file = dir / "one.pcap";
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake().client(command_array({"PING"})).server("+PONG\r\n:1\r\n").close();
  write_pcap(file, s.segments);
  const std::string one = read_command_output(binary + " decode " + file.string() + " 2>&1 >/dev/null");
  CHECK_THAT(one, Catch::Contains("1 flow (1 RESP), 1 exchange, 0 pushes") &&
                      Catch::Contains("1 reply to commands sent before the capture"));
}

TEST_CASE("cli: the HTML report has a legend of every mark", "[cli][messages]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  const std::string html = read_command_output(binary + " analyze " + seed_capture + " --format html 2>/dev/null");
  const auto legend_at = html.find("<figure class=\"legend\"");
  REQUIRE(legend_at != std::string::npos);
  const std::string legend = html.substr(legend_at, html.find("</figure>", legend_at) - legend_at);
  // Each kind of mark the swimlanes draw (swimlane_svg.cpp), in their colours.
  for (const char* label : {"hold (a colour per owner)", "reentrant hold", "lease", "wait (hatched)",
                            "attempt while waiting", "cluster redirect", "subscribed to the lock's channel",
                            "notification", "renewal", "release", "refused renewal / release", "expiry",
                            "RedLock / MultiLock hold", "anomaly (red, dashed", "zoomed out"}) {
    CAPTURE(label);
    CHECK(legend.find(label) != std::string::npos);
  }
  CHECK(count_of(legend, "<svg width=\"30\"") == 15);
  CHECK_THAT(legend, Catch::Contains("var(--anomaly)") && Catch::Contains("url(#ls-hatch)") &&
                         Catch::Contains("url(#ls-arrow)"));
  // Not the marks' classes: the page's script (and what counts marks) sees the timeline's only.
  CHECK(legend.find("class=\"m ") == std::string::npos);
  CHECK(html.find("<figure class=\"legend\"") < html.find("id=\"timeline\""));
}
