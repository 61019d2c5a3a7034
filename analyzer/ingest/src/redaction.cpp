#include "lockscope/ingest/redaction.hpp"
#include "lockscope/resp/ascii.hpp"

#include <cstddef>

namespace lockscope::analyzer {

namespace {

using resp::iequals;

bool contains_ignoring_case(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.size() > haystack.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    if (iequals(haystack.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

// A configuration parameter whose value is a credential: any name mentioning a
// password or auth (requirepass, masterauth, masteruser is not, tls-*-pass are,
// sentinel-pass/-user, auth-pass/-user). Unknown future names of that kind are
// covered by the same test.
bool credential_parameter(std::string_view name) noexcept {
  return contains_ignoring_case(name, "pass") || contains_ignoring_case(name, "auth") ||
         iequals(name, "sentinel-user");
}

// ACL SETUSER rules that carry a password or its hash: >pw adds, <pw removes,
// #hash adds by hash, !hash removes by hash.
bool password_rule(std::string_view rule) noexcept {
  return !rule.empty() && (rule[0] == '>' || rule[0] == '<' || rule[0] == '#' || rule[0] == '!');
}

using position_list = std::vector<std::uint32_t>;

void mark(position_list& out, std::size_t i, std::size_t size) {
  if (i < size) out.push_back(static_cast<std::uint32_t>(i));
}

// `name value name value ...` from `first`: values of credential parameters.
void mark_parameter_values(std::span<const std::string_view> args, std::size_t first, position_list& out) {
  for (std::size_t i = first; i < args.size(); i += 2) {
    if (credential_parameter(args[i])) mark(out, i + 1, args.size());
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
  const std::string_view name = args[0];
  const std::size_t n = args.size();
  if (iequals(name, "AUTH")) {
    // AUTH pw | AUTH user pw; with any other count, mask everything after the name.
    if (n == 2 || n == 3) {
      mark(out, n - 1, n);
    } else {
      for (std::size_t i = 1; i < n; ++i) mark(out, i, n);
    }
  } else if (iequals(name, "HELLO")) {
    for (std::size_t i = 1; i < n; ++i) {
      if (iequals(args[i], "AUTH")) {
        mark(out, i + 2, n);
        i += 2;
      }
    }
  } else if (iequals(name, "MIGRATE")) {
    // Keys after KEYS may be named anything, "AUTH" included.
    for (std::size_t i = 1; i < n; ++i) {
      if (iequals(args[i], "KEYS")) break;
      if (iequals(args[i], "AUTH")) {
        mark(out, i + 1, n);
        ++i;
      } else if (iequals(args[i], "AUTH2")) {
        mark(out, i + 2, n);
        i += 2;
      }
    }
  } else if (iequals(name, "CONFIG")) {
    if (n >= 3 && iequals(args[1], "SET")) mark_parameter_values(args, 2, out);
  } else if (iequals(name, "ACL")) {
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
}

}  // namespace lockscope::analyzer
