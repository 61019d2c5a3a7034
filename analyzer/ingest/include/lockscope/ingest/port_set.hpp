// The server ports a capture is filtered by, as one bit per port: every TCP segment asks
// whether its source or its destination is one, and a bit test answers in a few
// instructions where a search of the list took ~24 (twice for a server's replies).
//
//   port_set s(std::vector<std::uint16_t>{6379, 26379});
//   if (s.contains(seg.source.port)) ...
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace lockscope::ingest {

class port_set {
 public:
  port_set() = default;
  explicit port_set(std::span<const std::uint16_t> ports) noexcept {
    for (const std::uint16_t p : ports) bits_[p >> 6] |= std::uint64_t{1} << (p & 63);
  }
  bool contains(std::uint16_t port) const noexcept { return (bits_[port >> 6] >> (port & 63) & 1u) != 0; }

 private:
  std::array<std::uint64_t, 65536 / 64> bits_{};
};

}  // namespace lockscope::ingest
