#include <fmt/format.h>

#include "lockscope/resp/types.hpp"
#include "lockscope/test/catch_support.hpp"

namespace lockscope::test {

namespace {

void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_list(std::string& out, const std::vector<resp::value>& values, char open, char close);

void append_value(std::string& out, const resp::value& v) {
  if (!v.attributes.empty()) {
    out += "attributes";
    append_list(out, v.attributes, '{', '}');
    out += ' ';
  }
  out += resp::to_string(v.type);
  if (v.flags != 0) {
    std::vector<std::string_view> names;
    if (v.flags & resp::node_flags::streamed) names.push_back("streamed");
    if (v.flags & resp::node_flags::null_bulk) names.push_back("null_bulk");
    if (v.flags & resp::node_flags::null_array) names.push_back("null_array");
    if (v.flags & resp::node_flags::inline_command) names.push_back("inline_command");
    out += fmt::format("{{{}}}", fmt::join(names, ","));
  }
  if (v.type == resp::type::integer && v.text != std::to_string(v.integer)) {
    out += fmt::format(" {} (text ", v.integer);
    append_escaped(out, v.text);
    out += ')';
  } else if (v.type == resp::type::integer) {
    out += fmt::format(" {}", v.integer);
  } else if (!v.text.empty() || resp::is_bulk(v.type) || v.type == resp::type::simple_string) {
    out += ' ';
    append_escaped(out, v.text);
  }
  if (resp::is_aggregate(v.type) || !v.elements.empty()) append_list(out, v.elements, '[', ']');
}

void append_list(std::string& out, const std::vector<resp::value>& values, char open, char close) {
  out += open;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += ", ";
    append_value(out, values[i]);
  }
  out += close;
}

}  // namespace

std::string debug_string(const resp::value& v) {
  std::string out;
  append_value(out, v);
  return out;
}

}  // namespace lockscope::test
