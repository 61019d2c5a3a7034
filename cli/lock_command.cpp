// `lockscope lock NAME [--redis URL]... [--sentinel-user U] [--sentinel-password P] [--wait DUR] [--lease DUR] [--owner ID] [--fair|--fenced|--read|--write] [--multi] [--tls-ca …] [--sync-replicas N [--sync-timeout DUR]] -- CMD [ARGS...]`:
// several --redis URLs take a RedLock (or with --multi a MultiLock) of NAME on each server.
// flock(1) for Redis, on a Redisson-compatible lock.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <fmt/format.h>

#include "verb_arguments.hpp"
#include "lockscope/live/diagnostics.hpp"
#include "commands.hpp"
#include "lockscope/lock/client.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/multi_lock.hpp"
#include "lockscope/lock/scripts.hpp"

extern char** environ;

namespace lockscope::cli {

namespace {

using verb::exit_software;
using verb::exit_tempfail;
using verb::exit_unavailable;
using verb::exit_usage;
using verb::exit_noperm;

struct lock_options {
  std::string name;
  std::vector<std::string> redis_urls;
  bool multi = false;
  std::string wait;
  std::string lease;
  std::string owner;
  bool fair = false;
  bool fenced = false;
  bool read = false;
  bool write = false;
  std::vector<std::string> command;
  // rediss:// only
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
  // Replica sync: WAIT for this many replicas after acquire and unlock.
  int sync_replicas = 0;
  std::string sync_timeout;
  // redis-sentinel:// only: AUTH to the sentinels.
  std::string sentinel_user;
  std::string sentinel_password;  // empty: $LOCKSCOPE_SENTINEL_PASSWORD, else none
  // The Redisson release whose scripts to send (client_config::redisson_dialect).
  std::string redisson;
};

// How long `lockscope lock` keeps trying while the sentinels name a master that cannot
// be reached yet (a failover in progress), and its command timeout in Sentinel mode:
// a queued command outlives a failover.
constexpr std::chrono::milliseconds sentinel_failover_budget{10000};

void say(const std::string& line) { live::print_diagnostic("lockscope lock: {}\n", line); }

// Redis's own text for an acquire script it answered with an error (WRONGTYPE: NAME is a
// key of another kind; READONLY: a replica). The asynchronous API carries only the code,
// so one more attempt goes through the blocking API, which throws with the text. Should
// that attempt get the lock after all, it is given back at once.
std::string server_error_text(lock::rlock& handle, const std::error_code& ec) {
  try {
    if (handle.try_lock()) {
      handle.unlock();
      return ec.message() + " (a second attempt got the lock, and gave it back)";
    }
    return ec.message();
  } catch (const lock::lock_error& e) {
    return e.what();
  }
}

// The --tls-* flags and --insecure, for every rediss:// server; a usage error when no
// server is one.
int apply_tls_options(const lock_options& o, std::vector<lock::client_config>& configs) {
  const bool any_tls = std::any_of(configs.begin(), configs.end(), [](const auto& c) { return c.tls.enabled; });
  if (!any_tls && (!o.tls_ca.empty() || !o.tls_cert.empty() || !o.tls_key.empty() || o.insecure)) {
    say("--tls-ca, --tls-cert, --tls-key and --insecure need a rediss:// URL");
    return exit_usage;
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    say(o.tls_cert.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key");
    return exit_usage;
  }
  for (lock::client_config& c : configs) {
    if (!c.tls.enabled) continue;
    c.tls.ca = o.tls_ca;
    c.tls.certificate = o.tls_cert;
    c.tls.private_key = o.tls_key;
    c.tls.verify_peer = !o.insecure;
  }
  return 0;
}

// --sentinel-user and --sentinel-password (else $LOCKSCOPE_SENTINEL_PASSWORD), for every
// redis-sentinel:// server; a usage error when no server is one.
int apply_sentinel_options(const lock_options& o, std::vector<lock::client_config>& configs) {
  std::optional<std::string> password;
  if (!o.sentinel_password.empty()) {
    password = o.sentinel_password;
  } else {
    if (const char* env = std::getenv("LOCKSCOPE_SENTINEL_PASSWORD"); env != nullptr && *env != '\0') password = env;
  }
  const bool any = std::any_of(configs.begin(), configs.end(), [](const auto& c) { return c.sentinel.enabled(); });
  if (!any && (!o.sentinel_password.empty() || !o.sentinel_user.empty())) {
    say("--sentinel-user and --sentinel-password need a redis-sentinel:// or rediss-sentinel:// URL");
    return exit_usage;
  }
  for (lock::client_config& c : configs) {
    if (!c.sentinel.enabled()) continue;
    c.sentinel.username = o.sentinel_user;
    c.sentinel.password = password;
    c.command_timeout = std::max(c.command_timeout, sentinel_failover_budget);
  }
  return 0;
}

// Sentinel: a master the sentinels name but that cannot be reached (or is a replica by
// now) is a failover in progress: try again for a while. No sentinel answering, and
// wrong passwords, fail at once.
void connect_through_failover(lock::client& c) {
  const auto give_up = std::chrono::steady_clock::now() + sentinel_failover_budget;
  for (;;) {
    try {
      return c.connect();
    } catch (const lock::lock_error& e) {
      const bool settled = e.code() == lock::errc::no_master || e.code() == lock::errc::auth_failed ||
                           e.code() == lock::errc::tls_failed || e.code() == lock::errc::invalid_argument;
      if (!c.config().sentinel.enabled() || settled || std::chrono::steady_clock::now() >= give_up) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// --sync-replicas and --sync-timeout, for every server.
int apply_sync_options(const lock_options& o, std::vector<lock::client_config>& configs) {
  std::chrono::milliseconds timeout = lock::client_config{}.sync_timeout;
  if (!o.sync_timeout.empty()) {
    const std::optional<std::chrono::milliseconds> parsed = cli::verb::duration_argument("lock", "--sync-timeout", o.sync_timeout, false);
    if (!parsed) return exit_usage;
    if (o.sync_replicas == 0) {
      say("--sync-timeout needs --sync-replicas");
      return exit_usage;
    }
    timeout = *parsed;
  }
  if (o.sync_replicas < 0) {
    say(fmt::format("--sync-replicas: {} is negative", o.sync_replicas));
    return exit_usage;
  }
  for (lock::client_config& c : configs) {
    c.sync_replicas = o.sync_replicas;
    c.sync_timeout = timeout;
  }
  return 0;
}

// Our environment plus LOCKSCOPE_FENCE_TOKEN=<token> (replacing any inherited one).
std::vector<std::string> child_environment(std::int64_t fence_token) {
  std::vector<std::string> env;
  constexpr std::string_view variable = "LOCKSCOPE_FENCE_TOKEN=";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with(variable)) continue;
    env.emplace_back(*e);
  }
  if (fence_token != 0) env.push_back(fmt::format("{}{}", variable, fence_token));
  return env;
}

int run_lock(const lock_options& o) {
  if (int{o.fair} + int{o.fenced} + int{o.read} + int{o.write} > 1) {
    say("--fair, --fenced, --read and --write exclude each other");
    return exit_usage;
  }
  std::optional<std::chrono::milliseconds> wait;
  std::optional<std::chrono::milliseconds> lease;
  if (!o.wait.empty()) {
    wait = cli::verb::duration_argument("lock", "--wait", o.wait, true);
    if (!wait) return exit_usage;
  }
  if (!o.lease.empty()) {
    lease = cli::verb::duration_argument("lock", "--lease", o.lease, false);
    if (!lease) return exit_usage;
  }
  std::vector<std::string> urls = o.redis_urls;
  if (urls.empty()) {
    const char* env = std::getenv("LOCKSCOPE_REDIS");
    urls.emplace_back(env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379");
  }
  // Several servers: a RedLock (or a MultiLock) of NAME on each.
  const bool several = urls.size() > 1 || o.multi;
  if (several && (o.fair || o.fenced || o.read || o.write)) {
    say("several --redis URLs (or --multi) take plain locks; --fair, --fenced, --read and --write need one server");
    return exit_usage;
  }
  lock::client_config config;
  // One name per process (CLIENT LIST tells them apart, and the analyzer ties the
  // subscriber connection, "lockscope-lock:PID:sub", to its command connection by it).
  config.client_name = fmt::format("lockscope-lock:{}", ::getpid());
  std::vector<lock::client_config> configs;
  for (const std::string& url : urls) {
    std::string why;
    configs.push_back(config);
    if (const std::error_code ec = lock::parse_url(url, configs.back(), &why)) {
      say(fmt::format("bad Redis URL: {}", why));
      return exit_usage;
    }
  }
  if (const int status = apply_tls_options(o, configs); status != 0) return status;
  if (const int status = apply_sync_options(o, configs); status != 0) return status;
  if (!o.redisson.empty()) {
    if (!verb::redisson_release_argument("lock", o.redisson)) return exit_usage;
    for (lock::client_config& c : configs) c.redisson_dialect = o.redisson;
  }
  if (const int status = apply_sentinel_options(o, configs); status != 0) return status;
  for (const lock::client_config& c : configs) {
    if (c.cluster.enabled && c.sync_replicas > 0) {
      say("--sync-replicas is not supported with a redis-cluster:// URL");
      return exit_usage;
    }
  }
  config = configs.front();
  config.on_lock_lost = [name = o.name](const std::string&) {
    say(fmt::format("lost lock '{}': the watchdog could not renew it; CMD keeps running unprotected", name));
  };
  config.on_unlock_error = [](const std::string& name, const std::string& message) {
    say(fmt::format("releasing '{}' failed: {}", name, message));
  };

  // Block the signals before the client starts its I/O thread, so that only our
  // signalfd sees them.
  const sigset_t signals = cli::verb::handled_signals();
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  const int signal_fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  const int done_fd = ::eventfd(0, EFD_CLOEXEC);
  if (signal_fd < 0 || done_fd < 0) {
    say(fmt::format("cannot set up signal handling: {}", std::strerror(errno)));
    return exit_software;
  }

  // One client per server. Each server's commands are bounded by its command timeout:
  // with several servers, one that is down costs a RedLock attempt at most that long.
  std::vector<std::unique_ptr<lock::client>> clients;
  for (lock::client_config& c : configs) {
    c.on_lock_lost = config.on_lock_lost;
    c.on_unlock_error = config.on_unlock_error;
    if (several) c.command_timeout = std::chrono::milliseconds(1000);
    clients.push_back(std::make_unique<lock::client>(c));
  }
  lock::client& client = *clients.front();
  std::size_t reachable = 0;
  std::error_code connect_error;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    try {
      connect_through_failover(*clients[i]);
      ++reachable;
    } catch (const lock::lock_error& e) {
      say(several ? fmt::format("{}: {}", urls[i], e.what()) : std::string(e.what()));
      if (!connect_error) connect_error = e.code();
    }
  }
  const std::size_t required = !several ? 1 : o.multi ? clients.size() : clients.size() / 2 + 1;
  if (reachable < required) {
    if (several) say(fmt::format("{} of {} servers reachable, {} needed", reachable, clients.size(), required));
    return connect_error == lock::errc::auth_failed ? exit_noperm : several ? exit_unavailable
                                                                            : cli::verb::exit_code_for(connect_error);
  }
  // The owner is fixed here: the acquisition runs on the client's I/O thread.
  const std::string owner = o.owner.empty() ? client.thread_owner() : o.owner;
  // A fair_lock is an rlock whose state sends the fair scripts: the copy keeps them.
  std::optional<lock::fenced_lock> fenced;
  if (o.fenced) fenced.emplace(client.get_fenced_lock(o.name, owner));
  std::optional<lock::multi_lock> multi;
  if (several) {
    std::vector<lock::rlock> parts;
    for (auto& c : clients) parts.push_back(c->get_lock(o.name, o.owner.empty() ? c->thread_owner() : o.owner));
    multi.emplace(o.multi ? lock::get_multi_lock(std::move(parts)) : lock::multi_lock(lock::get_red_lock(std::move(parts))));
  }
  lock::rlock lock_handle = fenced    ? lock::rlock(*fenced)
                            : o.fair  ? client.get_fair_lock(o.name, owner)
                            : o.read  ? client.get_read_write_lock(o.name, owner).read_lock()
                            : o.write ? client.get_read_write_lock(o.name, owner).write_lock()
                                      : client.get_lock(o.name, owner);

  // Acquire asynchronously so that a signal can interrupt the wait.
  struct outcome {
    std::atomic<bool> done{false};
    boost::system::error_code ec;
    bool acquired = false;
    std::int64_t fence_token = 0;
  };
  auto result = std::make_shared<outcome>();
  auto on_acquired = [result, done_fd](boost::system::error_code ec, bool acquired) {
    result->ec = ec;
    result->acquired = acquired;
    result->done = true;
    const std::uint64_t one = 1;
    (void)!::write(done_fd, &one, sizeof one);
  };
  auto acquired_forever = [on_acquired](boost::system::error_code ec) mutable { on_acquired(ec, !ec); };
  auto token_acquired = [result, on_acquired](boost::system::error_code ec, std::int64_t token) mutable {
    result->fence_token = token;
    on_acquired(ec, !ec && token != 0);
  };
  if (multi) {
    if (!wait && lease) {
      multi->async_lock(*lease, acquired_forever);
    } else if (!wait) {
      multi->async_lock(acquired_forever);
    } else if (lease) {
      multi->async_try_lock(*wait, *lease, on_acquired);
    } else {
      multi->async_try_lock(*wait, on_acquired);
    }
  } else if (fenced) {
    if (!wait && lease) {
      fenced->async_lock_and_get_token(*lease, token_acquired);
    } else if (!wait) {
      fenced->async_lock_and_get_token(token_acquired);
    } else if (lease) {
      fenced->async_try_lock_and_get_token(*wait, *lease, token_acquired);
    } else {
      fenced->async_try_lock_and_get_token(*wait, token_acquired);
    }
  } else if (!wait && lease) {
    lock_handle.async_lock(*lease, acquired_forever);
  } else if (!wait) {
    lock_handle.async_lock(acquired_forever);
  } else if (lease) {
    lock_handle.async_try_lock(*wait, *lease, on_acquired);
  } else {
    lock_handle.async_try_lock(*wait, on_acquired);
  }

  while (!result->done) {
    pollfd fds[2] = {{done_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if ((fds[1].revents & POLLIN) != 0) {
      const auto sig = verb::read_signal(signal_fd);
      if (!sig || sig->signo == SIGCHLD) continue;
      // Interrupted while waiting: stop waiting, so that no attempt goes out any more
      // (a wake-up between the unlock and the close used to send one, which took the
      // lock for a process about to exit), then give back the lock in case the attempt
      // in flight got it. Each client's strand runs the two in order.
      for (auto& c : clients) c->abandon_waits();
      if (multi) {
        // Each unlock goes out before its client's QUIT, after any acquire in flight.
        multi->async_unlock([](boost::system::error_code) {});
        for (auto& c : clients) c->close();
      } else {
        // abandon_waits() completes the acquisition once nothing is left behind: the
        // attempt in flight answered, a hold it took was given back, a fair waiter left
        // the queue. Only an acquisition that completed just before the signal holds
        // the lock: give it back. Then the connection may close. Bounded: a server that
        // stopped answering does not keep us.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!result->done && std::chrono::steady_clock::now() < deadline) {
          pollfd fd{done_fd, POLLIN, 0};
          (void)::poll(&fd, 1, 50);
        }
        if (result->done && !result->ec && result->acquired) {
          auto released = std::make_shared<std::promise<void>>();
          std::future<void> done = released->get_future();
          lock_handle.async_unlock([released](boost::system::error_code) { released->set_value(); });
          done.wait_until(deadline);
        }
        client.close();
      }
      say(fmt::format("interrupted by signal {} while waiting for '{}'", sig->signo, o.name));
      return 128 + sig->signo;
    }
  }
  if (result->ec) {
    const std::error_code ec = result->ec;
    if (ec == lock::errc::replica_sync_failed) {
      say(fmt::format("acquiring '{}' failed: WAIT did not see it on {} replicas within {} ms; it was given back",
                      o.name, config.sync_replicas, config.sync_timeout.count()));
    } else if (ec == lock::errc::server_error && !multi) {
      say(fmt::format("acquiring '{}' failed: {}", o.name, server_error_text(lock_handle, ec)));
    } else {
      say(fmt::format("acquiring '{}' failed: {}", o.name, result->ec.message()));
    }
    return cli::verb::exit_code_for(ec);
  }
  if (!result->acquired) {
    say(fmt::format("timed out after {} waiting for lock '{}'", o.wait, o.name));
    return exit_tempfail;
  }

  // Run CMD with LOCKSCOPE_FENCE_TOKEN for a fenced lock.
  std::vector<std::string> env_strings = child_environment(result->fence_token);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int exit_status = verb::run_child("lock", o.command, envp.data(), signal_fd, signals);

  try {
    if (multi) {
      multi->unlock_or_throw();
    } else {
      lock_handle.unlock_or_throw();
    }
  } catch (const lock::lock_error& e) {
    // A release that reached too few replicas did happen on the master: CMD's status stands.
    if (e.code() == lock::errc::replica_sync_failed) {
      say(e.what());
    } else {
      say(fmt::format("releasing '{}' failed: {}", o.name, e.what()));
      if (exit_status == 0) exit_status = cli::verb::exit_code_for(e.code());
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return exit_status;
}

}  // namespace

void add_lock_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<lock_options>();
  CLI::App* cmd = app.add_subcommand(
      "lock", "Run CMD while holding a Redisson-compatible Redis lock (flock(1) for Redis)");
  cmd->add_option("name", options->name, "Lock name (the Redis key)")->required();
  cmd->add_option("command", options->command, "CMD [ARGS...], after --")->required();
  cmd->add_option("--redis", options->redis_urls,
                  "redis[s]://[[user]:password@]host[:port][/db], rediss:// for TLS; Sentinel: "
                  "redis[s]-sentinel://[[user]:password@]host[:port][,host2[:port2]...][/db]#mastername "
                  "(sentinel port 26379 by default; the password is the master's); Redis Cluster: "
                  "redis[s]-cluster://[[user]:password@]host:port[,host:port...] (seed nodes) "
                  "(default: $LOCKSCOPE_REDIS, else redis://127.0.0.1:6379). Several: a RedLock of NAME on each "
                  "server (a majority)")
      ->allow_extra_args(false);
  cmd->add_flag("--multi", options->multi,
                "With several --redis: a MultiLock (NAME on every server, all or nothing) instead of a RedLock");
  cmd->add_option("--wait", options->wait, "How long to wait for the lock: 500ms, 10s, 2m; 0 tries once (default: forever)");
  cmd->add_option("--lease", options->lease,
                  "Lease after which the lock expires: 500ms, 30s, 2m (default: held by a watchdog while CMD runs)");
  cmd->add_option("--owner", options->owner, "Owner id (default: <client uuid>:<thread id>)");
  cmd->add_flag("--fair", options->fair,
                "Redisson's fair lock: waiters get the lock in the order they asked (queue "
                "redisson_lock_queue:{NAME})");
  cmd->add_flag("--fenced", options->fenced,
                "Redisson's fenced lock: CMD gets LOCKSCOPE_FENCE_TOKEN=<n>, a number larger than any "
                "earlier holder's (from redisson_lock_token:{NAME})");
  cmd->add_flag("--read", options->read,
                "The read side of Redisson's read/write lock: readers run together, not while a writer runs");
  cmd->add_flag("--write", options->write,
                "The write side of Redisson's read/write lock: alone, after the readers and writers before it");
  cmd->add_option("--tls-ca", options->tls_ca,
                  "rediss://: trusted CA file (PEM) or hashed directory (default: the system's trust store)");
  cmd->add_option("--tls-cert", options->tls_cert, "rediss://: client certificate (PEM), for mutual TLS");
  cmd->add_option("--tls-key", options->tls_key, "rediss://: the client certificate's private key (PEM)");
  cmd->add_flag("--insecure", options->insecure,
                "rediss://: do not verify the server's certificate or host name (encrypts, does not authenticate)");
  cmd->add_option("--sentinel-user", options->sentinel_user, "redis-sentinel://: user for AUTH to the sentinels");
  cmd->add_option("--sentinel-password", options->sentinel_password,
                  "redis-sentinel://: password for AUTH to the sentinels, separate from the master's (default: "
                  "$LOCKSCOPE_SENTINEL_PASSWORD)");
  cmd->add_option("--redisson", options->redisson,
                  "Redisson release whose lock scripts to speak, as the Java clients sharing the lock do: "
                  "4.7.0 (default), 3.27.2, 3.16.8, ... (3.11.1 to 4.7.0)");
  cmd->add_option("--sync-replicas,--wait-replicas", options->sync_replicas,
                  "Replica sync: after acquire and unlock, WAIT until N replicas have the write; too few "
                  "gives the lock back and exits 69; after unlock, too few is reported (CMD's status "
                  "stands) (default: 0, off)");
  cmd->add_option("--sync-timeout", options->sync_timeout,
                  "How long each WAIT may take: 500ms, 2s (default: 1s)");
  cmd->footer(
      "Exit status: CMD's; 75 if the lock (or a RedLock's majority) was not acquired in time; 64 bad "
      "arguments; 69 Redis unreachable, TLS failed, no sentinel naming the master (or the master it names "
      "unreachable for 10 s), too many servers unreachable to ever reach a majority, or "
      "too few replicas acknowledged the lock (--sync-replicas); "
      "77 wrong password; 126/127 CMD not runnable. SIGINT/SIGTERM/SIGHUP/SIGQUIT are "
      "forwarded to CMD; the lock is released when CMD exits.");
  cmd->callback([options, &exit_code] { exit_code = run_lock(*options); });
}

}  // namespace lockscope::cli
