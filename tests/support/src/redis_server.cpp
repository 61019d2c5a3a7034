#include "lockscope/test/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "lockscope/test/resp_connection.hpp"

namespace lockscope::test {

namespace {

using namespace std::chrono_literals;

std::string errno_text(int e) { return fmt::format("{} (errno {})", std::strerror(e), e); }

bool is_executable(const std::filesystem::path& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0 && !std::filesystem::is_directory(p);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("changed state ({})", status);
}

}  // namespace

std::uint16_t find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw redis_server_error("find_free_port: socket: " + errno_text(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    const int e = errno;
    ::close(fd);
    throw redis_server_error("find_free_port: bind 127.0.0.1:0: " + errno_text(e));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

namespace {

std::optional<std::filesystem::path> find_program(const char* variable, const char* name) {
  if (const char* explicit_path = std::getenv(variable); explicit_path != nullptr) {
    if (is_executable(explicit_path)) return std::filesystem::path(explicit_path);
    return std::nullopt;
  }
  std::vector<std::filesystem::path> candidates;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty()) candidates.push_back(std::filesystem::path(dir) / name);
    }
  }
  candidates.emplace_back(std::filesystem::path("/usr/bin") / name);
  candidates.emplace_back(std::filesystem::path("/usr/local/bin") / name);
  for (const auto& candidate : candidates) {
    if (is_executable(candidate)) return candidate;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::filesystem::path> redis_server::find_executable() {
  return find_program("LOCKSCOPE_REDIS_SERVER", "redis-server");
}

std::optional<std::filesystem::path> redis_server::find_sentinel_executable() {
  return find_program("LOCKSCOPE_REDIS_SENTINEL", "redis-sentinel");
}

redis_server::redis_server(std::vector<std::string> extra_args)
    : redis_server([&] {
        redis_server_options o;
        o.extra_args = std::move(extra_args);
        return o;
      }()) {}

redis_server::redis_server(redis_server_options options) : options_(std::move(options)) {
  auto executable = options_.sentinel_config ? find_sentinel_executable() : find_executable();
  if (!executable)
    throw redis_server_error(options_.sentinel_config
                                 ? "redis-sentinel not found (PATH, /usr/bin, $LOCKSCOPE_REDIS_SENTINEL)"
                                 : "redis-server not found (PATH, /usr/bin, $LOCKSCOPE_REDIS_SERVER)");
  executable_ = *executable;

  std::string pattern = (std::filesystem::temp_directory_path() / "lockscope-redis-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw redis_server_error("cannot create a directory for redis-server: " + errno_text(errno));
  }
  directory_ = pattern;
  if (options_.sentinel_config) {
    std::ofstream conf(directory_ / "sentinel.conf");
    conf << *options_.sentinel_config << '\n';
    if (!conf) throw redis_server_error("cannot write " + (directory_ / "sentinel.conf").string());
  }

  // The port was free when probed, but another process may take it before the server
  // binds it: then try another one.
  constexpr int attempts = 3;
  for (int attempt = 1;; ++attempt) {
    const bool tls = options_.tls.has_value();
    port_ = !tls || options_.tls->plain_port_too ? find_free_port() : 0;
    tls_port_ = tls ? find_free_port() : 0;
    try {
      start();
      return;
    } catch (const redis_server_error&) {
      const bool port_taken = log_tail(5).find("Address already in use") != std::string::npos;
      if (!port_taken || attempt == attempts) {
        std::error_code ignored;
        std::filesystem::remove_all(directory_, ignored);
        throw;
      }
    }
  }
}

redis_server::~redis_server() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

void redis_server::start() {
  if (running()) return;
  spawn();
  wait_until_ready();
}

void redis_server::restart() {
  stop();
  start();
}

void redis_server::spawn() {
  std::vector<std::string> args = {executable_.string()};
  // A sentinel's config file comes first, before the options.
  if (options_.sentinel_config) args.push_back((directory_ / "sentinel.conf").string());
  for (std::string a : {std::string("--port"), std::to_string(port_)}) args.push_back(std::move(a));
  for (std::string a : std::initializer_list<std::string>{
                                   "--bind", host_,
                                   "--save", "",
                                   "--appendonly", "no",
                                   "--daemonize", "no",
                                   "--dir", directory_.string(),
                                   "--enable-debug-command", "local"})
    args.push_back(std::move(a));
  if (options_.tls) {
    const redis_tls_options& t = *options_.tls;
    for (std::string a : std::initializer_list<std::string>{"--tls-port", std::to_string(tls_port_), "--tls-cert-file", t.certificate.string(),
                          "--tls-key-file", t.private_key.string(), "--tls-ca-cert-file", t.ca.string(),
                          "--tls-auth-clients", std::string(t.auth_clients ? "yes" : "no")})
      args.push_back(std::move(a));
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Everything the child needs is prepared here: between fork and exec only
  // async-signal-safe calls are allowed.
  const std::string log = log_path().string();
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw redis_server_error(fmt::format("cannot open {}: {}", log, errno_text(errno)));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    throw redis_server_error("cannot open /dev/null: " + errno_text(errno));
  }
  const pid_t parent = ::getpid();
  std::error_code size_error;
  log_size_at_spawn_ = std::filesystem::file_size(log_path(), size_error);
  if (size_error) log_size_at_spawn_ = 0;

  const pid_t child = ::fork();
  if (child == 0) {
    // If the test process dies without stopping us, do not outlive it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    // Leave no inherited descriptor (ctest's pipes, test sockets) open in the server.
    ::close_range(3, ~0u, 0);
    ::execv(argv[0], argv.data());
    static constexpr char message[] = "lockscope::test::redis_server: execv failed\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (child < 0) throw redis_server_error("fork failed: " + errno_text(fork_errno));
  pid_ = child;
}

void redis_server::wait_until_ready() {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + options_.startup_timeout;
  std::string last_problem = "no attempt made";
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw redis_server_error(fmt::format("redis-server on port {} {} during startup; log tail:\n{}", port_ != 0 ? port_ : tls_port_,
                                           describe_status(status), log_tail()));
    }
    if (port_ == 0) {
      // TLS only: the probe would need TLS, so read the log, from this start on.
      std::ifstream in(log_path(), std::ios::binary);
      in.seekg(static_cast<std::streamoff>(log_size_at_spawn_));
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("Ready to accept connections") != std::string::npos) return;
      last_problem = "no 'Ready to accept connections' in the log yet";
      std::this_thread::sleep_for(20ms);
      continue;
    }
    try {
      resp_connection probe(host_, port_, 250ms);
      probe.send_raw("PING\r\n");
      const resp::value reply = probe.read_value(500ms);
      // With --requirepass, PING gets NOAUTH: the server is up all the same.
      const bool loading = reply.is_error() && reply.text.starts_with("LOADING");
      if ((reply.type == resp::type::simple_string && reply.text == "PONG") ||
          (reply.is_error() && !loading)) {
        return;
      }
      last_problem = "PING answered with " + reply.text;
    } catch (const connection_error& e) {
      last_problem = e.what();
    }
    std::this_thread::sleep_for(20ms);
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  kill();
  throw redis_server_error(fmt::format("redis-server on port {} did not answer PING within {} ms ({}); log tail:\n{}",
                                       port_ != 0 ? port_ : tls_port_, waited.count(), last_problem, log_tail()));
}

void redis_server::reap(int signal, std::chrono::milliseconds grace) noexcept {
  if (!running()) return;
  ::kill(pid_, signal);
  ::kill(pid_, SIGCONT);  // a suspended server would never act on SIGTERM
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  pid_ = -1;
}

void redis_server::stop() noexcept { reap(SIGTERM, options_.stop_timeout); }

void redis_server::kill() noexcept { reap(SIGKILL, options_.stop_timeout); }

void redis_server::suspend() {
  if (!running() || ::kill(pid_, SIGSTOP) != 0) throw redis_server_error("cannot suspend redis-server");
}

void redis_server::resume() {
  if (!running() || ::kill(pid_, SIGCONT) != 0) throw redis_server_error("cannot resume redis-server");
}

std::string redis_server::log_tail(std::size_t lines) const {
  if (lines == 0) return {};
  std::ifstream in(log_path(), std::ios::binary);
  if (!in) return "(no log at " + log_path().string() + ")";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t start = text.size();
  for (std::size_t i = 0; i < lines; ++i) {
    const std::size_t newline = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
    if (newline == std::string::npos) return text;
    start = newline;
  }
  return text.substr(start + 1);
}

}  // namespace lockscope::test
