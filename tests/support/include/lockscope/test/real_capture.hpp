// Recording real traffic on loopback for the end-to-end tests: tcpdump for a scope,
// shell commands with a timeout, and a classic pcap cut so that it starts mid-stream.
// Needs LOCKSCOPE_CLI_PATH defined (the test targets define it).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <string>
#include <thread>

#include "lockscope/test/catch_support.hpp"  // LOCKSCOPE_REQUIRE_REDIS_SERVER
#include "lockscope/test/shell.hpp"  // read_command_output
#include "lockscope/test/temp_dir.hpp"

namespace lockscope::test {

using namespace std::chrono_literals;

inline bool on_path(const char* program) {
  return std::system((std::string("command -v ") + program + " >/dev/null 2>&1").c_str()) == 0;
}

// The lockscope binary, or empty (with a warning) when it or `tool` is missing.
inline std::string cli_binary_with(const char* tool) {
  const std::string binary = LOCKSCOPE_CLI_PATH;
  if (binary.empty() || !std::filesystem::exists(binary) || !on_path(tool)) {
    WARN("the lockscope binary or " << tool << " is missing: skipping");
    return {};
  }
  return binary;
}

// The lockscope binary, or empty (with a warning) when it, python3 or Debian's
// python3-redis is missing: the tests that drive a real client from Python.
inline std::string cli_binary_with_python_redis() {
  const std::string binary = cli_binary_with("python3");
  if (binary.empty()) return {};
  if (std::system("/usr/bin/python3 -c 'import redis' 2>/dev/null") != 0) {
    WARN("python3-redis is missing (scripts/install-deps installs it): skipping");
    return {};
  }
  return binary;
}

// `tcpdump -i lo -w FILE tcp port P` for the lifetime of the object (a pcap, not pcapng),
// each packet cut to `snaplen` bytes (-s).
class tcpdump_recording {
 public:
  tcpdump_recording(const std::filesystem::path& file, std::uint16_t port, unsigned snaplen = 262144) : file_(file) {
    const std::string filter = "tcp port " + std::to_string(port);
    const std::string snap = std::to_string(snaplen);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::FILE* null = std::fopen("/dev/null", "w");
      if (null != nullptr) {
        ::dup2(::fileno(null), 1);
        ::dup2(::fileno(null), 2);
      }
      // A 64 MiB buffer (-B, KiB): 64 KiB loopback segments overflow the default.
      ::execlp("tcpdump", "tcpdump", "-i", "lo", "-U", "--immediate-mode", "-B", "65536", "-s", snap.c_str(), "-w",
               file.c_str(), filter.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // tcpdump writes the file header once the capture is active.
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::error_code ec;
      if (std::filesystem::file_size(file_, ec) >= 24 && !ec) {
        ready_ = true;
        break;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(200ms);  // the filter is attached just after the header
  }
  ~tcpdump_recording() { stop(); }
  bool ready() const { return ready_; }
  void stop() {
    if (pid_ <= 0) return;
    std::this_thread::sleep_for(300ms);  // let the last packets reach the file
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  std::filesystem::path file_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

inline int run(const std::string& command) {
  const int rc = std::system(("timeout 20 " + command).c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string cli(std::uint16_t port, const std::string& args) {
  return "redis-cli -p " + std::to_string(port) + " " + args + " >/dev/null";
}

// Copies a classic pcap file without its first `skip` packets: a recording that
// starts in the middle of its connections.
inline void cut_pcap(const std::filesystem::path& in, const std::filesystem::path& out, std::size_t skip) {
  std::ifstream f(in, std::ios::binary);
  std::ofstream o(out, std::ios::binary);
  char header[24];
  f.read(header, sizeof header);
  o.write(header, sizeof header);
  char record[16];
  std::size_t index = 0;
  while (f.read(record, sizeof record)) {
    std::uint32_t captured = 0;
    std::memcpy(&captured, record + 8, 4);  // written on this host: its byte order
    std::string data(captured, '\0');
    f.read(data.data(), captured);
    if (index++ < skip) continue;
    o.write(record, sizeof record);
    o.write(data.data(), captured);
  }
}

}  // namespace lockscope::test

#define LOCKSCOPE_REQUIRE_CAPTURE_TOOLS()                                         \
  LOCKSCOPE_REQUIRE_REDIS_SERVER();                                               \
  if (!lockscope::test::on_path("tcpdump") || !lockscope::test::on_path("redis-cli")) { \
    WARN("tcpdump or redis-cli is not installed: skipping");                      \
    return;                                                                       \
  }

