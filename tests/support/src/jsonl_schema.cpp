#include "lockscope/test/jsonl_schema.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace lockscope::test {

namespace {

namespace json = boost::json;

bool one_of(std::string_view s, std::initializer_list<std::string_view> values) {
  return std::find(values.begin(), values.end(), s) != values.end();
}

// "ip:port" or "[v6]:port", the port 0-65535.
bool endpoint_text(const json::value& v) {
  if (!v.is_string()) return false;
  const std::string_view s = v.get_string();
  const std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size() || s.size() - colon > 6) return false;
  if (!std::all_of(s.begin() + static_cast<std::ptrdiff_t>(colon) + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  if (std::stoul(std::string(s.substr(colon + 1))) > 65535) return false;
  const std::string_view host = s.substr(0, colon);
  if (host.front() == '[') return host.back() == ']' && host.find(':') != std::string_view::npos;
  return host.find(':') == std::string_view::npos;
}

bool timestamp(const json::value& v) {
  return (v.is_double() || v.is_int64() || v.is_uint64()) && v.to_number<double>() > 0;
}

bool number(const json::value& v) { return v.is_double() || v.is_int64() || v.is_uint64(); }

// Parses one object and checks that its keys are `required` in order, with any of
// `optional` (in their documented order) where `order` puts them.
std::string parse_object(std::string_view line, json::object& out) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec) return "not JSON (" + ec.message() + "): " + std::string(line.substr(0, 200));
  if (!v.is_object()) return "not an object: " + std::string(line.substr(0, 200));
  out = std::move(v.as_object());
  return "";
}

std::string keys_in_order(const json::object& o, const std::vector<std::string_view>& order,
                          const std::vector<std::string_view>& required) {
  std::size_t at = 0;
  for (const auto& kv : o) {
    const std::string_view key = kv.key();
    auto it = std::find(order.begin() + static_cast<std::ptrdiff_t>(at), order.end(), key);
    if (it == order.end()) {
      const bool known = std::find(order.begin(), order.end(), key) != order.end();
      return known ? "field out of order: " + std::string(key) : "unknown field: " + std::string(key);
    }
    at = static_cast<std::size_t>(it - order.begin()) + 1;
  }
  for (std::string_view r : required) {
    if (!o.contains(r)) return "missing field: " + std::string(r);
  }
  return "";
}

}  // namespace

std::string exchange_line_errors(std::string_view line) {
  json::object o;
  if (std::string e = parse_object(line, o); !e.empty()) return e;
  static const std::vector<std::string_view> fields = {"ts", "client", "server", "command", "reply_type",
                                                       "reply", "latency_us", "kind"};
  // not_kept: only when a message limit cut the command or the reply.
  static const std::vector<std::string_view> order = {"ts",    "client",     "server",   "command", "reply_type",
                                                      "reply", "latency_us", "not_kept", "kind"};
  if (std::string e = keys_in_order(o, order, fields); !e.empty()) return e;
  if (o.size() != fields.size() + (o.contains("not_kept") ? 1 : 0)) return "duplicate fields";
  if (o.contains("not_kept")) {
    static const std::vector<std::string_view> counts = {"command_arguments", "command_bytes", "reply_elements",
                                                         "reply_bytes"};
    if (!o.at("not_kept").is_object()) return "not_kept is not an object";
    const json::object& n = o.at("not_kept").as_object();
    if (std::string e = keys_in_order(n, counts, counts); !e.empty()) return "not_kept: " + e;
    bool any = false;
    for (const auto& kv : n) {
      if (!kv.value().is_int64() || kv.value().as_int64() < 0) return "not_kept: a count is not a non-negative integer";
      any = any || kv.value().as_int64() > 0;
    }
    if (n.size() != counts.size() || !any) return "not_kept: not four counts, at least one above 0";
  }
  if (!timestamp(o.at("ts"))) return "ts is not a positive number";
  if (!endpoint_text(o.at("client"))) return "client is not ip:port";
  if (!endpoint_text(o.at("server"))) return "server is not ip:port";
  if (!o.at("command").is_array()) return "command is not an array";
  for (const json::value& a : o.at("command").as_array()) {
    if (!a.is_string()) return "command has a non-string argument";
  }
  if (!o.at("reply_type").is_string() ||
      !one_of(o.at("reply_type").get_string(), {"simple_string", "error", "integer", "bulk_string", "array", "null",
                                                "boolean", "double", "big_number", "bulk_error", "verbatim_string",
                                                "map", "set", "push", "none"})) {
    return "reply_type is not one of the documented types";
  }
  const std::string_view kind = o.at("kind").is_string() ? std::string_view(o.at("kind").get_string()) : "";
  if (!one_of(kind, {"exchange", "push"})) return "kind is not exchange or push";
  const json::value& latency = o.at("latency_us");
  if (!latency.is_null() && !(latency.is_int64() || latency.is_uint64())) return "latency_us is not an integer or null";
  const std::string_view reply_type = o.at("reply_type").get_string();
  if (kind == "push" && (!o.at("command").as_array().empty() || !latency.is_null())) {
    return "a push has a command or a latency";
  }
  if (reply_type == "none" && (!o.at("reply").is_null() || !latency.is_null())) return "no reply, but a reply or latency";
  if (reply_type == "integer" && !(o.at("reply").is_int64() || o.at("reply").is_uint64())) return "integer reply is not an integer";
  if ((reply_type == "simple_string" || reply_type == "error" || reply_type == "bulk_string" ||
       reply_type == "big_number" || reply_type == "verbatim_string" || reply_type == "bulk_error") &&
      !o.at("reply").is_string() && !(reply_type == "bulk_string" && o.at("reply").is_null())) {
    return "string reply is not a string";
  }
  if ((reply_type == "array" || reply_type == "set" || reply_type == "push") && !o.at("reply").is_array() &&
      !(reply_type == "array" && o.at("reply").is_null())) {
    return "aggregate reply is not an array";
  }
  if (reply_type == "map" && !o.at("reply").is_object()) return "map reply is not an object";
  if (reply_type == "boolean" && !o.at("reply").is_bool()) return "boolean reply is not a boolean";
  return "";
}

std::string event_line_errors(std::string_view line) {
  json::object o;
  if (std::string e = parse_object(line, o); !e.empty()) return e;
  static const std::vector<std::string_view> order = {
      "ts",       "lock",  "event",    "owner",       "client",           "server", "db", "lock_server",
      "hold_count", "lease_ms", "ttl_ms", "wait_ms", "wait_at_least", "wait_at_most_ms", "wait_likely_ms", "wait_likely_from", "held_ms", "since_capture_start", "kind", "inferred", "confidence", "link_not_certain", "token",
      "redirect", "operation", "slot", "to", "asking",
      "since", "for_ms", "ended", "closed_holder", "holder_closed_at", "holder_lease_ran_out_at",
      "servers",  "acquired_on", "needed", "redlock_or_multilock", "acquired_servers", "owners", "keys", "acquired_keys", "outcome",
      "start",    "end"};
  static const std::vector<std::string_view> required = {"ts", "lock", "event", "owner", "client", "server", "db"};
  if (std::string e = keys_in_order(o, order, required); !e.empty()) return e;
  if (!timestamp(o.at("ts"))) return "ts is not a positive number";
  if (!o.at("lock").is_string()) return "lock is not a string";
  if (!o.at("owner").is_string()) return "owner is not a string";
  if (!endpoint_text(o.at("client")) && !(o.at("client").is_string() && o.at("client").get_string().empty())) {
    return "client is not ip:port";
  }
  if (!endpoint_text(o.at("server")) && !(o.at("server").is_string() && o.at("server").get_string().empty())) {
    return "server is not ip:port";
  }
  const std::string_view event = o.at("event").is_string() ? std::string_view(o.at("event").get_string()) : "";
  static const std::initializer_list<std::string_view> events = {
      "acquired", "reentered", "contended", "renewed", "renew_failed", "released", "partially_released",
      "unlock_rejected", "force_released", "expired", "subscribed", "notified", "unsubscribed", "anomaly",
      "quorum", "multilock", "redirected", "gave_up"};
  if (!one_of(event, events)) return "unknown event: " + std::string(event);
  if (!(o.at("db").is_int64() || o.at("db").is_uint64()) || o.at("db").to_number<double>() < 0) {
    return "db is not a non-negative integer";
  }
  const bool group = event == "quorum" || event == "multilock";
  for (std::string_view f : {"outcome", "start", "end"}) {
    if (o.contains(f) != group) return std::string(f) + " goes with quorum and multilock events, and only with them";
  }
  for (std::string_view f : {"servers", "acquired_on", "needed", "acquired_servers", "owners"}) {
    if (o.contains(f) != (event == "quorum")) return std::string(f) + " goes with quorum events, and only with them";
  }
  for (std::string_view f : {"keys", "acquired_keys"}) {
    if (o.contains(f) != (event == "multilock")) return std::string(f) + " goes with multilock events, and only with them";
  }
  for (std::string_view f : {"acquired_servers", "owners", "keys", "acquired_keys"}) {
    if (o.contains(f) && !o.at(f).is_array()) return std::string(f) + " is not an array";
  }
  if (group && !(o.at("outcome").is_string() && one_of(o.at("outcome").get_string(), {"acquired", "failed", "failed_released"}))) {
    return "outcome is not acquired, failed or failed_released";
  }
  if (group && (!timestamp(o.at("start")) || !timestamp(o.at("end")))) return "start/end are not timestamps";
  for (std::string_view f : {"hold_count", "lease_ms", "ttl_ms", "token", "servers", "acquired_on", "needed"}) {
    if (o.contains(f) && !(o.at(f).is_int64() || o.at(f).is_uint64())) return std::string(f) + " is not an integer";
  }
  if (o.contains("since") != o.contains("for_ms")) return "since and for_ms go together";
  if (o.contains("since") && !timestamp(o.at("since"))) return "since is not a positive number";
  if (o.contains("since") && !(o.contains("kind") && o.at("kind").is_string() &&
                               one_of(o.at("kind").get_string(), {"idle_with_waiters", "subscription_lost", "overlapping_holders"})) &&
      event != "gave_up") {
    return "since on an event other than gave_up and idle_with_waiters/subscription_lost/overlapping_holders";
  }
  if (event == "gave_up") {
    for (std::string_view f : {"wait_ms", "since", "ended"}) {
      if (!o.contains(f)) return "gave_up without " + std::string(f);
    }
  }
  if (o.contains("ended") != (event == "gave_up")) return "ended goes with gave_up events, and only with them";
  if (o.contains("ended") && !(o.at("ended").is_string() &&
                               one_of(o.at("ended").get_string(),
                                      {"last_attempt", "unsubscribed", "connection_closed", "new_wait", "left_queue", "group_decided",
                                       "forced", "next_attempt_missed", "withdrew"}))) {
    return "ended is not last_attempt, unsubscribed, connection_closed, new_wait, left_queue, group_decided, forced, "
           "next_attempt_missed or withdrew";
  }
  if (o.contains("closed_holder") != o.contains("holder_closed_at")) return "closed_holder and holder_closed_at go together";
  if (o.contains("holder_lease_ran_out_at") && !o.contains("holder_closed_at")) {
    return "holder_lease_ran_out_at without holder_closed_at";
  }
  if (o.contains("closed_holder") && !one_of(event, {"expired", "acquired", "gave_up"})) {
    return "closed_holder on a " + std::string(event) + " event";
  }
  if (o.contains("closed_holder") && !o.at("closed_holder").is_string()) return "closed_holder is not a string";
  for (std::string_view f : {"holder_closed_at", "holder_lease_ran_out_at"}) {
    if (o.contains(f) && !timestamp(o.at(f))) return std::string(f) + " is not a positive number";
  }
  for (std::string_view f : {"wait_ms", "held_ms", "for_ms"}) {
    if (o.contains(f) && (!number(o.at(f)) || o.at(f).to_number<double>() < 0)) {
      return std::string(f) + " is not a non-negative number";
    }
  }
  if (o.contains("inferred") && !(o.at("inferred").is_bool() && o.at("inferred").get_bool())) return "inferred is not true";
  if (o.contains("confidence") &&
      !(o.at("confidence").is_string() && one_of(o.at("confidence").get_string(), {"certain", "high", "low"}))) {
    return "confidence is not certain, high or low";
  }
  if (o.contains("confidence") && !one_of(event, {"subscribed", "notified", "unsubscribed"})) {
    return "confidence on a " + std::string(event) + " event";
  }
  if ((event == "anomaly") != o.contains("kind")) return "kind goes with anomaly events, and only with them";
  if (o.contains("kind") && !o.at("kind").is_string()) return "kind is not a string";
  for (std::string_view f : {"redirect", "operation"}) {
    if (o.contains(f) != (event == "redirected")) return std::string(f) + " goes with redirected events, and only with them";
  }
  if (o.contains("redirect") &&
      !(o.at("redirect").is_string() && one_of(o.at("redirect").get_string(), {"moved", "ask", "tryagain", "clusterdown"}))) {
    return "redirect is not moved, ask, tryagain or clusterdown";
  }
  if (o.contains("operation") &&
      !(o.at("operation").is_string() &&
        one_of(o.at("operation").get_string(), {"acquire", "unlock", "renew", "force_unlock", "expire", "del", "subscribe", "unsubscribe"}))) {
    return "operation is not a lock call";
  }
  if (o.contains("slot") && !(o.at("slot").is_int64() && o.at("slot").get_int64() >= 0 && o.at("slot").get_int64() <= 16383)) {
    return "slot is not 0-16383";
  }
  if ((o.contains("slot") || o.contains("to")) && !(o.contains("redirect") && one_of(o.at("redirect").get_string(), {"moved", "ask"}))) {
    return "slot and to go with MOVED/ASK redirects only";
  }
  if (o.contains("to") && !endpoint_text(o.at("to"))) return "to is not ip:port";
  if (o.contains("asking") && !(o.at("asking").is_bool() && o.at("asking").get_bool())) return "asking is not true";
  if (o.contains("lock_server") && !(o.at("lock_server").is_string() && o.at("lock_server").get_string().starts_with("cluster:"))) {
    return "lock_server is not cluster:<node>";
  }
  if (o.contains("wait_ms") && !one_of(event, {"acquired", "gave_up"})) return "wait_ms on a " + std::string(event) + " event";
  if (o.contains("wait_at_least") && !(o.contains("wait_ms") && o.at("wait_at_least").is_bool() &&
                                       o.at("wait_at_least").get_bool())) {
    return "wait_at_least is not true, or comes without wait_ms";
  }
  if (o.contains("wait_at_most_ms") &&
      !(event == "gave_up" && o.contains("wait_at_least") && o.at("wait_at_most_ms").is_number() &&
        o.at("wait_at_most_ms").to_number<double>() >= o.at("wait_ms").to_number<double>())) {
    return "wait_at_most_ms comes without a gave_up's wait_at_least, or is below wait_ms";
  }
  if (o.contains("wait_likely_ms") || o.contains("wait_likely_from")) {
    const bool shaped = event == "gave_up" && o.contains("wait_at_least") && o.contains("wait_likely_ms") &&
                        o.contains("wait_likely_from") && o.at("wait_likely_ms").is_number() &&
                        o.at("wait_likely_from").is_int64() && o.at("wait_likely_from").get_int64() >= 2;
    if (!shaped) return "wait_likely_ms/wait_likely_from come without a gave_up's wait_at_least, or not together, or from < 2";
    const double likely = o.at("wait_likely_ms").to_number<double>();
    if (likely < o.at("wait_ms").to_number<double>() ||
        (o.contains("wait_at_most_ms") && likely > o.at("wait_at_most_ms").to_number<double>())) {
      return "wait_likely_ms lies outside [wait_ms, wait_at_most_ms]";
    }
  }
  if (o.contains("since_capture_start") &&
      !(o.at("since_capture_start").is_bool() && o.at("since_capture_start").get_bool() &&
        (o.contains("held_ms") || one_of(event, {"renewed", "partially_released"})))) {
    return "since_capture_start is not true, or comes without held_ms on a " + std::string(event) + " event";
  }
  if (o.contains("ttl_ms") && !one_of(event, {"contended", "gave_up"})) return "ttl_ms on a " + std::string(event) + " event";
  if (o.contains("link_not_certain") &&
      !(one_of(event, {"contended", "acquired"}) && o.at("link_not_certain").is_string() &&
        one_of(o.at("link_not_certain").get_string(), {"woken_by_timeout", "subscription_lost", "idle_with_waiters"}))) {
    return "link_not_certain is not an anomaly resting on a link, or is on a " + std::string(event) + " event";
  }
  return "";
}

std::string jsonl_errors(std::string_view text, std::string (*check)(std::string_view)) {
  std::size_t number = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    const std::string_view line = text.substr(at, end - at);
    if (!line.empty()) {
      if (std::string e = check(line); !e.empty()) return "line " + std::to_string(number) + ": " + e;
    }
    at = end + 1;
  }
  return "";
}

}  // namespace lockscope::test
