// A Redis Functions library read as scripts (function_calls.cpp; the sandbox fuzzer
// runs the same texts). Private to the recognizer.
//
//   std::string_view name, code;
//   if (split_library(text, name, code)) {
//     run_script(library_names_script(code), {}, {}, store);    // answers the names registered
//     learn(library_function_script(code, "lock"));             // `lock` as a script of KEYS, ARGV
//   }
//
// The library's code runs inside a block where a local `redis` provides
// `register_function` in both its forms (`('name', fn)` and `{function_name=...,
// callback=..., flags=...}`), keeping each callback by its lower-cased name, and reaches
// the sandbox's `redis` for everything else; after the block, the names script answers
// the names, a function's script calls that callback with KEYS and ARGV.
#pragma once

#include <string>
#include <string_view>

namespace lockscope::locks::effect {

inline constexpr std::string_view library_prelude =
    "local lockscope_functions = {}\n"
    "local redis = setmetatable({register_function = function(name, callback)\n"
    "  if type(name) == 'table' then name, callback = name.function_name, name.callback end\n"
    "  if type(name) ~= 'string' or type(callback) ~= 'function' then\n"
    "    error('ERR wrong arguments to register_function')\n"
    "  end\n"
    "  lockscope_functions[string.lower(name)] = callback\n"
    "end}, {__index = redis})\n"
    "do\n";

// The library's name from its first line (`#!lua name=lib`) and its code after that
// line, which Redis strips; false when the text has no such line (Redis refuses it).
inline bool split_library(std::string_view text, std::string_view& name, std::string_view& code) noexcept {
  if (text.substr(0, 2) != "#!") return false;
  const std::size_t eol = text.find('\n');
  std::string_view line = text.substr(0, eol);
  code = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  name = {};
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    const std::string_view word = line.substr(0, space);
    if (word.substr(0, 5) == "name=") name = word.substr(5);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  }
  return !name.empty();
}

// A function name as Redis accepts one: letters, digits and '_'.
inline bool valid_function_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 128) return false;
  for (const char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    if (!ok) return false;
  }
  return true;
}

// The library's top level, answering the (lower-cased) names it registered as a list.
inline std::string library_names_script(std::string_view code) {
  constexpr std::string_view trailer =
      "\nend\n"
      "local names = {}\n"
      "for name in pairs(lockscope_functions) do names[#names + 1] = name end\n"
      "return names\n";
  std::string text;
  text.reserve(library_prelude.size() + code.size() + trailer.size());
  text.append(library_prelude).append(code).append(trailer);
  return text;
}

// The function `name` (a valid_function_name) as a script of KEYS and ARGV.
inline std::string library_function_script(std::string_view code, std::string_view name) {
  std::string text;
  text.reserve(library_prelude.size() + code.size() + name.size() + 48);
  text.append(library_prelude).append(code).append("\nend\nreturn lockscope_functions['").append(name);
  text.append("'](KEYS, ARGV)\n");
  return text;
}

}  // namespace lockscope::locks::effect
