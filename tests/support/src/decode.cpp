#include "lockscope/test/decode.hpp"

#include <algorithm>

namespace lockscope::test {

decode_result decode_in_chunks(std::string_view bytes, std::size_t chunk_size,
                               const resp::decoder_options& options) {
  resp::decoder decoder(options);
  resp::value_builder builder;
  const std::size_t step = chunk_size == 0 ? std::max<std::size_t>(bytes.size(), 1) : chunk_size;
  for (std::size_t at = 0; at < bytes.size() && !decoder.error(); at += step) {
    decoder.feed(bytes.substr(at, step), builder);
  }
  decode_result result;
  result.values = std::move(builder.values());
  result.error = decoder.error();
  result.error_offset = decoder.error() ? decoder.error_offset() : 0;
  result.at_message_boundary = decoder.at_message_boundary();
  result.consumed = decoder.offset();
  return result;
}

}  // namespace lockscope::test
