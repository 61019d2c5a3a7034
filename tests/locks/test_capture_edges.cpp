// Captures as people take them (issue 42 item 6), through the CLI: joined while a lock
// was held, a wrong --port, one direction only, absolute times, and HTML/SVG from stdin.
// The truth each is checked against comes from outside lockscope: the Redisson
// processes' own logs, tcpdump's reading of the same files (sides, filters, times).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "capture_builder.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/real_capture.hpp"
#include "lockscope/test/shell.hpp"
#include "lockscope/test/temp_dir.hpp"

namespace {

namespace json = boost::json;
using lockscope::test::command_output;
using lockscope::test::temp_dir;

const std::string source_dir = LOCKSCOPE_SOURCE_DIR;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

// The CLI's stdout, stderr (in `err`) and exit status.
struct run_result {
  std::string out, err;
  int status = -1;
};
run_result run_cli(const std::string& args, const std::string& env = {}, const std::string& stdin_file = {}) {
  static int n = 0;
  const std::string err_file = "/tmp/lockscope-edges-err-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  run_result r;
  int status = 0;
  r.out = command_output(env + " " + std::string(LOCKSCOPE_CLI_PATH) + " analyze " + args +
                             (stdin_file.empty() ? "" : " < " + stdin_file) + " 2>" + err_file,
                         status);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_file);
  std::filesystem::remove(err_file);
  return r;
}

// A classic pcap copied from its first packet at or after `from_us` (epoch µs): a
// capture started then.
std::int64_t cut_pcap_at(const std::filesystem::path& in, const std::filesystem::path& out, std::int64_t from_us) {
  std::ifstream f(in, std::ios::binary);
  std::ofstream o(out, std::ios::binary);
  char header[24];
  f.read(header, sizeof header);
  o.write(header, sizeof header);
  std::int64_t first = -1;
  char record[16];
  while (f.read(record, sizeof record)) {
    std::uint32_t sec = 0, usec = 0, captured = 0;
    std::memcpy(&sec, record, 4);
    std::memcpy(&usec, record + 4, 4);
    std::memcpy(&captured, record + 8, 4);
    std::string data(captured, '\0');
    f.read(data.data(), captured);
    const std::int64_t ts = std::int64_t{sec} * 1'000'000 + usec;
    if (ts < from_us) continue;
    if (first < 0) first = ts;
    o.write(record, sizeof record);
    o.write(data.data(), captured);
  }
  return first;
}

struct logged_hold {
  std::string lock, owner;
  std::int64_t acquired_ms = 0, released_ms = 0;
};

// The first hold of `lock` in a Redisson driver's log that lasted more than a second.
logged_hold long_hold_in_log(const std::string& log, const std::string& lock) {
  std::map<std::string, std::int64_t> since;
  std::istringstream s(read_file(log));
  for (std::string line; std::getline(s, line);) {
    const json::object o = json::parse(line).as_object();
    if (o.at("lock").as_string() != lock) continue;
    const std::string owner(o.at("owner").as_string());
    const std::int64_t ms = o.at("ms").to_number<std::int64_t>();
    if (o.at("did") == "acquired") since[owner] = ms;
    if (o.at("did") == "released" && since.count(owner) && ms - since[owner] > 1000) {
      return {lock, owner, since[owner], ms};
    }
  }
  return {};
}

// The server ports of a capture, as tcpdump reads its SYN-ACKs' source ports.
std::vector<std::string> server_ports_by_tcpdump(const std::string& pcap) {
  const std::string out = lockscope::test::read_command_output(
      "tcpdump -nn -r " + pcap + " 'tcp[tcpflags] & (tcp-syn|tcp-ack) == (tcp-syn|tcp-ack)' 2>/dev/null");
  std::vector<std::string> ports;
  for (const std::string& l : lines_of(out)) {
    // "12:00:00.000000 IP 127.0.0.1.56287 > 127.0.0.1.36234: Flags [S.], ..."
    const std::size_t ip = l.find(" IP ");
    if (ip == std::string::npos) continue;
    const std::string from = l.substr(ip + 4, l.find(' ', ip + 4) - ip - 4);
    const std::string port = from.substr(from.rfind('.') + 1);
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  return ports;
}

bool have_cli() {
  const std::string binary = LOCKSCOPE_CLI_PATH;
  if (binary.empty() || !std::filesystem::exists(binary)) {
    WARN("the lockscope binary is not built: skipping");
    return false;
  }
  return true;
}

// "  +1.014188  " or "  2026-…Z  ": the time that begins an event line.
std::string time_field(const std::string& line) {
  const std::size_t from = line.find_first_not_of(' ');
  return line.substr(from, line.find(' ', from) - from);
}

double relative_seconds(const std::string& field) { return std::stod(field); }

}  // namespace

// Joined while locks were held: Redisson's log says who held each lock when the cut
// capture begins; the analysis must show that holder holding from the capture's start,
// at least as long as the log's hold after the cut and at most its whole hold.
TEST_CASE("capture edges: a holder seen first by its renewal or release holds from the capture's start (real "
          "Redisson, cut mid-hold)",
          "[edges][redisson][real]") {
  if (!have_cli()) return;
  temp_dir tmp;
  std::size_t checked = 0;
  for (const char* version : {"3.16.8", "3.27.2", "4.7.0"}) {
    const std::string base = source_dir + "/tests/redisson/redisson-" + version;
    for (const char* lock : {"rlock", "fair", "spin"}) {
      const logged_hold hold = long_hold_in_log(base + ".log.jsonl", lock);
      INFO(version << " " << lock << " " << hold.owner);
      REQUIRE(!hold.owner.empty());
      const auto cut = tmp / (std::string(version) + "-" + lock + ".pcap");
      const std::int64_t start_us = cut_pcap_at(base + ".pcap", cut, (hold.acquired_ms + 500) * 1000);
      REQUIRE(start_us > 0);
      const run_result jsonl = run_cli(cut.string() + " --format jsonl --lock " + lock);
      REQUIRE(jsonl.status == 0);
      CHECK(lockscope::test::jsonl_errors(jsonl.out, lockscope::test::event_line_errors) == "");
      // Joined mid-run, subscriber connections only receive pushes: no one-direction capture.
      CHECK(jsonl.err.find("were captured") == std::string::npos);
      CHECK(jsonl.err.find("one direction") == std::string::npos);
      bool found = false;
      for (const std::string& line : lines_of(jsonl.out)) {
        const json::object o = json::parse(line).as_object();
        if (o.at("owner").as_string() != hold.owner) continue;
        const std::string event(o.at("event").as_string());
        if (event != "released" && event != "expired" && event != "force_released") continue;
        INFO(line);
        CHECK(o.contains("since_capture_start"));
        REQUIRE(o.contains("held_ms"));
        const double held = o.at("held_ms").to_number<double>();
        // At least the part of the hold the capture saw (less 50 ms: the JVM logs its
        // release up to ~25 ms after the reply is on the wire), at most the whole hold.
        CHECK(held >= static_cast<double>(hold.released_ms * 1000 - start_us) / 1000 - 50);
        CHECK(held <= static_cast<double>(hold.released_ms - hold.acquired_ms) + 10);
        found = true;
        break;
      }
      CHECK(found);
      // Text: "held ≥1.01s", never a release with no held time.
      const run_result text = run_cli(cut.string() + " --lock " + lock + " --no-summary");
      REQUIRE(text.status == 0);
      const std::string owner_tail = hold.owner.substr(hold.owner.rfind(':'));
      bool text_found = false;
      for (const std::string& line : lines_of(text.out)) {
        if (line.find(owner_tail + " ") == std::string::npos || line.find(" released ") == std::string::npos) continue;
        INFO(line);
        CHECK(line.find("held ≥") != std::string::npos);
        CHECK(line.find("held since before the capture") != std::string::npos);
        text_found = true;
        break;
      }
      CHECK(text_found);
      ++checked;
    }
  }
  CHECK(checked == 9);
}

TEST_CASE("capture edges: the HTML and SVG draw a hold from the capture's start for a holder held before it",
          "[edges][html][redisson][real]") {
  if (!have_cli()) return;
  temp_dir tmp;
  const std::string base = source_dir + "/tests/redisson/redisson-4.7.0";
  const logged_hold hold = long_hold_in_log(base + ".log.jsonl", "rlock");
  REQUIRE(!hold.owner.empty());
  const auto cut = tmp / "cut.pcap";
  REQUIRE(cut_pcap_at(base + ".pcap", cut, (hold.acquired_ms + 500) * 1000) > 0);
  const run_result svg = run_cli(cut.string() + " --format svg --lock rlock");
  REQUIRE(svg.status == 0);
  // The hold's bar starts at the left edge (data-t0 is relative to the capture's start).
  const std::size_t before = svg.out.find("class=\"m hold c");
  REQUIRE(before != std::string::npos);
  const std::string first_hold = svg.out.substr(before, svg.out.find("/>", before) - before);
  INFO(first_hold);
  CHECK(first_hold.find(" before\"") != std::string::npos);
  CHECK(first_hold.find("data-t0=\"0\"") != std::string::npos);
  CHECK(first_hold.find(hold.owner) != std::string::npos);
  const run_result html = run_cli(cut.string() + " --format html");
  REQUIRE(html.status == 0);
  CHECK(html.out.find(" before\"") != std::string::npos);
}

// A --port that selects nothing: the ports tcpdump sees answering SYNs are named.
TEST_CASE("capture edges: a wrong --port names where the Redis traffic is and exits 2", "[edges][port]") {
  if (!have_cli() || !lockscope::test::on_path("tcpdump")) return;
  const std::string pcap = source_dir + "/captures/recorded/contend.pcap";
  const std::vector<std::string> servers = server_ports_by_tcpdump(pcap);
  REQUIRE(servers.size() == 1);
  for (const std::string format : {"text", "jsonl", "html"}) {
    INFO(format);
    const run_result r = run_cli(pcap + " --port 6380 --format " + format);
    CHECK(r.status == 2);
    CHECK(r.err.find("no Redis traffic on port 6380; RESP seen on 127.0.0.1:" + servers[0] + " (") != std::string::npos);
    CHECK(r.err.find(": try --port " + servers[0] + "\n") != std::string::npos);
  }
  const run_result right = run_cli(pcap + " --port " + servers[0] + " --summary");
  CHECK(right.status == 0);
  CHECK(right.err.find("no Redis traffic") == std::string::npos);
  // Standard input cannot be read twice: said, not guessed.
  const run_result piped = run_cli("- --port 6380", {}, pcap);
  CHECK(piped.status == 2);
  CHECK(piped.err.find("no Redis traffic on port 6380 (standard input cannot be read again") != std::string::npos);
  // decode too.
  int status = 0;
  command_output(std::string(LOCKSCOPE_CLI_PATH) + " decode " + pcap + " --port 6380 >/dev/null 2>&1", status);
  CHECK(WEXITSTATUS(status) == 2);
}

// One direction, as tcpdump 'dst port P' / 'src port P' keeps it from a real recording.
TEST_CASE("capture edges: a capture of one direction is said once, and the lines stay in time order",
          "[edges][one-direction]") {
  if (!have_cli() || !lockscope::test::on_path("tcpdump")) return;
  temp_dir tmp;
  const std::string pcap = source_dir + "/captures/recorded/contend.pcap";
  const std::vector<std::string> servers = server_ports_by_tcpdump(pcap);
  REQUIRE(servers.size() == 1);
  struct side {
    const char* filter;
    const char* said;
  };
  for (const side s : {side{"dst port ", "only requests were captured"}, side{"src port ", "only replies were captured"}}) {
    const auto one = tmp / "one.pcap";
    REQUIRE(lockscope::test::run("tcpdump -r " + pcap + " -w " + one.string() + " '" + s.filter + servers[0] +
                                 "' 2>/dev/null") == 0);
    INFO(s.filter);
    const run_result r = run_cli(one.string());
    CHECK(r.status == 0);
    const std::size_t at = r.err.find(s.said);
    CHECK(at != std::string::npos);
    CHECK(r.err.find(s.said, at + 1) == std::string::npos);  // once
    CHECK(r.err.find("capture both directions") != std::string::npos);
    // Every lock's lines in time order.
    double last = -1e9;
    for (const std::string& line : lines_of(r.out)) {
      if (line.starts_with("== ")) last = -1e9;
      if (!line.starts_with("    +")) continue;
      const double t = relative_seconds(time_field(line));
      INFO(line);
      CHECK(t >= last);
      last = t;
    }
  }
  // Both directions: nothing said.
  const run_result both = run_cli(pcap);
  CHECK(both.err.find("were captured") == std::string::npos);
  CHECK(both.err.find("one direction") == std::string::npos);
}

// The header's start is the first packet's time as tcpdump prints it (-tt); --time abs
// lines carry the JSONL's times (the same events in the same order).
TEST_CASE("capture edges: the text states the capture's start, and --time abs stamps each line", "[edges][time]") {
  if (!have_cli() || !lockscope::test::on_path("tcpdump")) return;
  const std::string pcap = source_dir + "/captures/recorded/contend.pcap";
  const std::string first = lockscope::test::read_command_output("tcpdump -tt -nn -c 1 -r " + pcap + " 2>/dev/null");
  const std::string epoch = first.substr(0, first.find(' '));  // "1795...350418"
  const std::time_t seconds = std::stol(epoch.substr(0, epoch.find('.')));
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  const std::string iso = std::string(date) + "." + epoch.substr(epoch.find('.') + 1) + "Z";

  const run_result rel = run_cli(pcap + " --no-summary", "env -u TZ");
  REQUIRE(rel.status == 0);
  CHECK(lines_of(rel.out).front() == "capture start " + iso + "; times are seconds after it");
  // TZ set: the local time too, with its offset (India: +05:30, no daylight saving).
  const run_result india = run_cli(pcap + " --no-summary", "TZ=Asia/Kolkata");
  CHECK(lines_of(india.out).front().starts_with("capture start " + iso + " ("));
  CHECK(lines_of(india.out).front().find("+05:30 local); times are seconds after it") != std::string::npos);

  const run_result abs = run_cli(pcap + " --no-summary --time abs", "env -u TZ");
  REQUIRE(abs.status == 0);
  const run_result jsonl = run_cli(pcap + " --format jsonl");
  std::vector<std::string> stamps;
  for (const std::string& line : lines_of(abs.out)) {
    if (line.starts_with("  2")) stamps.push_back(time_field(line));
  }
  std::vector<double> ts;
  for (const std::string& line : lines_of(jsonl.out)) ts.push_back(json::parse(line).as_object().at("ts").to_number<double>());
  REQUIRE(stamps.size() == ts.size());
  REQUIRE(!ts.empty());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    INFO(stamps[i]);
    std::tm t{};
    REQUIRE(::strptime(stamps[i].c_str(), "%Y-%m-%dT%H:%M:%S", &t) != nullptr);
    const double s = static_cast<double>(::timegm(&t)) + std::stod(stamps[i].substr(19, 7));
    CHECK(stamps[i].back() == 'Z');
    CHECK(s == Approx(ts[i]).margin(1e-6));
  }
  CHECK(lines_of(abs.out).front() == "capture start " + iso + "; times are UTC");
  const run_result abs_india = run_cli(pcap + " --no-summary --time abs", "TZ=Asia/Kolkata");
  CHECK(abs_india.out.find("+05:30  ") != std::string::npos);
  CHECK(lines_of(abs_india.out).front().ends_with("; times are local (+05:30)"));
}

// Live text (--replay runs the live loop): lock names of 1, 16 and 42 columns; the
// client column starts at the same place on every event line.
TEST_CASE("capture edges: live text columns stay aligned whatever the lock name's width", "[edges][live][columns]") {
  if (!have_cli()) return;
  temp_dir tmp;
  using lockscope::timeline_test::capture_builder;
  capture_builder b;
  const std::int64_t t = 1'700'000'000'000'000;
  const std::vector<std::string> names = {"a", "nonreentrantfair", "orders:eu-west-1:customer:1234567:checkout"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int c = b.connect("10.0.0.2", static_cast<std::uint16_t>(50000 + i), "10.0.0.1", 6379, t + 1000 * i);
    b.command(c, t + 10'000 + 1000 * i, {"SET", names[i], "tok" + std::to_string(i), "NX", "PX", "30000"}, "+OK\r\n");
  }
  const auto pcap = tmp / "widths.pcap";
  b.write(pcap.string());
  const run_result r = run_cli("--replay " + pcap.string() + " --replay-speed 0");
  REQUIRE(r.status == 0);
  std::vector<std::size_t> columns;
  std::vector<std::string> seen;
  for (const std::string& line : lines_of(r.out)) {
    const std::size_t client = line.find("10.0.0.2:");
    if (client == std::string::npos || !line.starts_with("    +")) continue;
    // Display columns before the client (the … is one column in three bytes).
    std::size_t cols = 0;
    for (std::size_t i = 0; i < client; ++i) cols += (static_cast<unsigned char>(line[i]) & 0xc0) != 0x80;
    columns.push_back(cols);
    seen.push_back(line);
  }
  INFO(r.out);
  REQUIRE(columns.size() >= 3);
  CHECK(std::adjacent_find(columns.begin(), columns.end(), std::not_equal_to<>()) == columns.end());
  // The long name keeps its head and tail.
  CHECK(r.out.find("orders:eu-west-…1234567:checkout") != std::string::npos);
  CHECK(lockscope::locks::fit_column("a", 4) == "a   ");
  CHECK(lockscope::locks::fit_column("abcdefgh", 5) == "ab…gh");
}

// `… | lockscope analyze - --format html|svg`: the same report as from the file, and
// nothing left in $TMPDIR; a spool limit that is too small is a clear error.
TEST_CASE("capture edges: html and svg read standard input through a spool", "[edges][stdin]") {
  if (!have_cli()) return;
  temp_dir tmp;
  const std::string pcap = source_dir + "/captures/recorded/contend.pcap";
  const std::string env = "TMPDIR=" + tmp.path.string();
  for (const std::string format : {"html", "svg --lock orders:42"}) {
    INFO(format);
    const run_result file = run_cli(pcap + " --format " + format, env);
    const run_result piped = run_cli("- --format " + format, env, pcap);
    REQUIRE(piped.status == 0);
    CHECK(piped.err.find("not a capture") == std::string::npos);
    std::string expected = file.out;
    for (std::size_t at; (at = expected.find(pcap)) != std::string::npos;) expected.replace(at, pcap.size(), "-");
    CHECK(piped.out == expected);
    CHECK(piped.out.find("/proc/self/fd") == std::string::npos);
  }
  const run_result small = run_cli("- --format html --stdin-spool-max 1000", env, pcap);
  CHECK(small.status == 2);
  CHECK(small.err.find("standard input is larger than --stdin-spool-max (1000 bytes)") != std::string::npos);
  CHECK(std::filesystem::is_empty(tmp.path));  // the spool is gone however the run ended
  const run_result nowhere = run_cli("- --format html", "TMPDIR=/nonexistent-lockscope-dir", pcap);
  CHECK(nowhere.status == 2);
  CHECK(nowhere.err.find("-: cannot spool standard input") != std::string::npos);
}

// A real one: tcpdump 'tcp dst port P' on loopback while two `lockscope lock` processes
// contend on a real redis-server (their exit statuses say both ran). Needs CAP_NET_RAW.
TEST_CASE("capture edges: a real capture of requests only (tcpdump 'dst port') is said once", "[edges][one-direction][real]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  if (!have_cli()) return;
  lockscope::test::redis_server server;
  temp_dir tmp;
  const std::string port = std::to_string(server.port());
  const auto pcap = tmp / "requests.pcap";
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string url = "redis://127.0.0.1:" + port;
  const std::string script =
      "tcpdump -i lo -U --immediate-mode -w " + pcap.string() + " 'tcp dst port " + port + "' 2>/dev/null & t=$!; " +
      "sleep 1; " + cli + " lock edges:k --redis " + url + " -- sleep 0.5 & h=$!; sleep 0.2; " + cli +
      " lock edges:k --redis " + url + " --wait 3s -- true; w=$?; wait $h; a=$?; sleep 0.5; kill -INT $t; wait $t; " +
      "exit $((w + a))";
  std::ofstream(tmp / "run.sh") << script;
  REQUIRE(lockscope::test::run("bash " + (tmp / "run.sh").string()) == 0);  // both held the lock
  if (!std::filesystem::exists(pcap) || std::filesystem::file_size(pcap) <= 24) {
    WARN("tcpdump could not capture on lo (needs CAP_NET_RAW): skipping");
    return;
  }
  const run_result r = run_cli(pcap.string());
  CHECK(r.status == 0);
  const std::size_t at = r.err.find("only requests were captured");
  CHECK(at != std::string::npos);
  CHECK(r.err.find("only requests were captured", at + 1) == std::string::npos);
  CHECK(r.out.find(" acquired ") == std::string::npos);  // nothing decided without replies
  double last = -1e9;
  for (const std::string& line : lines_of(r.out)) {
    if (line.starts_with("== ")) last = -1e9;
    if (!line.starts_with("    +")) continue;
    const double t = relative_seconds(time_field(line));
    INFO(line);
    CHECK(t >= last);
    last = t;
  }
}
