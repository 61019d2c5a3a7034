#include "verb_arguments.hpp"

#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"

namespace lockscope::cli::verb {

std::optional<std::chrono::milliseconds> duration_argument(std::string_view verb, std::string_view option,
                                                           const std::string& text, bool zero_allowed) {
  const std::optional<std::chrono::milliseconds> parsed = lock::parse_duration(text);
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && (!parsed || parsed->count() != 0)) {
    live::print_diagnostic("lockscope {}: {}: '{}' needs a unit: {}ms or {}s (units: ms, s, m, h)\n", verb, option,
                           text, text, text);
    return std::nullopt;
  }
  if (!parsed || (!zero_allowed && parsed->count() == 0)) {
    live::print_diagnostic("lockscope {}: {}: '{}' is not a {}duration (use e.g. 500ms, 10s, 2m)\n", verb, option,
                           text, zero_allowed ? "" : "positive ");
    return std::nullopt;
  }
  return parsed;
}

int exit_code_for(const std::error_code& ec) {
  if (ec == lock::errc::auth_failed) return 77;
  if (ec == lock::errc::invalid_url || ec == lock::errc::invalid_argument) return 64;
  if (ec == lock::errc::timeout || ec == lock::errc::tls_failed || ec == lock::errc::no_master ||
      ec == lock::errc::replica_sync_failed || ec == lock::errc::not_connected || ec == lock::errc::connection_lost ||
      ec.category() == std::system_category() || ec.category() == boost::system::system_category())
    return 69;
  return 70;
}

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&set, s);
  return set;
}

}  // namespace lockscope::cli::verb
