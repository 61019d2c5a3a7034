// Finding the sides and frame boundaries of a stream joined mid-way or after lost bytes.
#include "lockscope/ingest/resp_session.hpp"
#include "session_internal.hpp"

#include <algorithm>
#include <charconv>

namespace lockscope::ingest {

using namespace session_detail;

namespace {

struct counting_handler final : resp::handler {
  std::size_t messages = 0;
  std::size_t arrays = 0;  // messages sent as `*N` arrays, not inline
  void on_node(const resp::node& n) override {
    if (n.depth == 0 && n.type == resp::type::array && (n.flags & resp::node_flags::inline_command) == 0) ++arrays;
    if (n.ends_message()) ++messages;
  }
};

constexpr std::size_t validation_enough = 16u << 10;  // clean bytes that prove a candidate
// What a side keeps of its resync buffer once in sync: joined mid-stream on a busy port,
// every connection resyncs, some through a large value (tens of KB each), and a
// connection resyncs rarely after that.
constexpr std::size_t kept_resync_capacity = 4u << 10;

}  // namespace

resp::decoder& session_detail::scratch_decoder(bool allow_inline) {
  thread_local resp::decoder strict{resp::decoder_options{}};
  thread_local resp::decoder with_inline{[] {
    resp::decoder_options o;
    o.allow_inline = true;
    o.unbalanced_as_command = true;
    return o;
  }()};
  resp::decoder& d = allow_inline ? with_inline : strict;
  d.reset();
  return d;
}

void resp_session::lose_sync(int side) {
  side_state& s = sides_[side];
  s.synced = false;
  if (s.decoder) s.decoder->reset();
  if (side == client_side_) {
    tail_slot().clear_command();
  } else {
    reply_.clear();
    // Replies were lost, but how many is unknown: the first reply after the resync
    // decides (see reply_complete).
    server_lost_replies_ = true;
    if (replication_ != replication::none) replication_ = replication::stream;
  }
}

bool resp_session::validate(int side, std::string_view candidate, bool& need_more) {
  need_more = false;
  const bool client = side == client_side_;
  const bool first_bytes = sides_[side].resync_start == 0 && candidate.data() == sides_[side].resync_buffer.data();
  // Inline commands: at the start of a stream seen from its SYN, anything; elsewhere
  // (a flow's first captured bytes, a resync) a line that looks typed.
  const bool stream_start = client && sides_[side].at_stream_start && first_bytes;
  const bool allow_inline =
      stream_start || (client && (first_bytes || inline_seen_) && looks_like_inline_line(candidate));
  if (client && !allow_inline && !looks_like_command_array(candidate)) {
    // `*N\r\n` alone could still be waiting for its `$`.
    if (candidate.size() < 16 && !candidate.empty() && candidate[0] == '*') need_more = true;
    return false;
  }
  if (!client && (candidate.empty() || !is_reply_type_byte(candidate[0]))) return false;
  resp::decoder& d = scratch_decoder(allow_inline);
  counting_handler h;
  d.feed(candidate, h);
  if (d.error()) {
    // Valid messages, then bytes that are not RESP: the messages are kept (the real
    // decoder reports the bad byte, then resynchronises after it). A frame start is
    // certain at the first byte of a stream seen from its SYN; elsewhere two messages
    // must decode first, so that a value's text is not taken for a reply.
    const bool certain_start = sides_[side].at_stream_start && first_bytes;
    return h.messages >= (certain_start ? 1u : 2u);
  }
  // A client that sends arrays after it is not typing: the line was a value's text.
  if (allow_inline && !stream_start && !candidate.starts_with('*') && h.arrays > 0) return false;
  if (h.messages >= 1 || candidate.size() >= validation_enough) return true;
  need_more = true;
  return false;
}

void resp_session::resync(int side, std::string_view bytes) {
  side_state& s = sides_[side];
  if (s.resync_buffer.empty()) s.resync_start = s.next_offset;
  s.resync_buffer.append(bytes);
  s.next_offset += bytes.size();
  if (!sides_certain_ && side == client_side_) {
    // Guessed roles: replies from the end taken for the client prove the guess wrong.
    std::string_view detail;
    if (classify(s.resync_buffer, detail) == server_only) {
      std::string held;
      held.swap(s.resync_buffer);
      s.next_offset = s.resync_start;
      correct_sides(side, held);
      return;
    }
  }
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
      give_up(side, 0);
      return;
    }
    const std::size_t newline = buffer.find('\n', candidate);
    if (newline == std::string_view::npos) {
      // No candidate: keep only the unfinished last line.
      stats_.skipped_bytes += buffer.size();
      s.unsynced_bytes += buffer.size();
      s.resync_start += buffer.size();
      s.resync_buffer.clear();
      if (s.unsynced_bytes > options_.give_up_after) give_up(side, s.resync_start);
      return;
    }
    candidate = newline + 1;
    if (candidate >= buffer.size()) {
      stats_.skipped_bytes += candidate;
      s.unsynced_bytes += candidate;
      s.resync_start += candidate;
      s.resync_buffer.clear();
      if (s.unsynced_bytes > options_.give_up_after) give_up(side, s.resync_start);
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
  s.synced_once = true;
  s.decoder->reset();
  s.decoder_base = start;
  s.next_offset = start;
  std::string held;
  held.swap(s.resync_buffer);
  feed_synced(side, std::string_view(held).substr(candidate));
  if (s.resync_buffer.empty() && held.capacity() <= kept_resync_capacity) {
    held.clear();
    s.resync_buffer.swap(held);  // keep a small capacity for next time
  }
}

}  // namespace lockscope::ingest
