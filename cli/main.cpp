#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"

namespace {

// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The option of `command` closest to `given` (e.g. --wiat: --wait), or empty when none
// is near: a prefix of one option (--out: --output), or a few edits away.
std::string closest_option(const CLI::App& command, std::string_view given) {
  given = given.substr(0, given.find('='));
  std::string best;
  // Edits allowed: 1 for a short name (--out is not --port), 2 from 9 letters, 3 from 13.
  const std::size_t letters = given.size() > 2 ? given.size() - 2 : 0;
  std::size_t best_distance = (letters >= 13 ? 3 : letters >= 9 ? 2 : 1) + 1;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      const std::string candidate = "--" + name;
      std::size_t distance = edit_distance(given, candidate);
      if (given.size() > 3 && candidate.starts_with(given)) distance = 1;
      if (distance < best_distance) {
        best_distance = distance;
        best = candidate;
      }
    }
  }
  return best;
}

// CLI11's message, as every other lockscope message: "lockscope: " first, and for an
// unknown option the nearest known one ("did you mean --wait?").
std::string failure_message(const CLI::App& app, int argc, char** argv, const CLI::Error& e) {
  const CLI::App* command = nullptr;
  std::string name = "lockscope";
  if (argc > 1) {
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == argv[1]) command = sub;
    }
  }
  if (command != nullptr) name += " " + command->get_name();
  std::string out = name + ": " + e.what() + "\n";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && command != nullptr) {
    out.clear();
    for (int i = 2; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--") break;
      if (!arg.starts_with("--") || command->get_option_no_throw(std::string(arg.substr(0, arg.find('=')))) != nullptr) {
        continue;
      }
      out += name + ": unknown option " + std::string(arg.substr(0, arg.find('=')));
      if (const std::string near = closest_option(*command, arg); !near.empty()) out += " (did you mean " + near + "?)";
      out += "\n";
    }
    if (out.empty()) out = name + ": " + e.what() + "\n";  // an extra value, not an option
  }
  out += "Run '" + name + " --help' for the options.\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lockscope: Redis distributed-lock toolkit"};
  app.require_subcommand(1);
  int exit_code = 0;
  lockscope::cli::add_resp_command(app, exit_code);
  lockscope::cli::add_lock_command(app, exit_code);
  lockscope::cli::add_semaphore_command(app, exit_code);
  lockscope::cli::add_latch_command(app, exit_code);
  lockscope::cli::add_decode_command(app, exit_code);
  lockscope::cli::add_analyze_command(app, exit_code);
  lockscope::cli::add_scripts_command(app, exit_code);
  // What a command printed last must have reached stdout (resp, scripts, --help into a
  // full disk): else its status says so. analyze and decode check as they write.
  auto stdout_status = [](int status) {
    if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return status;
    if (status != 0) return status;  // the command failed, and said why
    std::fprintf(stderr, "lockscope: cannot write stdout: %s\n", std::strerror(errno != 0 ? errno : EIO));
    return 2;
  };
  app.failure_message([argc, argv](const CLI::App* failing, const CLI::Error& e) {
    return failure_message(*failing, argc, argv, e);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) return stdout_status(0);  // --help: printed
    // One status for every usage error, not CLI11's own (105, 109, …): 64 (EX_USAGE) for
    // `lock`, whose other statuses are sysexits, as scripts around it test; 2 elsewhere,
    // as the commands' own argument errors and tcpdump.
    const bool lock_command = argc > 1 && (std::string_view(argv[1]) == "lock" || std::string_view(argv[1]) == "semaphore" ||
                                           std::string_view(argv[1]) == "latch");
    return lock_command ? 64 : 2;
  }
  return stdout_status(exit_code);
}
