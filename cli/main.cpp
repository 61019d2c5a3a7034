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
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
