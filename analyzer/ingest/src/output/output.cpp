#include "lockscope/ingest/output.hpp"

#include <charconv>
#include <ctime>

#include "lockscope/resp/format.hpp"

namespace lockscope::ingest {

namespace {

void append_int(std::string& out, std::int64_t v) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, v);
  out.append(digits, r.ptr);
}

void append_padded(std::string& out, std::int64_t v, int width) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, v);
  for (auto n = static_cast<int>(r.ptr - digits); n < width; ++n) out.push_back('0');
  out.append(digits, r.ptr);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

void append_endpoint(std::string& out, std::string_view cached, const endpoint& e) {
  if (!cached.empty()) out.append(cached);
  else e.append_to(out);
}

void append_not_kept(std::string& out, std::uint64_t elements, std::uint64_t bytes, std::string_view what) {
  if (elements == 0 && bytes == 0) return;
  out += " (… ";
  if (elements > 0) {
    append_int(out, static_cast<std::int64_t>(elements));
    out += " more ";
    out += what;
  } else {
    append_int(out, static_cast<std::int64_t>(bytes));
    out += " more bytes";
  }
  out += " not kept)";
}
// A reply too large to keep whole (message::add) says what was left out: its elements
// past the node cap, or else the bytes of a value cut at the text cap.
void append_dropped(std::string& out, const message& m) {
  append_not_kept(out, m.dropped_nodes(), m.truncated_bytes(), "elements");
}
void append_json_count(std::string& out, std::string_view key, std::uint64_t n) {
  out += key;
  append_int(out, static_cast<std::int64_t>(n));
}

}  // namespace

void append_timestamp(std::string& out, std::int64_t ts_us) {
  const std::int64_t seconds = floor_div(ts_us, 1'000'000);
  const std::int64_t micros = ts_us - seconds * 1'000'000;
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  out.append(text, n);
  out.push_back('.');
  append_padded(out, micros, 6);
}

void append_text_line(std::string& out, const exchange& e, const text_options& options) {
  append_timestamp(out, e.request_us);
  out.push_back(' ');
  append_endpoint(out, e.client_text, *e.client);
  out += e.kind == exchange_kind::push ? " ← " : " → ";
  append_endpoint(out, e.server_text, *e.server);
  out.push_back(' ');
  const resp::parsed_options parsed{options.max_argument, options.shorten_owner_ids};
  if (e.kind == exchange_kind::push) {
    out += "push: ";
    if (e.reply != nullptr) {
      out += resp::to_parsed(e.reply->to_value(), parsed);
      append_dropped(out, *e.reply);
    }
    return;
  }
  for (std::size_t i = 0; i < e.command.size(); ++i) {
    if (i > 0) out.push_back(' ');
    resp::append_parsed_argument(out, e.command[i], parsed);
  }
  append_not_kept(out, e.command_arguments_not_kept, e.command_bytes_not_kept, "arguments");
  out += " ⇒ ";
  if (e.reply == nullptr) {
    out += "(no reply)";
    return;
  }
  out += to_cli_line(*e.reply);
  append_dropped(out, *e.reply);
  out += " [";
  append_int(out, e.latency_us());
  out += " µs]";
}

void append_jsonl(std::string& out, const exchange& e) {
  out += "{\"ts\":";
  const std::int64_t seconds = floor_div(e.request_us, 1'000'000);
  append_int(out, seconds);
  out.push_back('.');
  append_padded(out, e.request_us - seconds * 1'000'000, 6);
  out += ",\"client\":\"";
  append_endpoint(out, e.client_text, *e.client);
  out += "\",\"server\":\"";
  append_endpoint(out, e.server_text, *e.server);
  out += "\",\"command\":[";
  for (std::size_t i = 0; i < e.command.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_json_string(out, e.command[i]);
  }
  out += "],\"reply_type\":\"";
  const message_node* root = e.reply != nullptr ? e.reply->root_node() : nullptr;
  out += root != nullptr ? resp::to_string(root->type) : std::string_view("none");
  out += "\",\"reply\":";
  if (root != nullptr) append_json(out, *e.reply);
  else out += "null";
  out += ",\"latency_us\":";
  if (e.kind == exchange_kind::exchange && e.reply != nullptr) append_int(out, e.latency_us());
  else out += "null";
  const std::uint64_t reply_elements = e.reply != nullptr ? e.reply->dropped_nodes() : 0;
  const std::uint64_t reply_bytes = e.reply != nullptr ? e.reply->truncated_bytes() : 0;
  if ((e.command_arguments_not_kept | e.command_bytes_not_kept | reply_elements | reply_bytes) != 0) {
    // Only when a limit cut something: the arrays and strings above are then partial.
    append_json_count(out, ",\"not_kept\":{\"command_arguments\":", e.command_arguments_not_kept);
    append_json_count(out, ",\"command_bytes\":", e.command_bytes_not_kept);
    append_json_count(out, ",\"reply_elements\":", reply_elements);
    append_json_count(out, ",\"reply_bytes\":", reply_bytes);
    out.push_back('}');
  }
  out += e.kind == exchange_kind::push ? ",\"kind\":\"push\"}" : ",\"kind\":\"exchange\"}";
}

}  // namespace lockscope::ingest
