#include "verb_arguments.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/scripts.hpp"

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
  if (ec == lock::errc::auth_failed) return exit_noperm;
  if (ec == lock::errc::invalid_url || ec == lock::errc::invalid_argument) return exit_usage;
  if (ec == lock::errc::timeout || ec == lock::errc::tls_failed || ec == lock::errc::no_master ||
      ec == lock::errc::replica_sync_failed || ec == lock::errc::not_connected || ec == lock::errc::connection_lost ||
      ec.category() == std::system_category() || ec.category() == boost::system::system_category())
    return exit_unavailable;
  return exit_software;
}

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&set, s);
  return set;
}

std::optional<signal_event> read_signal(int signal_fd) {
  signalfd_siginfo info{};
  if (::read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return std::nullopt;
  return signal_event{static_cast<int>(info.ssi_signo), info.ssi_code == SI_KERNEL};
}

bool redisson_release_argument(std::string_view verb, const std::string& release) {
  if (!lock::redisson_scripts_of(release).empty() && std::count(release.begin(), release.end(), '.') == 2) return true;
  live::print_diagnostic("lockscope {}: --redisson: '{}' is not a Redisson release this client knows (3.11.1 to "
                         "4.7.0, as tagged: e.g. 4.7.0, 3.27.2, 3.16.8)\n",
                         verb, release);
  return false;
}

namespace {

void mark_descriptors_close_on_exec() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (fd > 2 && fd != own) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  }
  ::closedir(dir);
}

// CMD as a child of this process: its pid, or the errno its start failed with (ENOENT:
// no such program on PATH).
struct started_command {
  pid_t pid = -1;
  int error = 0;
};

// Starts CMD by fork and execve rather than posix_spawn, for one thing posix_spawn cannot
// ask: PR_SET_PDEATHSIG. The child runs only async-signal-safe calls before execve (the
// paths to try are built here first), and tries PATH as execvp does: on past a missing
// file or directory and a denied one, stopping at any other error.
started_command start_command(const std::vector<std::string>& command, char* const* envp, const sigset_t& defaults) {
  const std::string& file = command.front();
  if (file.empty()) return {-1, ENOENT};
  std::vector<std::string> candidates;
  if (file.find('/') != std::string::npos) {
    candidates.push_back(file);
  } else {
    const char* path = std::getenv("PATH");
    const std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/bin:/usr/bin";
    for (std::size_t at = 0;;) {
      const std::size_t colon = dirs.find(':', at);
      const std::string_view dir = dirs.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at);
      candidates.push_back((dir.empty() ? std::string(".") : std::string(dir)) + "/" + file);
      if (colon == std::string_view::npos) break;
      at = colon + 1;
    }
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return {-1, errno};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return {-1, error};
  }
  if (pid == 0) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) {
      if (sigismember(&defaults, s) == 1) ::sigaction(s, &default_action, nullptr);
    }
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // died before the request took hold
    int error = ENOENT;
    for (const std::string& c : candidates) {
      ::execve(c.c_str(), argv.data(), envp);
      if (errno == EACCES) {
        error = EACCES;
      } else if (errno != ENOENT && errno != ENOTDIR) {
        error = errno;
        break;
      }
    }
    [[maybe_unused]] const ssize_t written = ::write(report[1], &error, sizeof error);
    ::_exit(exit_not_found);
  }
  ::close(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof error)) {  // execve failed: the child has exited
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return {-1, error};
  }
  return {pid, 0};
}

}  // namespace

int run_child(std::string_view verb, const std::vector<std::string>& command, char* const* envp, int signal_fd,
              const sigset_t& handled) {
  mark_descriptors_close_on_exec();
  sigset_t defaults = handled;
  sigaddset(&defaults, SIGPIPE);
  const started_command started = start_command(command, envp, defaults);
  if (started.error != 0) {
    live::print_diagnostic("lockscope {}: cannot run '{}': {}\n", verb, command.front(), std::strerror(started.error));
    return started.error == ENOENT ? exit_not_found : exit_cannot_execute;
  }
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(started.pid, &status, WNOHANG);
    if (reaped == started.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (reaped < 0 && errno != EINTR) return exit_software;
    pollfd fd{signal_fd, POLLIN, 0};
    if (::poll(&fd, 1, -1) < 0 && errno != EINTR) continue;
    const auto sig = read_signal(signal_fd);
    // A terminal's Ctrl-C already reached CMD, which shares our process group.
    if (sig && sig->signo != SIGCHLD && !sig->from_terminal) ::kill(started.pid, sig->signo);
  }
}

}  // namespace lockscope::cli::verb
