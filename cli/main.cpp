#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"lockscope: Redis distributed-lock toolkit"};
  app.require_subcommand(1);
  int exit_code = 0;
  lockscope::cli::add_resp_command(app, exit_code);
  lockscope::cli::add_lock_command(app, exit_code);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) return stdout_status(0);  // --help: printed
    // One status for every usage error, not CLI11's own (105, 109, …): 64 (EX_USAGE) for
    // `lock`, whose other statuses are sysexits, as scripts around it test; 2 elsewhere,
    // as the commands' own argument errors and tcpdump.
    const bool lock_command = argc > 1 && std::string_view(argv[1]) == "lock";
    return lock_command ? 64 : 2;
  }
  return stdout_status(exit_code);
}
