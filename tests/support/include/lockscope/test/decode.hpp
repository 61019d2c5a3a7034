// Decoding a captured byte string in different chunkings, to check that the
// incremental decoder's result does not depend on how bytes arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::test {

struct decode_result {
  std::vector<resp::value> values;  // every complete top-level value, in order
  std::error_code error;
  std::uint64_t error_offset = 0;
  bool at_message_boundary = false;  // false if the bytes end inside a value
  std::uint64_t consumed = 0;

  bool operator==(const decode_result&) const = default;
};

// Feeds `bytes` to one decoder in pieces of `chunk_size` bytes (1: byte by byte;
// 0: all at once) and builds the values.
decode_result decode_in_chunks(std::string_view bytes, std::size_t chunk_size,
                               const resp::decoder_options& options = {});

}  // namespace lockscope::test
