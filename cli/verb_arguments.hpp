// What the client verbs (`lock`, `semaphore`, `latch`) share: one rule for durations,
// one mapping of errors to exit statuses, and the signals they handle themselves.
#pragma once

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace lockscope::cli::verb {

// A number and its unit (ms, s, m, h); only 0 may go without. A bare "5" could mean 5 s
// as easily as 5 ms: it is refused, naming the argument. nullopt after saying why
// ("lockscope VERB: OPTION: ...").
std::optional<std::chrono::milliseconds> duration_argument(std::string_view verb, std::string_view option,
                                                           const std::string& text, bool zero_allowed);

// sysexits: 77 wrong password or user, 64 bad URL or argument, 69 Redis refused,
// unreachable or timed out, 70 anything else.
int exit_code_for(const std::error_code& ec);

// Handled by the verb itself: blocked in every thread, read from a signalfd.
sigset_t handled_signals();

}  // namespace lockscope::cli::verb
