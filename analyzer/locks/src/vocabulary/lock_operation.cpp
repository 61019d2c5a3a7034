// The functions of the operation vocabulary (lockscope/locks/lock_operation.hpp): the
// names of kinds and cluster replies, and the reading of a cluster redirect's text.
#include "lockscope/locks/lock_operation.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lockscope/locks/command_words.hpp"

namespace lockscope::locks {

std::string_view to_string(lock_op_kind k) noexcept {
  static constexpr std::string_view names[] = {"acquire",   "unlock",      "renew",   "force_unlock", "expire",
                                               "del",       "subscribe",   "unsubscribe", "message", "cluster_link",
                                               "set_permits", "count_down"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(cluster_reply r) noexcept {
  static constexpr std::string_view names[] = {"none", "moved", "ask", "tryagain", "clusterdown"};
  return names[static_cast<std::size_t>(r)];
}

cluster_redirect parse_cluster_error(std::string_view t) noexcept {
  cluster_redirect r;
  auto word_is = [&](std::string_view w) {
    return t.size() >= w.size() && t.substr(0, w.size()) == w && (t.size() == w.size() || t[w.size()] == ' ');
  };
  if (word_is("TRYAGAIN")) {
    r.kind = cluster_reply::tryagain;
    return r;
  }
  if (word_is("CLUSTERDOWN")) {
    r.kind = cluster_reply::clusterdown;
    return r;
  }
  const bool moved = word_is("MOVED");
  if (!moved && !word_is("ASK")) return r;
  r.malformed = true;  // until every part parsed
  const std::string_view rest = t.substr(std::min(t.size(), moved ? std::size_t{6} : std::size_t{4}));
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return r;
  std::int64_t slot = -1;
  if (!parse_wire_int(rest.substr(0, space), slot) || slot < 0 || slot > 16383) return r;
  const std::string_view target = rest.substr(space + 1);
  const std::size_t colon = target.rfind(':');
  if (colon == std::string_view::npos || target.find(' ') != std::string_view::npos) return r;
  std::int64_t port = 0;
  if (!parse_wire_int(target.substr(colon + 1), port) || port < 1 || port > 65535) return r;
  std::string_view host = target.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.kind = moved ? cluster_reply::moved : cluster_reply::ask;
  r.slot = static_cast<std::int32_t>(slot);
  r.host = host;
  r.port = static_cast<std::uint16_t>(port);
  r.malformed = false;
  return r;
}

std::string cluster_node_text(std::string_view host, std::uint16_t port) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace lockscope::locks
