// Which end is the client, when neither the SYN nor --port says: hold both directions,
// look for a frame only a server sends, decide, replay; correct a guess later bytes
// contradict. Also names the protocols that are not RESP.
#include "lockscope/ingest/resp_session.hpp"
#include "session_internal.hpp"

#include <algorithm>

namespace lockscope::ingest {

using namespace session_detail;

std::string_view to_string(side_reason r) noexcept {
  switch (r) {
    case side_reason::undecided: return "undecided";
    case side_reason::syn: return "SYN";
    case side_reason::port: return "--port";
    case side_reason::content: return "content";
    case side_reason::well_known_port: return "well-known port";
    case side_reason::content_weak: return "content (only one end sent commands)";
    case side_reason::lower_port: return "lower port";
  }
  return "?";
}

std::string_view describe(flow_protocol p) noexcept {
  switch (p) {
    case flow_protocol::resp: return "RESP";
    case flow_protocol::tls: return "TLS: cannot decode; capture before the TLS terminator or on the server";
    case flow_protocol::http: return "HTTP: not Redis";
    case flow_protocol::unknown: return "unknown protocol: not RESP";
  }
  return "?";
}

bool is_well_known_redis_port(std::uint16_t port) noexcept {
  // 16379: the bundled crafted and seed captures (the recorded ones start with SYNs).
  return port == 6379 || port == 6380 || port == 16379 || port == 26379 || (port >= 7000 && port <= 7005);
}

namespace {

// Classifies the messages decoded from a candidate frame start.
struct evidence_handler final : resp::handler {
  std::size_t messages = 0;
  std::uint8_t evidence = no_evidence;
  std::string_view detail;
  bool first_child = false;
  // Bulk strings before any other frame may be the tail of a command array whose
  // header was not captured: they prove nothing.
  bool leading = true;

  void server(std::string_view why) {
    if (evidence != server_only) detail = why;
    evidence = server_only;
  }
  void on_node(const resp::node& n) override {
    if (n.depth == 0) {
      first_child = true;
      if (leading && n.type == resp::type::bulk_string && (n.flags & resp::node_flags::null_bulk) == 0) {
        if (n.ends_message()) ++messages;
        return;
      }
      leading = false;
      if (n.type != resp::type::array) server("a reply-only frame type");
      else if ((n.flags & resp::node_flags::null_array) != 0) server("a null array");
      else if (n.length == 0) server("an empty array");
    } else if (n.depth == 1 && n.type != resp::type::bulk_string) {
      server("an array holding something other than bulk strings");
    } else if (n.depth == 1 && first_child) {
      first_child = false;
      const std::string_view w = n.value;
      if (!n.is_partial() && (w == "message" || w == "pmessage" || w == "smessage" || w == "pong")) {
        server("a lower-case pub/sub frame");
      }
    } else if (n.depth == 1) {
      first_child = false;
    }
    if (n.ends_message()) {
      ++messages;
      if (evidence == no_evidence && !leading) {
        evidence = client_like;
        detail = "arrays of bulk strings";
      }
    }
  }
};

bool is_letter(char c) noexcept { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

}  // namespace

// Tries each line start; the first candidate that decodes cleanly (RESP frames,
// strictly) decides. An inline-looking line counts only when no RESP frame is found.
std::uint8_t session_detail::classify(std::string_view bytes, std::string_view& detail) {
  bool inline_line = false;
  std::size_t candidate = 0;
  while (candidate < bytes.size()) {
    const std::string_view rest = bytes.substr(candidate);
    if (is_reply_type_byte(rest[0])) {
      resp::decoder& d = scratch_decoder(false);
      evidence_handler h;
      d.feed(rest, h);
      if (!d.error() && h.evidence == server_only) {
        detail = h.detail;
        return server_only;
      }
      if (!d.error() && h.evidence == client_like) {
        detail = h.detail;
        return client_like;
      }
      if (!d.error() && h.messages > 0) {
        detail = "bulk strings only";
        return bulk_only;
      }
      // Incomplete: wait for more bytes rather than trust a later line start.
      if (!d.error()) return inline_line ? client_like : no_evidence;
    } else if (!inline_line && looks_like_inline_line(rest)) {
      inline_line = true;
      detail = "an inline command";
    }
    const std::size_t newline = bytes.find('\n', candidate);
    if (newline == std::string_view::npos) break;
    candidate = newline + 1;
  }
  return inline_line ? client_like : no_evidence;
}

bool session_detail::looks_like_inline_line(std::string_view bytes) noexcept {
  if (bytes.empty() || !is_letter(bytes[0])) return false;
  const std::size_t newline = bytes.find('\n');
  if (newline == std::string_view::npos || newline < 2 || bytes[newline - 1] != '\r') return false;
  std::size_t i = 0;
  while (i < newline && is_letter(bytes[i])) ++i;
  if (i > 32 || (bytes[i] != ' ' && bytes[i] != '\r')) return false;
  for (; i + 1 < newline; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if ((c < 0x20 && c != '\t') || c > 0x7e) return false;
  }
  return true;
}

bool resp_session::other_protocol_at_start(int side, std::string_view bytes) {
  side_state& s = sides_[side];
  s.first_size = static_cast<std::uint8_t>(std::min(bytes.size(), s.first.size()));
  std::copy_n(bytes.data(), s.first_size, s.first.data());
  // A TLS record: handshake (0x16) or application data (0x17), version 3.x.
  const bool tls = bytes.size() >= 3 && (bytes[0] == 0x16 || bytes[0] == 0x17) && bytes[1] == 0x03 &&
                   static_cast<unsigned char>(bytes[2]) <= 0x04;
  bool http = false;
  if (!tls) {
    const std::string_view line = bytes.substr(0, bytes.find('\n'));
    static constexpr std::string_view methods[] = {"GET ", "POST ", "PUT ", "HEAD ", "DELETE ",
                                                   "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "};
    for (std::string_view m : methods) {
      if (line.substr(0, m.size()) == m && line.find(" HTTP/") != std::string_view::npos) http = true;
    }
    http = http || line.substr(0, 7) == "HTTP/1." || line.substr(0, 14) == "PRI * HTTP/2.0";
  }
  if (!tls && !http) return false;
  carried_ = tls ? flow_protocol::tls : flow_protocol::http;
  give_up(side, 0);
  return true;
}

void resp_session::give_up(int side, std::uint64_t offset) {
  if (carried_ == flow_protocol::resp) carried_ = flow_protocol::unknown;
  // Exchanges already decoded stay; commands still waiting are shown unanswered.
  if (client_side_ >= 0) drop_pending(true);
  ignored_ = true;
  held_chunks_.clear();
  for (side_state& s : sides_) {
    std::string().swap(s.held);
    std::string().swap(s.resync_buffer);
  }
  report(session_event_kind::not_resp, side, offset, 0);
  note(flow_note_kind::other_protocol);
}

void resp_session::note(flow_note_kind kind, std::string_view detail) {
  if (options_.observer == nullptr) return;
  flow_note n;
  n.kind = kind;
  n.connection = connection_;
  if (client_side_ >= 0) {
    n.client = &ends_[client_side_];
    n.server = &ends_[1 - client_side_];
  } else {
    n.client = &ends_[0];
    n.server = &ends_[1];
  }
  n.reason = reason_;
  n.detail = detail;
  n.protocol = carried_;
  options_.observer->on_flow_note(n);
}

void resp_session::hold(int side, std::string_view bytes, std::uint64_t offset, std::int64_t now_us) {
  if (held_chunks_.empty()) held_since_us_ = now_us;
  side_state& s = sides_[side];
  // A chunk is at most the window; longer ones are split so sizes fit 32 bits.
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    held_chunk& c = held_chunks_.emplace_back();
    c.now_us = now_us;
    c.offset = offset;
    c.size = static_cast<std::uint32_t>(n);
    c.side = static_cast<std::uint8_t>(side);
    s.held.append(bytes.substr(0, n));
    held_bytes_ += n;
    offset += n;
    bytes.remove_prefix(n);
  }
  if (s.evidence != server_only) s.evidence = classify(s.held, s.evidence_detail);
  decide(held_bytes_ >= options_.decide_window || held_chunks_.size() >= 4096 ||
         now_us - held_since_us_ >= options_.decide_after_us);
}

void resp_session::decide(bool forced) {
  const side_state& a = sides_[0];
  const side_state& b = sides_[1];
  if ((a.evidence == server_only) != (b.evidence == server_only)) {
    const int server = a.evidence == server_only ? 0 : 1;
    commit_sides(1 - server, side_reason::content, sides_[server].evidence_detail);
    return;
  }
  if ((a.evidence == client_like && b.evidence == bulk_only) || (b.evidence == client_like && a.evidence == bulk_only)) {
    // Commands one way, bulk strings (GET replies, or a command's tail) the other.
    commit_sides(a.evidence == client_like ? 0 : 1, side_reason::content,
                 "commands one way, bulk string replies the other");
    sides_certain_ = false;
    return;
  }
  if (!forced) return;
  if (held_chunks_.empty() && !a.seen_data && !b.seen_data) return;
  const bool known0 = is_well_known_redis_port(ends_[0].port);
  const bool known1 = is_well_known_redis_port(ends_[1].port);
  if (known0 != known1) {
    commit_sides(known0 ? 1 : 0, side_reason::well_known_port, {});
    return;
  }
  if ((a.evidence == client_like) != (b.evidence == client_like)) {
    commit_sides(a.evidence == client_like ? 0 : 1, side_reason::content_weak,
                 (a.evidence == client_like ? a : b).evidence_detail);
    return;
  }
  commit_sides(ends_[0].port < ends_[1].port ? 1 : 0, side_reason::lower_port, {});
}

void resp_session::commit_sides(int client, side_reason reason, std::string_view detail) {
  client_side_ = client;
  reason_ = reason;
  sides_certain_ = reason == side_reason::content;
  make_decoders();
  note(flow_note_kind::sides_decided, detail);
  // Replay what was held, in arrival order, now that each direction has its role.
  std::vector<held_chunk> chunks;
  chunks.swap(held_chunks_);
  std::array<std::string, 2> held;
  std::array<std::size_t, 2> used{0, 0};
  for (int side = 0; side < 2; ++side) {
    held[side].swap(sides_[side].held);
    sides_[side].evidence_detail = {};
  }
  held_bytes_ = 0;
  const std::int64_t now = now_us_;
  for (const held_chunk& c : chunks) {
    if (ignored_) break;
    const std::string_view bytes = std::string_view(held[c.side]).substr(used[c.side], c.size);
    used[c.side] += c.size;
    process(c.side, bytes, c.offset, c.now_us);
  }
  now_us_ = now;
}

bool resp_session::contradicts_client(const resp::node& n) noexcept {
  if (n.depth == 0) {
    first_word_next_ = true;
    if (n.type != resp::type::array || (n.flags & resp::node_flags::null_array) != 0) return true;
    return n.length == 0 && (n.flags & resp::node_flags::inline_command) == 0;
  }
  if (n.type != resp::type::bulk_string) return true;
  if (n.depth != 1 || !first_word_next_) return false;
  first_word_next_ = false;
  return first_word_contradicts(n.value, n.is_partial());
}

bool resp_session::first_word_contradicts(std::string_view w, bool partial) noexcept {
  if (w.empty()) return false;
  // `+OK`, `:1`, `$3`, `-ERR ...` read as inline commands are replies.
  if (!partial && is_reply_type_byte(w[0]) && w[0] != '*') return true;
  return w == "message" || w == "pmessage" || w == "smessage" || w == "pong";
}

void resp_session::correct_sides(int side, std::string_view rest) {
  correct_pending_ = false;
  ++stats_.side_corrections;
  client_side_ = 1 - client_side_;
  reason_ = side_reason::content;
  sides_certain_ = true;
  // What was paired under the old roles was misread: dropped, not shown. So is the
  // command the contradiction interrupted (an inline line's array node, say), or the
  // real client's first command would be appended to it.
  while (count_ > 0) pop_front();
  ring_[head_].clear_command();
  reply_.clear();
  server_lost_replies_ = false;
  for (int i = 0; i < 2; ++i) {
    side_state& s = sides_[i];
    resp::decoder_options o;
    o.allow_inline = i == client_side_;
    o.unbalanced_as_command = o.allow_inline;
    s.decoder.emplace(o);
    s.handler.want_bulk_arrays(options_.whole_arrays && i == client_side_);
    s.synced = false;
    s.at_stream_start = false;
    s.resync_buffer.clear();
    s.unsynced_bytes = 0;
  }
  note(flow_note_kind::sides_corrected, "the end taken for the client sent a reply");
  resync(side, rest);
}

}  // namespace lockscope::ingest
