// Addresses from "ip:port" / "[v6]:port" texts, for tests that build operations and
// events by hand: the pipeline carries each endpoint as an address beside its text.
#pragma once

#include <charconv>
#include <map>
#include <string>
#include <string_view>

#include "lockscope/ingest/packet.hpp"

namespace lockscope::test {

// The address `text` spells, kept for the test program's life (map nodes never move);
// nullptr when the text spells none.
inline const ingest::endpoint* interned_endpoint(std::string_view text) {
  static std::map<std::string, ingest::endpoint, std::less<>> table;
  if (const auto it = table.find(text); it != table.end()) return &it->second;
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return nullptr;
  std::string_view ip = text.substr(0, colon);
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), port);
  ingest::endpoint address;
  if (ec != std::errc() || end != text.data() + text.size() || port > 65535 ||
      !ingest::endpoint::parse(ip, static_cast<std::uint16_t>(port), address)) {
    return nullptr;
  }
  return &table.emplace(std::string(text), address).first->second;
}

}  // namespace lockscope::test
