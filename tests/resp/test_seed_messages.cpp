// The Redisson lock traffic of the seed article (§4.2), byte for byte, and the bundled
// capture captures/seed-4.2.resp that replays it.
#include <fstream>
#include <iterator>
#include <string>

#include "helpers.hpp"
#include "lockscope/resp/encoder.hpp"
#include "lockscope/resp/format.hpp"

using namespace resp_test;
using lockscope::resp::decoder_options;
using lockscope::resp::parsed_options;
using lockscope::resp::to_parsed;
using lockscope::resp::value;

namespace {

// The three Lua scripts exactly as the seed prints them (§4.2.1, §4.2.2, §4.2.3).
const std::string acquire_script =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const std::string renew_script =
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return 1; end; return 0;";
const std::string unlock_script =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

const std::string owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
const std::string channel = "redisson_lock__channel:{myLock}";

struct seed_message {
  const char* name;
  std::string wire;
  std::string parsed;  // the seed's "解析后为" form
};

std::vector<seed_message> seed_messages() {
  return {
      {"AUTH", "*2\r\n$4\r\nAUTH\r\n$8\r\nRoot@123\r\n", "AUTH Root@123"},
      {"AUTH reply", "+OK\r\n", "OK"},
      {"PING", "*1\r\n$4\r\nPING\r\n", "PING"},
      {"PONG", "+PONG\r\n", "PONG"},
      {"QUIT", "*1\r\n$4\r\nQUIT\r\n", "QUIT"},
      {"QUIT reply", "+OK\r\n", "OK"},
      {"acquire (4.2.1)",
       "*6\r\n$4\r\nEVAL\r\n$339\r\n" + acquire_script + "\r\n$1\r\n1\r\n$6\r\nmyLock\r\n$4\r\n6000\r\n$39\r\n" +
           owner + "\r\n",
       "EVAL \"" + acquire_script + "\" 1 myLock 6000 " + owner},
      {"renew (4.2.2)",
       "*6\r\n$4\r\nEVAL\r\n$120\r\n" + renew_script + "\r\n$1\r\n1\r\n$6\r\nmyLock\r\n$4\r\n6000\r\n$39\r\n" +
           owner + "\r\n",
       "EVAL \"" + renew_script + "\" 1 myLock 6000 " + owner},
      {"unlock (4.2.3)",
       "*8\r\n$4\r\nEVAL\r\n$305\r\n" + unlock_script + "\r\n$1\r\n2\r\n$6\r\nmyLock\r\n$31\r\n" + channel +
           "\r\n$1\r\n0\r\n$4\r\n6000\r\n$39\r\n" + owner + "\r\n",
       "EVAL \"" + unlock_script + "\" 2 myLock " + channel + " 0 6000 " + owner},
      // The seed prints "EVAL SUBSCRIBE ..." and "EVAL UNSUBSCRIBE ...": a copy-paste
      // slip in the article; the wire bytes it shows carry no EVAL.
      {"SUBSCRIBE (4.2.4)", "*2\r\n$9\r\nSUBSCRIBE\r\n$31\r\n" + channel + "\r\n", "SUBSCRIBE " + channel},
      {"message (4.2.5)", "*3\r\n$7\r\nmessage\r\n$31\r\n" + channel + "\r\n$1\r\n0\r\n", "message " + channel + " 0"},
      {"UNSUBSCRIBE (4.2.6)", "*2\r\n$11\r\nUNSUBSCRIBE\r\n$31\r\n" + channel + "\r\n", "UNSUBSCRIBE " + channel},
  };
}

value decode_one(std::string_view wire, const decoder_options& options = {}) {
  const auto values = values_of(wire, options);
  REQUIRE(values.size() == 1);
  return values[0];
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("seed scripts have the lengths the capture announces", "[resp][seed]") {
  CHECK(acquire_script.size() == 339);
  CHECK(renew_script.size() == 120);
  CHECK(unlock_script.size() == 305);
  CHECK(owner.size() == 39);
  CHECK(channel.size() == 31);
}

TEST_CASE("seed messages decode to the seed's parsed form", "[resp][seed]") {
  decoder_options requests;
  requests.allow_inline = true;  // as a server reads requests
  for (const seed_message& m : seed_messages()) {
    INFO(m.name);
    CHECK(decode_every_way(m.wire).at_boundary);
    const value v = decode_one(m.wire);
    CHECK(to_parsed(v) == m.parsed);
    // Requests decode the same on a server's reader, which also accepts inline commands.
    if (m.wire.front() == '*') CHECK(decode_one(m.wire, requests) == v);
  }
}

TEST_CASE("seed lock commands are what append_command writes", "[resp][seed]") {
  std::string out;
  lockscope::resp::append_command(out, "EVAL", acquire_script, 1, "myLock", 6000, owner);
  CHECK(out == seed_messages()[6].wire);
  out.clear();
  lockscope::resp::append_command(out, "EVAL", renew_script, 1, "myLock", 6000, owner);
  CHECK(out == seed_messages()[7].wire);
  out.clear();
  lockscope::resp::append_command(out, "EVAL", unlock_script, 2, "myLock", channel, 0, 6000, owner);
  CHECK(out == seed_messages()[8].wire);
}

TEST_CASE("seed EVALs with short owner ids and cut scripts", "[resp][seed]") {
  parsed_options options;
  options.shorten_owner_ids = true;
  CHECK(to_parsed(decode_one(seed_messages()[6].wire), options) ==
        "EVAL \"" + acquire_script + "\" 1 myLock 6000 80e6\xe2\x80\xa6:12");
  options.max_argument = 40;
  CHECK(to_parsed(decode_one(seed_messages()[8].wire), options) ==
        "EVAL \"if (redis.call('hexists', KEYS[1], ARGV[\xe2\x80\xa6\" 2 myLock redisson_lock__channel:{myLock} 0 6000 "
        "80e6\xe2\x80\xa6:12");
}

TEST_CASE("captures/seed-4.2.resp decodes to the 17 messages of the seed exchange", "[resp][seed]") {
  const std::string capture = read_file(std::string(LOCKSCOPE_SOURCE_DIR) + "/captures/seed-4.2.resp");
  const std::vector<std::string> expected = {
      "AUTH Root@123",
      "OK",
      "PING",
      "PONG",
      "EVAL \"" + acquire_script + "\" 1 myLock 6000 " + owner,
      "(nil)",
      "EVAL \"" + renew_script + "\" 1 myLock 6000 " + owner,
      "1",
      "SUBSCRIBE " + channel,
      "subscribe " + channel + " 1",
      "EVAL \"" + unlock_script + "\" 2 myLock " + channel + " 0 6000 " + owner,
      "1",
      "message " + channel + " 0",
      "UNSUBSCRIBE " + channel,
      "unsubscribe " + channel + " 0",
      "QUIT",
      "OK",
  };
  // Every split agrees, and the capture is a whole number of messages.
  const outcome o = decode_every_way(capture);
  CHECK_FALSE(o.error);
  CHECK(o.at_boundary);

  const auto values = values_of(capture);
  REQUIRE(values.size() == 17);
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("message " << i + 1);
    CHECK(to_parsed(values[i]) == expected[i]);
  }
  // The lock request bytes in the capture are exactly the seed's.
  const auto seeds = seed_messages();
  for (std::size_t k : {0u, 2u, 6u, 7u, 8u, 9u, 10u, 11u, 4u}) {
    INFO(seeds[k].name);
    CHECK(capture.find(seeds[k].wire) != std::string::npos);
  }
}
