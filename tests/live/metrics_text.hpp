// Reading Prometheus text exposition in tests: samples by their full series name, a
// duplicate-series check, and `promtool check metrics` (Debian's prometheus package)
// as the independent linter.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace lockscope::test {

// series text (`name{labels}`) → value; `duplicates` gets every series seen twice.
inline std::map<std::string, double> parse_samples(const std::string& text, std::vector<std::string>* duplicates = nullptr) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string series = line.substr(0, space);
    const double value = std::strtod(line.c_str() + space + 1, nullptr);
    if (!out.emplace(series, value).second && duplicates != nullptr) duplicates->push_back(series);
  }
  return out;
}

inline double sample_or(const std::map<std::string, double>& s, const std::string& series, double fallback = 0) {
  const auto it = s.find(series);
  return it == s.end() ? fallback : it->second;
}

inline bool promtool_available() { return std::filesystem::exists("/usr/bin/promtool"); }

struct promtool_result {
  int status = -1;
  std::string output;
};

// Runs `promtool check metrics` on `text`.
inline promtool_result promtool_check(const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in = (dir / ("lockscope-metrics-" + std::to_string(::getpid()) + ".txt")).string();
  const std::string out = in + ".out";
  std::ofstream(in, std::ios::binary) << text;
  const std::string cmd = "/usr/bin/promtool check metrics < '" + in + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  promtool_result r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream f(out);
  r.output.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  return r;
}

}  // namespace lockscope::test
