// Shell commands for the tests that run the CLI or a tool as a program: what a command
// line prints on stdout. One copy for every test folder (the ingest, lock-timeline and
// live tests each had their own).
#pragma once

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace lockscope::test {

// What a shell command prints on stdout; `status` gets pclose()'s.
inline std::string command_output(const std::string& command, int& status) {
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  status = ::pclose(p);
  return out;
}

// What a shell command prints on stdout, whatever its exit status.
inline std::string read_command_output(const std::string& command) {
  int status = 0;
  return command_output(command, status);
}

}  // namespace lockscope::test
