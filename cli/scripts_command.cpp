// `lockscope scripts [NAME] [--sha1]`: the lock scripts lockscope sends and recognises,
// from lock/scripts.hpp, so that shell tools (bench/analyzer/make_lock_capture.sh) need
// no copy of their own.
#include <cstdio>
#include <memory>
#include <string>

#include <algorithm>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "commands.hpp"
#include "lockscope/lock/scripts.hpp"

namespace lockscope::cli {

namespace {

struct scripts_options {
  std::string name;
  bool sha1_only = false;
};

int run(const scripts_options& o) {
  if (o.name.empty()) {
    std::size_t width = 4;  // the longest name, and two blanks
    for (const lock::script_info& s : lock::all_scripts()) width = std::max(width, s.name.size());
    width += 2;
    fmt::print("{:<{}}{:<42}{:>5}  {}\n", "name", width, "sha1", "bytes", "KEYS/ARGV");
    for (const lock::script_info& s : lock::all_scripts()) {
      fmt::print("{:<{}}{:<42}{:>5}  {}/{}\n", s.name, width, s.sha1, s.text.size(), s.key_count, s.arg_count);
    }
    return 0;
  }
  for (const lock::script_info& s : lock::all_scripts()) {
    if (s.name != o.name) continue;
    // No newline after the text: its bytes are exactly what EVAL sends.
    const std::string_view out = o.sha1_only ? s.sha1 : s.text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (o.sha1_only) std::fputc('\n', stdout);
    return 0;
  }
  std::string names;
  for (const lock::script_info& s : lock::all_scripts()) names += fmt::format("{}{}", names.empty() ? "" : ", ", s.name);
  live::print_diagnostic("lockscope scripts: no script named '{}' (known: {})\n", o.name, names);
  return 64;  // EX_USAGE
}

}  // namespace

void add_scripts_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<scripts_options>();
  CLI::App* cmd = app.add_subcommand("scripts", "Print the Redisson lock scripts lockscope sends, or list them with their SHA1s");
  cmd->add_option("name", o->name, "acquire, unlock, renew, force_unlock or fair_*: print its exact text (no newline)");
  cmd->add_flag("--sha1", o->sha1_only, "Print the script's SHA1 instead of its text");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace lockscope::cli
