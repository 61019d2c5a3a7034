// A program outside the lockscope tree: encodes a command, decodes it back, and
// fails if anything differs. It only compiles and links if the package is usable.
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include <lockscope/resp/decoder.hpp>
#include <lockscope/resp/encoder.hpp>
#include <lockscope/resp/format.hpp>
#include <lockscope/resp/value.hpp>

int main() {
  namespace resp = lockscope::resp;
  std::string wire;
  resp::append_command(wire, "SET", "lock:{order-17}", "owner:1", "PX", 30000);
  if (wire != "*5\r\n$3\r\nSET\r\n$15\r\nlock:{order-17}\r\n$7\r\nowner:1\r\n$2\r\nPX\r\n$5\r\n30000\r\n") {
    std::fprintf(stderr, "unexpected encoding: %s\n", wire.c_str());
    return 1;
  }

  std::error_code ec;
  const std::vector<resp::value> values = resp::parse(wire, ec);
  if (ec || values.size() != 1) {
    std::fprintf(stderr, "decode failed: %s, %zu values\n", ec.message().c_str(), values.size());
    return 2;
  }
  const resp::value expected = resp::value::aggregate(
      resp::type::array, {resp::value::bulk("SET"), resp::value::bulk("lock:{order-17}"),
                          resp::value::bulk("owner:1"), resp::value::bulk("PX"), resp::value::bulk("30000")});
  if (!(values.front() == expected)) {
    std::fprintf(stderr, "decoded value differs\n");
    return 3;
  }

  // The incremental decoder, one byte at a time, gives the same value.
  resp::decoder decoder;
  resp::value_builder builder;
  for (char c : wire) decoder.feed(std::string_view(&c, 1), builder);
  if (decoder.error() || builder.values().size() != 1 || !(builder.values().front() == expected)) {
    std::fprintf(stderr, "byte-by-byte decode differs\n");
    return 4;
  }

  // The formatter pulls in fmt, a public dependency of the package.
  const std::string parsed = resp::to_parsed(values.front());
  if (parsed != "SET lock:{order-17} owner:1 PX 30000") {
    std::fprintf(stderr, "unexpected parsed form: %s\n", parsed.c_str());
    return 5;
  }
  std::printf("lockscope consumer ok: %s\n", parsed.c_str());
  return 0;
}
