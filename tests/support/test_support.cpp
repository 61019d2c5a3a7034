// The test helpers are themselves tested against a real redis-server: a helper that
// hangs or hides a failure would make every test built on it worthless.
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/decode.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace std::chrono_literals;
using lockscope::resp::type;
using lockscope::resp::value;
using lockscope::test::resp_connection;

namespace {

std::chrono::milliseconds elapsed_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t);
}

}  // namespace

TEST_CASE("find_free_port returns a loopback port that can be bound", "[support]") {
  const std::uint16_t port = lockscope::test::find_free_port();
  REQUIRE(port != 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  ::close(fd);
}

TEST_CASE("redis_server starts, stops, and restarts on the same port", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  std::filesystem::path directory;
  {
    lockscope::test::redis_server server;
    directory = server.directory();
    REQUIRE(server.running());
    REQUIRE(server.port() != 0);
    CHECK(std::filesystem::exists(server.log_path()));

    resp_connection c(server.host(), server.port());
    CHECK(c.command("PING") == value::simple("PONG"));
    CHECK(c.command("SET", "k", "v") == value::simple("OK"));
    CHECK(c.command("CONFIG", "GET", "save").elements.at(1) == value::bulk(""));

    const std::uint16_t port = server.port();
    server.stop();
    CHECK_FALSE(server.running());
    CHECK_THROWS_AS(c.read_value(2s), lockscope::test::connection_closed);
    CHECK_THROWS_AS(resp_connection(server.host(), port, 1s), lockscope::test::connection_error);

    server.start();
    CHECK(server.port() == port);
    c.connect(server.host(), server.port());
    CHECK(c.command("PING") == value::simple("PONG"));
    // No persistence: a restart loses the data.
    CHECK(c.command("GET", "k").is_null());

    const auto old_pid = server.pid();
    server.restart();
    CHECK(server.pid() != old_pid);
    c.connect(server.host(), server.port());
    CHECK(c.command("PING") == value::simple("PONG"));
  }
  CHECK_FALSE(std::filesystem::exists(directory));
}

TEST_CASE("redis_server passes extra arguments", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server({"--requirepass", "s3cret"});
  resp_connection c(server.host(), server.port());
  const value denied = c.command("GET", "k");
  REQUIRE(denied.is_error());
  CHECK(denied.text.starts_with("NOAUTH"));
  CHECK(c.command("AUTH", "s3cret") == value::simple("OK"));
  CHECK(c.command("GET", "k").is_null());
}

TEST_CASE("redis_server reports a server that cannot start, with its log", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const auto started = std::chrono::steady_clock::now();
  try {
    lockscope::test::redis_server server({"--no-such-directive", "1"});
    FAIL("redis-server started with a bad directive");
  } catch (const lockscope::test::redis_server_error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("during startup") != std::string::npos);
    CHECK(message.find("no-such-directive") != std::string::npos);  // from the log tail
  }
  CHECK(elapsed_since(started) < 3s);
}

TEST_CASE("redis_server kill and suspend look like a crash and a hang", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  resp_connection c(server.host(), server.port());

  server.suspend();
  c.send_command("PING");
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(c.read_value(200ms), lockscope::test::io_timeout);
  CHECK(elapsed_since(started) < 2s);
  server.resume();
  CHECK(c.read_value(2s) == value::simple("PONG"));

  server.kill();
  CHECK_FALSE(server.running());
  CHECK_THROWS_AS(c.command("PING"), lockscope::test::connection_error);
  server.start();
  c.connect(server.host(), server.port());
  CHECK(c.command("PING") == value::simple("PONG"));
}

TEST_CASE("resp_connection keeps bytes beyond one value for the next read", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  resp_connection c(server.host(), server.port());
  // Three replies that arrive in one read.
  c.send_raw("PING\r\nECHO hello\r\nINCR n\r\n");
  CHECK(c.read_value() == value::simple("PONG"));
  CHECK(c.last_value_bytes() == "+PONG\r\n");
  CHECK(c.read_value() == value::bulk("hello"));
  CHECK(c.last_value_bytes() == "$5\r\nhello\r\n");

  resp_connection moved = std::move(c);
  CHECK_FALSE(c.is_open());
  CHECK(moved.read_value() == value::number(1));
  CHECK(moved.last_value_bytes() == ":1\r\n");
  CHECK(moved.buffered_bytes() == 0);
  CHECK_FALSE(moved.try_read_value(50ms).has_value());
}

TEST_CASE("resp_connection reassembles a value split over many reads", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  resp_connection c(server.host(), server.port());
  std::string big(3 * 1024 * 1024 + 7, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  CHECK(c.command("SET", "big", big) == value::simple("OK"));
  const value got = c.command("GET", "big");
  REQUIRE(got.type == type::bulk_string);
  CHECK(got.text.size() == big.size());
  CHECK(got.text == big);
  CHECK(c.last_value_bytes().size() == big.size() + std::to_string(big.size()).size() + 5);
  CHECK(c.command_argv({"STRLEN", "big"}) == value::number(static_cast<std::int64_t>(big.size())));
}

TEST_CASE("resp_connection fails fast on a closed port and a silent server", "[support][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  const std::uint16_t unused = lockscope::test::find_free_port();
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(resp_connection("127.0.0.1", unused, 1s), lockscope::test::connection_error);
  CHECK(elapsed_since(started) < 1s);

  lockscope::test::redis_server server;
  resp_connection c(server.host(), server.port());
  CHECK(c.command("SUBSCRIBE", "nothing-here").type == type::array);
  const auto waited = std::chrono::steady_clock::now();
  try {
    c.read_value(150ms);
    FAIL("read_value returned without data");
  } catch (const lockscope::test::io_timeout& e) {
    CHECK(std::string(e.what()).find("150 ms") != std::string::npos);
  }
  CHECK(elapsed_since(waited) >= 140ms);
  CHECK(elapsed_since(waited) < 2s);
}

TEST_CASE("decode_in_chunks gives the same values for every chunking", "[support]") {
  const std::string bytes = "*2\r\n$3\r\nabc\r\n:-7\r\n|1\r\n+k\r\n#t\r\n,1.5\r\n";
  const auto whole = lockscope::test::decode_in_chunks(bytes, 0);
  REQUIRE_FALSE(whole.error);
  REQUIRE(whole.values.size() == 2);
  CHECK(whole.values[0] == value::aggregate(type::array, {value::bulk("abc"), value::number(-7)}));
  CHECK(lockscope::test::debug_string(whole.values[1]) == R"(attributes{simple_string "k", boolean "t"} double "1.5")");
  for (std::size_t chunk : {1, 2, 3, 5, 8}) {
    CAPTURE(chunk);
    CHECK(lockscope::test::decode_in_chunks(bytes, chunk) == whole);
  }

  const auto bad = lockscope::test::decode_in_chunks("*1\r\n@x\r\n", 1);
  CHECK(bad.error == lockscope::resp::errc::unknown_type);
  CHECK(bad.error_offset == 4);
  CHECK(bad.values.empty());

  const auto incomplete = lockscope::test::decode_in_chunks("$5\r\nab", 1);
  CHECK_FALSE(incomplete.error);
  CHECK_FALSE(incomplete.at_message_boundary);
}

TEST_CASE("jsonl schema: the checker accepts the README's examples and rejects each kind of fault", "[jsonl]") {
  using lockscope::test::event_line_errors;
  using lockscope::test::exchange_line_errors;
  const std::string exchange =
      R"({"ts":1795239742.734860,"client":"127.0.0.1:33164","server":"127.0.0.1:6379","command":["AUTH","****"],"reply_type":"simple_string","reply":"OK","latency_us":139,"kind":"exchange"})";
  CHECK(exchange_line_errors(exchange) == "");
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"[::1]:5","server":"[::1]:6379","command":[],"reply_type":"push","reply":["message","c","1"],"latency_us":null,"kind":"push"})") == "");
  CHECK(exchange_line_errors("{\"ts\":1}") != "");                                       // fields missing
  CHECK(exchange_line_errors(exchange.substr(0, exchange.size() - 1)) != "");           // not JSON
  CHECK(exchange_line_errors(R"({"client":"127.0.0.1:1","ts":1.5,"server":"127.0.0.1:6379","command":[],"reply_type":"none","reply":null,"latency_us":null,"kind":"exchange"})") != "");  // order
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1","server":"127.0.0.1:6379","command":[],"reply_type":"none","reply":null,"latency_us":null,"kind":"exchange"})") != "");  // no port
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":[1],"reply_type":"none","reply":null,"latency_us":null,"kind":"exchange"})") != "");  // argument type
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":[],"reply_type":"integer","reply":"1","latency_us":3,"kind":"exchange"})") != "");  // reply type
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":[],"reply_type":"none","reply":null,"latency_us":null,"kind":"exchange","x":1})") != "");  // extra
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":["GET","k"],"reply_type":"bulk_string","reply":"v","latency_us":3,"not_kept":{"command_arguments":0,"command_bytes":0,"reply_elements":0,"reply_bytes":7},"kind":"exchange"})") == "");
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":["GET","k"],"reply_type":"bulk_string","reply":"v","latency_us":3,"not_kept":{"command_arguments":0,"command_bytes":0,"reply_elements":0,"reply_bytes":0},"kind":"exchange"})") != "");  // nothing cut
  CHECK(exchange_line_errors(R"({"ts":1.5,"client":"127.0.0.1:1","server":"127.0.0.1:6379","command":["GET","k"],"reply_type":"bulk_string","reply":"v","latency_us":3,"kind":"exchange","not_kept":{"command_arguments":0,"command_bytes":0,"reply_elements":0,"reply_bytes":7}})") != "");  // order

  const std::string event =
      R"({"ts":1717209306.000520,"lock":"myLock","event":"acquired","owner":"5f1c:15","client":"192.168.1.22:50002","server":"192.168.1.10:16379","db":0,"hold_count":1,"lease_ms":6000,"wait_ms":2750.520})";
  CHECK(event_line_errors(event) == "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"anomaly","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0,"kind":"idle_with_waiters"})") == "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"anomaly","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0})") != "");  // anomaly without kind
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"bogus","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0})") != "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"released","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0,"wait_ms":1})") != "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"acquired","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0,"lease_ms":6000,"hold_count":1})") != "");  // order
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"acquired","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0,"hold_count":"1"})") != "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"notified","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":0,"confidence":"maybe"})") != "");

  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"acquired","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6"})") != "");  // no db
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"acquired","owner":"","client":"1.2.3.4:5","server":"1.2.3.4:6","db":-1})") != "");
  const std::string quorum =
      R"({"ts":1.5,"lock":"l","event":"quorum","owner":"t","client":"","server":"","db":0,"servers":3,"acquired_on":2,"needed":2,"acquired_servers":["1.2.3.4:6","1.2.3.4:7"],"owners":["t","t"],"outcome":"acquired","start":1.4,"end":1.5})";
  CHECK(event_line_errors(quorum) == "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"quorum","owner":"t","client":"","server":"","db":0,"servers":3,"acquired_on":2,"needed":2,"acquired_servers":[],"owners":[],"outcome":"won","start":1.4,"end":1.5})") != "");
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"l","event":"acquired","owner":"t","client":"","server":"","db":0,"servers":3})") != "");  // group field elsewhere
  CHECK(event_line_errors(R"({"ts":1.5,"lock":"a","event":"multilock","owner":"t","client":"","server":"","db":0,"keys":["a","b"],"acquired_keys":["a"],"outcome":"failed_released","start":1.4,"end":1.5})") == "");
  CHECK(lockscope::test::jsonl_errors(event + "\n" + event + "\n", event_line_errors) == "");
  CHECK(lockscope::test::jsonl_errors(event + "\nnope\n", event_line_errors).rfind("line 2: ", 0) == 0);
}
