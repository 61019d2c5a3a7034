// `lockscope analyze -i lo` against a real redis-server: events are printed as they
// happen (line-buffered), a lease expiry is printed at its deadline with no traffic
// after it, and SIGINT prints the summary. Needs CAP_NET_RAW (skipped without it).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "child_process.hpp"

using namespace std::chrono_literals;

using lockscope::timeline_test::child;
using lockscope::timeline_test::spawn;

TEST_CASE("live: events as they happen, expiry at the deadline, summary on SIGINT", "[live]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli) || !lockscope::test::redis_server::available()) {
    WARN("needs the lockscope CLI and redis-server");
    return;
  }
  if (::geteuid() != 0) {
    WARN("live capture needs CAP_NET_RAW: skipped");
    return;
  }
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
  CHECK(analyze.text.find("lease 400 ms, held 400.0ms") != std::string::npos);
  ::kill(analyze.pid, SIGINT);
  CHECK(analyze.read_until(" lock operations (", 5000ms));  // the closing totals line
  int status = 0;
  ::waitpid(analyze.pid, &status, 0);
  ::close(analyze.out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(analyze.text.find("liveLock") != std::string::npos);
  CHECK(analyze.text.find("acq  contended") != std::string::npos);  // the summary table
}
