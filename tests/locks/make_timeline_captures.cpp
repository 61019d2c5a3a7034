// Writes the synthetic captures of scenarios.cpp and their expected timelines:
//   make_timeline_captures DIR      → DIR/<name>.pcap, .timeline.txt, .jsonl
// Run from the repository root as `make_timeline_captures captures` to refresh
// captures/ (then review the diff: the goldens are what the tests compare against).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "lockscope/locks/lock_analysis.hpp"
#include "scenarios.hpp"

namespace {

std::string analyze(const std::string& pcap, lockscope::locks::report_format format) {
  lockscope::locks::analysis_options o;
  o.report.format = format;
  std::string out;
  lockscope::locks::analyze_files({pcap}, o, [&](std::string_view s) { out += s; });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_timeline_captures DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  for (const auto& s : lockscope::timeline_test::scenarios()) {
    const std::filesystem::path base = dir / s.name;
    std::filesystem::create_directories(base.parent_path());
    lockscope::timeline_test::capture_builder b;
    s.build(b);
    const std::string pcap = base.string() + ".pcap";
    b.write(pcap);
    std::ofstream(base.string() + ".timeline.txt") << analyze(pcap, lockscope::locks::report_format::text);
    std::ofstream(base.string() + ".jsonl") << analyze(pcap, lockscope::locks::report_format::jsonl);
    std::printf("%s: %s\n", pcap.c_str(), s.description.c_str());
  }
  return 0;
}
