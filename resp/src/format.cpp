#include "lockscope/resp/format.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace lockscope::resp {

std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t min = 0;
  if (c >= 0xc2 && c <= 0xdf) { n = 2; min = 0x80; }
  else if ((c & 0xf0) == 0xe0) { n = 3; min = 0x800; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; min = 0x10000; }
  else return 0;
  if (i + n > s.size()) return 0;
  std::uint32_t cp = c & (0xff >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::size_t printable_utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const std::size_t n = utf8_sequence(s, i);
  const bool c1 = n == 2 && static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
  return c1 ? 0 : n;
}

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// `<8-4-4-4-12 hex uuid>:<digits>`, Redisson's owner id.
bool is_owner_id(std::string_view s) {
  static constexpr std::size_t dashes[] = {8, 13, 18, 23};
  if (s.size() < 38 || s[36] != ':') return false;
  for (std::size_t i = 0; i < 36; ++i) {
    const bool dash = i == dashes[0] || i == dashes[1] || i == dashes[2] || i == dashes[3];
    if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
  }
  for (std::size_t i = 37; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// Whether `s` holds a byte the text forms must not print as it is: a control byte
// (what a terminal acts on), or one that is not UTF-8 (pipes and viewers choke on it).
// Such a byte comes from the wire: a server's error echoes what a client sent, so
// escape sequences reach decode's output unless they are escaped.
bool needs_escapes(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c > 0x7f) {
      const std::size_t n = printable_utf8_sequence(s, i);
      if (n == 0) return true;
      i += n - 1;
    }
  }
  return false;
}

bool needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == '"' || c == '\'' || c == '\\') return true;
  }
  return needs_escapes(s);
}

// Cuts at a UTF-8 character boundary so that "…" never splits a character.
std::string_view cut(std::string_view s, std::size_t max) {
  if (max == 0 || s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// C escapes like redis-cli's sdscatrepr. redis-cli also escapes bytes above 0x7e
// (UTF-8 text shows as \xc3\xa9); the parsed form keeps them readable.
void append_quoted(std::string& out, std::string_view s, bool escape_non_ascii) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c > 0x7f && !escape_non_ascii) {
      // Valid UTF-8 stays readable; any other byte is escaped, so the line is UTF-8.
      if (const std::size_t n = printable_utf8_sequence(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n - 1;
        continue;
      }
      out += fmt::format("\\x{:02x}", c);
      continue;
    }
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      default:
        if (c < 0x20 || c == 0x7f || (escape_non_ascii && c > 0x7f)) out += fmt::format("\\x{:02x}", c);
        else out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

// A status, an error or another unquoted text: as it is, unless it holds a byte that
// needs_escapes(); then quoted, with C escapes, so that the reader sees it was escaped.
void append_text(std::string& out, std::string_view s) {
  if (needs_escapes(s)) append_quoted(out, s, /*escape_non_ascii=*/false);
  else out += s;
}

// A verbatim string's text (INFO's, LATENCY DOCTOR's) spans lines: kept so when only
// its line ends (LF or CRLF) and tabs would need escaping. A lone CR would let a line
// write over the one before.
void append_multiline_text(std::string& out, std::string_view s) {
  bool other = false;
  for (std::size_t start = 0; start <= s.size() && !other;) {
    const std::size_t end = std::min(s.find_first_of("\r\n\t", start), s.size());
    other = needs_escapes(s.substr(start, end - start)) ||
            (end < s.size() && s[end] == '\r' && (end + 1 == s.size() || s[end + 1] != '\n'));
    start = end + 1;
  }
  if (other) append_quoted(out, s, /*escape_non_ascii=*/false);
  else out += s;
}

void append_cli(std::string& out, const value& v, std::size_t indent);

// redis-cli's cliIsMultilineValueTTY: a map value that spans lines starts on a new one.
bool is_multiline_cli(const value& v) {
  switch (v.type) {
    case type::array:
    case type::set:
    case type::push:
      if (v.elements.empty()) return false;
      if (v.elements.size() > 1) return true;
      return is_multiline_cli(v.elements[0]);
    case type::map:
      if (v.elements.empty()) return false;
      if (v.elements.size() > 2) return true;
      return is_multiline_cli(v.elements[1]);
    default:
      return false;
  }
}

void append_cli_elements(std::string& out, const value& v, std::size_t indent, std::string_view empty,
                         bool as_map, char marker) {
  if (v.elements.empty()) {
    out += empty;
    return;
  }
  const std::size_t count = as_map ? v.elements.size() / 2 : v.elements.size();
  const std::size_t width = std::to_string(count).size();
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) {
      out.push_back('\n');
      out.append(indent, ' ');
    }
    const std::string label = fmt::format("{:>{}}{} ", i + 1, width, marker);
    out += label;
    if (as_map) {
      append_cli(out, v.elements[2 * i], indent + label.size());
      out += " => ";
      if (is_multiline_cli(v.elements[2 * i + 1])) {
        out.push_back('\n');
        out.append(indent + label.size(), ' ');
      }
      append_cli(out, v.elements[2 * i + 1], indent + label.size());
    } else {
      append_cli(out, v.elements[i], indent + label.size());
    }
  }
}

void append_cli(std::string& out, const value& v, std::size_t indent) {
  if (!v.attributes.empty()) {
    value attributes = value::aggregate(type::map, v.attributes);
    out += "|";
    append_cli_elements(out, attributes, indent + 1, "(empty attribute)", true, '#');
    out.push_back('\n');
    out.append(indent, ' ');
  }
  switch (v.type) {
    case type::simple_string: append_text(out, v.text); return;
    case type::simple_error:
    case type::bulk_error: out += "(error) "; append_text(out, v.text); return;
    case type::integer: out += "(integer) "; append_text(out, v.text); return;
    case type::bulk_string: append_quoted(out, v.text, /*escape_non_ascii=*/true); return;
    case type::verbatim_string: append_multiline_text(out, v.verbatim_text()); return;
    case type::null: out += "(nil)"; return;
    case type::boolean: out += v.boolean() ? "(true)" : "(false)"; return;
    case type::double_: out += "(double) "; append_text(out, v.text); return;
    case type::big_number: out += "(big number) "; append_text(out, v.text); return;
    case type::array: append_cli_elements(out, v, indent, "(empty array)", false, ')'); return;
    case type::push: append_cli_elements(out, v, indent, "(empty push)", false, ')'); return;
    case type::set: append_cli_elements(out, v, indent, "(empty set)", false, '~'); return;
    case type::map: append_cli_elements(out, v, indent, "(empty hash)", true, '#'); return;
    case type::attribute:
    case type::streamed_string_part:
    case type::stream_end: append_text(out, v.text); return;
  }
}

void append_parsed(std::string& out, const value& v, const parsed_options& options) {
  switch (v.type) {
    case type::simple_string:
    case type::big_number:
    case type::double_:
    case type::integer: append_text(out, v.text); return;
    case type::simple_error:
    case type::bulk_error: out += "(error) "; append_text(out, v.text); return;
    case type::bulk_string:
    case type::verbatim_string: append_parsed_argument(out, v.type == type::verbatim_string ? v.verbatim_text() : std::string_view(v.text), options); return;
    case type::null: out += "(nil)"; return;
    case type::boolean: out += v.boolean() ? "true" : "false"; return;
    case type::array:
    case type::push:
    case type::set:
    case type::map: {
      if (v.elements.empty()) {
        out += v.type == type::map ? "{}" : "[]";
        return;
      }
      for (std::size_t i = 0; i < v.elements.size(); ++i) {
        if (i > 0) out.push_back(' ');
        const value& e = v.elements[i];
        if (is_aggregate(e.type) && !e.elements.empty()) {
          out.push_back('[');
          append_parsed(out, e, options);
          out.push_back(']');
        } else {
          append_parsed(out, e, options);
        }
      }
      return;
    }
    case type::attribute:
    case type::streamed_string_part:
    case type::stream_end: append_text(out, v.text); return;
  }
}

}  // namespace

void append_parsed_argument(std::string& out, std::string_view arg, const parsed_options& options) {
  if (options.shorten_owner_ids && is_owner_id(arg)) {
    out.append(arg.substr(0, 4));
    out += "…";
    out.append(arg.substr(36));
    return;
  }
  const std::string_view shown = cut(arg, options.max_argument);
  const bool quoted = needs_quotes(arg);
  if (quoted) {
    append_quoted(out, shown, /*escape_non_ascii=*/false);
  } else {
    out.append(shown);
  }
  if (shown.size() < arg.size()) {
    if (quoted) out.insert(out.size() - 1, "…");
    else out += "…";
  }
}

std::string to_cli(const value& v) {
  std::string out;
  append_cli(out, v, 0);
  return out;
}

std::string to_parsed(const value& v, const parsed_options& options) {
  std::string out;
  append_parsed(out, v, options);
  return out;
}

}  // namespace lockscope::resp
