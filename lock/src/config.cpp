#include "lockscope/lock/config.hpp"

#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "lockscope/lock/cluster.hpp"
#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

namespace {

std::error_code fail(std::string* why, errc code, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return code;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

template <class Int>
bool parse_decimal(std::string_view s, Int& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc{} && ptr == end;
}

// `host[:port]` or `[v6][:port]`; `port` keeps its value when none is given.
std::error_code parse_host_port(std::string_view text, std::string_view url, server_address& out, std::string* why) {
  std::string_view host = text;
  std::string_view port;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return fail(why, errc::invalid_url, "unterminated [IPv6] host");
    host = text.substr(1, close - 1);
    std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail(why, errc::invalid_url, "junk after the [IPv6] host");
      port = after.substr(1);
      if (port.empty()) return fail(why, errc::invalid_url, "empty port after ':'");
    }
  } else if (const std::size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return fail(why, errc::invalid_url, "empty port after ':'");
  }
  if (host.empty()) return fail(why, errc::invalid_url, "no host in '" + std::string(url) + "'");
  out.host = std::string(host);
  if (!port.empty()) {
    unsigned value = 0;
    if (!parse_decimal(port, value) || value == 0 || value > 65535)
      return fail(why, errc::invalid_url, "port '" + std::string(port) + "' is not a number in 1..65535");
    out.port = static_cast<std::uint16_t>(value);
  }
  return {};
}

}  // namespace

std::error_code parse_url(std::string_view url, client_config& config, std::string* why) {
  if (is_cluster_url(url)) return parse_cluster_url(url, config, why);
  constexpr std::string_view plain_scheme = "redis://";
  constexpr std::string_view tls_scheme = "rediss://";
  constexpr std::string_view sentinel_scheme = "redis-sentinel://";
  constexpr std::string_view tls_sentinel_scheme = "rediss-sentinel://";
  std::string_view scheme;
  for (const std::string_view s : {plain_scheme, tls_scheme, sentinel_scheme, tls_sentinel_scheme})
    if (url.starts_with(s)) scheme = s;
  if (scheme.empty())
    return fail(why, errc::invalid_url,
                "'" + std::string(url) +
                    "' does not start with redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://");
  const bool tls = scheme == tls_scheme || scheme == tls_sentinel_scheme;
  const bool sentinel = scheme == sentinel_scheme || scheme == tls_sentinel_scheme;
  std::string_view rest = url.substr(scheme.size());

  std::string_view master_name;
  if (sentinel) {
    const std::size_t hash = rest.find('#');
    if (hash == std::string_view::npos || hash + 1 == rest.size())
      return fail(why, errc::invalid_url,
                  "no master name in '" + std::string(url) + "': end a Sentinel URL with #mastername");
    master_name = rest.substr(hash + 1);
    rest = rest.substr(0, hash);
  }

  std::string_view path;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }

  client_config parsed = config;
  parsed.tls.enabled = tls;
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const std::size_t colon = userinfo.find(':');
    std::string decoded;
    if (colon == std::string_view::npos) {
      // redis://secret@host: a lone userinfo is a password, as redis-cli -u reads it.
      if (!percent_decode(userinfo, decoded))
        return fail(why, errc::invalid_url, "bad percent-escape in the password");
      parsed.username.clear();
      parsed.password = decoded;
    } else {
      if (!percent_decode(userinfo.substr(0, colon), decoded))
        return fail(why, errc::invalid_url, "bad percent-escape in the user name");
      parsed.username = decoded;
      if (!percent_decode(userinfo.substr(colon + 1), decoded))
        return fail(why, errc::invalid_url, "bad percent-escape in the password");
      parsed.password = decoded;
    }
  }

  if (sentinel) {
    std::string decoded;
    if (!percent_decode(master_name, decoded))
      return fail(why, errc::invalid_url, "bad percent-escape in the master name");
    parsed.sentinel.master_name = decoded;
    parsed.sentinel.sentinels.clear();
    std::size_t index = 0;
    for (std::string_view hosts = rest;; ++index) {
      const std::size_t comma = hosts.find(',');
      const std::string_view one = hosts.substr(0, comma);
      server_address address{{}, default_sentinel_port};
      std::string reason;
      if (one.empty()) {
        reason = "empty host";
      } else if (parse_host_port(one, one, address, &reason)) {
        reason = "'" + std::string(one) + "': " + reason;
      }
      if (!reason.empty()) return fail(why, errc::invalid_url, fmt::format("sentinel {} in the URL: {}", index + 1, reason));
      parsed.sentinel.sentinels.push_back(std::move(address));
      if (comma == std::string_view::npos) break;
      hosts = hosts.substr(comma + 1);
    }
  } else {
    server_address address{{}, parsed.port};
    if (const std::error_code ec = parse_host_port(rest, url, address, why)) return ec;
    parsed.host = std::move(address.host);
    parsed.port = address.port;
    parsed.sentinel = {};
  }
  if (!path.empty()) {
    int db = 0;
    if (!parse_decimal(path, db) || db < 0)
      return fail(why, errc::invalid_url, "database '" + std::string(path) + "' is not a non-negative number");
    parsed.database = db;
  }
  config = std::move(parsed);
  return {};
}

client_config client_config::from_url(std::string_view url) {
  client_config config;
  std::string why;
  if (const std::error_code ec = parse_url(url, config, &why)) throw lock_error(ec, why);
  return config;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::int64_t value = 0;
  if (!parse_decimal(text.substr(0, digits), value)) return std::nullopt;
  const std::string_view unit = text.substr(digits);
  std::int64_t scale = 0;
  if (unit == "ms") scale = 1;
  else if (unit == "s") scale = 1000;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  else if (unit.empty() && value == 0) scale = 1;
  else return std::nullopt;
  if (value > std::numeric_limits<std::int64_t>::max() / scale) return std::nullopt;
  return std::chrono::milliseconds(value * scale);
}

}  // namespace lockscope::lock
