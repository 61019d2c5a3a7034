// What the client verbs (`lock`, `semaphore`, `latch`) share: one rule for durations,
// one mapping of errors to exit statuses, the exit statuses themselves, the signals they
// handle themselves, and how they run CMD.
#pragma once

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace lockscope::cli::verb {

// sysexits.h values, so scripts can tell failures apart.
constexpr int exit_usage = 64;        // EX_USAGE: bad URL, duration or arguments
constexpr int exit_unavailable = 69;  // EX_UNAVAILABLE: Redis refused, unreachable or timed out
constexpr int exit_software = 70;     // EX_SOFTWARE: anything else that went wrong
constexpr int exit_tempfail = 75;     // EX_TEMPFAIL: not acquired in time
constexpr int exit_noperm = 77;       // EX_NOPERM: wrong password or user
constexpr int exit_cannot_execute = 126;
constexpr int exit_not_found = 127;

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

// A signal read from the verb's signalfd, and whether the kernel sent it (a terminal's
// Ctrl-C, which CMD got too: it shares our process group).
struct signal_event {
  int signo = 0;
  bool from_terminal = false;
};
std::optional<signal_event> read_signal(int signal_fd);

// Whether `release` names a Redisson release the client has a dialect for (3.11.1 to
// 4.7.0, as tagged); says why not ("lockscope VERB: --redisson: ...") when not.
bool redisson_release_argument(std::string_view verb, const std::string& release);

// Runs CMD as a child while the verb holds what it acquired, and returns CMD's exit
// status (128+n when a signal n ended it), or 126/127 when it could not start (said
// why). CMD gets `envp`, default dispositions for `handled` and SIGPIPE and an empty
// mask, none of our descriptors (the Redis sockets: a CMD leaving a daemon behind would
// keep them open after we exit), and SIGTERM should we die unannounced
// (PR_SET_PDEATHSIG: the lock or permits are no longer ours to hold then). Every signal
// read from `signal_fd` meanwhile is forwarded to CMD, but a terminal's.
int run_child(std::string_view verb, const std::vector<std::string>& command, char* const* envp, int signal_fd,
              const sigset_t& handled);

}  // namespace lockscope::cli::verb
