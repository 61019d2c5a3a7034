// What live runs tell the user: what they listen to (as tcpdump does), that nothing
// arrives (on a terminal), and a setcap command that really lets a user without root
// capture. Needs root to capture on lo (skipped otherwise).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "helpers.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace lockscope::ingest::test;
using namespace std::chrono_literals;

namespace {

std::string file_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool can_run_live() {
  if (::geteuid() != 0) WARN("live capture needs root here: skipping");
  return ::geteuid() == 0;
}

// A port nothing listens on (and no traffic goes to) during the test.
std::string quiet_port() { return std::to_string(40000 + ::getpid() % 20000); }

}  // namespace

TEST_CASE("live runs say what they listen to, with the BPF filter", "[cli][live]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  if (!can_run_live()) return;
  const std::string port = quiet_port();
  const std::string by_port = read_command_output("timeout -s INT 1 " + binary + " decode -i lo --port " + port + " 2>&1");
  CHECK_THAT(by_port, Catch::StartsWith("lockscope decode: listening on lo, port " + port + " (BPF \"(tcp port " +
                                        port + ") or (vlan and (tcp port " + port + "))\")\n"));
  const std::string two_ports =
      read_command_output("timeout -s INT 1 " + binary + " analyze -i lo --port " + port + ",6390 2>&1");
  CHECK_THAT(two_ports, Catch::StartsWith("lockscope analyze: listening on lo, ports " + port + ", 6390 (BPF \"(tcp port " +
                                          port + " or tcp port 6390) or "));
  const std::string by_filter =
      read_command_output("timeout -s INT 1 " + binary + " analyze -i lo --filter 'tcp port " + port + "' 2>&1");
  CHECK_THAT(by_filter, Catch::StartsWith("lockscope analyze: listening on lo (BPF \"tcp port " + port + "\")\n"));
}

TEST_CASE("live runs on a terminal say when nothing arrived for 10 s and suggest --port", "[cli][live][slow]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  if (!can_run_live()) return;
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    WARN("script (util-linux) is not installed: skipping");
    return;
  }
  const std::string port = quiet_port();
  const std::string run = "timeout -s INT 12 " + binary + " decode -i lo --port " + port;
  // The same run with stderr on a terminal (script's pty) and on a pipe, at the same time.
  auto on_tty = std::async(std::launch::async, [&] { return read_command_output("script -qec '" + run + "' /dev/null"); });
  auto on_pipe = std::async(std::launch::async, [&] { return read_command_output(run + " 2>&1"); });
  const std::string tty = on_tty.get();
  const std::string pipe = on_pipe.get();
  CHECK_THAT(tty, Catch::Contains("lockscope decode: nothing arrived on lo for 10 s (BPF \"(tcp port " + port) &&
                      Catch::Contains("give it with --port PORT"));
  CHECK(tty.find("nothing arrived") == tty.rfind("nothing arrived"));  // once
  CHECK_THAT(pipe, Catch::Contains("listening on lo") && !Catch::Contains("nothing arrived"));
}

TEST_CASE("the setcap command in the permission error lets a user without root capture", "[cli][live]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  if (!can_run_live()) return;
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  if (std::system("command -v setcap >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1") != 0) {
    WARN("setcap or setpriv is not installed: skipping");
    return;
  }
  temp_dir dir;
  ::chmod(dir.path.c_str(), 0755);
  const auto copy = dir / "lockscope";
  std::filesystem::copy_file(binary, copy);
  ::chmod(copy.c_str(), 0755);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " + copy.string();

  lockscope::test::redis_server server;
  const std::string port = std::to_string(server.port());
  const std::string denied = read_command_output(as_nobody + " decode -i lo --port " + port + " 2>&1; echo rc=$?");
  const std::string lead = "(run as root, or once: ";
  const auto at = denied.find(lead);
  REQUIRE(at != std::string::npos);
  CHECK_THAT(denied, Catch::Contains("CAP_NET_RAW") && Catch::EndsWith("rc=2\n"));
  const std::string hint = denied.substr(at + lead.size(), denied.find(')', at + lead.size()) - at - lead.size());
  CHECK(hint == "sudo setcap cap_net_raw=eip " + copy.string());
  // The README gives the same command.
  CHECK_THAT(file_text(std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / "README.md"),
             Catch::Contains("sudo setcap cap_net_raw=eip \"$(command -v lockscope)\""));

  REQUIRE(std::system(hint.substr(hint.find("setcap")).c_str()) == 0);  // as root already: without sudo
  const auto out = dir / "out.txt";
  std::thread capture([&] {
    std::system(("timeout -s INT 4 " + as_nobody + " decode --format jsonl -i lo --port " + port + " >" +
                 out.string() + " 2>&1").c_str());
  });
  lockscope::test::resp_connection c(server.host(), server.port());
  bool seen = false;
  for (int i = 0; i < 30 && !seen; ++i) {
    c.command("PING");
    std::this_thread::sleep_for(100ms);
    seen = file_text(out).find("[\"PING\"]") != std::string::npos;
  }
  capture.join();
  INFO(file_text(out));
  CHECK(seen);
  CHECK_THAT(file_text(out), Catch::Contains("listening on lo") && !Catch::Contains("permission denied"));
}
