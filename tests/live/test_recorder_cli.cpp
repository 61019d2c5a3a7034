// `lockscope analyze --replay / --save-anomalies / --write` end to end: the replay gives
// the file analysis's events through the live loop, RSS stays flat over the soak
// capture, saved anomalies are reproduced by analyzing their pcaps, and tshark reads
// the --write files.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "lockscope/test/temp_dir.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const fs::path captures_dir = LOCKSCOPE_CAPTURES_DIR;

bool have_cli() {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  return !cli.empty() && fs::exists(cli);
}

struct run_result {
  std::string out, err;
  int status = -1;
};

// Runs a shell command line; stdout and stderr apart.
run_result run(const std::string& command) {
  static int counter = 0;
  const fs::path err_file = fs::temp_directory_path() /
                            ("lockscope-recorder-err-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
  run_result r;
  FILE* p = ::popen((command + " 2>" + err_file.string()).c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  r.status = ::pclose(p);
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  fs::remove(err_file);
  return r;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

using lockscope::test::temp_dir;

std::vector<fs::path> bundled_captures() {
  std::vector<fs::path> out{captures_dir / "seed-redisson.pcap"};
  for (const char* sub : {"crafted", "recorded", "thirdparty"}) {
    for (const auto& e : fs::directory_iterator(captures_dir / sub)) {
      if (e.path().extension() == ".pcap") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// (lock, kind) of every anomaly in a JSONL output.
std::multiset<std::pair<std::string, std::string>> anomalies_in(const std::string& jsonl) {
  std::multiset<std::pair<std::string, std::string>> out;
  for (const std::string& line : lines_of(jsonl)) {
    const auto v = boost::json::parse(line).as_object();
    if (v.at("event").as_string() != "anomaly") continue;
    out.emplace(std::string(v.at("lock").as_string()), std::string(v.at("kind").as_string()));
  }
  return out;
}

// The packet count of `lockscope analyze: N packets, …` on stderr.
std::uint64_t packets_in_summary(const std::string& err) {
  for (const std::string& line : lines_of(err)) {
    const std::string_view prefix = "lockscope analyze: ";
    const auto at = line.find(" packets, ");
    if (line.starts_with(prefix) && at != std::string::npos) return std::stoull(line.substr(prefix.size(), at));
  }
  FAIL("no totals line in: " << err);
  return 0;
}

std::uint64_t vm_rss_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6));
  }
  return 0;
}

// Packets tshark reads from a file (an independent reader).
std::uint64_t tshark_count(const fs::path& file) {
  const run_result r = run("tshark -r " + quoted(file) + " -T fields -e frame.number | wc -l");
  REQUIRE(r.status == 0);
  return std::stoull(r.out);
}

bool have_tshark() { return ::system("command -v tshark >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("replay: every bundled capture through the live loop gives analyze FILE's events", "[recorder][cli]") {
  if (!have_cli()) {
    WARN("the lockscope CLI is not built");
    return;
  }
  const std::string cli = LOCKSCOPE_CLI_PATH;
  for (const fs::path& capture : bundled_captures()) {
    INFO(capture.string());
    // The live loop runs on one thread: the same as --threads 1 (see the README on
    // --replay for the one capture where two threads differ).
    const run_result file = run(cli + " analyze --threads 1 --format jsonl " + quoted(capture));
    const run_result replay = run(cli + " analyze --format jsonl --replay-speed 0 --replay " + quoted(capture));
    REQUIRE(file.status == 0);
    REQUIRE(replay.status == 0);
    CHECK(replay.out == file.out);
    // The end-of-run totals agree too (packets, exchanges, operations, locks, events).
    const auto totals = [](const std::string& err) {
      for (const std::string& line : lines_of(err)) {
        const auto at = line.find(" packets, ");
        if (at != std::string::npos) return line.substr(0, line.find("; gaps"));
      }
      return std::string();
    };
    CHECK(totals(replay.err) == totals(file.err));
  }
}

TEST_CASE("replay: decode through its live loop prints decode FILE's exchanges", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  for (const fs::path& capture : bundled_captures()) {
    INFO(capture.string());
    const run_result file = run(cli + " decode --format jsonl " + quoted(capture));
    const run_result replay = run(cli + " decode --format jsonl --replay-speed 0 --replay " + quoted(capture));
    REQUIRE(file.status == 0);
    REQUIRE(replay.status == 0);
    CHECK(!replay.out.empty());
    CHECK(replay.out == file.out);
  }
}

TEST_CASE("replay: paced at capture speed, the events are the same", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  // The seed spans 3 s; at 4× the replay takes about 0.75 s, with waits between packets.
  const fs::path seed = captures_dir / "seed-redisson.pcap";
  const auto started = std::chrono::steady_clock::now();
  const run_result paced = run(cli + " analyze --format jsonl --replay-speed 4 --replay " + quoted(seed));
  const auto took = std::chrono::steady_clock::now() - started;
  const run_result file = run(cli + " analyze --format jsonl " + quoted(seed));
  REQUIRE(paced.status == 0);
  CHECK(paced.out == file.out);
  CHECK(took >= 700ms);
  // The text stream names each event's lock, as live output does.
  const run_result text = run(cli + " analyze --replay-speed 0 --replay " + quoted(seed));
  CHECK(text.out.find("myLock") != std::string::npos);
  CHECK(text.out.find("acquired") != std::string::npos);
}

TEST_CASE("replay: bad input", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const run_result missing = run(cli + " analyze --replay /nonexistent/x.pcap");
  CHECK(missing.status != 0);
  CHECK(missing.err.find("/nonexistent/x.pcap") != std::string::npos);
  const run_result both = run(cli + " analyze --replay " + quoted(captures_dir / "seed-redisson.pcap") + " -i lo");
  CHECK(both.status != 0);
  CHECK(both.out.empty());
  // Recording needs the live loop: a capture file alone would silently record nothing.
  const run_result file_only =
      run(cli + " analyze " + quoted(captures_dir / "seed-redisson.pcap") + " --save-anomalies /tmp");
  CHECK(file_only.status != 0);
  CHECK(file_only.err.find("--save-anomalies and --write work on live capture (-i) or --replay") !=
        std::string::npos);
  const run_result rotate_alone = run(cli + " analyze --replay " + quoted(captures_dir / "seed-redisson.pcap") + " -C 1");
  CHECK(WEXITSTATUS(rotate_alone.status) == 2);  // a usage error: 2, not CLI11's own status
  CHECK(rotate_alone.err.find("--write") != std::string::npos);
  CHECK(WEXITSTATUS(run(cli + " analyze --no-such-option").status) == 2);
  CHECK(WEXITSTATUS(run(cli + " analyze --summary --no-summary " + quoted(captures_dir / "seed-redisson.pcap")).status) == 2);
  const run_result to_stdout = run(cli + " analyze --replay " + quoted(captures_dir / "seed-redisson.pcap") + " -w -");
  CHECK(WEXITSTATUS(to_stdout.status) == 2);  // tcpdump's -w - is stdout, which carries the report here
  CHECK(to_stdout.err.find("--write: - (stdout) carries the events and report") != std::string::npos);
  CHECK(WEXITSTATUS(run(cli + " lock --no-such-option").status) == 64);  // EX_USAGE, as lock's other usage errors
  CHECK(run(cli + " analyze --help").status == 0);
}

TEST_CASE("every command whose stdout takes no more (a full disk) says so and exits 2", "[recorder][cli]") {
  if (!have_cli()) return;
  if (!fs::exists("/dev/full")) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string capture = quoted(captures_dir / "seed-redisson.pcap");
  const std::vector<std::string> commands = {
      "decode " + capture, "decode --format jsonl " + capture, "decode --replay " + capture + " --replay-speed 0",
      "analyze " + capture, "analyze --format jsonl " + capture, "resp " + quoted(captures_dir / "seed-4.2.resp"),
      "scripts", "analyze --help"};
  for (const std::string& c : commands) {
    CAPTURE(c);
    const run_result r = run(cli + " " + c + " >/dev/full");
    CHECK(WEXITSTATUS(r.status) == 2);
    CHECK(r.err.find("cannot write stdout: No space left on device") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 2);  // once, and at most resp's own line
  }
}

TEST_CASE("every command whose stderr takes no more (a full disk) loses its messages, not its work", "[recorder][cli]") {
  // fmt::print(stderr, …) threw on the failed write: the closing totals line aborted
  // analyze (SIGABRT, a core) after its report was written.
  if (!have_cli()) return;
  if (!fs::exists("/dev/full")) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string capture = quoted(captures_dir / "seed-redisson.pcap");
  temp_dir dir;
  struct attempt {
    std::string args;
    int status;
  };
  const std::vector<attempt> attempts = {
      {"analyze " + capture, 0},
      {"analyze --format jsonl " + capture, 0},
      {"analyze --summary --replay-speed 0 --replay " + capture + " --save-anomalies " + quoted(dir.path) + " -w " +
           quoted(dir.path / "w.pcap"),
       0},
      {"analyze --format html -o " + quoted(dir.path / "r.html") + " " + capture, 0},
      {"decode " + capture, 0},
      {"resp " + quoted(captures_dir / "seed-4.2.resp"), 0},
      {"analyze /nonexistent.pcap", 2},  // the error is lost, its status is not
      {"analyze --port 0 " + capture, 2},
  };
  for (const attempt& a : attempts) {
    CAPTURE(a.args);
    const run_result r = run("{ " + cli + " " + a.args + " 2>/dev/full; }");  // run()'s own 2> applies outside
    CHECK(WIFEXITED(r.status));
    CHECK(WEXITSTATUS(r.status) == a.status);
    if (a.status == 0 && a.args.find(" -o ") == std::string::npos && a.args.find("--replay") == std::string::npos) {
      CHECK(!r.out.empty());
    }
  }
  CHECK(fs::file_size(dir.path / "r.html") > 0);
  CHECK(fs::file_size(dir.path / "w.pcap") > 0);
}

TEST_CASE("options: values that make no sense are refused as usage errors", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string seed = quoted(captures_dir / "seed-redisson.pcap");
  struct attempt {
    std::string args, says;
  };
  // Each was taken: a negative threshold flagged every free moment, a timeout of 0 or
  // less made each packet a new connection, NaN compared false with every hold, port 0
  // matched nothing, -1 wrapped to 2^64 - 1, and the empty -Z and --metrics-listen
  // meant "not given".
  const std::vector<attempt> refused = {
      {"--idle-threshold -5 " + seed, "--idle-threshold: must be a number at least 0"},
      {"--flow-timeout -1 " + seed, "--flow-timeout: must be a number more than 0"},
      {"--flow-timeout 0 " + seed, "--flow-timeout: must be a number more than 0"},
      {"--long-hold nan " + seed, "--long-hold: must be a number more than 0 and at most 1000000000 (got nan)"},
      {"--long-hold inf " + seed, "(got inf)"},
      {"--port 0 " + seed, "--port: must be a number at least 1 and at most 65535 (got 0)"},
      {"--port 6379,0 " + seed, "(got 0)"},
      {"--top -1 " + seed, "--top: must be a number at least 0"},
      {"--max-locks -1 " + seed, "--max-locks: must be a number at least 0"},
      {"--group-window nan " + seed, "--group-window: must be"},
      {"--link-window -1 " + seed, "--link-window: must be"},
      {"-i lo -Z ''", "--relinquish-privileges: must be a user name, not empty"},
      {"-i lo --metrics-listen ''", "--metrics-listen: must be ADDR:PORT, not empty"},
      {"-i lo --stats-interval -1", "--stats-interval: must be"},
      {"--replay " + seed + " --replay-speed nan", "--replay-speed: must be"},
      {"--replay " + seed + " --save-anomalies /tmp --save-window nan", "--save-window: must be"},
  };
  for (const attempt& a : refused) {
    CAPTURE(a.args);
    // Bounded: a live one that is not refused would capture until stopped.
    const run_result r = run("timeout -s INT 5 " + cli + " analyze --summary " + a.args);
    CHECK(WEXITSTATUS(r.status) == 2);
    CHECK(r.err.find(a.says) != std::string::npos);
    CHECK(r.out.empty());
  }
  const run_result decode = run(cli + " decode --max-argument -1 " + seed);
  CHECK(WEXITSTATUS(decode.status) == 2);
  CHECK(decode.err.find("--max-argument: must be a number at least 0") != std::string::npos);
  // The edges that make sense are taken.
  CHECK(run(cli + " analyze --summary --idle-threshold 0 --top 0 --port 16379 --flow-timeout 0.5 " + seed).status == 0);
}

TEST_CASE("options: live capture's own options are refused with capture files", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string seed = quoted(captures_dir / "seed-redisson.pcap");
  // Each did nothing to a file, silently: a user could believe the file was filtered.
  for (const std::string command : {"analyze", "decode"}) {
    for (const std::string option : {"--filter 'tcp port 1'", "-Z nobody", "--no-drop", "--buffer-mb 8",
                                     "--stats-interval 5"}) {
      CAPTURE(command, option);
      const run_result file = run(cli + " " + command + " " + option + " " + seed);
      CHECK(WEXITSTATUS(file.status) == 2);
      CHECK(file.err.find(option.substr(0, option.find(' ')) + ": only for live capture (-i IFACE)") !=
            std::string::npos);
      CHECK(file.out.empty());
      // --replay is the live loop without a capture: its drop reports run, nothing else does.
      const run_result replay = run(cli + " " + command + " --replay-speed 0 --replay " + seed + " " + option);
      CHECK(WEXITSTATUS(replay.status) == (option.starts_with("--stats-interval") ? 0 : 2));
    }
  }
}

TEST_CASE("analyze: an output that is one of the inputs is refused, the input left as it was", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  const fs::path input = dir.path / "victim.pcap";
  fs::copy_file(captures_dir / "seed-redisson.pcap", input);
  const auto size = fs::file_size(input);
  fs::create_symlink(input.filename(), dir.path / "alias.pcap");
  fs::copy_file(input, dir.path / "w3");
  struct attempt {
    std::string args, named;
  };
  const std::vector<attempt> attempts = {
      {"--format html -o " + quoted(input) + " " + quoted(input), "-o"},
      {"-o " + quoted(dir.path / "alias.pcap") + " " + quoted(input), "-o"},                 // the same file by a link
      {"--replay " + quoted(input) + " -w " + quoted(input), "--write"},
      {"--replay " + quoted(dir.path / "w3") + " -w " + quoted(dir.path / "w") + " -C 1", "--write"},  // -C's w3
  };
  for (const attempt& a : attempts) {
    CAPTURE(a.args);
    const run_result r = run(cli + " analyze " + a.args);
    CHECK(WEXITSTATUS(r.status) == 2);
    CHECK(r.err.find(a.named + ": ") != std::string::npos);
    CHECK(r.err.find("it would be overwritten") + r.err.find("-C would write w3") != 2 * std::string::npos);
    CHECK(fs::file_size(input) == size);
    CHECK(fs::file_size(dir.path / "w3") == size);
  }
  // A different file is fine.
  CHECK(run(cli + " analyze --replay " + quoted(input) + " --replay-speed 0 -w " + quoted(dir.path / "copy.pcap")).status == 0);
  CHECK(fs::file_size(input) == size);
}

TEST_CASE("replay: the soak capture through the live loop keeps RSS flat", "[recorder][cli][soak]") {
  const std::string generator = LOCKSCOPE_SOAK_GENERATOR;
  if (!have_cli() || generator.empty() || !fs::exists(generator)) {
    WARN("needs the lockscope CLI and lock_soak_capture");
    return;
  }
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  const fs::path capture = dir.path / "soak.pcap";
  // 2,000 short-lived connections with fresh owners (80,000 of them), 64 locks: about
  // 62 MB, 510,000 packets and 250,000 exchanges, replayed as fast as possible (a few seconds).
  REQUIRE(run(quoted(fs::path(generator)) + " " + quoted(capture) + " --connections 2000").status == 0);
  for (const char* format : {"--summary", "--format text"}) {
    INFO(format);
    const fs::path err = dir.path / "err";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(null, 1);
      ::dup2(e, 2);
      const std::string f = format;
      if (f == "--summary") {
        ::execl(cli.c_str(), cli.c_str(), "analyze", "--summary", "--replay-speed", "0", "--replay", capture.c_str(),
                nullptr);
      } else {
        ::execl(cli.c_str(), cli.c_str(), "analyze", "--format", "text", "--replay-speed", "0", "--replay",
                capture.c_str(), nullptr);
      }
      ::_exit(127);
    }
    // VmRSS every 5 ms while it runs.
    std::vector<std::uint64_t> samples;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (const std::uint64_t kb = vm_rss_kb(pid); kb > 0) samples.push_back(kb);
      std::this_thread::sleep_for(5ms);
    }
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream e(err);
    const std::string err_text((std::istreambuf_iterator<char>(e)), {});
    CHECK(packets_in_summary(err_text) > 300'000);
    INFO("samples: " << samples.size());
    REQUIRE(samples.size() >= 10);
    // Flat: the second half's peak is within 4 MB of the first half's (the capture's
    // owners and connections all differ, so anything kept per owner would grow), and
    // all of it within the 64 MB budget.
    const auto half = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2);
    const std::uint64_t first_peak = *std::max_element(samples.begin(), half);
    const std::uint64_t second_peak = *std::max_element(half, samples.end());
    INFO("first half peak " << first_peak << " kB, second half peak " << second_peak << " kB");
    CHECK(second_peak <= first_peak + 4096);
    CHECK(second_peak <= 64 * 1024);
  }
}

TEST_CASE("save-anomalies: each anomaly's pcap, analyzed alone, shows the same anomaly", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  std::size_t checked = 0;
  for (const fs::path& capture : bundled_captures()) {
    const run_result file = run(cli + " analyze --format jsonl " + quoted(capture));
    REQUIRE(file.status == 0);
    const auto expected = anomalies_in(file.out);
    if (expected.empty()) continue;
    INFO(capture.string());
    temp_dir dir;
    // A long hold is shown only by a file that holds its start: the window must be longer
    // than --long-hold (60 s).
    const std::string window = capture.stem() == "long_hold" ? " --save-window 90" : "";
    const run_result replay = run(cli + " analyze --summary --replay-speed 0 --save-anomalies " + quoted(dir.path) +
                                  window + " --replay " + quoted(capture));
    REQUIRE(replay.status == 0);
    CHECK(replay.err.find("flight recorder: ") != std::string::npos);
    // One pair of files per lock and kind (the rest are rate-limited: 30 s per lock and kind).
    std::set<std::pair<std::string, std::string>> distinct(expected.begin(), expected.end());
    std::set<std::pair<std::string, std::string>> saved;
    for (const auto& e : fs::directory_iterator(dir.path)) {
      if (e.path().extension() != ".pcap") continue;
      INFO(e.path().filename().string());
      fs::path json_path = e.path();
      json_path.replace_extension(".json");
      REQUIRE(fs::exists(json_path));
      std::ifstream in(json_path);
      std::string json_line;
      std::getline(in, json_line);
      const auto event = boost::json::parse(json_line).as_object();
      const std::string lock(event.at("lock").as_string()), kind(event.at("kind").as_string());
      CHECK(event.at("event").as_string() == "anomaly");
      CHECK(e.path().filename().string().ends_with("-" + kind + ".pcap"));
      CHECK(saved.emplace(lock, kind).second);
      // The .json is the JSONL line analyze printed for it.
      CHECK(file.out.find(json_line + "\n") != std::string::npos);
      // The small pcap (mid-connection, a 30 s window) reproduces it.
      const run_result again = run(cli + " analyze --format jsonl " + quoted(e.path()));
      CHECK(again.status == 0);
      CHECK(anomalies_in(again.out).count({lock, kind}) >= 1);
      // And it holds only the lock's connections: never more packets than the capture.
      CHECK(packets_in_summary(again.err) <= packets_in_summary(file.err));
      ++checked;
    }
    CHECK(saved == distinct);
  }
  CHECK(checked >= 12);
}

TEST_CASE("save-anomalies: a missing or unusable directory is named before the capture starts", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string seed = quoted(captures_dir / "seed-redisson.pcap");
  const run_result missing = run(cli + " analyze --replay " + seed + " --save-anomalies /nonexistent/dir");
  CHECK(missing.status == 512);  // exit 2
  CHECK(missing.err.find("--save-anomalies /nonexistent/dir: No such file or directory") != std::string::npos);
  CHECK(missing.out.empty());
  temp_dir dir;
  std::ofstream(dir.path / "file") << "x";
  const run_result file = run(cli + " analyze --replay " + seed + " --save-anomalies " + quoted(dir.path / "file"));
  CHECK(file.status == 512);
  CHECK(file.err.find("file: not a directory") != std::string::npos);
  if (::geteuid() == 0 && ::system("command -v setpriv >/dev/null 2>&1") == 0) {
    // Not writable for the user it runs as (root writes anywhere: run as nobody).
    fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(fs::temp_directory_path(), fs::perms::others_exec, fs::perm_options::add);
    const run_result denied = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + cli + " analyze --replay " +
                                  seed + " --save-anomalies " + quoted(dir.path));
    CHECK(denied.status == 512);
    CHECK(denied.err.find(dir.path.string() + ": cannot write there as uid 65534: Permission denied") !=
          std::string::npos);
  }
}

TEST_CASE("save-anomalies: the directory stays under --save-max-mb, oldest files deleted first", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  // An old file from an earlier run counts and goes first.
  const fs::path old = dir.path / "20000101T000000.000000Z-old-long_hold.pcap";
  std::ofstream(old) << std::string(5000, 'x');
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(24));
  // Older still, but not the recorder's: someone's capture, a config, near-misses of
  // its names. They neither count nor go.
  const std::vector<std::string> foreign = {"important-capture.pcap", "config.json",
                                            "20000101T000000.000000Z-old-not_a_kind.pcap",
                                            "20000101T000000.000000Z-long_hold.pcap",
                                            "20000101T000000.000000-old-long_hold.json",
                                            "20000101T000000.000000Z-old-long_hold-x2.pcap"};
  for (const std::string& name : foreign) {
    std::ofstream(dir.path / name) << std::string(50000, 'y');
    fs::last_write_time(dir.path / name, fs::file_time_type::clock::now() - std::chrono::hours(48));
  }
  // split_quorum: several anomalies on one lock, saved one file pair each.
  const run_result r = run(cli + " analyze --summary --replay-speed 0 --save-max-mb 0.006 --save-anomalies " +
                           quoted(dir.path) + " --replay " + quoted(captures_dir / "crafted" / "split_quorum.pcap"));
  REQUIRE(r.status == 0);
  CHECK_FALSE(fs::exists(old));
  for (const std::string& name : foreign) CHECK(fs::file_size(dir.path / name) == 50000);
  std::uint64_t total = 0;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    if (std::find(foreign.begin(), foreign.end(), e.path().filename().string()) != foreign.end()) continue;
    total += fs::file_size(e.path());
    ++files;
  }
  CHECK(files >= 2);
  // At most the limit, or the last pair alone (never deleted).
  CHECK((total <= 6000 || files == 2));
  CHECK(r.err.find("old files deleted") != std::string::npos);
}

TEST_CASE("write: -C rotation as tcpdump, every packet readable by tshark", "[recorder][cli]") {
  if (!have_cli()) return;
  if (!have_tshark()) {
    WARN("tshark is not installed");
    return;
  }
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  const fs::path capture = captures_dir / "recorded" / "contend.pcap";
  const run_result r = run(cli + " analyze --summary --replay-speed 0 --replay " + quoted(capture) + " --write " +
                           quoted(dir.path / "out.pcap") + " -C 0.02");
  REQUIRE(r.status == 0);
  const std::uint64_t analyzed = packets_in_summary(r.err);
  REQUIRE(fs::exists(dir.path / "out.pcap"));
  REQUIRE(fs::exists(dir.path / "out.pcap1"));
  std::uint64_t total = 0;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    CHECK((name == "out.pcap" || (name.starts_with("out.pcap") && std::isdigit(static_cast<unsigned char>(name[8])))));
    // -C 0.02: 20,000 bytes, exceeded by at most one packet.
    CHECK(fs::file_size(e.path()) <= 20'000 + 70'000);
    total += tshark_count(e.path());
    ++files;
  }
  CHECK(files >= 2);
  CHECK(total == analyzed);
  CHECK(total == tshark_count(capture));
  CHECK(r.err.find("--write: " + std::to_string(analyzed) + " packets in " + std::to_string(files) + " files") !=
        std::string::npos);
}

TEST_CASE("write: -G names files by strftime on the loop's clock", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  // The seed spans 3 s: with -G 1, one file per second of its time, named by its epoch.
  const run_result r = run(cli + " analyze --summary --replay-speed 0 --replay " +
                           quoted(captures_dir / "seed-redisson.pcap") + " --write " +
                           quoted(dir.path / "seed-%s.pcap") + " -G 1");
  REQUIRE(r.status == 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 3);
  for (const std::string& n : names) {
    CHECK(n.starts_with("seed-17"));
    CHECK(n.ends_with(".pcap"));
  }
}

TEST_CASE("write: -G with a name that would repeat within -G is refused before writing", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  const std::string replay = cli + " analyze --summary --replay-speed 0 --replay " +
                             quoted(captures_dir / "recorded" / "contend.pcap") + " --write ";
  struct attempt {
    std::string name, rotation, says;
  };
  // The same name every interval (tcpdump's trap: each file overwrites the last), a name
  // that changes only every hour against 100 s, a second against half of one, and the
  // rotations that would be none at all.
  const std::vector<attempt> refused = {
      {"fixed.pcap", "-G 100", "-G: --write " + (dir.path / "fixed.pcap").string() + " has no strftime time conversion"},
      {"fixed.pcap", "-G 100 -C 1", "has no strftime time conversion"},
      {"h-%H.pcap", "-G 100", "its finest time conversion changes every 3600 s, more than -G 100"},
      {"s-%s.pcap", "-G 0.5", "changes every 1 s, more than -G 0.5"},
      {"c.pcap", "-C 0", "-C: must be a number more than 0"},
      {"g-%s.pcap", "-G 0", "-G: must be a number more than 0"},
      {"g-%s.pcap", "-G nan", "-G: must be a number more than 0"},
  };
  for (const attempt& a : refused) {
    CAPTURE(a.name, a.rotation);
    const run_result r = run(replay + quoted(dir.path / a.name) + " " + a.rotation);
    CHECK(WEXITSTATUS(r.status) == 2);
    CHECK(r.err.find(a.says) != std::string::npos);
    CHECK(fs::is_empty(dir.path));
  }
  // A name that repeats only after an hour is a ring of files, kept on purpose.
  const run_result ring = run(replay + quoted(dir.path / "m-%M.pcap") + " -G 60");
  CHECK(ring.status == 0);
  CHECK_FALSE(fs::is_empty(dir.path));
}

TEST_CASE("write: a --write file that cannot be created is named before the capture starts", "[recorder][cli]") {
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::string replay =
      cli + " analyze --summary --replay-speed 0 --replay " + quoted(captures_dir / "seed-redisson.pcap") + " -w ";
  const run_result missing = run(replay + "/nonexistent/w.pcap");
  CHECK(WEXITSTATUS(missing.status) == 2);
  CHECK(missing.err.find("--write /nonexistent/w.pcap: cannot create it as uid ") != std::string::npos);
  CHECK(missing.out.empty());  // before the analysis: no summary table
  temp_dir dir;
  const run_result directory = run(replay + quoted(dir.path));
  CHECK(WEXITSTATUS(directory.status) == 2);
  CHECK(directory.err.find("--write " + dir.path.string() + ": Is a directory") != std::string::npos);
  // -G: the first file's name, from the loop's clock (a replay's: its first packet's time).
  const run_result dated = run(replay + quoted(dir.path / "%Y" / "w-%s.pcap") + " -G 1");
  CHECK(WEXITSTATUS(dated.status) == 2);
  CHECK(dated.err.find("--write " + (dir.path / "2024" / "w-17").string()) != std::string::npos);
  CHECK(dated.err.find(".pcap: cannot create it") != std::string::npos);
  CHECK(fs::is_empty(dir.path));  // the probe leaves nothing behind
  if (::geteuid() == 0 && ::system("command -v setpriv >/dev/null 2>&1") == 0) {
    // Root writes anywhere: as nobody, the user a live capture started as root drops to.
    fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(fs::temp_directory_path(), fs::perms::others_exec, fs::perm_options::add);
    const run_result denied = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + replay + quoted(dir.path / "w.pcap"));
    CHECK(WEXITSTATUS(denied.status) == 2);
    CHECK(denied.err.find("--write " + (dir.path / "w.pcap").string() + ": cannot create it as uid 65534: Permission denied") !=
          std::string::npos);
    CHECK(denied.out.empty());
    std::ofstream(dir.path / "root.pcap") << "x";  // there, but not nobody's to truncate
    const run_result existing = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + replay + quoted(dir.path / "root.pcap"));
    CHECK(WEXITSTATUS(existing.status) == 2);
    CHECK(existing.err.find("root.pcap: cannot write it as uid 65534: Permission denied") != std::string::npos);
    CHECK(fs::file_size(dir.path / "root.pcap") == 1);
  }
}

TEST_CASE("write: a write that fails later (a full disk) is repeated at the end, exit 1", "[recorder][cli]") {
  if (!have_cli()) return;
  if (!fs::exists("/dev/full")) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const run_result r = run(cli + " analyze --summary --replay-speed 0 --replay " +
                           quoted(captures_dir / "recorded" / "contend.pcap") + " -w /dev/full");
  CHECK(WEXITSTATUS(r.status) == 1);
  CHECK(r.err.find("--write /dev/full: No space left on device; writing stopped, the analysis goes on") !=
        std::string::npos);
  // After the summary table, in the closing lines, where it is seen.
  CHECK(r.err.find("--write failed: /dev/full: No space left on device; writing stopped there, after ") !=
        std::string::npos);
  CHECK(r.out.find("lock ") != std::string::npos);  // the analysis went on
}

TEST_CASE("save-anomalies: an anomaly whose files cannot be written is named at the end, exit 1", "[recorder][cli]") {
  // RLIMIT_FSIZE 0 (SIGXFSZ ignored) makes every write to a file fail with EFBIG, as a
  // full disk would, while the start-up probe (an empty file) still succeeds. stdout and
  // stderr are pipes (a file would fail too): python3 sets the limit for the child only.
  if (!have_cli()) return;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  temp_dir dir;
  const std::string replay = cli + " analyze --summary --replay-speed 0 --replay " +
                             quoted(captures_dir / "recorded" / "expiry.pcap") + " --save-anomalies " + quoted(dir.path);
  temp_dir script_dir;
  const fs::path limiter = script_dir.path / "limit.py";
  std::ofstream(limiter) << R"py(import resource, signal, subprocess, sys
def limit():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
p = subprocess.run(['sh', '-c', sys.argv[1]], preexec_fn=limit, capture_output=True)
sys.stdout.buffer.write(p.stdout)
sys.stderr.buffer.write(p.stderr)
sys.exit(p.returncode)
)py";
  const run_result r = run("python3 " + quoted(limiter) + " \"" + replay + "\"");
  CHECK(WEXITSTATUS(r.status) == 1);
  CHECK(r.err.find("0 anomalies saved to") != std::string::npos);
  CHECK(r.err.find("1 write errors") != std::string::npos);
  CHECK(r.err.find("-report_daily-expired_while_held.pcap: File too large") != std::string::npos);
  CHECK(r.out.find("report:daily") != std::string::npos);  // the analysis went on
  CHECK(fs::is_empty(dir.path));  // no half-written file is left
  // The control: the same run with room writes its pair and exits 0.
  const run_result room = run(replay);
  CHECK(WEXITSTATUS(room.status) == 0);
  CHECK(room.err.find("1 anomalies saved to") != std::string::npos);
}

namespace {

// Waits until `file` contains `needle` (true) or `wait` passed.
bool file_shows(const fs::path& file, std::string_view needle, std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  do {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

std::string file_text(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("live on lo: a holder killed with SIGKILL, its lease runs out while another waits: saved and written",
          "[recorder][cli][live]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  if (!have_cli()) return;
  if (::geteuid() != 0) {
    WARN("live capture needs CAP_NET_RAW: skipped");
    return;
  }
  const std::string cli = LOCKSCOPE_CLI_PATH;
  lockscope::test::redis_server server;
  temp_dir dir;
  const fs::path saved = dir.path / "saved", out = dir.path / "out.jsonl", err = dir.path / "err",
                 written = dir.path / "all.pcap";
  fs::create_directories(saved);
  const std::string port = std::to_string(server.port());
  const pid_t analyzer = ::fork();
  REQUIRE(analyzer >= 0);
  if (analyzer == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execl(cli.c_str(), cli.c_str(), "analyze", "-i", "lo", "--port", port.c_str(), "--format", "jsonl",
            "--save-anomalies", saved.c_str(), "--save-after", "1", "--write", written.c_str(),
            "--no-drop",  // the test's directories are root's
            nullptr);
    ::_exit(127);
  }
  REQUIRE(file_shows(err, "listening on lo", 5000ms));
  std::this_thread::sleep_for(300ms);  // the capture is open
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  const std::string lock = "flight:{recorder}/1";  // sanitized in the file name
  const std::string holder_id = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:7";
  const std::string waiter_id = "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:15";
  // The holder: its own process, killed while it holds a 600 ms lease.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    lockscope::test::resp_connection c("127.0.0.1", server.port());
    c.command_argv({"EVAL", std::string(acquire.text), "1", lock, "600", holder_id});
    (void)::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char x;
  REQUIRE(::read(ready[0], &x, 1) == 1);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  // The waiter: fails, subscribes (nobody will publish: a lease that runs out says
  // nothing), and retries by its timer after the lease has run out.
  lockscope::test::resp_connection waiter("127.0.0.1", server.port());
  lockscope::test::resp_connection subscriber("127.0.0.1", server.port());
  waiter.command_argv({"EVAL", std::string(acquire.text), "1", lock, "600", waiter_id});
  subscriber.command_argv({"SUBSCRIBE", "redisson_lock__channel:{" + lock + "}"});
  std::this_thread::sleep_for(900ms);
  waiter.command_argv({"EVAL", std::string(acquire.text), "1", lock, "600", waiter_id});
  const bool shown = file_shows(out, "\"kind\":\"idle_with_waiters\"", 5000ms);
  INFO(file_text(out));
  CHECK(shown);
  // The file is written --save-after (1 s) later, by the wall clock.
  fs::path pcap;
  for (int i = 0; i < 100 && pcap.empty(); ++i) {
    for (const auto& e : fs::directory_iterator(saved)) {
      if (e.path().extension() == ".json" && e.path().string().find("idle_with_waiters") != std::string::npos) {
        pcap = e.path();
        pcap.replace_extension(".pcap");
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE_FALSE(pcap.empty());
  CHECK(pcap.filename().string().find("-flight__recorder__1-idle_with_waiters.pcap") != std::string::npos);
  ::kill(analyzer, SIGINT);
  int status = 0;
  ::waitpid(analyzer, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string err_text = file_text(err);
  INFO(err_text);
  // The kill closed the holder's connection while it held: holder_connection_closed, saved too.
  CHECK(err_text.find("flight recorder: 2 anomalies saved") != std::string::npos);
  // The saved file shows the same anomaly on its own.
  const run_result again = run(cli + " analyze --format jsonl " + quoted(pcap));
  CHECK(anomalies_in(again.out).count({lock, "idle_with_waiters"}) == 1);
  // --write: tshark reads every packet the analyzer saw.
  if (have_tshark()) CHECK(tshark_count(written) == packets_in_summary(err_text));
  const run_result whole = run(cli + " analyze --format jsonl " + quoted(written));
  CHECK(anomalies_in(whole.out).count({lock, "idle_with_waiters"}) == 1);
  CHECK(anomalies_in(whole.out).count({lock, "holder_connection_closed"}) == 1);
}
