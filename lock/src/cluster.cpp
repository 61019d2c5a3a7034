#include "lockscope/lock/cluster.hpp"

#include <algorithm>
#include <charconv>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

namespace {

constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[i] = crc;
  }
  return t;
}();

bool parse_port(std::string_view s, std::uint16_t& port) {
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || ptr != s.data() + s.size() || value == 0 || value > 65535) return false;
  port = static_cast<std::uint16_t>(value);
  return true;
}

bool is_aggregate(const resp::value& v) {
  return v.type == resp::type::array || v.type == resp::type::map || v.type == resp::type::set;
}

// A field of a CLUSTER SHARDS entry, which is a map in RESP3 and a flat key/value
// array in RESP2: both arrive as key, value, key, value.
const resp::value* field(const resp::value& object, std::string_view name) {
  const auto& e = object.elements;
  for (std::size_t i = 0; i + 1 < e.size(); i += 2)
    if (e[i].is_string() && e[i].text == name) return &e[i + 1];
  return nullptr;
}

std::optional<std::int64_t> integer_of(const resp::value& v) {
  if (v.type == resp::type::integer) return v.integer;
  if (v.is_string()) {
    std::int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), n);
    if (ec == std::errc{} && ptr == v.text.data() + v.text.size()) return n;
  }
  return std::nullopt;
}

bool valid_range(std::optional<std::int64_t> from, std::optional<std::int64_t> to) {
  return from && to && *from >= 0 && *to < cluster_slots && *from <= *to;
}

}  // namespace

std::uint16_t crc16_xmodem(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes)
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  return crc;
}

std::uint16_t key_slot(std::string_view key) noexcept {
  if (const std::size_t open = key.find('{'); open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16_xmodem(key) & (cluster_slots - 1);
}

std::string node_address::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<node_address> parse_node_address(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  node_address node;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  node.host = std::string(host);
  if (!parse_port(text.substr(colon + 1), node.port)) return std::nullopt;
  return node;
}

void slot_map::clear() {
  nodes_.clear();
  owner_.fill(no_node);
}

std::uint16_t slot_map::intern(const node_address& node) {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] == node) return static_cast<std::uint16_t>(i);
  nodes_.push_back(node);
  return static_cast<std::uint16_t>(nodes_.size() - 1);
}

std::optional<std::string> slot_map::load_shards(const resp::value& reply, bool tls) {
  if (reply.type != resp::type::array) return "CLUSTER SHARDS did not answer an array";
  slot_map fresh;
  fresh.clear();
  for (const resp::value& shard : reply.elements) {
    if (!is_aggregate(shard)) return "a CLUSTER SHARDS entry is not a map";
    const resp::value* slots = field(shard, "slots");
    const resp::value* nodes = field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || !is_aggregate(*slots) || !is_aggregate(*nodes))
      return "a CLUSTER SHARDS entry lacks slots or nodes";
    std::optional<node_address> master;
    for (const resp::value& node : nodes->elements) {
      const resp::value* role = field(node, "role");
      const resp::value* health = field(node, "health");
      if (role == nullptr || role->text != "master") continue;
      if (health != nullptr && health->text == "fail") continue;
      const resp::value* host = field(node, "endpoint");
      if (host == nullptr || !host->is_string() || host->text.empty() || host->text == "?") host = field(node, "ip");
      const resp::value* port = tls ? field(node, "tls-port") : nullptr;
      if (port == nullptr) port = field(node, "port");
      if (host == nullptr || port == nullptr) return "a CLUSTER SHARDS node lacks ip or port";
      const auto number = integer_of(*port);
      if (!number || *number <= 0 || *number > 65535) return "a CLUSTER SHARDS node has a bad port";
      master = node_address{host->text, static_cast<std::uint16_t>(*number)};
      break;
    }
    if (!master) continue;  // a shard without a master serves nothing until a failover
    const std::uint16_t index = fresh.intern(*master);
    const auto& ranges = slots->elements;
    for (std::size_t i = 0; i + 1 < ranges.size(); i += 2) {
      const auto from = integer_of(ranges[i]);
      const auto to = integer_of(ranges[i + 1]);
      if (!valid_range(from, to)) return "a CLUSTER SHARDS slot range is out of bounds";
      std::fill(fresh.owner_.begin() + *from, fresh.owner_.begin() + *to + 1, index);
    }
  }
  if (fresh.covered() == 0) return "CLUSTER SHARDS lists no slot with a master";
  *this = std::move(fresh);
  return std::nullopt;
}

std::optional<std::string> slot_map::load_slots(const resp::value& reply) {
  if (reply.type != resp::type::array) return "CLUSTER SLOTS did not answer an array";
  slot_map fresh;
  fresh.clear();
  for (const resp::value& range : reply.elements) {
    if (range.type != resp::type::array || range.elements.size() < 3) return "a CLUSTER SLOTS entry is too short";
    const auto from = integer_of(range.elements[0]);
    const auto to = integer_of(range.elements[1]);
    if (!valid_range(from, to)) return "a CLUSTER SLOTS range is out of bounds";
    const resp::value& master = range.elements[2];
    if (master.type != resp::type::array || master.elements.size() < 2 || !master.elements[0].is_string())
      return "a CLUSTER SLOTS master entry is malformed";
    const auto port = integer_of(master.elements[1]);
    if (!port || *port <= 0 || *port > 65535) return "a CLUSTER SLOTS master has a bad port";
    const std::uint16_t index = fresh.intern({master.elements[0].text, static_cast<std::uint16_t>(*port)});
    std::fill(fresh.owner_.begin() + *from, fresh.owner_.begin() + *to + 1, index);
  }
  if (fresh.covered() == 0) return "CLUSTER SLOTS lists no slot";
  *this = std::move(fresh);
  return std::nullopt;
}

void slot_map::assign(std::uint16_t slot, const node_address& node) {
  if (nodes_.empty()) owner_.fill(no_node);
  owner_[slot & (cluster_slots - 1)] = intern(node);
}

const node_address* slot_map::node_for(std::uint16_t slot) const noexcept {
  if (nodes_.empty()) return nullptr;
  const std::uint16_t index = owner_[slot & (cluster_slots - 1)];
  return index == no_node ? nullptr : &nodes_[index];
}

std::size_t slot_map::covered() const noexcept {
  if (nodes_.empty()) return 0;
  return static_cast<std::size_t>(std::count_if(owner_.begin(), owner_.end(), [](std::uint16_t o) { return o != no_node; }));
}

redirect parse_redirect(std::string_view text) {
  redirect r;
  auto word = [&](std::string_view w) { return text.starts_with(w) && (text.size() == w.size() || text[w.size()] == ' '); };
  if (word("TRYAGAIN")) {
    r.kind = redirect_kind::try_again;
    return r;
  }
  if (word("CLUSTERDOWN")) {
    r.kind = redirect_kind::cluster_down;
    return r;
  }
  const bool moved = text.starts_with("MOVED ");
  if (!moved && !text.starts_with("ASK ")) return r;
  std::string_view rest = text.substr(moved ? 6 : 4);
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return r;
  unsigned slot = 0;
  const std::string_view slot_text = rest.substr(0, space);
  const auto [ptr, ec] = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
  if (ec != std::errc{} || ptr != slot_text.data() + slot_text.size() || slot >= cluster_slots) return r;
  auto node = parse_node_address(rest.substr(space + 1));
  if (!node) return r;
  r.kind = moved ? redirect_kind::moved : redirect_kind::ask;
  r.slot = static_cast<std::uint16_t>(slot);
  r.node = std::move(*node);
  return r;
}

std::chrono::milliseconds redirect_policy::backoff(int attempt) const noexcept {
  std::chrono::milliseconds pause = backoff_min;
  for (int i = 1; i < attempt && pause < backoff_max; ++i) pause *= 2;
  return std::min(pause, backoff_max);
}

std::optional<std::string> parse_seed_list(std::string_view list, std::uint16_t default_port,
                                           std::vector<node_address>& seeds) {
  seeds.clear();
  while (true) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (item.empty()) return "empty seed node in the cluster URL";
    node_address node;
    node.port = default_port;
    std::string_view port;
    if (item.starts_with('[')) {
      const std::size_t close = item.find(']');
      if (close == std::string_view::npos) return "unterminated [IPv6] seed '" + std::string(item) + "'";
      node.host = std::string(item.substr(1, close - 1));
      const std::string_view after = item.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') return "junk after the [IPv6] seed '" + std::string(item) + "'";
        port = after.substr(1);
        if (port.empty()) return "empty port in seed '" + std::string(item) + "'";
      }
    } else if (const std::size_t colon = item.rfind(':'); colon != std::string_view::npos) {
      node.host = std::string(item.substr(0, colon));
      port = item.substr(colon + 1);
      if (port.empty()) return "empty port in seed '" + std::string(item) + "'";
    } else {
      node.host = std::string(item);
    }
    if (node.host.empty()) return "no host in seed '" + std::string(item) + "'";
    if (!port.empty() && !parse_port(port, node.port))
      return "port '" + std::string(port) + "' of seed '" + std::string(item) + "' is not a number in 1..65535";
    seeds.push_back(std::move(node));
    if (comma == std::string_view::npos) return std::nullopt;
    list = list.substr(comma + 1);
  }
}

bool is_cluster_url(std::string_view url) noexcept {
  return url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://");
}

std::error_code parse_cluster_url(std::string_view url, client_config& config, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return make_error_code(errc::invalid_url);
  };
  const bool tls = url.starts_with("rediss-cluster://");
  std::string_view rest = url.substr(url.find("://") + 3);
  std::string_view path;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (!path.empty() && path != "0") return fail("database '" + std::string(path) + "': a cluster has only database 0");
  std::string_view userinfo;
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = rest.substr(0, at + 1);
    rest = rest.substr(at + 1);
  }
  std::vector<node_address> seeds;
  if (auto error = parse_seed_list(rest, 6379, seeds)) return fail(*error);
  // Credentials, TLS and the first seed through the single-node parser.
  const std::string single =
      std::string(tls ? "rediss://" : "redis://") + std::string(userinfo) + seeds.front().text();
  client_config parsed = config;
  if (const std::error_code ec = parse_url(single, parsed, why)) return ec;
  parsed.cluster.enabled = true;
  parsed.cluster.seeds.clear();
  for (const node_address& seed : seeds) parsed.cluster.seeds.push_back(seed.text());
  config = std::move(parsed);
  return {};
}

}  // namespace lockscope::lock
