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
    const std::size_t n = d.feed(bytes, s.handler);
    bytes.remove_prefix(n);
    s.next_offset += n;
    if (correct_pending_) {
      correct_sides(side, bytes);
      return;
    }
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

exchange resp_session::make_exchange(exchange_kind kind) const noexcept {
  exchange e;
  e.kind = kind;
  e.connection = connection_;
  e.client = &ends_[client_side_];
  e.server = &ends_[1 - client_side_];
  e.client_text = end_texts_[client_side_];
  e.server_text = end_texts_[1 - client_side_];
  e.client_from_start = sides_[client_side_].at_stream_start;
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
