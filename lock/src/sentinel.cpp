#include "lockscope/lock/sentinel.hpp"

#include <charconv>

#include <fmt/format.h>

#include "lockscope/lock/error.hpp"

namespace lockscope::lock {

namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// Splits on single spaces; false unless there are exactly `n` fields.
bool split_fields(std::string_view text, std::string_view* fields, std::size_t n) {
  std::size_t count = 0;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    if (count == n) return false;
    fields[count++] = text.substr(0, space);
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  return count == n;
}

}  // namespace

std::string address_text(const server_address& address) {
  if (address.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", address.host, address.port);
  return fmt::format("{}:{}", address.host, address.port);
}

sentinel_discovery::sentinel_discovery(sentinel_config config) : config_(std::move(config)) {}

sentinel_step sentinel_discovery::begin() {
  order_.clear();
  if (preferred_ < config_.sentinels.size()) order_.push_back(preferred_);
  for (std::size_t i = 0; i < config_.sentinels.size(); ++i)
    if (i != preferred_) order_.push_back(i);
  position_ = 0;
  tried_.clear();
  in_round_ = true;
  return next();
}

sentinel_step sentinel_discovery::next() {
  if (position_ < order_.size()) return {sentinel_step::kind_type::ask, order_[position_++], {}, {}};
  in_round_ = false;
  if (config_.sentinels.empty())
    return {sentinel_step::kind_type::failed, 0, {}, "no sentinels configured for master '" + config_.master_name + "'"};
  return {sentinel_step::kind_type::failed, 0, {},
          fmt::format("no sentinel gave the address of master '{}' (tried {})", config_.master_name, tried_)};
}

sentinel_step sentinel_discovery::on_unreachable(std::size_t sentinel, std::string_view why) {
  if (!tried_.empty()) tried_ += "; ";
  tried_ += fmt::format("{}: {}", address_text(config_.sentinels.at(sentinel)), why);
  return next();
}

sentinel_step sentinel_discovery::on_reply(std::size_t sentinel, std::error_code ec, const resp::value& reply) {
  if (ec) {
    const std::string text = reply.is_error() && !reply.text.empty() ? reply.text : ec.message();
    return on_unreachable(sentinel, text);
  }
  // A nil (RESP2 null array, RESP3 null): this sentinel does not monitor that name.
  if (reply.type == resp::type::null)
    return on_unreachable(sentinel, "does not know master '" + config_.master_name + "'");
  if (reply.type == resp::type::array && reply.elements.size() == 2 && reply.elements[0].is_string() &&
      reply.elements[1].is_string() && !reply.elements[0].text.empty()) {
    if (const auto port = parse_port(reply.elements[1].text)) {
      preferred_ = sentinel;
      in_round_ = false;
      return {sentinel_step::kind_type::found, sentinel, {reply.elements[0].text, *port}, {}};
    }
  }
  return on_unreachable(sentinel,
                        fmt::format("unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME (type {})",
                                    resp::to_string(reply.type)));
}

std::optional<server_address> sentinel_discovery::on_switch_master(std::string_view payload) const {
  std::string_view fields[5];
  if (!split_fields(payload, fields, 5) || fields[0] != config_.master_name || fields[3].empty()) return std::nullopt;
  const auto port = parse_port(fields[4]);
  if (!port) return std::nullopt;
  return server_address{std::string(fields[3]), *port};
}

std::string check_master_role(const resp::value& reply, const server_address& at) {
  if (reply.type == resp::type::array && !reply.elements.empty() && reply.elements[0].is_string()) {
    const std::string& role = reply.elements[0].text;
    if (role == "master") return {};
    return fmt::format("{} answers ROLE with '{}', not master: the sentinels' view is out of date", address_text(at),
                       role);
  }
  if (reply.is_error()) return fmt::format("ROLE on {} failed: {}", address_text(at), reply.text);
  return fmt::format("unexpected reply to ROLE from {} (type {})", address_text(at), resp::to_string(reply.type));
}

bool is_readonly_error(const resp::value& reply) noexcept {
  return reply.is_error() && reply.text.starts_with("READONLY");
}

}  // namespace lockscope::lock
