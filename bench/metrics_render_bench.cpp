// lock_metrics (the `--metrics-listen` renderer): what the capture thread pays per lock
// event and per scrape. 100 labelled locks (the default --metrics-max-locks) plus _other.
//   build/default/bench/metrics_render_bench
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "lockscope/live/lock_metrics.hpp"

namespace {

using namespace lockscope::ingest;
using namespace lockscope::locks;
using namespace lockscope::live;

std::vector<std::string> lock_names(std::size_t n) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) names.push_back("orders:lock:" + std::to_string(i));
  return names;
}

void fill(lock_metrics& m, const std::vector<std::string>& names) {
  lock_event e;
  std::int64_t t = 0;
  for (int round = 0; round < 50; ++round) {
    for (const std::string& n : names) {
      e.lock = n;
      e.ts_us = ++t;
      e.event = lock_event_kind::acquired;
      e.wait_us = (t * 7919) % 3'000'000;
      m.on_event(e);
      e.event = lock_event_kind::released;
      e.held_us = (t * 104729) % 10'000'000;
      m.on_event(e);
      e.event = lock_event_kind::anomaly;
      e.kind = static_cast<anomaly_kind>(1 + t % 13);
      m.on_event(e);
    }
  }
}

void render_100_locks(benchmark::State& state) {
  lock_metrics m;
  fill(m, lock_names(150));  // 100 labelled, 50 under _other
  std::string out;
  capture_gauges g;
  for (auto _ : state) {
    m.render(out, g);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(render_100_locks);

// One event of a labelled lock, and one of a lock folded into _other (all slots busy).
void event(benchmark::State& state) {
  lock_metrics m;
  const auto names = lock_names(150);
  fill(m, names);
  lock_event e;
  e.event = lock_event_kind::acquired;
  e.wait_us = 1234;
  e.lock = state.range(0) == 0 ? names[7] : names[140];
  std::int64_t t = 1'000'000;
  for (auto _ : state) {
    e.ts_us = ++t;
    m.on_event(e);
  }
}
BENCHMARK(event)->Arg(0)->Arg(1)->ArgNames({"other"});

}  // namespace

BENCHMARK_MAIN();
