// `lockscope semaphore NAME [--permits N] [--count K | --lease DUR] [--wait DUR] [--redis URL] [--redisson R] -- CMD [ARGS...]`:
// run CMD while holding K permits of Redisson's RSemaphore NAME (sem(1) for Redis), or with
// --lease one permit of its RPermitExpirableSemaphore NAME, which expires after DUR.
// `lockscope latch NAME --count N | --count-down | --get | --await [--wait DUR] [--redisson R]`:
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

#include <boost/asio/associated_cancellation_slot.hpp>
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
#include "lockscope/lock/permit_expirable_semaphore.hpp"
#include "lockscope/lock/semaphore.hpp"

extern char** environ;

namespace lockscope::cli {
namespace primitive_verbs {
namespace {

using verb::exit_software;
using verb::exit_tempfail;
using verb::exit_usage;

void tell(std::string_view verb, const std::string& line) {
  live::print_diagnostic("lockscope {}: {}\n", verb, line);
}

// The client for --redis (else $LOCKSCOPE_REDIS, else 127.0.0.1:6379), connected; a
// status when that failed (said why).
struct connected {
  std::unique_ptr<lock::client> client;
  int status = 0;
};
connected connect(std::string_view verb, const std::string& url_option, const std::string& redisson) {
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
    return {nullptr, exit_usage};
  }
  if (!redisson.empty()) {
    if (!cli::verb::redisson_release_argument(verb, redisson)) return {nullptr, exit_usage};
    config.redisson_dialect = redisson;
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
    const auto sig = cli::verb::read_signal(signals.fd());
    if (!sig || sig->signo == SIGCHLD) continue;
    out.signal = sig->signo;
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

struct semaphore_options {
  std::string name;
  std::string redis;
  std::int64_t permits = 0;  // 0: do not set
  std::int64_t count = 1;
  std::string wait;
  std::string lease;  // set: the permit-expirable semaphore
  std::string redisson;
  std::vector<std::string> command;
};

// `f` with the cancellation slot of `handler` (taken before `handler` moves into `f`):
// a wrapped handler still hears the signal's cancellation.
template <class Handler, class F>
auto with_slot_of(const Handler& handler, F f) {
  return boost::asio::bind_cancellation_slot(boost::asio::get_associated_cancellation_slot(handler), std::move(f));
}

int run_semaphore(const semaphore_options& o) {
  constexpr std::string_view verb = "semaphore";
  if (o.count < 1) {
    tell(verb, fmt::format("--count: {} is not a positive number of permits", o.count));
    return exit_usage;
  }
  if (o.permits < 0) {
    tell(verb, fmt::format("--permits: {} is negative", o.permits));
    return exit_usage;
  }
  std::optional<std::chrono::milliseconds> wait;
  if (!o.wait.empty() && !(wait = cli::verb::duration_argument(verb, "--wait", o.wait, true))) return exit_usage;
  std::optional<std::chrono::milliseconds> lease;
  if (!o.lease.empty()) {
    if (!(lease = cli::verb::duration_argument(verb, "--lease", o.lease, false))) return exit_usage;
    if (o.count != 1) {
      tell(verb, "--lease takes one permit (Redisson's RPermitExpirableSemaphore: one id per permit); drop --count");
      return exit_usage;
    }
  }
  signal_guard signals;
  if (signals.fd() < 0) {
    tell(verb, fmt::format("cannot set up signal handling: {}", std::strerror(errno)));
    return exit_software;
  }
  connected c = connect(verb, o.redis, o.redisson);
  if (!c.client) return c.status;
  // --lease: Redisson's RPermitExpirableSemaphore, whose permit has an id and an expiry of
  // its own; else RSemaphore. The two keep their permits apart: use one kind per name.
  std::optional<lock::semaphore> sem;
  std::optional<lock::permit_expirable_semaphore> expirable;
  if (lease) {
    expirable.emplace(c.client->get_permit_expirable_semaphore(o.name));
  } else {
    sem.emplace(c.client->get_semaphore(o.name));
  }
  try {
    // As Redisson's trySetPermits: only when the semaphore does not exist yet.
    if (o.permits > 0) (void)(expirable ? expirable->try_set_permits(o.permits) : sem->try_set_permits(o.permits));
  } catch (const lock::lock_error& e) {
    tell(verb, fmt::format("setting the permits of '{}' failed: {}", o.name, e.what()));
    return cli::verb::exit_code_for(e.code());
  }
  auto permit_id = std::make_shared<std::string>();  // --lease: the id acquired
  const wait_outcome got = interruptible(*c.client, signals, [&](auto handler) {
    if (expirable) {
      auto got_id = with_slot_of(handler, [h = std::move(handler), permit_id](boost::system::error_code ec,
                                                                              std::string id) mutable {
        *permit_id = std::move(id);
        const bool acquired = !permit_id->empty();
        h(ec, acquired);
      });
      if (wait) {
        expirable->async_try_acquire(*wait, lease, std::move(got_id));
      } else {
        expirable->async_acquire(lease, std::move(got_id));
      }
    } else if (wait) {
      sem->async_try_acquire(o.count, *wait, std::move(handler));
    } else {
      sem->async_acquire(o.count, with_slot_of(handler, [h = std::move(handler)](boost::system::error_code ec) mutable {
                           h(ec, !ec);
                         }));
    }
  });
  const auto release = [&] {
    if (expirable) {
      expirable->release(*permit_id);
    } else {
      sem->release(o.count);
    }
  };
  if (got.signal != 0) {
    // A cancelled acquire took no permit; one that completed just before did.
    if (got.done) {
      try {
        release();
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
    return exit_tempfail;
  }
  int status = cli::verb::run_child(verb, o.command, environ, signals.fd(), signals.set());
  try {
    release();
  } catch (const lock::lock_error& e) {
    if (expirable && e.code() == lock::errc::not_owner) {
      tell(verb, fmt::format("the permit of '{}' expired after its lease of {} while CMD ran: it was not ours any "
                             "more when CMD ended",
                             o.name, o.lease));
    } else {
      tell(verb, fmt::format("releasing {} permit(s) of '{}' failed: {}", o.count, o.name, e.what()));
    }
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
  std::string redisson;
};

int run_latch(const latch_options& o) {
  constexpr std::string_view verb = "latch";
  const int actions = int{o.count != 0} + int{o.count_down} + int{o.await} + int{o.get};
  if (actions != 1) {
    tell(verb, "give one of --count N, --count-down, --await, --get");
    return exit_usage;
  }
  if (o.count < 0) {
    tell(verb, fmt::format("--count: {} is negative", o.count));
    return exit_usage;
  }
  if (!o.wait.empty() && !o.await) {
    tell(verb, "--wait goes with --await");
    return exit_usage;
  }
  std::optional<std::chrono::milliseconds> wait;
  if (!o.wait.empty() && !(wait = cli::verb::duration_argument(verb, "--wait", o.wait, true))) return exit_usage;
  signal_guard signals;
  connected c = connect(verb, o.redis, o.redisson);
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
    return exit_tempfail;
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
  cmd->add_option("--lease", o->lease,
                  "Use Redisson's RPermitExpirableSemaphore NAME: one permit with an id of its own that comes back "
                  "by itself after DUR (500ms, 30s, 2m) should CMD outlive it or we die");
  cmd->add_option("--redisson", o->redisson,
                  "Redisson release of the Java clients sharing NAME: 4.7.0 (default), 3.27.2, 3.16.8, ...; on a "
                  "Redis 7 cluster, releases from 3.22 wake waiters by SPUBLISH/SSUBSCRIBE, older ones by "
                  "PUBLISH/SUBSCRIBE");
  cmd->footer(
      "Exit status: CMD's; 75 if the permits were not acquired in time; 64 bad arguments; 69 Redis "
      "unreachable; 77 wrong password; 70 the --lease ran out while CMD ran (when CMD succeeded); "
      "126/127 CMD not runnable; 128+n interrupted by signal n while "
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
  cmd->add_option("--redisson", o->redisson,
                  "Redisson release of the Java clients sharing NAME, as for `lockscope semaphore` (default: 4.7.0)");
  cmd->footer(
      "Exit status: 0 done; 1 --count found a count already set; 75 --await timed out; 64 bad "
      "arguments; 69 Redis unreachable; 77 wrong password; 128+n interrupted by signal n.");
  cmd->callback([o, &exit_code] { exit_code = primitive_verbs::run_latch(*o); });
}

}  // namespace lockscope::cli
