// `lockscope semaphore NAME [--permits N] [--count K] [--wait DUR] [--redis URL] -- CMD [ARGS...]`:
// run CMD while holding K permits of Redisson's RSemaphore NAME (sem(1) for Redis).
// `lockscope latch NAME --count N | --count-down | --get | --await [--wait DUR]`:
// Redisson's RCountDownLatch NAME from the shell.
// Exit statuses as `lockscope lock`'s (sysexits): 75 not acquired (or not released) in
// time, 64 bad arguments, 69 Redis unreachable, 77 wrong password, 70 anything else,
// 126/127 CMD not runnable, 128+n interrupted by signal n; else CMD's.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "verb_arguments.hpp"
#include "lockscope/live/diagnostics.hpp"
#include "lockscope/lock/client.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/count_down_latch.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/semaphore.hpp"

namespace lockscope::cli {
namespace primitive_verbs {
namespace {

constexpr int ex_usage = 64;
constexpr int ex_unavailable = 69;
constexpr int ex_software = 70;
constexpr int ex_tempfail = 75;
constexpr int ex_noperm = 77;
constexpr int ex_cannot_execute = 126;
constexpr int ex_not_found = 127;

void tell(std::string_view verb, const std::string& line) {
  live::print_diagnostic("lockscope {}: {}\n", verb, line);
}

// The client for --redis (else $LOCKSCOPE_REDIS, else 127.0.0.1:6379), connected; a
// status when that failed (said why).
struct connected {
  std::unique_ptr<lock::client> client;
  int status = 0;
};
connected connect(std::string_view verb, const std::string& url_option) {
  std::string url = url_option;
  if (url.empty()) {
    const char* env = std::getenv("LOCKSCOPE_REDIS");
    url = env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379";
  }
  lock::client_config config;
  config.client_name = fmt::format("lockscope-{}", verb);
  std::string why;
  if (lock::parse_url(url, config, &why)) {
    tell(verb, fmt::format("bad Redis URL: {}", why));
    return {nullptr, ex_usage};
  }
  auto client = std::make_unique<lock::client>(config);
  try {
    client->connect();
  } catch (const lock::lock_error& e) {
    tell(verb, e.what());
    return {nullptr, cli::verb::exit_code_for(e.code())};
  }
  return {std::move(client), 0};
}

// Blocks the handled signals (before the client's thread starts: only our signalfd
// sees them) and restores the mask on the way out.
class signal_guard {
 public:
  signal_guard() : set_(cli::verb::handled_signals()) {
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC);
  }
  ~signal_guard() {
    if (fd_ >= 0) ::close(fd_);
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  signal_guard(const signal_guard&) = delete;
  signal_guard& operator=(const signal_guard&) = delete;
  int fd() const noexcept { return fd_; }
  const sigset_t& set() const noexcept { return set_; }
  // The next signal (not SIGCHLD), and whether the kernel sent it (a terminal's Ctrl-C).
  std::optional<std::pair<int, bool>> read() const {
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return std::nullopt;
    return std::pair{static_cast<int>(info.ssi_signo), info.ssi_code == SI_KERNEL};
  }

 private:
  sigset_t set_;
  sigset_t previous_;
  int fd_ = -1;
};

// An asynchronous wait that a signal can interrupt: `start(handler)` begins it with a
// handler bound to a cancellation slot; a signal cancels it on the client's strand (where
// the handler clears its slot: never both at once) and waits for it to leave nothing
// behind. Returns the outcome, or the signal.
struct wait_outcome {
  boost::system::error_code ec;
  bool done = false;  // the acquire (await) succeeded
  int signal = 0;
};
template <class Start>
wait_outcome interruptible(lock::client& client, const signal_guard& signals, Start&& start) {
  struct shared {
    std::atomic<bool> finished{false};
    boost::system::error_code ec;
    bool done = false;
    int event_fd = -1;
    boost::asio::cancellation_signal cancel;
  };
  auto s = std::make_shared<shared>();
  s->event_fd = ::eventfd(0, EFD_CLOEXEC);
  start(boost::asio::bind_cancellation_slot(s->cancel.slot(), [s](boost::system::error_code ec, bool done) {
    s->ec = ec;
    s->done = !ec && done;
    s->finished = true;
    const std::uint64_t one = 1;
    (void)!::write(s->event_fd, &one, sizeof one);
  }));
  wait_outcome out;
  while (!s->finished) {
    pollfd fds[2] = {{s->event_fd, POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if ((fds[1].revents & POLLIN) == 0) continue;
    const auto sig = signals.read();
    if (!sig || sig->first == SIGCHLD) continue;
    out.signal = sig->first;
    boost::asio::post(client.get_executor(), [s] { s->cancel.emit(boost::asio::cancellation_type::terminal); });
    // Bounded: a server that stopped answering does not keep us.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!s->finished && std::chrono::steady_clock::now() < deadline) {
      pollfd fd{s->event_fd, POLLIN, 0};
      (void)::poll(&fd, 1, 50);
    }
    break;
  }
  ::close(s->event_fd);
  out.ec = s->ec;
  out.done = s->finished && s->done;
  return out;
}

// CMD as a child (PR_SET_PDEATHSIG as `lockscope lock`: should we die unannounced, CMD
// gets SIGTERM rather than run on without its permits being ours); signals forwarded;
// its exit status.
int run_child(std::string_view verb, const std::vector<std::string>& command, const signal_guard& signals) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return ex_software;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    tell(verb, fmt::format("cannot run '{}': {}", command.front(), std::strerror(errno)));
    return ex_software;
  }
  if (pid == 0) {
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    ::execvp(argv[0], argv.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t written = ::write(report[1], &error, sizeof error);
    ::_exit(ex_not_found);
  }
  ::close(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof error)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    tell(verb, fmt::format("cannot run '{}': {}", command.front(), std::strerror(error)));
    return error == ENOENT ? ex_not_found : ex_cannot_execute;
  }
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (reaped < 0 && errno != EINTR) return ex_software;
    pollfd fd{signals.fd(), POLLIN, 0};
    if (::poll(&fd, 1, -1) < 0) continue;
    const auto sig = signals.read();
    // A terminal's Ctrl-C already reached CMD, which shares our process group.
    if (sig && sig->first != SIGCHLD && !sig->second) ::kill(pid, sig->first);
  }
}

struct semaphore_options {
  std::string name;
  std::string redis;
  std::int64_t permits = 0;  // 0: do not set
  std::int64_t count = 1;
  std::string wait;
  std::vector<std::string> command;
};

int run_semaphore(const semaphore_options& o) {
  constexpr std::string_view verb = "semaphore";
  if (o.count < 1) {
    tell(verb, fmt::format("--count: {} is not a positive number of permits", o.count));
    return ex_usage;
  }
  if (o.permits < 0) {
    tell(verb, fmt::format("--permits: {} is negative", o.permits));
    return ex_usage;
  }
  std::optional<std::chrono::milliseconds> wait;
  if (!o.wait.empty() && !(wait = cli::verb::duration_argument(verb, "--wait", o.wait, true))) return ex_usage;
  signal_guard signals;
  if (signals.fd() < 0) {
    tell(verb, fmt::format("cannot set up signal handling: {}", std::strerror(errno)));
    return ex_software;
  }
  connected c = connect(verb, o.redis);
  if (!c.client) return c.status;
  lock::semaphore sem = c.client->get_semaphore(o.name);
  try {
    // As Redisson's trySetPermits: only when the semaphore does not exist yet.
    if (o.permits > 0) sem.try_set_permits(o.permits);
  } catch (const lock::lock_error& e) {
    tell(verb, fmt::format("setting the permits of '{}' failed: {}", o.name, e.what()));
    return cli::verb::exit_code_for(e.code());
  }
  const wait_outcome got = interruptible(*c.client, signals, [&](auto handler) {
    if (wait) {
      sem.async_try_acquire(o.count, *wait, std::move(handler));
    } else {
      sem.async_acquire(o.count, [h = std::move(handler)](boost::system::error_code ec) mutable { h(ec, !ec); });
    }
  });
  if (got.signal != 0) {
    // A cancelled acquire took no permit; one that completed just before did.
    if (got.done) {
      try {
        sem.release(o.count);
      } catch (const lock::lock_error&) {
      }
    }
    tell(verb, fmt::format("interrupted by signal {} while waiting for '{}'", got.signal, o.name));
    return 128 + got.signal;
  }
  if (got.ec) {
    tell(verb, fmt::format("acquiring {} permit(s) of '{}' failed: {}", o.count, o.name, got.ec.message()));
    return cli::verb::exit_code_for(got.ec);
  }
  if (!got.done) {
    tell(verb, fmt::format("timed out after {} waiting for {} permit(s) of '{}'", o.wait, o.count, o.name));
    return ex_tempfail;
  }
  int status = run_child(verb, o.command, signals);
  try {
    sem.release(o.count);
  } catch (const lock::lock_error& e) {
    tell(verb, fmt::format("releasing {} permit(s) of '{}' failed: {}", o.count, o.name, e.what()));
    if (status == 0) status = cli::verb::exit_code_for(e.code());
  }
  return status;
}

struct latch_options {
  std::string name;
  std::string redis;
  std::int64_t count = 0;
  bool count_down = false;
  bool await = false;
  bool get = false;
  std::string wait;
};

int run_latch(const latch_options& o) {
  constexpr std::string_view verb = "latch";
  const int actions = int{o.count != 0} + int{o.count_down} + int{o.await} + int{o.get};
  if (actions != 1) {
    tell(verb, "give one of --count N, --count-down, --await, --get");
    return ex_usage;
  }
  if (o.count < 0) {
    tell(verb, fmt::format("--count: {} is negative", o.count));
    return ex_usage;
  }
  if (!o.wait.empty() && !o.await) {
    tell(verb, "--wait goes with --await");
    return ex_usage;
  }
  std::optional<std::chrono::milliseconds> wait;
  if (!o.wait.empty() && !(wait = cli::verb::duration_argument(verb, "--wait", o.wait, true))) return ex_usage;
  signal_guard signals;
  connected c = connect(verb, o.redis);
  if (!c.client) return c.status;
  lock::count_down_latch latch = c.client->get_count_down_latch(o.name);
  try {
    if (o.count != 0) {
      if (latch.try_set_count(o.count)) return 0;
      tell(verb, fmt::format("'{}' already counts {}: not set", o.name, latch.get_count()));
      return 1;
    }
    if (o.count_down) {
      latch.count_down();
      return 0;
    }
    if (o.get) {
      std::printf("%lld\n", static_cast<long long>(latch.get_count()));
      return 0;
    }
  } catch (const lock::lock_error& e) {
    tell(verb, fmt::format("'{}': {}", o.name, e.what()));
    return cli::verb::exit_code_for(e.code());
  }
  const wait_outcome got = interruptible(*c.client, signals, [&](auto handler) {
    if (wait) {
      latch.async_await(*wait, std::move(handler));
    } else {
      latch.async_await([h = std::move(handler)](boost::system::error_code ec) mutable { h(ec, !ec); });
    }
  });
  if (got.signal != 0) {
    tell(verb, fmt::format("interrupted by signal {} while waiting for '{}'", got.signal, o.name));
    return 128 + got.signal;
  }
  if (got.ec) {
    tell(verb, fmt::format("waiting for '{}' failed: {}", o.name, got.ec.message()));
    return cli::verb::exit_code_for(got.ec);
  }
  if (!got.done) {
    tell(verb, fmt::format("timed out after {} waiting for '{}' to count down", o.wait, o.name));
    return ex_tempfail;
  }
  return 0;
}

}  // namespace
}  // namespace primitive_verbs

void add_semaphore_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<primitive_verbs::semaphore_options>();
  CLI::App* cmd = app.add_subcommand(
      "semaphore", "Run CMD while holding permits of a Redisson-compatible semaphore (RSemaphore)");
  cmd->add_option("name", o->name, "Semaphore name (the Redis key holding the free permits)")->required();
  cmd->add_option("command", o->command, "CMD [ARGS...], after --")->required();
  cmd->add_option("--redis", o->redis,
                  "redis[s]://[[user]:password@]host[:port][/db], or a redis-sentinel:// or redis-cluster:// URL "
                  "as for `lockscope lock` (default: $LOCKSCOPE_REDIS, else redis://127.0.0.1:6379)");
  cmd->add_option("--permits", o->permits,
                  "Create the semaphore with N permits if it does not exist yet (Redisson's trySetPermits; "
                  "an existing semaphore keeps its count)");
  cmd->add_option("--count", o->count, "How many permits CMD holds (default: 1)");
  cmd->add_option("--wait", o->wait, "How long to wait for the permits: 500ms, 10s, 2m; 0 tries once (default: forever)");
  cmd->footer(
      "Exit status: CMD's; 75 if the permits were not acquired in time; 64 bad arguments; 69 Redis "
      "unreachable; 77 wrong password; 126/127 CMD not runnable; 128+n interrupted by signal n while "
      "waiting (no permit taken). Signals are forwarded to CMD; the permits are released when CMD exits.");
  cmd->callback([o, &exit_code] { exit_code = primitive_verbs::run_semaphore(*o); });
}

void add_latch_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<primitive_verbs::latch_options>();
  CLI::App* cmd = app.add_subcommand("latch", "Set, count down or await a Redisson-compatible RCountDownLatch");
  cmd->add_option("name", o->name, "Latch name (the Redis key holding the count)")->required();
  cmd->add_option("--redis", o->redis,
                  "Redis URL as for `lockscope lock` (default: $LOCKSCOPE_REDIS, else redis://127.0.0.1:6379)");
  cmd->add_option("--count", o->count, "Set the count to N if no count is set (exit 1 if one is)");
  cmd->add_flag("--count-down", o->count_down, "Count down by one; at zero every waiter goes");
  cmd->add_flag("--get", o->get, "Print the count (0 when the latch does not exist)");
  cmd->add_flag("--await", o->await, "Wait until the count is zero");
  cmd->add_option("--wait", o->wait, "With --await: how long to wait: 500ms, 10s, 2m (default: forever)");
  cmd->footer(
      "Exit status: 0 done; 1 --count found a count already set; 75 --await timed out; 64 bad "
      "arguments; 69 Redis unreachable; 77 wrong password; 128+n interrupted by signal n.");
  cmd->callback([o, &exit_code] { exit_code = primitive_verbs::run_latch(*o); });
}

}  // namespace lockscope::cli
