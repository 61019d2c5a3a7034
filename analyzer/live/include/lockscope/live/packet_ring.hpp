// The flight recorder's memory: the last `window` of captured TCP packets, copied into
// a fixed budget of bytes, so that the packets of a few connections can be written out
// when something goes wrong (`lockscope analyze --save-anomalies`).
//
//   packet_ring ring({.budget_bytes = 64 << 20, .window_us = 30'000'000});
//   ring.add(p);                                   // every captured packet, in order
//   ring.for_each_since(now - window, [&](const packet_ring::record& r) { ... });
//
// Packets go into blocks (1/16 of the budget, at least 512 KiB); when the budget is
// full, or the newest packet of the oldest block is older than the window, that block
// is recycled. No allocation per packet: blocks are reused. Frames that are not TCP
// (or not decodable) are not kept. Sans-I/O: fed with packets, no clock of its own.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/packet.hpp"
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

struct packet_ring_options {
  std::size_t budget_bytes = 64u << 20;
  std::int64_t window_us = 30'000'000;
};

class packet_ring {
 public:
  struct record {
    std::int64_t ts_us;
    int link_type;
    std::uint32_t wire_length;
    endpoint source, destination;
    std::string_view data;
  };

  explicit packet_ring(const packet_ring_options& options);
  ~packet_ring();
  packet_ring(const packet_ring&) = delete;
  packet_ring& operator=(const packet_ring&) = delete;

  // Copies the packet in (false when it is not a TCP segment: not kept).
  bool add(const captured_packet& p);
  // Every kept packet with ts_us >= since_us, oldest first.
  void for_each_since(std::int64_t since_us, const std::function<void(const record&)>& f) const;

  std::size_t bytes_held() const noexcept;  // blocks in use × block size
  std::uint64_t packets_held() const noexcept { return held_; }
  // Packets pushed out by the budget while still inside the window.
  std::uint64_t evicted_in_window() const noexcept { return evicted_in_window_; }
  std::size_t block_size() const noexcept { return block_size_; }

 private:
  struct block;
  void recycle_oldest(std::int64_t newest_us);

  packet_ring_options options_;
  std::size_t block_size_;
  std::size_t max_blocks_;
  std::deque<std::unique_ptr<block>> used_;
  std::vector<std::unique_ptr<block>> free_;
  std::size_t allocated_ = 0;
  std::uint64_t held_ = 0;
  std::uint64_t evicted_in_window_ = 0;
};

}  // namespace lockscope::live
