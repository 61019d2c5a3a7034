// `lockscope analyze FILE... --format html|svg`: the swimlane report (HTML page) and one
// lock's swimlanes as a standalone SVG. Two passes over the files: the first ranks the
// locks (and finds --lock's), the second builds only the swimlanes drawn, so memory
// stays bounded by what is drawn, not by the capture.
#pragma once

#include <cstddef>
#include <string>

#include "lockscope/locks/lock_analysis.hpp"
#include "stdin_spool.hpp"

namespace lockscope::cli {

struct visual_report_options {
  bool svg = false;                   // else html
  std::string output;                 // "" or "-": stdout
  std::size_t max_locks = 500;        // --html-max-locks
  std::size_t detail = 3000;          // --html-detail: marks a lock draws in full before coarsening
  std::vector<std::string> lock_globs;  // --lock; svg: exactly one lock must match
  // Standard input copied to a file (the files name its path): messages and the page say "-".
  const stdin_spool* spooled_stdin = nullptr;
};

// When --lock names locks and the capture holds none of them (`matching_locks`: locks, or
// anything else that shows one matched): says so on stderr, the same
// in every format, and returns 2 (as any argument the capture contradicts). Else 0.
int no_lock_matched(const std::vector<std::string>& lock_globs, std::uint64_t matching_locks);

// Returns the exit code; errors go to stderr naming the file or argument.
int run_visual_report(const std::vector<std::string>& files, const locks::analysis_options& analysis,
                      const visual_report_options& options);

}  // namespace lockscope::cli
