// `lockscope analyze -i lo` against a real redis-server: events are printed as they
// happen (line-buffered), a lease expiry is printed at its deadline with no traffic
// after it, and SIGINT prints the summary. Needs CAP_NET_RAW (skipped without it).
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/live/live_loop.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "lockscope/test/temp_dir.hpp"
#include "child_process.hpp"
#include "helpers.hpp"

using namespace std::chrono_literals;

using lockscope::timeline_test::child;
using lockscope::timeline_test::spawn;

namespace {
// What the live cases need: the CLI, redis-server (when `needs_redis`) and root for
// CAP_NET_RAW. False, with a warning, when one is missing.
bool live_prerequisites(const std::string& cli, bool needs_redis = true) {
  if (cli.empty() || !std::filesystem::exists(cli) || (needs_redis && !lockscope::test::redis_server::available())) {
    WARN("needs the lockscope CLI" << (needs_redis ? " and redis-server" : ""));
    return false;
  }
  if (::geteuid() != 0) {
    WARN("live capture needs CAP_NET_RAW: skipped");
    return false;
  }
  return true;
}
}  // namespace

TEST_CASE("live: events as they happen, expiry at the deadline, summary on SIGINT", "[live]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli)) return;
  lockscope::test::redis_server server;
  child analyze = spawn({cli, "analyze", "-i", "lo", "--port", std::to_string(server.port())});
  // Said once the capture is open (a fixed sleep was too short under ASan on a loaded machine).
  REQUIRE(analyze.read_until("listening on lo", 10000ms));
  std::this_thread::sleep_for(200ms);
  lockscope::test::resp_connection c("127.0.0.1", server.port());
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  c.command_argv({"EVAL", std::string(acquire.text), "1", "liveLock", "400", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:7"});
  CHECK(analyze.read_until("acquired", 3000ms));
  // Nothing else is sent: the expiry must still be printed, at the deadline.
  CHECK(analyze.read_until("expired", 3000ms));
  CHECK(analyze.text.find("lease 400 ms, held 401.0ms") != std::string::npos);  // + Redis's clock's 1 ms
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.read_until(" 1 lock operation (", 5000ms));  // the closing totals line: the one acquire
  int status = 0;
  ::waitpid(analyze.pid, &status, 0);
  ::close(analyze.out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(analyze.text.find("liveLock") != std::string::npos);
  CHECK(analyze.text.find("acq  contended") != std::string::npos);  // the summary table
}

namespace {
// The number before `label` in the closing totals line ("..., 50002 exchanges, ...").
std::int64_t total_before(const std::string& text, std::string_view label) {
  const std::size_t end = text.rfind(label);
  if (end == std::string::npos || end == 0) return -1;
  std::size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(text[begin - 1])) != 0) --begin;
  return begin == end ? -1 : std::stoll(text.substr(begin, end - begin));
}
// `analyze -i lo --summary` on `port`, listening (out of immediate mode: the kernel hands
// packets over a block at a time).
child summary_on_loopback(const std::string& cli, int port) {
  child analyze = spawn({cli, "analyze", "-i", "lo", "--port", std::to_string(port), "--summary",
                         "--stats-interval", "0"});
  REQUIRE(analyze.read_until("listening on lo", 10000ms));
  std::this_thread::sleep_for(200ms);
  return analyze;
}
// A real redis-server, `analyze -i lo --summary` listening on its port, and a connection
// to send it commands.
struct watched_server {
  lockscope::test::redis_server server;
  child analyze;
  lockscope::test::resp_connection c;
  explicit watched_server(const std::string& cli)
      : analyze(summary_on_loopback(cli, server.port())), c("127.0.0.1", server.port()) {}
};
// `field:calls=N` in INFO commandstats, or -1.
std::int64_t calls_of(const std::string& info, std::string_view command) {
  const std::string key = "cmdstat_" + std::string(command) + ":calls=";
  const std::size_t at = info.find(key);
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + key.size()));
}
}  // namespace

// The live loop takes packets straight from libpcap's ring (packet_source::dispatch),
// and libpcap gives a ring block back to the kernel right after its last packet. A burst
// of pipelined EVALs fills dozens of blocks; every one must be counted, as the server
// counted them, and every lock the server holds must be a lock row.
TEST_CASE("live: a pipelined burst across many ring blocks, counted as the server counted it", "[live]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const std::filesystem::path benchmark = "/usr/bin/redis-benchmark";
  if (!live_prerequisites(cli)) return;
  if (!std::filesystem::exists(benchmark)) {
    WARN("needs redis-benchmark (redis-tools)");
    return;
  }
  lockscope::test::redis_server server;
  const std::string port = std::to_string(server.port());
  // --summary: no immediate mode, so the kernel fills whole blocks before handing them over.
  child analyze = spawn({cli, "analyze", "-i", "lo", "--port", port, "--summary", "--stats-interval", "0"});
  REQUIRE(analyze.read_until("listening on lo", 10000ms));
  std::this_thread::sleep_for(200ms);
  // ~20 MB of requests (50,000 EVALs of the acquire script, 64 to a segment): it fits
  // in the 32 MiB kernel buffer, so even a slow (sanitized) build drops nothing.
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  child load = spawn({benchmark.string(), "-p", port, "-c", "20", "-P", "64", "-n", "50000", "-r", "1000", "-q", "EVAL",
                      std::string(acquire.text), "1", "burstLock:__rand_int__", "60000",
                      "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:9"});
  REQUIRE(load.wait() == 0);
  std::this_thread::sleep_for(500ms);
  ::kill(analyze.pid, SIGINT);
  REQUIRE(analyze.read_until(" kernel drops ", 30000ms));
  analyze.read_until("\n", 2000ms);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
  ::close(load.out);

  // The server's own counts (these commands come after the capture ended).
  lockscope::test::resp_connection c("127.0.0.1", server.port());
  const std::string stats = c.command("INFO", "commandstats").text;
  const std::int64_t evals = calls_of(stats, "eval");
  const std::int64_t keys = c.command("DBSIZE").integer;
  INFO(analyze.text);
  REQUIRE(evals >= 50000);  // it sends whole pipelines: a few more than -n
  const std::size_t drops_at = analyze.text.rfind("kernel drops ");
  REQUIRE(drops_at != std::string::npos);
  CHECK(std::stoll(analyze.text.substr(drops_at + 13)) == 0);
  CHECK(total_before(analyze.text, " lock operations (") == evals);
  CHECK(total_before(analyze.text, " locks, ") == keys);
  CHECK(total_before(analyze.text, " exchanges, ") >= evals);
  CHECK(analyze.text.find("gaps 0, decode errors 0") != std::string::npos);
}

namespace {
// A tap interface, up, for as long as this object keeps its descriptor (it is not
// persistent: closing the descriptor removes the interface). name is empty when this
// process may not create one (no /dev/net/tun, no CAP_NET_ADMIN).
struct tap_interface {
  int fd = -1;
  std::string name;
  explicit tap_interface(const std::string& wanted) {
    fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);  // CLOEXEC: a child must not keep it alive
    if (fd < 0) return;
    ifreq request{};
    request.ifr_flags = IFF_TAP | IFF_NO_PI;
    std::snprintf(request.ifr_name, IFNAMSIZ, "%s", wanted.c_str());
    if (::ioctl(fd, TUNSETIFF, &request) != 0) {
      remove();
      return;
    }
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq flags{};
    std::snprintf(flags.ifr_name, IFNAMSIZ, "%s", request.ifr_name);
    const bool up = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &flags) == 0 &&
                    (flags.ifr_flags = static_cast<short>(flags.ifr_flags | IFF_UP), ::ioctl(s, SIOCSIFFLAGS, &flags) == 0);
    if (s >= 0) ::close(s);
    if (!up) {
      remove();
      return;
    }
    name = request.ifr_name;
  }
  void remove() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~tap_interface() { remove(); }
  tap_interface(const tap_interface&) = delete;
  tap_interface& operator=(const tap_interface&) = delete;
};
}  // namespace

TEST_CASE("live: a stop reads what the kernel captured before it", "[live]") {
  // Out of immediate mode the kernel hands a block over when it fills or at its timeout
  // (100 ms, later on a busy host): a SIGINT right after the last reply comes before that.
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli)) return;
  watched_server run(cli);
  child& analyze = run.analyze;
  lockscope::test::resp_connection& c = run.c;
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  constexpr int evals = 20;
  for (int i = 0; i < evals; ++i) {
    c.command_argv({"EVAL", std::string(acquire.text), "1", "stopLock" + std::to_string(i), "60000",
                    "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:5"});
  }
  ::kill(analyze.pid, SIGINT);
  REQUIRE(analyze.read_until(" kernel drops ", 10000ms));
  analyze.read_until("\n", 2000ms);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
  INFO(analyze.text);
  CHECK(total_before(analyze.text, " lock operations (") == evals);
  CHECK(total_before(analyze.text, " locks, ") == evals);
}

// An interface that goes away under a long-running capture (a VM's NIC unplugged, a
// container's veth deleted): the analyzer must not end as if all were well. It says why,
// as libpcap words it, still prints what it had, and exits with status 1, as tcpdump does.
TEST_CASE("live: an interface that disappears ends the capture with the reason and status 1", "[live]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli, false)) return;
  for (const std::string command : {"analyze", "decode"}) {
    tap_interface tap("lstap" + std::to_string(::getpid() % 100000));
    if (tap.name.empty()) {
      WARN("cannot create a tap interface (/dev/net/tun, CAP_NET_ADMIN): skipped");
      return;
    }
    INFO(command);
    child run = spawn({cli, command, "-i", tap.name, "--port", "6379", "--stats-interval", "0"});
    REQUIRE(run.read_until("listening on " + tap.name, 10000ms));
    tap.remove();
    REQUIRE(run.read_until("the report covers the traffic before that\n", 10000ms));
    CHECK(run.wait() == 1);
    ::close(run.out);
    INFO(run.text);
    CHECK(run.text.find("lockscope " + command + ": the capture failed: ") != std::string::npos);
    // The closing totals are still printed (analyze: its summary table too).
    CHECK(run.text.find("0 packets") != std::string::npos);
  }
}

// `-i any` is what an SRE types first. Its Linux cooked capture cannot take the `vlan`
// clause of the Ethernet port filter (libpcap refuses to compile it), and libpcap leaves
// out the outgoing copy of a loopback packet: each exchange is decoded once.
TEST_CASE("live: -i any (Linux cooked capture) with --port decodes each exchange once", "[live]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli)) return;
  lockscope::test::redis_server server;
  const std::string port = std::to_string(server.port());
  child run = spawn({cli, "decode", "-i", "any", "--port", port, "--format", "jsonl", "--stats-interval", "0"});
  REQUIRE(run.read_until("listening on any", 10000ms));
  CHECK(run.text.find("(BPF \"tcp port " + port + "\")") != std::string::npos);
  std::this_thread::sleep_for(200ms);
  lockscope::test::resp_connection c("127.0.0.1", server.port());
  c.command("SET", "anyKey", "anyValue");
  c.command("GET", "anyKey");
  CHECK(run.read_until("anyValue\"", 5000ms));
  std::this_thread::sleep_for(300ms);  // a duplicate would come right behind
  ::kill(run.pid, SIGINT);
  run.read_until(" kernel drops ", 5000ms);
  CHECK(run.wait() == 0);
  ::close(run.out);
  INFO(run.text);
  std::size_t lines = 0;
  for (std::size_t at = run.text.find("\"anyKey\""); at != std::string::npos; at = run.text.find("\"anyKey\"", at + 1)) {
    ++lines;
  }
  CHECK(lines == 2);  // the SET and the GET
  CHECK(run.text.find(" 2 exchanges, ") != std::string::npos);
}

// Remote captures are piped in (`ssh host tcpdump -U -w - | lockscope analyze -`) and ended
// with Ctrl-C. The signal ends the input, as if the capture ended there: the report of
// what was read must come out, the same as for the file read whole, and the exit status
// says it was cut short (128 + the signal). Before, the signal killed the process with
// nothing printed.
TEST_CASE("a capture piped in and ended with SIGINT or SIGTERM: the output of what was read, status 128 + signal", "[cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("needs the lockscope CLI");
    return;
  }
  const std::filesystem::path capture = std::filesystem::path(LOCKSCOPE_CAPTURES_DIR) / "seed-redisson.pcap";
  std::string bytes;
  {
    std::ifstream f(capture, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  REQUIRE(bytes.size() < 60000);  // fits in the pipe's buffer: written at once
  const std::filesystem::path err = std::filesystem::temp_directory_path() / ("lockscope-sigint-" + std::to_string(::getpid()));
  for (const std::string command : {"analyze", "decode"}) {
    INFO(command);
    child whole = spawn({cli, command, capture.string()}, err);
    whole.read_until("\x04", 10000ms);  // to the end of its output
    REQUIRE(whole.wait() == 0);
    ::close(whole.out);

    int in[2];
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::write(in[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    child piped = spawn({cli, command, "-"}, err, in[0]);
    // Read all of it (the pipe drained), while the writer keeps the pipe open.
    int left = 1;
    for (int i = 0; i < 1000 && left > 0; ++i) {
      std::this_thread::sleep_for(10ms);
      REQUIRE(::ioctl(in[0], FIONREAD, &left) == 0);
    }
    REQUIRE(left == 0);
    std::this_thread::sleep_for(100ms);
    const int signal = command == "analyze" ? SIGINT : SIGTERM;  // Ctrl-C, or a service manager's stop
    ::kill(piped.pid, signal);
    piped.read_until("\x04", 10000ms);
    CHECK(piped.wait_for(10000ms) == 128 + signal);
    ::close(piped.out);
    ::close(in[0]);
    ::close(in[1]);
    CHECK_FALSE(piped.text.empty());
    CHECK(piped.text == whole.text);
    CHECK(piped.err().find("lockscope " + command + ": interrupted: the output covers the packets read before the signal") !=
          std::string::npos);
  }
  // Through the live loop (--replay -), events come out as they are read, and SIGINT ends
  // it as it ends a live capture (status 0), also while the pipe is waiting for data.
  int in[2];
  REQUIRE(::pipe(in) == 0);
  REQUIRE(::write(in[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  child replay = spawn({cli, "analyze", "--replay", "-", "--replay-speed", "0"}, err, in[0]);
  CHECK(replay.read_until("acquired                     hold count 1, lease 6000 ms, waited 2.751s", 10000ms));
  ::kill(replay.pid, SIGINT);
  replay.read_until("\x04", 10000ms);
  CHECK(replay.wait_for(10000ms) == 0);  // -1: it hung on the open pipe
  ::close(replay.out);
  ::close(in[0]);
  ::close(in[1]);
  // The totals (not their values: the loop stops at the signal, maybe before the last
  // packets it had read, as a live capture does).
  CHECK(replay.err().find(" lock operations (") != std::string::npos);
  std::filesystem::remove(err);
}

TEST_CASE("live: a step of the wall clock is reported, with its size (libfaketime steps it)", "[live][clock]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli, false)) return;
  const std::filesystem::path faketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  if (!std::filesystem::exists(faketime)) {
    WARN("libfaketime (Debian's faketime) is not installed: skipped");
    return;
  }
  // libfaketime reads the offset from this file on every clock read; the monotonic
  // clocks stay true, as they do when NTP steps the wall clock.
  char pattern[] = "/tmp/lockscope-clock-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(pattern);
  const std::filesystem::path offset = dir / "offset";
  auto set_offset = [&](const char* spec) { std::ofstream(offset) << spec << "\n"; };
  set_offset("+0");
  // In the ASan build, ASan must come first among the preloaded libraries unless told
  // not to check (libfaketime only wraps the clock calls, which ASan leaves alone).
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options =
      "ASAN_OPTIONS=verify_asan_link_order=0" + (asan != nullptr && *asan != '\0' ? ":" + std::string(asan) : "");
  child analyze = spawn({"/usr/bin/env", "LD_PRELOAD=" + faketime.string(), asan_options,
                         "FAKETIME_TIMESTAMP_FILE=" + offset.string(),
                         "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", cli, "analyze", "-i", "lo", "--port",
                         "9", "--no-drop", "--summary"});
  REQUIRE(analyze.read_until("listening on lo", 10000ms));
  std::this_thread::sleep_for(500ms);
  analyze.read_available();
  CHECK(analyze.text.find("stepped") == std::string::npos);  // an unstepped clock says nothing
  set_offset("+1h");
  CHECK(analyze.read_until("warning: the wall clock, which stamps the packets, was stepped forward 3600.000 s", 5000ms));
  CHECK(analyze.read_until("leases held across it ran out early", 1000ms));
  set_offset("-30s");  // from an hour ahead to 30 s behind
  CHECK(analyze.read_until("was stepped back 3630.000 s", 5000ms));
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.read_until(" lock operations (", 5000ms));
  CHECK(analyze.wait_for(5000ms) == 0);
  ::close(analyze.out);
  CHECK(lockscope::timeline_test::occurrences(analyze.text, "was stepped") == 2);
  std::filesystem::remove_all(dir);
}

// Out of immediate mode (--summary, metrics) the kernel hands packets over a block at a
// time, and the capture lets bursts gather before taking them: a packet may reach the
// loop well after it was captured. The loop's clock must not pass a lease deadline while
// a renewal captured before it is still in the kernel's ring: each lock here is renewed
// 15 ms before its lease would run out, then released, and none expired.
namespace {

// A live source that hands the loop scripted turns: the wall clock at each, the packets
// it hands over, and whether the kernel still holds packets it has not handed over.
class scripted_live_source final : public lockscope::ingest::packet_source {
 public:
  struct turn {
    std::int64_t now_us;
    std::vector<std::pair<std::int64_t, std::string>> packets;  // (capture time, frame)
    bool holds_unhanded = false;
  };
  explicit scripted_live_source(std::vector<turn> turns) : turns_(std::move(turns)) {}
  result next(lockscope::ingest::captured_packet&) override { return result::end; }
  result dispatch(int, packet_callback on_packet) override {
    if (next_ == turns_.size()) return result::end;
    const turn& t = turns_[next_++];
    now_ = t.now_us;
    for (const auto& [ts, frame] : t.packets) {
      lockscope::ingest::captured_packet p;
      p.ts_us = ts;
      p.link_type = 1;  // DLT_EN10MB
      p.data = frame;
      p.wire_length = static_cast<std::uint32_t>(frame.size());
      ++handed_;
      on_packet(p);
    }
    return t.packets.empty() ? result::timeout : result::packet;
  }
  // Packets handed to the loop so far.
  std::size_t handed() const noexcept { return handed_; }
  void stop() noexcept override {}
  drop_stats stats() const override { return {}; }
  std::int64_t now_us() const override { return now_; }
  bool live() const noexcept override { return true; }
  bool holds_unhanded_packets() override { return next_ > 0 && turns_[next_ - 1].holds_unhanded; }

 private:
  std::vector<turn> turns_;
  std::size_t next_ = 0;
  std::size_t handed_ = 0;
  std::int64_t now_ = 0;
};

struct expiry_counter : lockscope::locks::lock_event_sink {
  int expired = 0;
  void on_event(const lockscope::locks::lock_event& e) override {
    expired += e.event == lockscope::locks::lock_event_kind::expired;
  }
};

std::string resp_command(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

}  // namespace

// The kernel hands a block over when its timeout runs out, which a busy host runs late
// (112 ms after the block's first packet, on an idle 2-core VM): a turn with nothing
// handed over while the kernel says it holds packets must not move the clock past them.
TEST_CASE("live loop: the clock waits for packets the kernel holds but has not handed over", "[live][clock]") {
  using lockscope::ingest::make_endpoint;
  lockscope::ingest::tcp_conversation c(make_endpoint("127.0.0.1", 40000), make_endpoint("127.0.0.1", 6379));
  auto frame = [](const lockscope::ingest::tcp_segment_spec& s) { return lockscope::ingest::make_frame(1, s); };
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  const auto& renew = lockscope::lock::script(lockscope::lock::script_kind::renew);
  const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:3";
  constexpr std::int64_t t = 1'700'000'000'000'000, ms = 1000;
  std::vector<std::pair<std::int64_t, std::string>> opening;
  for (const auto& s : c.handshake()) opening.emplace_back(t, frame(s));
  opening.emplace_back(t + 1, frame(c.client_sends(resp_command({"EVAL", std::string(acquire.text), "1", "L", "300", owner}))));
  opening.emplace_back(t + 2, frame(c.server_sends("$-1\r\n")));
  // Renewed 285 ms into the 300 ms lease; the kernel hands it over 130 ms later.
  const std::vector<std::pair<std::int64_t, std::string>> renewal{
      {t + 285 * ms, frame(c.client_sends(resp_command({"EVAL", std::string(renew.text), "1", "L", "300", owner})))},
      {t + 285 * ms + 1, frame(c.server_sends(":1\r\n"))}};
  for (const bool kernel_says_so : {true, false}) {
    INFO(kernel_says_so);
    scripted_live_source source({{t + 5 * ms, opening, false},
                                 {t + 200 * ms, {}, false},
                                 {t + 415 * ms, {}, kernel_says_so},  // the clock's lag alone: 310 ms, past the deadline
                                 {t + 416 * ms, renewal, false},
                                 {t + 500 * ms, {}, false}});
    lockscope::live::recorder_hooks hooks("analyze", lockscope::live::recorder_options{});
    expiry_counter events;
    lockscope::live::run_live(lockscope::live::live_options{}, {source, hooks}, events);
    CHECK(events.expired == (kernel_says_so ? 0 : 1));  // without its word, the lag is all the clock has
  }
}

// A turn's packets are all ingested before their operations reach the timeline (one
// flush a turn), and its events are out before the next turn; with --write or
// --save-anomalies, each packet's events are out before the next packet is recorded.
TEST_CASE("live loop: a turn's operations reach the timeline at its end, each packet's with the recorder",
          "[live][batching]") {
  using lockscope::ingest::make_endpoint;
  lockscope::ingest::tcp_conversation c(make_endpoint("127.0.0.1", 40001), make_endpoint("127.0.0.1", 6379));
  auto frame = [](const lockscope::ingest::tcp_segment_spec& s) { return lockscope::ingest::make_frame(1, s); };
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:3";
  constexpr std::int64_t t = 1'700'000'000'000'000, ms = 1000;
  // A turn: three locks acquired, each a request packet and its reply's.
  auto turn_of = [&](std::int64_t at, const std::string& prefix) {
    std::vector<std::pair<std::int64_t, std::string>> packets;
    for (int k = 0; k < 3; ++k) {
      const std::string lock = prefix + std::to_string(k);
      packets.emplace_back(at + 10 * k, frame(c.client_sends(resp_command({"EVAL", std::string(acquire.text), "1", lock,
                                                                            "30000", owner}))));
      packets.emplace_back(at + 10 * k + 1, frame(c.server_sends("$-1\r\n")));
    }
    return packets;
  };
  std::vector<std::pair<std::int64_t, std::string>> first;
  for (const auto& s : c.handshake()) first.emplace_back(t, frame(s));
  const std::size_t opening = first.size();
  for (auto& p : turn_of(t + 1, "A")) first.push_back(std::move(p));
  const auto second = turn_of(t + 2 * ms, "B");
  struct handed_at_event : lockscope::locks::lock_event_sink {
    const scripted_live_source* source = nullptr;
    std::vector<std::size_t> handed;  // packets handed when each acquisition came out
    void on_event(const lockscope::locks::lock_event& e) override {
      if (e.event == lockscope::locks::lock_event_kind::acquired) handed.push_back(source->handed());
    }
  };
  for (const bool recording : {false, true}) {
    INFO(recording);
    scripted_live_source source({{t + 5 * ms, first, false}, {t + 10 * ms, second, false}, {t + 20 * ms, {}, false}});
    lockscope::test::temp_dir dir;
    lockscope::live::recorder_options ro;
    if (recording) ro.write = (dir / "written.pcap").string();
    lockscope::live::recorder_hooks hooks("analyze", ro, t);
    REQUIRE(hooks.active() == recording);
    handed_at_event events;
    events.source = &source;
    lockscope::live::run_live(lockscope::live::live_options{}, {source, hooks}, events);
    const std::size_t end_of_first = first.size(), end_of_second = first.size() + second.size();
    if (recording) {
      // Each acquisition as its reply is ingested: the reply is the last packet handed.
      CHECK(events.handed == std::vector<std::size_t>{opening + 2, opening + 4, opening + 6, end_of_first + 2,
                                                      end_of_first + 4, end_of_first + 6});
    } else {
      CHECK(events.handed == std::vector<std::size_t>{end_of_first, end_of_first, end_of_first, end_of_second,
                                                      end_of_second, end_of_second});
    }
  }
}

TEST_CASE("live --summary: a renewal captured just before the deadline and handed over after it is no expiry",
          "[live][clock]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (!live_prerequisites(cli)) return;
  watched_server run(cli);
  child& analyze = run.analyze;
  lockscope::test::resp_connection& c = run.c;
  const auto& acquire = lockscope::lock::script(lockscope::lock::script_kind::acquire);
  const auto& renew = lockscope::lock::script(lockscope::lock::script_kind::renew);
  const auto& unlock = lockscope::lock::script(lockscope::lock::script_kind::unlock);
  const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:3";
  // Locks started 37 ms apart (not a multiple of the kernel's 100 ms block timeout, so
  // their renewals fall at every phase of it), each: acquire with a 300 ms lease, renew
  // at 285 ms, release at 400 ms.
  constexpr int locks = 24;
  struct step {
    std::chrono::milliseconds at;
    int lock;
    int what;  // 0 acquire, 1 renew, 2 unlock
  };
  std::vector<step> steps;
  for (int i = 0; i < locks; ++i) {
    const std::chrono::milliseconds start(37 * i);
    steps.push_back({start, i, 0});
    steps.push_back({start + 285ms, i, 1});
    steps.push_back({start + 400ms, i, 2});
  }
  std::stable_sort(steps.begin(), steps.end(), [](const step& a, const step& b) { return a.at < b.at; });
  const auto begin = std::chrono::steady_clock::now();
  std::vector<bool> renewed(locks, false);  // the server's word: the lease had not run out
  for (const step& s : steps) {
    std::this_thread::sleep_until(begin + s.at);
    const std::string name = "clockLock" + std::to_string(s.lock);
    if (s.what == 0) {
      c.command_argv({"EVAL", std::string(acquire.text), "1", name, "300", owner});
    } else if (s.what == 1) {
      renewed[s.lock] = c.command_argv({"EVAL", std::string(renew.text), "1", name, "300", owner}).integer == 1;
    } else {
      c.command_argv({"EVAL", std::string(unlock.text), "2", name, lockscope::lock::channel_name(name), "0", "300", owner});
    }
  }
  // On a loaded machine this client may itself be late: a renewal the server refused
  // (the lease had run out) is an expiry, rightly. Most must have been in time.
  REQUIRE(std::count(renewed.begin(), renewed.end(), true) >= locks / 2);
  std::this_thread::sleep_for(300ms);
  ::kill(analyze.pid, SIGINT);
  REQUIRE(analyze.read_until(" lock operations (", 10000ms));
  analyze.read_until("\n", 2000ms);
  CHECK(analyze.wait() == 0);
  ::close(analyze.out);
  INFO(analyze.text);
  int rows = 0;
  std::istringstream lines(analyze.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("clockLock", 0) != 0) continue;
    ++rows;
    // lock acq contended hold(p50/p99/max) wait(p50/p99/max) gave_up renewals expiries anomalies
    std::istringstream fields(line);
    std::string name, acq, contended, hold, wait, gave_up, renewals, expiries, anomalies;
    fields >> name >> acq >> contended >> hold >> wait >> gave_up >> renewals >> expiries >> anomalies;
    INFO(line);
    CHECK(acq == "1");
    if (!renewed[static_cast<std::size_t>(std::stoi(name.substr(9)))]) {
      CHECK(expiries == "1");
      continue;
    }
    CHECK(renewals == "1");
    CHECK(expiries == "0");
    // (A renewal at 285 ms of 300 is a late_renewal, rightly; none expired while held.)
    CHECK(anomalies.find("expired") == std::string::npos);
  }
  CHECK(rows == locks);
}
