// A real admin session full of passwords, recorded with tcpdump from a real
// redis-server: no password and no password hash appears in any output of decode or
// analyze (text, JSONL, trace, HTML), and --show-secrets shows that they were there.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "lockscope/test/real_capture.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace lockscope::test;
namespace ltest = lockscope::test;

namespace {

// The SHA-256 (hex) Redis shows for a password in ACL LIST and ACL GETUSER.
std::string password_hash(const std::string& password) {
  const std::string out = read_command_output("printf %s '" + password + "' | sha256sum");
  return out.substr(0, 64);
}

}  // namespace

TEST_CASE("a real admin session: no password or hash in any output", "[real][cli][redaction]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  const std::string binary = cli_binary_with("sha256sum");
  if (binary.empty()) return;
  const std::string admin = "adminPw-7f3a";
  ltest::redis_server server({"--requirepass", admin});
  temp_dir dir;
  const auto file = dir / "admin.pcap";
  const std::string master = "masterPw-91c2";
  const std::string alice = "alicePw-5d0e";
  const std::string sentinel = "sentinelPw-b77d";
  const std::string long_pw = "longPw-" + std::string(180, 'q');  // Redis cuts its echo short
  {
    tcpdump_recording rec(file, server.port());
    if (!rec.ready()) {
      WARN("tcpdump could not capture on lo: skipping");
      return;
    }
    ltest::resp_connection c(server.host(), server.port());
    REQUIRE(c.command("AUTH", admin).text == "OK");
    REQUIRE(c.command("CONFIG", "SET", "masterauth", master).text == "OK");
    c.command("CONFIG", "GET", "*pass*");
    c.command("CONFIG", "GET", "masterauth");
    REQUIRE(c.command("ACL", "SETUSER", "alice", "on", ">" + alice, "~*", "+@all").text == "OK");
    c.command("ACL", "LIST");
    c.command("ACL", "GETUSER", "alice");
    // Not a sentinel: "unknown command 'SENTINEL', with args beginning with: ... '<pw>'".
    const auto unknown = c.command("SENTINEL", "SET", "mymaster", "auth-pass", sentinel);
    REQUIRE(unknown.text.find(sentinel) != std::string::npos);  // the server did echo it
    c.command("SENTINEL", "SET", "mymaster", "auth-pass", long_pw);
    // RESP3: maps instead of flat arrays.
    c.command("HELLO", "3", "AUTH", "alice", alice);
    c.command("CONFIG", "GET", "requirepass");
    c.command("ACL", "GETUSER", "alice");
    c.command("ACL", "LIST");
    // In a transaction: the replies come in EXEC's.
    c.command("MULTI");
    c.command("CONFIG", "GET", "masterauth");
    c.command("ACL", "GETUSER", "alice");
    c.command("EXEC");
    c.command("SET", "ordinary", "value");
  }
  const std::vector<std::string> secrets = {admin, master, alice, sentinel, "longPw-qqq", password_hash(alice),
                                            password_hash(admin)};
  const std::string f = file.string();
  const std::vector<std::string> commands = {
      "decode " + f,
      "decode --format jsonl " + f,
      "decode -v " + f,
      "analyze " + f,
      "analyze --format jsonl " + f,
      "analyze --format trace " + f,
      "analyze --format html " + f,
  };
  for (const std::string& command : commands) {
    CAPTURE(command);
    const std::string out = read_command_output(binary + " " + command + " 2>&1");
    CHECK(!out.empty());
    for (const std::string& secret : secrets) {
      CAPTURE(secret);
      CHECK(out.find(secret) == std::string::npos);
    }
  }
  const std::string text = read_command_output(binary + " decode " + f + " 2>&1");
  CHECK_THAT(text, Catch::Contains("user alice on #****") && Catch::Contains("masterauth") &&
                       Catch::Contains("'auth-pass' '****'") && Catch::Contains("SET ordinary value ⇒ OK"));
  // The secrets were on the wire: --show-secrets shows every one.
  const std::string shown = read_command_output(binary + " decode --show-secrets " + f + " 2>&1");
  for (const std::string& secret : secrets) {
    CAPTURE(secret);
    CHECK(shown.find(secret) != std::string::npos);
  }
}
