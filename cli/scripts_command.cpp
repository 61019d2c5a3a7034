// `lockscope scripts [NAME] [--sha1]`: the lock scripts lockscope sends and recognises,
// from lock/scripts.hpp, so that shell tools (bench/analyzer/make_lock_capture.sh) need
// no copy of their own.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
  std::string release;  // --redisson: that release's scripts, named TYPE.ROLE
};

// TYPE.ROLE, and #2, #3... for a second script of one role (FasterMultiLock's two queries).
std::vector<std::string> catalogue_names(const std::vector<const lock::redisson_script*>& rows) {
  std::vector<std::string> names;
  for (const auto* s : rows) {
    const std::string base = fmt::format("{}.{}", lock::to_string(s->type), lock::to_string(s->role));
    const auto seen = std::count_if(names.begin(), names.end(),
                                    [&](const std::string& n) { return n == base || n.starts_with(base + "#"); });
    names.push_back(seen ? fmt::format("{}#{}", base, seen + 1) : base);
  }
  return names;
}

// --redisson RELEASE: the catalogue's rows for that release (what `lockscope lock
// --redisson RELEASE` and a Java client of that release send).
int run_release(const scripts_options& o) {
  const auto rows = lock::redisson_scripts_of(o.release);
  if (rows.empty()) {
    live::print_diagnostic("lockscope scripts: --redisson {}: not a Redisson release from 3.10.0 to 4.7.0\n", o.release);
    return 64;  // EX_USAGE
  }
  const std::vector<std::string> names = catalogue_names(rows);
  if (o.name.empty()) {
    std::size_t width = 4;
    for (const auto& n : names) width = std::max(width, n.size());
    width += 2;
    fmt::print("{:<{}}{:<42}{:>5}  {}\n", "name", width, "sha1", "bytes", "sent by");
    for (std::size_t i = 0; i < rows.size(); ++i)
      fmt::print("{:<{}}{:<42}{:>5}  {}\n", names[i], width, rows[i]->sha1, rows[i]->text.size(), rows[i]->source);
    return 0;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (names[i] != o.name) continue;
    const std::string_view out = o.sha1_only ? rows[i]->sha1 : rows[i]->text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (o.sha1_only) std::fputc('\n', stdout);
    return 0;
  }
  std::string known;
  for (const auto& n : names) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
  live::print_diagnostic("lockscope scripts: Redisson {} sends no script named '{}' (it sends: {})\n", o.release,
                         o.name, known);
  return 64;
}

int run(const scripts_options& o) {
  if (!o.release.empty()) return run_release(o);
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
  CLI::App* cmd = app.add_subcommand("scripts", "Print Redisson's lock scripts, or list them with their SHA1s: the seeds' 3.16 forms, or a release's with --redisson");
  cmd->add_option("name", o->name,
                  "acquire, unlock, renew, force_unlock or fair_* (with --redisson: TYPE.ROLE, as listed): print its "
                  "exact text (no newline)");
  cmd->add_flag("--sha1", o->sha1_only, "Print the script's SHA1 instead of its text");
  cmd->add_option("--redisson", o->release,
                  "A Redisson release (3.10.0 to 4.7.0): its lock scripts, as that release (and `lockscope lock "
                  "--redisson RELEASE`) sends them; without it, the seeds' 3.16 forms");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace lockscope::cli
