// Shared by the resp_session source files only: what a waiting command expects, and
// the byte-level tests used to tell sides and frame starts apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockscope/resp/ascii.hpp"
#include "lockscope/resp/decoder.hpp"

namespace lockscope::ingest::session_detail {

enum : std::uint8_t {
  expect_reply = 0,
  expect_confirmation,  // (P|S)(UN)SUBSCRIBE: paired with its first confirmation
  expect_hello,
  expect_reset,
  expect_monitor,
  expect_replication,  // PSYNC/SYNC: the preamble line or the RDB
  expect_protocol_error,  // an inline line with unbalanced quotes
  expect_nothing,         // sent after that line: the server closes without answering
};

// Scratch decoders for validating candidates, shared by every session of a thread.
// The inline one accepts unbalanced quotes as commands, as the sessions' client
// decoders do.
resp::decoder& scratch_decoder(bool allow_inline);

// What one direction's bytes show about its sender (see resp_session.hpp); `detail`
// names the frame that decided.
enum : std::uint8_t { no_evidence = 0, bulk_only = 1, client_like = 2, server_only = 3 };
std::uint8_t classify(std::string_view bytes, std::string_view& detail);

// A line a person typed: printable ASCII ending in CRLF, starting with a command-like
// word (letters only). Mid-stream, inline candidates must look like this.
bool looks_like_inline_line(std::string_view bytes) noexcept;

using resp::iequals;

inline bool is_message_kind(std::string_view s) noexcept {
  return iequals(s, "message") || iequals(s, "pmessage") || iequals(s, "smessage");
}

inline bool is_confirmation_kind(std::string_view s) noexcept {
  return iequals(s, "subscribe") || iequals(s, "psubscribe") || iequals(s, "ssubscribe") ||
         iequals(s, "unsubscribe") || iequals(s, "punsubscribe") || iequals(s, "sunsubscribe");
}

inline bool is_reply_type_byte(char c) noexcept {
  switch (c) {
    case '+': case '-': case ':': case '$': case '*': case '_': case ',': case '#':
    case '!': case '=': case '(': case '%': case '~': case '|': case '>':
      return true;
    default:
      return false;
  }
}

inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// `*N\r\n$`: how a client's command array starts. Sets `first_word` to the start of
// the first bulk when it is within `bytes`.
inline bool looks_like_command_array(std::string_view bytes, std::string_view* first_word = nullptr) {
  if (bytes.size() < 2 || bytes[0] != '*' || !is_digit(bytes[1])) return false;
  std::size_t i = 1;
  while (i < bytes.size() && is_digit(bytes[i])) ++i;
  if (i + 2 >= bytes.size() || bytes[i] != '\r' || bytes[i + 1] != '\n' || bytes[i + 2] != '$') {
    return false;
  }
  if (first_word != nullptr) {
    std::size_t j = i + 3;
    std::size_t length = 0;
    while (j < bytes.size() && is_digit(bytes[j])) length = length * 10 + static_cast<std::size_t>(bytes[j++] - '0');
    if (j + 2 + length <= bytes.size() && bytes[j] == '\r') *first_word = bytes.substr(j + 2, length);
  }
  return true;
}

}  // namespace lockscope::ingest::session_detail
