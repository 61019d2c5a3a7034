// Child processes for the cross-process lock tests: spawn with captured output, wait
// with a deadline (a hung child is killed, never waited on forever).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace lockscope::test {

struct child_process {
  pid_t pid = -1;
  std::string output_path;  // stdout and stderr, merged

  // Waits up to `timeout`; returns the exit status (128+signal when killed). Kills the
  // child and throws if it does not finish in time.
  int wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        pid = -1;
        throw std::runtime_error("child did not finish in time; output: " + output());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::string output() const {
    std::ifstream in(output_path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  ~child_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
    if (!output_path.empty()) std::remove(output_path.c_str());
  }
};

inline std::unique_ptr<child_process> spawn(const std::vector<std::string>& args,
                                            const std::vector<std::string>& extra_env = {}) {
  auto child = std::make_unique<child_process>();
  char path[] = "/tmp/lockscope-child-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  child->output_path = path;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // extra_env replaces inherited variables of the same name (getenv takes the first).
  auto overridden = [&extra_env](std::string_view inherited) {
    const std::string_view name = inherited.substr(0, inherited.find('='));
    return std::any_of(extra_env.begin(), extra_env.end(),
                       [name](const std::string& e) { return std::string_view(e).substr(0, e.find('=')) == name; });
  };
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) env_strings.emplace_back(*e);
  }
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = ::posix_spawnp(&child->pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("cannot spawn " + args.front());
  return child;
}

// Waits until `path` holds `text` (a child's "ready" line), or throws after `timeout`.
inline void wait_for_output(const child_process& child, const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (child.output().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("child never printed '" + text + "'; output: " + child.output());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace lockscope::test
