// Runs what the README shows: the embedding example and the demo command.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

namespace {

struct run_result {
  int status = -1;
  std::string output;
};

run_result run(const std::string& command) {
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("README embedding example locks, re-locks and releases on a real redis-server", "[examples]") {
  lockscope::test::redis_server server;
  const std::string url = "redis://127.0.0.1:" + std::to_string(server.port()) + "/0";
  const run_result r = run(std::string(LOCKSCOPE_EXAMPLE_EMBED_LOCK) + " " + url + " 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output == "held, hold count 1\n");
  lockscope::test::resp_connection redis("127.0.0.1", server.port());
  CHECK(redis.command("EXISTS", "orders:42").integer == 0);
}

TEST_CASE("README embedding example fails clearly when the server is down", "[examples]") {
  const std::uint16_t port = lockscope::test::find_free_port();
  const run_result r =
      run(std::string(LOCKSCOPE_EXAMPLE_EMBED_LOCK) + " redis://127.0.0.1:" + std::to_string(port) + " 2>&1");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find(std::to_string(port)) != std::string::npos);
}

TEST_CASE("lockscope resp prints the seed's messages (section 4.2) in the parsed form", "[examples]") {
  const std::string source = LOCKSCOPE_SOURCE_DIR;
  // The seed's listing shows its AUTH password: --show-secrets, as resp masks it otherwise.
  const run_result r = run(std::string(LOCKSCOPE_CLI) + " resp " + source +
                           "/captures/seed-4.2.resp --max-argument 48 --short-owners --show-secrets 2>/dev/null");
  CHECK(r.status == 0);
  CHECK(r.output == read_file(source + "/captures/seed-4.2.expected.txt"));
}

TEST_CASE("lockscope resp names the offset and reason of a decode error and exits 1", "[examples]") {
  // `$3\r\nabcXY`: the byte after the 3-byte body must be CR; X sits at offset 11.
  const run_result r =
      run("printf '*2\\r\\n$3\\r\\nabcXY' | " + std::string(LOCKSCOPE_CLI) + " resp - 2>&1 >/dev/null");
  CHECK(r.status == 1);
  CHECK(r.output == "lockscope resp: -: offset 11: expected CRLF\n");
}

TEST_CASE("lockscope resp masks passwords as decode does, and --show-secrets shows them", "[examples]") {
  // A `redis-cli --pipe` input: AUTH, HELLO … AUTH, CONFIG SET requirepass, as RESP and inline.
  const std::string stream =
      "printf '*2\\r\\n$4\\r\\nAUTH\\r\\n$8\\r\\ns3cr3tpw\\r\\n"
      "*5\\r\\n$5\\r\\nHELLO\\r\\n$1\\r\\n3\\r\\n$4\\r\\nAUTH\\r\\n$1\\r\\nu\\r\\n$6\\r\\nhello2\\r\\n"
      "*4\\r\\n$6\\r\\nCONFIG\\r\\n$3\\r\\nSET\\r\\n$11\\r\\nrequirepass\\r\\n$4\\r\\nnew1\\r\\n"
      "*2\\r\\n$3\\r\\nGET\\r\\n$8\\r\\ns3cr3tpw\\r\\n' | " +
      std::string(LOCKSCOPE_CLI) + " resp ";
  const run_result parsed = run(stream + "- 2>/dev/null");
  CHECK(parsed.status == 0);
  CHECK(parsed.output == "AUTH ****\nHELLO 3 AUTH u ****\nCONFIG SET requirepass ****\nGET s3cr3tpw\n");
  const run_result cli = run(stream + "--format cli - 2>/dev/null");
  CHECK(cli.output.find("2) \"****\"") != std::string::npos);
  CHECK(cli.output.find("hello2") == std::string::npos);
  const run_result shown = run(stream + "--show-secrets - 2>/dev/null");
  CHECK(shown.status == 0);
  CHECK(shown.output == "AUTH s3cr3tpw\nHELLO 3 AUTH u hello2\nCONFIG SET requirepass new1\nGET s3cr3tpw\n");
  const run_result inline_auth =
      run("printf 'AUTH pw1\\r\\nPING\\r\\n' | " + std::string(LOCKSCOPE_CLI) + " resp --inline - 2>/dev/null");
  CHECK(inline_auth.output == "AUTH ****\nPING\n");
}

TEST_CASE("lockscope scripts prints each lock script as EVAL sends it, and the SHA1 SCRIPT LOAD returns",
          "[examples]") {
  lockscope::test::redis_server server;
  lockscope::test::resp_connection redis("127.0.0.1", server.port());
  const std::string cli = LOCKSCOPE_CLI;
  for (const char* name : {"acquire", "unlock", "renew", "force_unlock", "fair_acquire", "fair_unlock",
                           "fair_force_unlock", "fair_acquire_failed", "fenced_acquire", "read_acquire",
                           "read_unlock", "read_renew", "read_force_unlock", "write_acquire", "write_unlock",
                           "write_force_unlock", "unlock_publish_argv", "force_unlock_publish_argv"}) {
    INFO(name);
    const run_result text = run(cli + " scripts " + name);
    REQUIRE(text.status == 0);
    const bool fair = std::string_view(name).starts_with("fair_");
    const std::string_view n(name);
    const bool counts_holds = n == "read_renew";
    const bool reads_mode = (n.starts_with("read_") || n.starts_with("write_")) && !n.ends_with("force_unlock");
    CHECK(text.output.rfind(fair            ? (n == "fair_acquire_failed" ? "local queue = " : "while true do ")
                            : counts_holds ? "local counter = "
                            : reads_mode   ? "local mode = "
                                           : "if (redis.call(",
                            0) == 0);
    const run_result sha1 = run(cli + " scripts " + name + " --sha1");
    REQUIRE(sha1.status == 0);
    CHECK(redis.command("SCRIPT", "LOAD", text.output).text + "\n" == sha1.output);
  }
  const run_result list = run(cli + " scripts");
  CHECK(list.status == 0);
  CHECK(list.output.find("acquire       ") != std::string::npos);
  CHECK(list.output.find(" 339  1/2") != std::string::npos);  // the seed's acquire: 339 bytes

  CHECK(list.output.find("fair_acquire               762bfafa6be221431a0b668685dd15c926483619   1453  3/4") !=
        std::string::npos);
  // Every row's name is followed by blanks, however long (the SHA1 column starts after
  // the longest name: force_unlock_publish_argv once ran into its SHA1).
  std::istringstream rows(list.output);
  std::size_t sha_column = std::string::npos;
  for (std::string row; std::getline(rows, row);) {
    const std::size_t at = row.find_first_of(' ');
    REQUIRE(at != std::string::npos);
    const std::size_t column = row.find_first_not_of(' ', at);
    if (sha_column == std::string::npos) sha_column = column;
    CHECK(column == sha_column);
  }

  const run_result unknown = run(cli + " scripts fair_lock 2>&1");
  CHECK(unknown.status == 64);
  CHECK(unknown.output ==
        "lockscope scripts: no script named 'fair_lock' (known: acquire, unlock, renew, force_unlock, fair_acquire, "
        "fair_unlock, fair_force_unlock, fair_acquire_failed, fenced_acquire, read_acquire, read_unlock, read_renew, "
        "read_force_unlock, write_acquire, write_unlock, write_force_unlock, unlock_publish_argv, "
        "force_unlock_publish_argv)\n");
}
