#include "lockscope/live/packet_ring.hpp"

#include <algorithm>
#include <cstring>

namespace lockscope::live {

namespace {
// A record as stored: this header, then the frame, padded to 8 bytes.
struct stored_header {
  std::int64_t ts_us;
  std::int32_t link_type;
  std::uint32_t wire_length;
  std::uint32_t caplen;
  endpoint source, destination;
};
constexpr std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }
constexpr std::size_t largest_record = align8(sizeof(stored_header) + 262144);
}  // namespace

struct packet_ring::block {
  std::unique_ptr<char[]> bytes;
  std::size_t used = 0;
  std::uint64_t records = 0;
  std::int64_t newest_us = 0;
  explicit block(std::size_t size) : bytes(new char[size]) {}
};

packet_ring::packet_ring(const packet_ring_options& options)
    : options_(options),
      block_size_(std::max<std::size_t>(options.budget_bytes / 16, std::max<std::size_t>(512u << 10, largest_record))),
      max_blocks_(std::max<std::size_t>(2, options.budget_bytes / block_size_)) {}

packet_ring::~packet_ring() = default;

std::size_t packet_ring::bytes_held() const noexcept { return used_.size() * block_size_; }

void packet_ring::recycle_oldest(std::int64_t newest_us) {
  block& b = *used_.front();
  if (b.newest_us >= newest_us - options_.window_us) evicted_in_window_ += b.records;
  held_ -= b.records;
  b.used = 0;
  b.records = 0;
  free_.push_back(std::move(used_.front()));
  used_.pop_front();
}

bool packet_ring::add(const captured_packet& p) {
  ingest::tcp_segment segment;
  if (ingest::decode_packet(p.link_type, p.data, segment) != ingest::decode_status::tcp) return false;
  // The window: blocks whose newest packet is older go back to the pool.
  while (!used_.empty() && used_.front()->newest_us < p.ts_us - options_.window_us) recycle_oldest(p.ts_us);
  const std::size_t caplen = std::min<std::size_t>(p.data.size(), 262144);
  const std::size_t need = align8(sizeof(stored_header) + caplen);
  if (used_.empty() || used_.back()->used + need > block_size_) {
    if (used_.size() >= max_blocks_) recycle_oldest(p.ts_us);
    if (free_.empty()) {
      free_.push_back(std::make_unique<block>(block_size_));
      ++allocated_;
    }
    used_.push_back(std::move(free_.back()));
    free_.pop_back();
  }
  block& b = *used_.back();
  stored_header h{p.ts_us, p.link_type, p.wire_length, static_cast<std::uint32_t>(caplen), segment.source,
                  segment.destination};
  std::memcpy(b.bytes.get() + b.used, &h, sizeof h);
  std::memcpy(b.bytes.get() + b.used + sizeof h, p.data.data(), caplen);
  b.used += need;
  ++b.records;
  b.newest_us = std::max(b.newest_us, p.ts_us);
  ++held_;
  return true;
}

void packet_ring::for_each_since(std::int64_t since_us, const std::function<void(const record&)>& f) const {
  for (const auto& b : used_) {
    if (b->newest_us < since_us) continue;
    std::size_t at = 0;
    while (at < b->used) {
      stored_header h;
      std::memcpy(&h, b->bytes.get() + at, sizeof h);
      if (h.ts_us >= since_us) {
        f(record{h.ts_us, h.link_type, h.wire_length, h.source, h.destination,
                 std::string_view(b->bytes.get() + at + sizeof h, h.caplen)});
      }
      at += align8(sizeof h + h.caplen);
    }
  }
}

}  // namespace lockscope::live
