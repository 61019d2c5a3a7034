#include "lockscope/analyzer/resp_session.hpp"

#include <algorithm>
#include <charconv>

namespace lockscope::analyzer {

namespace {

enum : std::uint8_t {
  expect_reply = 0,
  expect_confirmation,  // (P|S)(UN)SUBSCRIBE: paired with its first confirmation
  expect_hello,
  expect_reset,
  expect_monitor,
  expect_replication,  // PSYNC/SYNC: the preamble line or the RDB
};

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool is_message_kind(std::string_view s) noexcept {
  return iequals(s, "message") || iequals(s, "pmessage") || iequals(s, "smessage");
}

bool is_confirmation_kind(std::string_view s) noexcept {
  return iequals(s, "subscribe") || iequals(s, "psubscribe") || iequals(s, "ssubscribe") ||
         iequals(s, "unsubscribe") || iequals(s, "punsubscribe") || iequals(s, "sunsubscribe");
}

bool is_reply_type_byte(char c) noexcept {
  switch (c) {
    case '+': case '-': case ':': case '$': case '*': case '_': case ',': case '#':
    case '!': case '=': case '(': case '%': case '~': case '|': case '>':
      return true;
    default:
      return false;
  }
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// `*N\r\n$`: how a client's command array starts. Sets `first_word` to the start of
// the first bulk when it is within `bytes`.
bool looks_like_command_array(std::string_view bytes, std::string_view* first_word = nullptr) {
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

struct counting_handler final : resp::handler {
  std::size_t messages = 0;
  void on_node(const resp::node& n) override {
    if (n.ends_message()) ++messages;
  }
};

// Scratch decoders for validating resync candidates, shared by every session.
resp::decoder& scratch_decoder(bool allow_inline) {
  thread_local resp::decoder strict{resp::decoder_options{}};
  thread_local resp::decoder with_inline{[] {
    resp::decoder_options o;
    o.allow_inline = true;
    return o;
  }()};
  resp::decoder& d = allow_inline ? with_inline : strict;
  d.reset();
  return d;
}

constexpr std::size_t validation_enough = 16u << 10;  // clean bytes that prove a candidate

}  // namespace

void resp_session::side_handler::on_node(const resp::node& n) {
  if (session->client_side_ == side) session->on_client_node(n);
  else session->on_server_node(n);
}

resp_session::resp_session(const session_options& options, std::uint64_t connection,
                           std::array<endpoint, 2> ends, std::optional<int> client_side,
                           exchange_sink& sink)
    : options_(options), connection_(connection), ends_(ends), sink_(sink),
      client_side_(client_side ? *client_side : -1) {
  for (int side = 0; side < 2; ++side) {
    sides_[side].handler.session = this;
    sides_[side].handler.side = side;
  }
  ring_.resize(8);
  end_texts_[0] = ends_[0].to_string();
  end_texts_[1] = ends_[1].to_string();
}

void resp_session::report(session_event_kind kind, int side, std::uint64_t offset,
                          std::uint64_t bytes, std::error_code error) {
  session_event e;
  e.kind = kind;
  e.connection = connection_;
  e.from = &ends_[side];
  e.to = &ends_[1 - side];
  e.from_client = side == client_side_;
  e.offset = offset;
  e.bytes = bytes;
  e.error = error;
  sink_.on_session_event(e);
}

void resp_session::decide_roles(int side, std::string_view bytes) {
  if (client_side_ >= 0) return;
  int sender_is_client = -1;
  std::string_view first_word;
  if (looks_like_command_array(bytes, &first_word)) {
    // A RESP2 pub/sub frame looks like a command; its first word gives it away.
    sender_is_client = (is_message_kind(first_word) || is_confirmation_kind(first_word)) ? 0 : 1;
  } else if (!bytes.empty() && is_reply_type_byte(bytes[0])) {
    sender_is_client = 0;
  } else if (!bytes.empty() && ((bytes[0] >= 'A' && bytes[0] <= 'Z') || (bytes[0] >= 'a' && bytes[0] <= 'z'))) {
    sender_is_client = 1;  // an inline command
  }
  if (sender_is_client < 0) {
    // Nothing to go by: servers listen on the lower, well-known port.
    const int server = ends_[0].port < ends_[1].port ? 0 : 1;
    client_side_ = 1 - server;
    return;
  }
  client_side_ = sender_is_client == 1 ? side : 1 - side;
}

void resp_session::make_decoders() {
  if (sides_[0].decoder) return;
  for (int side = 0; side < 2; ++side) {
    resp::decoder_options o;
    o.allow_inline = side == client_side_;
    sides_[side].decoder.emplace(o);
  }
}

void resp_session::on_data(int side, std::string_view bytes, std::uint64_t offset,
                           std::int64_t now_us) {
  if (ignored_ || bytes.empty()) return;
  now_us_ = now_us;
  side_state& s = sides_[side];
  s.next_offset = offset;
  if (!s.seen_data) {
    s.seen_data = true;
    decide_roles(side, bytes);
    make_decoders();
  }
  if (s.synced) feed_synced(side, bytes);
  else resync(side, bytes);
}

void resp_session::on_gap(int side, std::uint64_t bytes, std::uint64_t offset, std::int64_t now_us) {
  if (ignored_) return;
  now_us_ = now_us;
  side_state& s = sides_[side];
  if (!s.seen_data && client_side_ < 0) {
    // Lost bytes before any data: nothing to resynchronise yet.
    s.next_offset = offset + bytes;
    return;
  }
  report(session_event_kind::gap, side, offset, bytes);
  s.next_offset = offset + bytes;
  s.at_stream_start = false;
  if (s.decoder) lose_sync(side);
  s.resync_buffer.clear();
}

void resp_session::lose_sync(int side) {
  side_state& s = sides_[side];
  s.synced = false;
  if (s.decoder) s.decoder->reset();
  if (side == client_side_) {
    tail_slot().command.clear();
  } else {
    reply_.clear();
    // Replies were lost, but how many is unknown: the first reply after the resync
    // decides (see reply_complete).
    server_lost_replies_ = true;
    if (replication_ != replication::none) replication_ = replication::stream;
  }
}

void resp_session::feed_synced(int side, std::string_view bytes) {
  side_state& s = sides_[side];
  resp::decoder& d = *s.decoder;
  while (!bytes.empty() && !ignored_) {
    if (side != client_side_ && (replication_ == replication::preamble ||
                                 replication_ == replication::rdb_body ||
                                 replication_ == replication::rdb_eof)) {
      const std::size_t n = consume_replication(bytes);
      bytes.remove_prefix(n);
      s.next_offset += n;
      if (replication_ == replication::stream) {
        d.reset();
        s.decoder_base = s.next_offset;
      }
      continue;
    }
    const std::size_t n = d.feed(bytes, s.handler);
    bytes.remove_prefix(n);
    s.next_offset += n;
    if (d.error()) {
      ++stats_.decode_errors;
      report(session_event_kind::decode_error, side, s.decoder_base + d.error_offset(), 0, d.error());
      lose_sync(side);
      // Look for the next frame boundary after the bad byte.
      const std::uint64_t bad = s.decoder_base + d.error_offset();
      if (bad + 1 > s.next_offset) {
        const std::uint64_t skip = std::min<std::uint64_t>(bad + 1 - s.next_offset, bytes.size());
        bytes.remove_prefix(static_cast<std::size_t>(skip));
        s.next_offset += skip;
        stats_.skipped_bytes += skip;
      }
      s.resync_buffer.clear();
      resync(side, bytes);
      return;
    }
  }
}

bool resp_session::validate(int side, std::string_view candidate, bool& need_more) {
  need_more = false;
  const bool client = side == client_side_;
  const bool allow_inline = client && sides_[side].at_stream_start && sides_[side].resync_start == 0 &&
                            candidate.data() == sides_[side].resync_buffer.data();
  if (client && !allow_inline && !looks_like_command_array(candidate)) {
    // `*N\r\n` alone could still be waiting for its `$`.
    if (candidate.size() < 16 && !candidate.empty() && candidate[0] == '*') need_more = true;
    return false;
  }
  if (!client && (candidate.empty() || !is_reply_type_byte(candidate[0]))) return false;
  resp::decoder& d = scratch_decoder(allow_inline);
  counting_handler h;
  d.feed(candidate, h);
  if (d.error()) return false;
  if (h.messages >= 1 || candidate.size() >= validation_enough) return true;
  need_more = true;
  return false;
}

void resp_session::resync(int side, std::string_view bytes) {
  side_state& s = sides_[side];
  if (s.resync_buffer.empty()) s.resync_start = s.next_offset;
  s.resync_buffer.append(bytes);
  s.next_offset += bytes.size();
  std::string_view buffer = s.resync_buffer;
  std::size_t candidate = 0;
  for (;;) {
    bool need_more = false;
    if (validate(side, buffer.substr(candidate), need_more)) break;
    if (need_more) {
      // Wait for more bytes; what precedes the candidate can go.
      if (candidate > 0) {
        stats_.skipped_bytes += candidate;
        s.unsynced_bytes += candidate;
        s.resync_start += candidate;
        s.resync_buffer.erase(0, candidate);
      }
      return;
    }
    if (s.at_stream_start && s.resync_start == 0 && candidate == 0) {
      // A stream seen from its first byte must start with a frame: this is not RESP.
      ignored_ = true;
      report(session_event_kind::not_resp, side, 0, 0);
      return;
    }
    const std::size_t newline = buffer.find('\n', candidate);
    if (newline == std::string_view::npos) {
      // No candidate: keep only the unfinished last line.
      stats_.skipped_bytes += buffer.size();
      s.unsynced_bytes += buffer.size();
      s.resync_start += buffer.size();
      s.resync_buffer.clear();
      if (s.unsynced_bytes > options_.give_up_after) {
        ignored_ = true;
        report(session_event_kind::not_resp, side, s.resync_start, 0);
      }
      return;
    }
    candidate = newline + 1;
    if (candidate >= buffer.size()) {
      stats_.skipped_bytes += candidate;
      s.unsynced_bytes += candidate;
      s.resync_start += candidate;
      s.resync_buffer.clear();
      if (s.unsynced_bytes > options_.give_up_after) {
        ignored_ = true;
        report(session_event_kind::not_resp, side, s.resync_start, 0);
      }
      return;
    }
    if (candidate > options_.resync_window) {
      // Bound the window: forget bytes that can no longer hold a candidate.
      stats_.skipped_bytes += candidate;
      s.unsynced_bytes += candidate;
      s.resync_start += candidate;
      s.resync_buffer.erase(0, candidate);
      buffer = s.resync_buffer;
      candidate = 0;
    }
  }
  // Accepted at `candidate`.
  const std::uint64_t start = s.resync_start + candidate;
  if (const std::uint64_t skipped = s.unsynced_bytes + candidate; skipped > 0) {
    ++stats_.resyncs;
    report(session_event_kind::resync, side, start, skipped);
  }
  stats_.skipped_bytes += candidate;
  s.unsynced_bytes = 0;
  s.synced = true;
  s.decoder->reset();
  s.decoder_base = start;
  s.next_offset = start;
  std::string held;
  held.swap(s.resync_buffer);
  feed_synced(side, std::string_view(held).substr(candidate));
  if (s.resync_buffer.empty()) {
    held.clear();
    s.resync_buffer.swap(held);  // keep the capacity for next time
  }
}

// The server side of PSYNC/SYNC before the replication stream: `+FULLRESYNC` or
// `+CONTINUE` lines, newline keepalives, then the RDB as `$len` + raw bytes (no CRLF)
// or `$EOF:<40-byte mark>` + raw bytes ending with the mark.
std::size_t resp_session::consume_replication(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (replication_ == replication::rdb_body) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(rdb_remaining_, bytes.size() - pos));
      pos += n;
      rdb_remaining_ -= n;
      stats_.replication_bytes += n;
      if (rdb_remaining_ == 0) replication_ = replication::stream;
      if (replication_ == replication::stream) return pos;
      continue;
    }
    if (replication_ == replication::rdb_eof) {
      const std::string_view chunk = bytes.substr(pos);
      const std::string_view mark = rdb_eof_mark_;
      // The mark may straddle two feeds: probe the previous tail joined to this head.
      std::string probe = rdb_tail_;
      probe.append(chunk.substr(0, std::min(chunk.size(), mark.size() - 1)));
      std::size_t end = std::string::npos;
      if (const std::size_t found = probe.find(mark); found != std::string::npos) {
        end = found + mark.size() - rdb_tail_.size();
      } else if (const std::size_t in_chunk = chunk.find(mark); in_chunk != std::string_view::npos) {
        end = in_chunk + mark.size();
      }
      if (end != std::string::npos) {
        pos += end;
        stats_.replication_bytes += end;
        replication_ = replication::stream;
        rdb_tail_.clear();
        return pos;
      }
      stats_.replication_bytes += chunk.size();
      rdb_tail_.append(chunk);
      if (rdb_tail_.size() > mark.size() - 1) rdb_tail_.erase(0, rdb_tail_.size() - (mark.size() - 1));
      return bytes.size();
    }
    // Preamble: one line at a time.
    const std::size_t newline = bytes.find('\n', pos);
    if (newline == std::string_view::npos) {
      if (rdb_line_.size() < 1024) rdb_line_.append(bytes.substr(pos));
      return bytes.size();
    }
    rdb_line_.append(bytes.substr(pos, newline - pos));
    pos = newline + 1;
    std::string_view line = rdb_line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {  // keepalive while the master prepares the RDB
      rdb_line_.clear();
      continue;
    }
    if (line[0] == '$') {
      if (line.substr(1, 4) == "EOF:") {
        rdb_eof_mark_.assign(line.substr(5));
        rdb_tail_.clear();
        replication_ = rdb_eof_mark_.empty() ? replication::stream : replication::rdb_eof;
      } else {
        std::uint64_t length = 0;
        std::from_chars(line.data() + 1, line.data() + line.size(), length);
        rdb_remaining_ = length;
        replication_ = length == 0 ? replication::stream : replication::rdb_body;
      }
      if (count_ > 0 && front().expect == expect_replication) {
        emit(front(), nullptr);  // SYNC: its reply is the RDB itself
        pop_front();
      }
      rdb_line_.clear();
      if (replication_ == replication::stream) return pos;
      continue;
    }
    // A status line: +FULLRESYNC / +CONTINUE answer PSYNC; anything else answers an
    // earlier command.
    const bool error = line[0] == '-';
    reply_.set_single(error ? resp::type::simple_error : resp::type::simple_string, line.substr(1));
    const bool continues = line.substr(1, 8) == "CONTINUE";
    if (count_ > 0) {
      const bool was_psync = front().expect == expect_replication;
      emit(front(), &reply_);
      pop_front();
      if (was_psync && error) {
        replica_link_ = false;
        replication_ = replication::none;
      }
    }
    reply_.clear();
    rdb_line_.clear();
    if (continues) {
      replication_ = replication::stream;
      return pos;
    }
    if (replication_ == replication::none) return pos;
  }
  return pos;
}

resp_session::pending_command& resp_session::tail_slot() {
  if (count_ + 1 > ring_.size()) {
    // Grow, keeping the order: head first, then the slot being filled.
    std::vector<pending_command> grown(ring_.size() * 2);
    for (std::size_t i = 0; i < ring_.size(); ++i) {
      grown[i] = std::move(ring_[ring_index(head_ + i)]);
    }
    ring_.swap(grown);
    head_ = 0;
  }
  return ring_[ring_index(head_ + count_)];
}

void resp_session::commit_tail() {
  ++count_;
  if (count_ > options_.max_pending) {
    emit(front(), nullptr);
    pop_front();
  }
}

void resp_session::pop_front() {
  ring_[head_].command.clear();
  head_ = ring_index(head_ + 1);
  --count_;
}

void resp_session::drop_pending(bool emit_unanswered) {
  while (count_ > 0) {
    if (emit_unanswered) emit(front(), nullptr);
    pop_front();
  }
}

void resp_session::on_client_node(const resp::node& n) {
  pending_command& c = tail_slot();
  c.command.add(n, options_.max_message_bytes);
  if (n.ends_message()) command_complete();
}

void resp_session::on_server_node(const resp::node& n) {
  if (replication_ == replication::stream) {
    // Commands the master propagates: skipped.
    stats_.replication_bytes += n.value.size();
    return;
  }
  reply_.add(n, options_.max_message_bytes);
  if (n.ends_message()) {
    reply_complete();
    reply_.clear();
  }
}

void resp_session::command_complete() {
  pending_command& c = tail_slot();
  c.at_us = now_us_;
  c.redact_mask = 0;
  c.expect = expect_reply;
  c.hello_protocol = 0;
  ++stats_.commands;
  if (replica_link_) {  // REPLCONF ACK from a replica: never answered, not shown
    c.command.clear();
    return;
  }
  // Most commands need only their name here: look at the whole argument list only
  // for the few that change the connection's state or carry a password.
  const auto nodes = c.command.nodes();
  if (nodes.size() < 2 || nodes[0].type != resp::type::array) {
    c.command.clear();
    return;
  }
  const std::string_view name = c.command.text(nodes[1]);
  std::vector<std::string_view>& args = arguments_;
  args.clear();
  // Every command handled below starts with one of these letters; the rest (EVAL,
  // GET, ...) skip the comparisons.
  static constexpr std::string_view special_initials = "ahmcrspu";
  const bool ordinary = name.empty() || special_initials.find(lower(name[0])) == std::string_view::npos;
  if (ordinary) {
    args.push_back(name);
  } else if (iequals(name, "AUTH") || iequals(name, "HELLO") || iequals(name, "MIGRATE") || iequals(name, "CONFIG") ||
      iequals(name, "ACL") || iequals(name, "CLIENT") || iequals(name, "REPLCONF")) {
    c.command.arguments(args);
  } else {
    args.push_back(name);
  }
  auto mask = [&](std::size_t i) {
    if (i < args.size() && i < 64) c.redact_mask |= std::uint64_t{1} << i;
  };
  if (ordinary) {
    // nothing to track
  } else if (iequals(name, "AUTH")) {
    if (args.size() >= 2) mask(args.size() - 1);
  } else if (iequals(name, "HELLO")) {
    c.expect = expect_hello;
    if (args.size() >= 2) {
      unsigned v = 0;
      std::from_chars(args[1].data(), args[1].data() + args[1].size(), v);
      c.hello_protocol = static_cast<std::uint8_t>(v);
    }
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (iequals(args[i], "AUTH")) mask(i + 2);
    }
  } else if (iequals(name, "MIGRATE")) {
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (iequals(args[i], "AUTH")) mask(i + 1);
      else if (iequals(args[i], "AUTH2")) mask(i + 2);
      else if (iequals(args[i], "KEYS")) break;
    }
  } else if (iequals(name, "CONFIG") && args.size() >= 4 && iequals(args[1], "SET")) {
    for (std::size_t i = 2; i + 1 < args.size(); i += 2) {
      if (iequals(args[i], "requirepass") || iequals(args[i], "masterauth")) mask(i + 1);
    }
  } else if (iequals(name, "ACL") && args.size() >= 3 && iequals(args[1], "SETUSER")) {
    for (std::size_t i = 3; i < args.size(); ++i) {
      if (!args[i].empty() && (args[i][0] == '>' || args[i][0] == '#')) mask(i);
    }
  } else if (iequals(name, "REPLCONF") && args.size() >= 2 && iequals(args[1], "ACK")) {
    // A replica acknowledging its offset (never answered): this is a replication link
    // joined after its PSYNC; what the master sends is the replication stream.
    replica_link_ = true;
    replication_ = replication::stream;
    drop_pending(true);
    reply_.clear();
    c.command.clear();
    return;
  } else if (is_confirmation_kind(name)) {
    c.expect = expect_confirmation;
  } else if (iequals(name, "RESET")) {
    c.expect = expect_reset;
  } else if (iequals(name, "MONITOR")) {
    c.expect = expect_monitor;
  } else if (iequals(name, "PSYNC") || iequals(name, "SYNC")) {
    c.expect = expect_replication;
    replica_link_ = true;
    replication_ = replication::preamble;
    rdb_line_.clear();
  } else if (iequals(name, "CLIENT") && args.size() >= 3 && iequals(args[1], "REPLY")) {
    if (iequals(args[2], "OFF")) {
      reply_mode_ = reply_mode::off;
      emit(c, nullptr);
      c.command.clear();
      return;
    }
    if (iequals(args[2], "SKIP")) {
      if (reply_mode_ != reply_mode::off) reply_mode_ = reply_mode::skip_next;
      emit(c, nullptr);
      c.command.clear();
      return;
    }
    if (iequals(args[2], "ON")) {
      reply_mode_ = reply_mode::on;
      commit_tail();
      return;
    }
  }
  if (reply_mode_ != reply_mode::on) {
    if (reply_mode_ == reply_mode::skip_next) reply_mode_ = reply_mode::on;
    emit(c, nullptr);
    c.command.clear();
    return;
  }
  commit_tail();
}

void resp_session::reply_complete() {
  const std::size_t root = reply_.root();
  if (root == message::npos) return;
  const message_node& top = reply_.nodes()[root];

  // First, second and third elements of an aggregate (pub/sub frames).
  const message_node* elements[3] = {nullptr, nullptr, nullptr};
  if (top.type == resp::type::array || top.type == resp::type::push) {
    std::size_t k = 0;
    reply_.for_each_child(root, [&](const message_node& e) {
      elements[k++] = &e;
      return k < 3;
    });
  }
  const std::string_view kind =
      elements[0] != nullptr && (elements[0]->type == resp::type::bulk_string ||
                                 elements[0]->type == resp::type::simple_string)
          ? reply_.text(*elements[0])
          : std::string_view();
  auto update_subscriptions = [&] {
    if (protocol_ == 2 && elements[2] != nullptr && elements[2]->type == resp::type::integer) {
      subscribed_ = elements[2]->integer > 0;
    }
  };
  auto front_awaits = [&](std::string_view confirmation) {
    if (count_ == 0 || front().expect != expect_confirmation) return false;
    front().command.arguments(arguments_);
    if (arguments_.empty() || !iequals(arguments_[0], confirmation)) return false;
    if (arguments_.size() == 1) return true;  // UNSUBSCRIBE with no channel: any
    return elements[1] != nullptr && reply_.text(*elements[1]) == arguments_[1];
  };

  if (monitor_) {
    emit_push(reply_);
    return;
  }
  if (top.type == resp::type::push) {
    if (is_confirmation_kind(kind) && front_awaits(kind)) {
      emit(front(), &reply_);
      pop_front();
      return;
    }
    emit_push(reply_);
    return;
  }
  if (top.type == resp::type::array && !kind.empty()) {
    if (is_message_kind(kind) && (subscribed_ || count_ == 0)) {
      if (protocol_ == 2) subscribed_ = true;  // a capture that began mid-subscription
      emit_push(reply_);
      return;
    }
    if (is_confirmation_kind(kind)) {
      if (front_awaits(kind)) {
        update_subscriptions();
        emit(front(), &reply_);
        pop_front();
        return;
      }
      if (subscribed_ || count_ == 0) {
        update_subscriptions();
        emit_push(reply_);
        return;
      }
    }
  }
  if (count_ == 0) {
    ++stats_.unpaired_replies;
    server_lost_replies_ = false;
    return;
  }
  if (server_lost_replies_) {
    // A server answers a request/response client's latest command next; the older
    // ones had their replies in the lost bytes.
    server_lost_replies_ = false;
    while (count_ > 1) {
      emit(front(), nullptr);
      pop_front();
    }
  }
  pending_command& c = front();
  const bool error = top.type == resp::type::simple_error || top.type == resp::type::bulk_error;
  switch (c.expect) {
    case expect_hello:
      if (!error && c.hello_protocol >= 2) protocol_ = c.hello_protocol;
      break;
    case expect_reset:
      subscribed_ = false;
      protocol_ = 2;
      reply_mode_ = reply_mode::on;
      monitor_ = false;
      break;
    case expect_monitor:
      if (!error) monitor_ = true;
      break;
    case expect_confirmation:
      // RESP3 confirmations arrive as pushes; this is an error reply.
      break;
    default:
      break;
  }
  emit(c, &reply_);
  pop_front();
}

void resp_session::emit(pending_command& c, const message* reply) {
  c.command.arguments(arguments_);
  if (!options_.show_secrets && c.redact_mask != 0) {
    for (std::size_t i = 0; i < arguments_.size() && i < 64; ++i) {
      if ((c.redact_mask >> i) & 1u) arguments_[i] = "****";
    }
  }
  exchange e = make_exchange(exchange_kind::exchange);
  e.request_us = c.at_us;
  e.reply_us = reply != nullptr ? now_us_ : -1;
  e.command = arguments_;
  e.reply = reply;
  ++stats_.exchanges;
  sink_.on_exchange(e);
}

exchange resp_session::make_exchange(exchange_kind kind) const noexcept {
  exchange e;
  e.kind = kind;
  e.connection = connection_;
  e.client = &ends_[client_side_];
  e.server = &ends_[1 - client_side_];
  e.client_text = end_texts_[client_side_];
  e.server_text = end_texts_[1 - client_side_];
  return e;
}

void resp_session::emit_push(const message& m) {
  exchange e = make_exchange(exchange_kind::push);
  e.request_us = now_us_;
  e.reply = &m;
  ++stats_.pushes;
  sink_.on_exchange(e);
}

void resp_session::finish(std::int64_t now_us) {
  if (ignored_ || client_side_ < 0) return;
  now_us_ = now_us;
  drop_pending(true);
}

}  // namespace lockscope::analyzer
