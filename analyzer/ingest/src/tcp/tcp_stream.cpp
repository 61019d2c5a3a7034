#include "lockscope/ingest/tcp_stream.hpp"

#include "lockscope/ingest/packet.hpp"

namespace lockscope::ingest {

void tcp_stream::deliver(std::string_view bytes, stream_sink& sink) {
  if (bytes.empty()) return;
  const std::uint64_t at = next_;
  next_ += bytes.size();
  next_seq_ += static_cast<std::uint32_t>(bytes.size());
  stats_.delivered_bytes += bytes.size();
  sink.on_data(bytes, at);
}

void tcp_stream::skip_to(std::uint64_t offset, stream_sink& sink) {
  if (offset <= next_) return;
  const std::uint64_t gap = offset - next_;
  const std::uint64_t at = next_;
  next_ = offset;
  next_seq_ += static_cast<std::uint32_t>(gap);
  ++stats_.gaps;
  stats_.gap_bytes += gap;
  sink.on_gap(gap, at);
}

// Delivers buffered segments that have become contiguous.
void tcp_stream::drain(stream_sink& sink) {
  while (!pending_.empty() && pending_.begin()->first <= next_) {
    auto node = pending_.extract(pending_.begin());
    buffered_bytes_ -= node.mapped().size();
    const std::uint64_t start = node.key();
    std::string_view bytes = node.mapped();
    const std::uint64_t end = start + bytes.size();
    if (end <= next_) {
      stats_.duplicate_bytes += bytes.size();
      continue;
    }
    const std::uint64_t overlap = next_ - start;
    stats_.duplicate_bytes += overlap;
    deliver(bytes.substr(static_cast<std::size_t>(overlap)), sink);
  }
}

void tcp_stream::buffer(std::uint64_t offset, std::string_view bytes, stream_sink& sink) {
  ++stats_.out_of_order_segments;
  // Over the limit: give up the oldest holes first, they are the least likely to fill.
  while (buffered_bytes_ + bytes.size() > options_.max_buffer && !pending_.empty() &&
         pending_.begin()->first < offset) {
    skip_to(pending_.begin()->first, sink);
    drain(sink);
  }
  if (offset <= next_ || buffered_bytes_ + bytes.size() > options_.max_buffer) {
    if (offset > next_) skip_to(offset, sink);
    const std::uint64_t overlap = next_ - offset;
    if (overlap >= bytes.size()) {
      stats_.duplicate_bytes += bytes.size();
      return;
    }
    stats_.duplicate_bytes += overlap;
    deliver(bytes.substr(static_cast<std::size_t>(overlap)), sink);
    drain(sink);
    return;
  }
  auto [it, inserted] = pending_.try_emplace(offset);
  if (!inserted) {
    // A retransmission of a buffered segment: keep the longer copy.
    if (it->second.size() >= bytes.size()) {
      stats_.duplicate_bytes += bytes.size();
      return;
    }
    stats_.duplicate_bytes += it->second.size();
    buffered_bytes_ -= it->second.size();
  }
  it->second.assign(bytes);
  buffered_bytes_ += bytes.size();
}

void tcp_stream::on_segment(std::uint32_t seq, std::uint8_t flags, std::string_view payload,
                            std::uint32_t missing, stream_sink& sink) {
  const bool syn = (flags & tcp_flags::syn) != 0;
  if (!started_) {
    started_ = true;
    saw_syn_ = syn;
    next_seq_ = syn ? seq + 1 : seq;
  }
  const std::uint32_t data_seq = syn ? seq + 1 : seq;
  const std::uint64_t total = payload.size() + std::uint64_t{missing};
  if ((flags & tcp_flags::fin) != 0) {
    fin_ = true;
    fin_seq_ = data_seq + static_cast<std::uint32_t>(total);
  }
  if (total == 0) return;

  std::int64_t rel = relative(data_seq);
  if (rel + static_cast<std::int64_t>(total) <= 0) {
    stats_.duplicate_bytes += total;
    return;
  }
  if (rel < 0) {  // a retransmission overlapping delivered bytes: trim its head
    const auto cut = static_cast<std::uint64_t>(-rel);
    stats_.duplicate_bytes += cut;
    if (cut <= payload.size()) {
      payload.remove_prefix(static_cast<std::size_t>(cut));
    } else {
      missing -= static_cast<std::uint32_t>(cut - payload.size());
      payload = {};
    }
    rel = 0;
  }
  const std::uint64_t offset = next_ + static_cast<std::uint64_t>(rel);
  if (rel == 0) {
    deliver(payload, sink);  // the fast path: a view of the captured frame
    if (missing != 0) skip_to(next_ + missing, sink);
    drain(sink);
    return;
  }
  if (!payload.empty()) buffer(offset, payload, sink);
}

void tcp_stream::on_peer_ack(std::uint32_t ack, stream_sink& sink) {
  if (!started_ || pending_.empty()) return;
  // The FIN takes a sequence number of its own; its ACK acknowledges no data.
  if (fin_ && ack == fin_seq_ + 1) ack = fin_seq_;
  const std::int64_t rel = relative(ack);
  if (rel <= 0) return;
  const std::uint64_t acked = next_ + static_cast<std::uint64_t>(rel);
  // The receiver has bytes we never saw: the hole will not fill from this capture.
  while (!pending_.empty() && next_ < acked) {
    const std::uint64_t first = pending_.begin()->first;
    skip_to(first < acked ? first : acked, sink);
    drain(sink);
  }
}

void tcp_stream::flush(stream_sink& sink) {
  while (!pending_.empty()) {
    skip_to(pending_.begin()->first, sink);
    drain(sink);
  }
}

}  // namespace lockscope::ingest
