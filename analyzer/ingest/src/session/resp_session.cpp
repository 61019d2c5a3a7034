// The session's plumbing: feeding each direction's decoder, gaps, and the end.
#include "lockscope/ingest/resp_session.hpp"
#include "session_internal.hpp"

#include <algorithm>
#include <charconv>

namespace lockscope::ingest {

using namespace session_detail;

void resp_session::side_handler::on_node(const resp::node& n) {
  if (session->client_side_ == side) session->on_client_node(n);
  else session->on_server_node(n);
}

bool resp_session::side_handler::on_bulk_array(std::string_view frame, std::span<const std::string_view> elements) {
  return session->client_side_ == side && session->on_client_array(frame, elements);
}

resp_session::resp_session(const session_options& options, std::uint64_t connection,
                           std::array<endpoint, 2> ends, std::optional<int> client_side,
                           exchange_sink& sink, side_reason reason, argument_interner* interner)
    : options_(options), connection_(connection), ends_(ends), sink_(sink),
      interner_(options.intern_arguments ? interner : nullptr), client_side_(client_side ? *client_side : -1) {
  for (int side = 0; side < 2; ++side) {
    sides_[side].handler.session = this;
    sides_[side].handler.side = side;
  }
  ring_.resize(8);
  ring_mask_ = ring_.size() - 1;
  end_texts_[0] = ends_[0].to_string();
  end_texts_[1] = ends_[1].to_string();
  if (client_side_ >= 0) {
    reason_ = reason;
    sides_certain_ = true;
  }
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

void resp_session::make_decoders() {
  if (sides_[0].decoder) return;
  for (int side = 0; side < 2; ++side) {
    resp::decoder_options o;
    o.allow_inline = side == client_side_;
    o.unbalanced_as_command = o.allow_inline;
    sides_[side].decoder.emplace(o);
    sides_[side].handler.want_bulk_arrays(options_.whole_arrays && side == client_side_);
  }
}

void resp_session::on_data(int side, std::string_view bytes, std::uint64_t offset,
                           std::int64_t now_us) {
  if (ignored_ || bytes.empty()) return;
  now_us_ = now_us;
  side_state& s = sides_[side];
  if (!s.seen_data) {
    s.seen_data = true;
    if (other_protocol_at_start(side, bytes)) return;
    if (client_side_ >= 0 && !s.decoder) {
      make_decoders();
      note(flow_note_kind::sides_decided);
    }
  }
  if (client_side_ < 0) hold(side, bytes, offset, now_us);
  else process(side, bytes, offset, now_us);
}

void resp_session::process(int side, std::string_view bytes, std::uint64_t offset, std::int64_t now_us) {
  now_us_ = now_us;
  side_state& s = sides_[side];
  s.next_offset = offset;
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
  if (client_side_ < 0) {
    decide(true);  // held bytes cannot be joined across the hole: decide on what came
    if (ignored_) return;
  }
  report(session_event_kind::gap, side, offset, bytes);
  s.next_offset = offset + bytes;
  s.at_stream_start = false;
  if (s.decoder) lose_sync(side);
  s.resync_buffer.clear();
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
    const std::string_view fed = bytes;
    const std::uint64_t fed_at = s.next_offset;
    const std::size_t n = d.feed(bytes, s.handler);
    bytes.remove_prefix(n);
    s.next_offset += n;
    if (correct_pending_) {
      correct_sides(side, bytes);
      return;
    }
    // CR/LF bytes that ended this feed (a stray line end split across segments).
    const std::uint64_t line_ends_before = s.trailing_line_ends;
    // Every feed pays this: the usual ending (a message's own CR LF) is decided in four
    // compares, and find_last_not_of (a memchr per byte) is left for the rest.
    const std::size_t size = fed.size();
    const auto line_end = [](char c) { return c == '\r' || c == '\n'; };
    std::size_t trailing = 0;
    if (size >= 3 && fed[size - 1] == '\n' && fed[size - 2] == '\r' && !line_end(fed[size - 3])) {
      trailing = 2;
    } else if (size > 0 && line_end(fed[size - 1])) {
      const std::size_t last = fed.find_last_not_of("\r\n");
      trailing = last == std::string_view::npos ? size : size - 1 - last;
    }
    s.trailing_line_ends = trailing == fed.size() ? line_ends_before + trailing : trailing;
    if (d.error() && skip_stray_line_ends(side, fed, fed_at, line_ends_before, bytes)) continue;
    if (d.error()) {
      ++stats_.decode_errors;
      // (lose_sync resets the decoder, and with it the error's offset.)
      const std::uint64_t bad = s.decoder_base + d.error_offset();
      report(session_event_kind::decode_error, side, bad, 0, d.error());
      lose_sync(side);
      // Look for the next frame boundary after the bad byte.
      if (bad >= fed_at && bad < fed_at + fed.size()) {
        // From the byte after the bad one, whatever the decoder had taken in after it:
        // those bytes are looked at again for a frame start, and counted if skipped.
        bytes = fed.substr(static_cast<std::size_t>(bad + 1 - fed_at));
        s.next_offset = bad + 1;
        stats_.skipped_bytes += 1;
        s.unsynced_bytes += 1;
      } else if (bad + 1 > s.next_offset) {
        const std::uint64_t skip = std::min<std::uint64_t>(bad + 1 - s.next_offset, bytes.size());
        bytes.remove_prefix(static_cast<std::size_t>(skip));
        s.next_offset += skip;
        stats_.skipped_bytes += skip;
        s.unsynced_bytes += skip;
      }
      s.resync_buffer.clear();
      resync(side, bytes);
      return;
    }
  }
}

bool resp_session::skip_stray_line_ends(int side, std::string_view fed, std::uint64_t fed_at,
                                        std::uint64_t line_ends_before, std::string_view& rest) {
  side_state& s = sides_[side];
  resp::decoder& d = *s.decoder;
  if (d.error() != resp::make_error_code(resp::errc::unknown_type)) return false;
  // Between two messages: nothing of a reply (or a command) is under way.
  const bool between =
      side == client_side_ ? count_ > ring_mask_ || ring_[ring_index(head_ + count_)].command.empty() : reply_.empty();
  if (!between) return false;
  const std::uint64_t bad = s.decoder_base + d.error_offset();
  // The bad line may have begun in earlier feeds: then only with CR/LF bytes.
  if (bad >= fed_at + fed.size() || (bad < fed_at && fed_at - bad > line_ends_before)) return false;
  const std::size_t in_fed = bad < fed_at ? 0 : static_cast<std::size_t>(bad - fed_at);
  const std::string_view from_bad = fed.substr(in_fed);
  const std::uint64_t stray = std::min(from_bad.find_first_not_of("\r\n"), from_bad.size()) + (fed_at - std::min(bad, fed_at));
  if (stray == 0) return false;
  // A line end where a message should start (a server or a proxy that ends a reply
  // twice): skipped and counted, the stream still in step.
  stats_.stray_bytes += stray;
  d.reset();
  s.decoder_base = bad + stray;
  s.next_offset = bad + stray;
  rest = fed.substr(static_cast<std::size_t>(bad + stray - fed_at));
  return true;
}

exchange resp_session::make_exchange(exchange_kind kind) const noexcept {
  exchange e;
  e.kind = kind;
  e.connection = connection_;
  e.client = &ends_[client_side_];
  e.server = &ends_[1 - client_side_];
  e.client_text = end_texts_[client_side_];
  e.server_text = end_texts_[1 - client_side_];
  e.client_from_start = sides_[client_side_].at_stream_start;
  e.opened_us = opened_us_;
  return e;
}

void resp_session::finish(std::int64_t now_us) {
  if (client_side_ < 0 && !ignored_) {
    now_us_ = now_us;
    decide(true);
  }
  if (ignored_ || client_side_ < 0) return;
  now_us_ = now_us;
  if (!sides_[0].synced_once && !sides_[1].synced_once && (sides_[0].seen_data || sides_[1].seen_data)) {
    give_up(sides_[0].seen_data ? 0 : 1, 0);  // not one frame: not RESP
    return;
  }
  drop_pending(true);
}

}  // namespace lockscope::ingest
