#include "lockscope/ingest/redaction.hpp"
#include "lockscope/resp/ascii.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace lockscope::ingest {

namespace {

using resp::iequals;
using position_list = std::vector<std::uint32_t>;

bool contains_ignoring_case(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.size() > haystack.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    if (iequals(haystack.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A configuration parameter whose value is a credential: any name mentioning a
// password or auth (requirepass, masterauth, tls-*-pass, sentinel-pass, auth-pass,
// auth-user; masteruser is not), and sentinel-user. Unknown future names of that kind
// are covered by the same test.
// tls-auth-clients (yes, no, optional) names auth without being a credential.
bool credential_parameter(std::string_view name) noexcept {
  if (iequals(name, "tls-auth-clients")) return false;
  return contains_ignoring_case(name, "pass") || contains_ignoring_case(name, "auth") ||
         iequals(name, "sentinel-user");
}

// ACL SETUSER rules that carry a password or its hash: >pw adds, <pw removes, #hash
// adds by hash, !hash removes by hash. Redis takes one rule per argument, but a
// selector "(~k* +get)" or a mistyped "on >pw" holds several: any of its
// space-separated words starting that way makes the whole argument a secret.
bool password_rule(std::string_view rule) noexcept {
  bool word_start = true;
  for (const char c : rule) {
    if (word_start && (c == '>' || c == '<' || c == '#' || c == '!')) return true;
    word_start = c == ' ' || c == '\t' || c == '(';
  }
  return false;
}

void mark(position_list& out, std::size_t i, std::size_t size) {
  if (i < size) out.push_back(static_cast<std::uint32_t>(i));
}

void mark_from(position_list& out, std::size_t first, std::size_t size) {
  for (std::size_t i = first; i < size; ++i) out.push_back(static_cast<std::uint32_t>(i));
}

// `name value name value ...` from `first` (CONFIG SET, SENTINEL SET, SENTINEL CONFIG
// SET): the word after every credential parameter name. Looking at every word, not
// only at every other one, keeps a miscounted list (Redis rejects it, but the bytes
// went over the wire) from showing a password that slipped to a name's place.
void mark_parameter_values(std::span<const std::string_view> args, std::size_t first, position_list& out) {
  for (std::size_t i = first; i < args.size(); ++i) {
    if (credential_parameter(args[i])) mark(out, i + 1, args.size());
  }
}

// HELLO [protover [AUTH username password] [SETNAME clientname]], parsed as Redis does
// (hello_command); from the first word it would reject, everything is masked.
void hello_secrets(std::span<const std::string_view> args, position_list& out) {
  const std::size_t n = args.size();
  std::size_t j = 1;
  if (n >= 2 && all_digits(args[1])) j = 2;
  for (; j < n; ++j) {
    const std::size_t more = n - 1 - j;
    if (iequals(args[j], "AUTH") && more >= 2) {
      mark(out, j + 2, n);
      j += 2;
    } else if (iequals(args[j], "SETNAME") && more >= 1) {
      ++j;
    } else {
      mark_from(out, iequals(args[j], "AUTH") ? j + 1 : j, n);
      return;
    }
  }
}

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
// AUTH2 username password] [KEYS key ...], parsed as Redis does (options from the
// sixth argument, so a key or host named AUTH or KEYS is not mistaken for one). Keys
// after KEYS may be named anything, "AUTH" included. From the first word Redis would
// reject, everything is masked.
void migrate_secrets(std::span<const std::string_view> args, position_list& out) {
  const std::size_t n = args.size();
  for (std::size_t j = 6; j < n; ++j) {
    const std::size_t more = n - 1 - j;
    if (iequals(args[j], "COPY") || iequals(args[j], "REPLACE")) continue;
    if (iequals(args[j], "KEYS")) return;
    if (iequals(args[j], "AUTH") && more >= 1) {
      mark(out, j + 1, n);
      ++j;
    } else if (iequals(args[j], "AUTH2") && more >= 2) {
      mark(out, j + 2, n);
      j += 2;
    } else {
      const bool keyword = iequals(args[j], "AUTH") || iequals(args[j], "AUTH2");
      mark_from(out, keyword ? j + 1 : j, n);
      return;
    }
  }
}

constexpr std::string_view mask = "****";

bool textual(resp::type t) noexcept {
  switch (t) {
    case resp::type::simple_string:
    case resp::type::simple_error:
    case resp::type::bulk_string:
    case resp::type::bulk_error:
    case resp::type::verbatim_string:
      return true;
    default:
      return false;
  }
}

// Redis turns CR and LF into spaces in the error replies it formats (the rest of the
// bytes are echoed as sent).
bool echoed_as(char shown, char sent) noexcept {
  return shown == sent || ((sent == '\r' || sent == '\n') && shown == ' ');
}

// Where a quoted or spaced word may start or end.
bool delimiter_before(std::string_view text, std::size_t i) noexcept {
  return i == 0 || text[i - 1] == ' ' || text[i - 1] == '\'' || text[i - 1] == '"';
}
bool delimiter_at(std::string_view text, std::size_t i) noexcept {
  return i == text.size() || text[i] == ' ' || text[i] == '\'' || text[i] == '"';
}

// A secret this short is masked only as a whole word: a two-letter password masked
// wherever its letters occur would make every error unreadable.
constexpr std::size_t short_secret = 4;

// The node indices of `m`'s aggregates' direct children, in pairs (map entries, the
// name/value lists of CONFIG GET and ACL GETUSER in RESP2): f(key, value).
template <class F>
void for_each_pair(const message& m, F&& f) {
  const auto nodes = m.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!resp::is_aggregate(nodes[i].type)) continue;
    std::size_t key = message::npos;
    m.for_each_child(i, [&](const message_node& child) {
      const std::size_t at = static_cast<std::size_t>(&child - nodes.data());
      if (key == message::npos) {
        key = at;
      } else {
        f(key, at);
        key = message::npos;
      }
      return true;
    });
  }
}

// Every string in the subtree at `index` becomes "****".
void mask_subtree(message& m, std::size_t index, bool& changed) {
  const std::size_t end = m.skip_subtree(index);
  for (std::size_t i = index; i < end; ++i) {
    if (!textual(m.nodes()[i].type)) continue;
    m.replace_text(i, mask);
    changed = true;
  }
}

// ACL LIST's "user u on #<sha256> ~* +@all": each password word keeps its sign.
bool mask_password_words(std::string_view text, std::string& out) {
  bool changed = false;
  bool word_start = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (word_start && (c == '#' || c == '>' || c == '<' || c == '!')) {
      out += c;
      out += mask;
      while (i + 1 < text.size() && text[i + 1] != ' ' && text[i + 1] != ')') ++i;
      changed = true;
      word_start = false;
      continue;
    }
    out += c;
    word_start = c == ' ' || c == '(';
  }
  return changed;
}

}  // namespace

std::uint8_t reply_checks(std::span<const std::string_view> args, bool has_secrets) noexcept {
  std::uint8_t checks = has_secrets ? reply_echoes_secrets : 0;
  if (args.size() < 2) return checks;
  const std::string_view name = args[0];
  if (iequals(name, "CONFIG") && iequals(args[1], "GET")) {
    checks |= reply_config_values;
  } else if (iequals(name, "SENTINEL") && args.size() >= 3 && iequals(args[1], "CONFIG") && iequals(args[2], "GET")) {
    checks |= reply_config_values;
  } else if (iequals(name, "ACL") && iequals(args[1], "LIST")) {
    checks |= reply_acl_rules;
  } else if (iequals(name, "ACL") && iequals(args[1], "GETUSER")) {
    checks |= reply_acl_passwords;
  }
  return checks;
}

bool mask_echoes(std::string_view text, std::span<const std::string_view> secrets, std::string& out) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // [from, to) to mask
  for (const std::string_view secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (!echoed_as(text[i], secret[0])) continue;
      std::size_t k = 1;
      while (k < secret.size() && i + k < text.size() && echoed_as(text[i + k], secret[k])) ++k;
      if (k == secret.size()) {
        if (secret.size() >= short_secret || (delimiter_before(text, i) && delimiter_at(text, i + k))) {
          ranges.emplace_back(i, i + k);
        }
      } else if (i > 0 && text[i - 1] == '\'' && i + k < text.size() && text[i + k] == '\'') {
        // 'its first k bytes': Redis quotes the arguments of an unknown command cut
        // to 128 bytes in all.
        ranges.emplace_back(i, i + k);
      }
    }
  }
  if (ranges.empty()) return false;
  std::sort(ranges.begin(), ranges.end());
  std::size_t copied = 0;
  for (std::size_t r = 0; r < ranges.size();) {
    std::size_t from = ranges[r].first;
    std::size_t to = ranges[r].second;
    for (++r; r < ranges.size() && ranges[r].first <= to; ++r) to = std::max(to, ranges[r].second);
    out.append(text.substr(copied, from - copied));
    out.append(mask);
    copied = to;
  }
  out.append(text.substr(copied));
  return true;
}

namespace {

// One quoted argument of a MONITOR line: where it is, and its bytes unescaped.
struct monitor_argument {
  std::size_t from = 0, to = 0;  // the quotes included
  std::string text;
};

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The quoted argument starting at `at` (a '"'); false when it does not end.
bool read_monitor_argument(std::string_view line, std::size_t at, monitor_argument& a) {
  a.from = at;
  a.text.clear();
  for (std::size_t i = at + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      a.to = i + 1;
      return true;
    }
    if (c != '\\' || i + 1 >= line.size()) {
      a.text += c;
      continue;
    }
    const char e = line[++i];
    switch (e) {
      case 'n': a.text += '\n'; break;
      case 'r': a.text += '\r'; break;
      case 't': a.text += '\t'; break;
      case 'a': a.text += '\a'; break;
      case 'b': a.text += '\b'; break;
      case 'x':
        if (i + 2 < line.size() && hex_digit(line[i + 1]) >= 0 && hex_digit(line[i + 2]) >= 0) {
          a.text += static_cast<char>(hex_digit(line[i + 1]) * 16 + hex_digit(line[i + 2]));
          i += 2;
        } else {
          a.text += e;
        }
        break;
      default: a.text += e; break;
    }
  }
  return false;
}

}  // namespace

bool mask_monitor_line(std::string_view line, std::string& out) {
  // The arguments start after "] " (the client's address ends the bracket).
  std::size_t at = line.find("] \"");
  if (at == std::string_view::npos) return false;
  at += 2;
  // Nearly every line is an ordinary command: its name (never escaped) tells, with no copy.
  const std::size_t name_end = line.find('"', at + 1);
  if (name_end == std::string_view::npos || !may_carry_secrets(line.substr(at + 1, name_end - at - 1))) return false;
  monitor_argument first;
  if (!read_monitor_argument(line, at, first)) return false;
  std::vector<monitor_argument> args{first};
  for (std::size_t i = first.to; i < line.size();) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    monitor_argument a;
    if (line[i] != '"' || !read_monitor_argument(line, i, a)) {
      // Not the shape Redis writes: everything after the name is masked.
      out.append(line.substr(0, first.to));
      out.append(" \"****\"");
      return true;
    }
    i = a.to;
    args.push_back(std::move(a));
  }
  std::vector<std::string_view> views;
  for (const monitor_argument& a : args) views.push_back(a.text);
  position_list secrets;
  find_secrets(views, secrets);
  if (secrets.empty()) return false;
  std::size_t copied = 0;
  for (const std::uint32_t i : secrets) {
    out.append(line.substr(copied, args[i].from - copied));
    out.append("\"****\"");
    copied = args[i].to;
  }
  out.append(line.substr(copied));
  return true;
}

bool redact_reply(std::uint8_t checks, std::span<const std::string_view> secrets, message& reply) {
  bool changed = false;
  if ((checks & reply_every_string) != 0 && !reply.empty()) {
    mask_subtree(reply, 0, changed);
    for (std::size_t next = reply.skip_subtree(0); next < reply.nodes().size(); next = reply.skip_subtree(next)) {
      mask_subtree(reply, next, changed);  // after a leading attribute
    }
    return changed;
  }
  std::string scratch;
  if ((checks & (reply_config_values | reply_acl_passwords)) != 0) {
    for_each_pair(reply, [&](std::size_t key, std::size_t value) {
      const message_node& k = reply.nodes()[key];
      if (!textual(k.type)) return;
      const std::string_view name = reply.text(k);
      if (((checks & reply_config_values) != 0 && credential_parameter(name)) ||
          ((checks & reply_acl_passwords) != 0 && iequals(name, "passwords"))) {
        mask_subtree(reply, value, changed);
      }
    });
  }
  if ((checks & (reply_echoes_secrets | reply_acl_rules)) == 0) return changed;
  for (std::size_t i = 0; i < reply.nodes().size(); ++i) {
    const message_node& n = reply.nodes()[i];
    if (!textual(n.type)) continue;
    scratch.clear();
    bool masked = false;
    if ((checks & reply_echoes_secrets) != 0) masked = mask_echoes(reply.text(n), secrets, scratch);
    if ((checks & reply_acl_rules) != 0) {
      std::string words;
      if (mask_password_words(masked ? std::string_view(scratch) : reply.text(n), words)) {
        scratch = std::move(words);
        masked = true;
      }
    }
    if (masked) {
      reply.replace_text(i, scratch);
      changed = true;
    }
  }
  return changed;
}

bool may_carry_secrets(std::string_view name) noexcept {
  if (name.empty()) return false;
  switch (resp::ascii_lower(name[0])) {
    case 'a': return iequals(name, "AUTH") || iequals(name, "ACL");
    case 'h': return iequals(name, "HELLO");
    case 'm': return iequals(name, "MIGRATE");
    case 'c': return iequals(name, "CONFIG");
    case 's': return iequals(name, "SENTINEL");
    default: return false;
  }
}

void find_secrets(std::span<const std::string_view> args, position_list& out) {
  if (args.empty()) return;
  const std::size_t first_new = out.size();
  const std::string_view name = args[0];
  const std::size_t n = args.size();
  if (iequals(name, "AUTH")) {
    // AUTH pw | AUTH user pw; with any other count, everything after the name.
    if (n == 2 || n == 3) mark(out, n - 1, n);
    else mark_from(out, 1, n);
  } else if (iequals(name, "HELLO")) {
    hello_secrets(args, out);
  } else if (iequals(name, "MIGRATE")) {
    migrate_secrets(args, out);
  } else if (iequals(name, "CONFIG")) {
    if (n >= 3 && iequals(args[1], "SET")) mark_parameter_values(args, 2, out);
  } else if (iequals(name, "ACL")) {
    // ACL SETUSER username [rule ...]
    if (n >= 3 && iequals(args[1], "SETUSER")) {
      for (std::size_t i = 3; i < n; ++i) {
        if (password_rule(args[i])) mark(out, i, n);
      }
    }
  } else if (iequals(name, "SENTINEL")) {
    if (n >= 4 && iequals(args[1], "SET")) {
      mark_parameter_values(args, 3, out);  // SENTINEL SET <master> option value ...
    } else if (n >= 4 && iequals(args[1], "CONFIG") && iequals(args[2], "SET")) {
      mark_parameter_values(args, 3, out);  // SENTINEL CONFIG SET name value ...
    }
  }
  // The miscounted-list and reject paths may mark a position twice or out of order.
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first_new), out.end());
  out.erase(std::unique(out.begin() + static_cast<std::ptrdiff_t>(first_new), out.end()), out.end());
}

}  // namespace lockscope::ingest
