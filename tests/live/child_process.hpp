// A CLI child process for the live tests: its stdout on a pipe read as it comes, its
// stderr on the same pipe or in a file of its own.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

namespace lockscope::timeline_test {

struct child {
  pid_t pid = -1;
  int out = -1;
  std::string text;                // what was read from `out` so far
  std::filesystem::path err_path;  // stderr, when not on `out`

  // Reads what is available within `wait`; true when `needle` has been seen.
  bool read_until(std::string_view needle, std::chrono::milliseconds wait) {
    const auto end = std::chrono::steady_clock::now() + wait;
    while (text.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      if (!read_some()) return text.find(needle) != std::string::npos;
    }
    return true;
  }
  // Reads what is there now, without waiting.
  void read_available() {
    for (;;) {
      pollfd p{out, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0 || !read_some()) return;
    }
  }
  std::string err() const {
    std::ifstream f(err_path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  // The exit status (128 + the signal when killed).
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // As wait(), but a child still running after `limit` is killed (SIGKILL): -1.
  int wait_for(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return -1;
      }
      ::usleep(10000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  bool read_some() {
    char buf[65536];
    const ssize_t n = ::read(out, buf, sizeof buf);
    if (n <= 0) return false;
    text.append(buf, static_cast<std::size_t>(n));
    return true;
  }
};

// stderr goes to `err_path` when given, else onto the stdout pipe; stdin is `in` when
// given (a descriptor the child gets as its 0).
inline child spawn(const std::vector<std::string>& args, const std::filesystem::path& err_path = {}, int in = -1) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  child c;
  c.err_path = err_path;
  c.pid = ::fork();
  REQUIRE(c.pid >= 0);
  if (c.pid == 0) {
    if (in >= 0) ::dup2(in, 0);
    ::dup2(fds[1], 1);
    if (err_path.empty()) ::dup2(fds[1], 2);
    else ::dup2(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    ::close(fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  c.out = fds[0];
  return c;
}

}  // namespace lockscope::timeline_test
