// The ingest's output, which every later stage reads: one command and its reply (or one
// push) on a connection, the session events beside them (gaps, decode errors), and the
// sink that receives both. Below the stages: the recognizer and the outputs include this
// header, not the session's.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>

#include "lockscope/ingest/message.hpp"
#include "lockscope/ingest/packet.hpp"

namespace lockscope::ingest {

enum class exchange_kind : std::uint8_t { exchange, push };

// One command and its reply, or one push. Views are valid during the sink call only.
struct exchange {
  exchange_kind kind = exchange_kind::exchange;
  std::uint64_t connection = 0;
  const endpoint* client = nullptr;
  const endpoint* server = nullptr;
  // "ip:port" of each, formatted once per connection.
  std::string_view client_text;
  std::string_view server_text;
  // When the command's last byte was captured (a push: when it arrived).
  std::int64_t request_us = 0;
  // When the reply's last byte was captured; -1 without a reply.
  std::int64_t reply_us = -1;
  // The client's stream was captured from its first byte (its SYN was seen) with no
  // gap since: nothing it sent is missing, so e.g. its SELECTed database is known.
  bool client_from_start = false;
  // When the connection's SYN was captured; -1: joined mid-stream. Connections a process
  // opens together (a client's command and subscriber connections, a pool at start-up)
  // tell the lock stage which subscriber is whose.
  std::int64_t opened_us = -1;
  // The command's arguments, passwords redacted; empty for a push.
  std::span<const std::string_view> command;
  // The reply (or the push); nullptr when none was captured or none is sent
  // (CLIENT REPLY OFF/SKIP, a connection that ended first).
  const message* reply = nullptr;
  // An argument held once for every command that repeats it (see argument_interner.hpp):
  // command[interned_argument] is the text of the interner entry `interned_identity`.
  // An identity is never given to other bytes in the process, so a consumer may key
  // what it learnt from those bytes by it and skip comparing them. 0: none (the
  // command came node by node, interning is off, the argument was redacted, or no
  // argument was long and repeated).
  std::uint64_t interned_identity = 0;
  std::uint32_t interned_argument = 0;
  // How many exchanges (pushes not counted) the connection carried before this one,
  // wrapping at 2^32: what a connection did between two of its commands is the
  // difference (a poller sleeps between attempts; a client doing other work does not).
  std::uint32_t connection_sequence = 0;
  // What the command's limits left out (the same cap as a reply's: message::add): its
  // arguments past the node cap, and the bytes of those and of arguments cut short.
  std::uint64_t command_arguments_not_kept = 0;
  std::uint64_t command_bytes_not_kept = 0;

  std::int64_t latency_us() const noexcept { return reply_us < 0 ? -1 : reply_us - request_us; }
};

enum class session_event_kind : std::uint8_t {
  decode_error,  // bad RESP: `error` and `offset` (in that direction's stream)
  gap,           // `bytes` lost at `offset`
  resync,        // decoding resumed at `offset` after skipping `bytes`
  not_resp,      // the stream never looked like RESP; the connection is ignored
};

// Like exchanges, events point into the connection: copy what you keep.
struct session_event {
  session_event_kind kind{};
  std::uint64_t connection = 0;
  const endpoint* from = nullptr;  // the end that sent the bytes concerned
  const endpoint* to = nullptr;
  bool from_client = false;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::error_code error;
};

class exchange_sink {
 public:
  virtual ~exchange_sink() = default;
  virtual void on_exchange(const exchange& e) = 0;
  virtual void on_session_event(const session_event&) {}
};

}  // namespace lockscope::ingest
