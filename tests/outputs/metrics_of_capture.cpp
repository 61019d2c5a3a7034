// Prints the Prometheus exposition text the live metrics server would serve once the
// capture's events were counted, with the process gauges (packets, RSS, ...) zeroed:
// what tests/outputs/output_digests.sh digests for the metrics output.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "lockscope/locks/lock_analysis.hpp"
#include "lockscope/live/lock_metrics.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: metrics_of_capture CAPTURE\n");
    return 2;
  }
  namespace a = lockscope::locks;
  try {
    lockscope::live::lock_metrics metrics;
    a::analysis_options options;
    options.threads = 1;
    const a::analysis_result r = a::analyze_files_into(
        {argv[1]}, options, metrics, {}, [](const a::lock_timeline&) {},
        [](std::string_view) {}, [](std::string_view) {});
    lockscope::live::capture_gauges gauges;
    gauges.exchanges = r.capture.exchanges;
    std::string text;
    metrics.render(text, gauges);
    std::fwrite(text.data(), 1, text.size(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metrics_of_capture: %s\n", e.what());
    return 1;
  }
  return 0;
}
