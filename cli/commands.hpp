// Subcommands of the lockscope CLI. Each registers its options and its run callback.
#pragma once

#include <CLI/CLI.hpp>

namespace lockscope::cli {

// `lockscope resp FILE`: decode a raw RESP byte stream and print each message.
void add_resp_command(CLI::App& app, int& exit_code);

// `lockscope lock NAME [--redis URL] [--wait DUR] [--lease DUR] [--owner ID] -- CMD...`:
// run CMD while holding a Redisson-compatible lock.
void add_lock_command(CLI::App& app, int& exit_code);

// `lockscope decode FILE... | -i IFACE`: Redis exchanges in captures or live traffic.
void add_decode_command(CLI::App& app, int& exit_code);

// `lockscope analyze FILE... | -i IFACE`: per-lock timelines, anomalies and a summary.
void add_analyze_command(CLI::App& app, int& exit_code);

// `lockscope semaphore NAME [--permits N] [--count K] [--wait DUR] -- CMD...`: run CMD
// holding permits of a Redisson RSemaphore; `lockscope latch NAME --count N |
// --count-down | --get | --await [--wait DUR]`: a Redisson RCountDownLatch.
void add_semaphore_command(CLI::App& app, int& exit_code);
void add_latch_command(CLI::App& app, int& exit_code);

// `lockscope scripts [NAME] [--sha1]`: the lock scripts (lock/scripts.hpp) as text.
void add_scripts_command(CLI::App& app, int& exit_code);

}  // namespace lockscope::cli
