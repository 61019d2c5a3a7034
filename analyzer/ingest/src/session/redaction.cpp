#include "lockscope/ingest/redaction.hpp"
#include "lockscope/resp/ascii.hpp"

#include <algorithm>
#include <cstddef>

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
bool credential_parameter(std::string_view name) noexcept {
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

}  // namespace

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
