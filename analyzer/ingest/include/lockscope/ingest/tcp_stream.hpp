// One direction of a TCP connection, reassembled into an ordered byte stream.
//
//   tcp_stream s({.max_buffer = 4 << 20});
//   s.on_segment(seg.seq, seg.flags, seg.payload, seg.missing, sink);
//   s.on_peer_ack(reverse.ack, sink);    // the peer acknowledged bytes we never saw
//   s.flush(sink);                       // connection over: deliver what is buffered
//
// In-order data goes to the sink as a view of the segment itself (no copy). Segments
// ahead of the expected sequence number are copied and buffered, up to max_buffer
// bytes; when the limit is hit, when the peer acknowledges past a hole, or on flush,
// the hole is given up and reported as a gap. Retransmitted and overlapping bytes are
// trimmed. Sequence numbers are compared modulo 2^32 and mapped to 64-bit stream
// offsets, so wraparound is invisible to the sink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace lockscope::ingest {

class stream_sink {
 public:
  virtual ~stream_sink() = default;
  // The next bytes of the stream, starting at stream offset `offset`.
  virtual void on_data(std::string_view bytes, std::uint64_t offset) = 0;
  // `bytes` bytes at `offset` were never captured; the next data follows them.
  virtual void on_gap(std::uint64_t bytes, std::uint64_t offset) = 0;
};

struct tcp_stream_options {
  std::size_t max_buffer = 4u << 20;  // out-of-order bytes held per direction
};

struct tcp_stream_stats {
  std::uint64_t delivered_bytes = 0;
  std::uint64_t gaps = 0;
  std::uint64_t gap_bytes = 0;
  std::uint64_t duplicate_bytes = 0;      // retransmitted or overlapping, trimmed
  std::uint64_t out_of_order_segments = 0;
};

class tcp_stream {
 public:
  tcp_stream() = default;
  explicit tcp_stream(const tcp_stream_options& options) : options_(options) {}

  // One segment of this direction. `missing` payload bytes follow `payload` on the
  // wire but were cut by the capture's snaplen.
  void on_segment(std::uint32_t seq, std::uint8_t flags, std::string_view payload,
                  std::uint32_t missing, stream_sink& sink);
  // An ACK sent by the other direction: bytes it acknowledges that we never saw are
  // lost from the capture, so waiting for them is pointless.
  void on_peer_ack(std::uint32_t ack, stream_sink& sink);
  // Delivers everything buffered, reporting the holes as gaps.
  void flush(stream_sink& sink);

  bool started() const noexcept { return started_; }
  // The stream began with a SYN, so offset 0 is the first byte the sender wrote.
  bool saw_syn() const noexcept { return saw_syn_; }
  bool finished() const noexcept { return fin_ && buffered_bytes_ == 0; }
  std::uint64_t next_offset() const noexcept { return next_; }
  std::size_t buffered_bytes() const noexcept { return buffered_bytes_; }
  // The memory the buffered segments take: their bytes and about this much per segment
  // (a map node and a string), so that a flood of tiny segments counts for what it costs.
  static constexpr std::size_t segment_overhead = 96;
  std::size_t held_bytes() const noexcept { return buffered_bytes_ + pending_.size() * segment_overhead; }
  const tcp_stream_stats& stats() const noexcept { return stats_; }

 private:
  // Stream offset of a sequence number, relative to the next expected one.
  std::int64_t relative(std::uint32_t seq) const noexcept {
    return static_cast<std::int32_t>(seq - next_seq_);
  }
  void deliver(std::string_view bytes, stream_sink& sink);
  void skip_to(std::uint64_t offset, stream_sink& sink);
  void drain(stream_sink& sink);
  void buffer(std::uint64_t offset, std::string_view bytes, stream_sink& sink);

  tcp_stream_options options_;
  bool started_ = false;
  bool saw_syn_ = false;
  bool fin_ = false;
  std::uint32_t next_seq_ = 0;  // sequence number of stream offset next_
  std::uint32_t fin_seq_ = 0;   // sequence number the FIN occupies
  std::uint64_t next_ = 0;      // next stream offset to deliver
  std::map<std::uint64_t, std::string> pending_;  // out-of-order segments by offset
  std::size_t buffered_bytes_ = 0;
  tcp_stream_stats stats_;
};

}  // namespace lockscope::ingest
