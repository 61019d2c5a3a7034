// `lockscope analyze FILE... | -i IFACE`: each lock's life rebuilt from Redis traffic.
//
// Pipeline: capture → analyzer (exchanges) → lock_recognizer (operations) → lock
// filter → lock_timeline (events, on a clock) → lock_report (text / jsonl / summary).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "lockscope/analyzer/analyzer.hpp"
#include "lockscope/analyzer/capture.hpp"
#include "lockscope/analyzer/lock_analysis.hpp"
#include "lockscope/analyzer/lock_recognizer.hpp"
#include "lockscope/analyzer/lock_report.hpp"
#include "lockscope/analyzer/lock_timeline.hpp"

namespace lockscope::cli {

namespace {

struct analyze_options {
  std::vector<std::string> files;
  std::string interface;
  std::vector<std::uint16_t> ports;
  std::string filter;
  int buffer_mb = 32;
  double flow_timeout = 600;
  std::string format = "text";
  bool summary = false;
  bool no_summary = false;
  std::vector<std::string> locks;
  double idle_threshold_ms = 50;
  double long_hold_s = 60;
  double link_window_ms = 1000;
};

std::atomic<bool> stop_requested{false};
std::atomic<analyzer::live_capture*> active_live{nullptr};

extern "C" void on_analyze_stop_signal(int) {
  stop_requested = true;
  if (analyzer::live_capture* live = active_live.load()) live->stop();
}

analyzer::timeline_options make_timeline_options(const analyze_options& o) {
  analyzer::timeline_options t;
  t.idle_threshold_us = static_cast<std::int64_t>(o.idle_threshold_ms * 1e3);
  t.long_hold_us = static_cast<std::int64_t>(o.long_hold_s * 1e6);
  t.link_window_us = static_cast<std::int64_t>(o.link_window_ms * 1e3);
  return t;
}

analyzer::analyzer_options make_analyzer_options(const analyze_options& o) {
  analyzer::analyzer_options a;
  a.ports = o.ports;
  a.flow_timeout_us = static_cast<std::int64_t>(o.flow_timeout * 1e6);
  return a;
}

void write_stdout(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

void print_totals(const analyzer::analyzer_stats& s, const analyzer::recognizer_stats& r, std::size_t locks,
                  std::uint64_t events, const std::string& drops) {
  fmt::print(stderr,
             "lockscope analyze: {} packets, {} flows ({} RESP), {} exchanges, {} lock operations ({} inferred), "
             "{} locks, {} events; gaps {}, decode errors {}, kernel drops {}\n",
             s.packets, s.flows, s.resp_flows, s.exchanges + s.pushes, r.operations, r.inferred, locks, events,
             s.gaps, s.decode_errors, drops);
}

int run(const analyze_options& o, bool live_mode) {
  analyzer::report_options ro;
  ro.lock_globs = o.locks;
  ro.summary = !o.no_summary;
  if (o.summary) ro.format = analyzer::report_format::summary_only;
  else if (o.format == "jsonl") ro.format = analyzer::report_format::jsonl;
  else ro.format = live_mode ? analyzer::report_format::stream_text : analyzer::report_format::text;
  if (!live_mode) {
    analyzer::analysis_options ao;
    ao.ports = o.ports;
    ao.flow_timeout_us = static_cast<std::int64_t>(o.flow_timeout * 1e6);
    ao.timeline = make_timeline_options(o);
    ao.report = ro;
    try {
      const auto r = analyzer::analyze_files(o.files, ao, write_stdout, [](const std::string& w) {
        fmt::print(stderr, "lockscope analyze: warning: {}\n", w);
      });
      std::fflush(stdout);
      print_totals(r.capture, r.recognizer, r.locks, r.events, "n/a");
    } catch (const analyzer::capture_error& e) {
      fmt::print(stderr, "lockscope analyze: {}\n", e.what());
      return 2;
    }
    return 0;
  }

  analyzer::live_options lo;
  lo.interface = o.interface;
  lo.ports = o.ports.empty() ? std::vector<std::uint16_t>{6379} : o.ports;
  lo.filter = o.filter;
  lo.buffer_mb = o.buffer_mb;
  std::unique_ptr<analyzer::live_capture> live;
  try {
    live = std::make_unique<analyzer::live_capture>(lo);
  } catch (const analyzer::capture_error& e) {
    fmt::print(stderr, "lockscope analyze: {}\n", e.what());
    return 2;
  }
  analyzer::lock_report report(ro, [](std::string_view s) {
    write_stdout(s);
    std::fflush(stdout);  // live: line-buffered
  });
  auto wall_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  report.set_start_us(wall_us());  // live: times relative to when the capture began
  analyzer::lock_timeline timeline(make_timeline_options(o), report);
  analyzer::lock_operation_filter filter(report, timeline, !o.locks.empty());
  analyzer::lock_recognizer recognizer(filter);
  analyze_options effective = o;
  if (effective.ports.empty() && o.filter.empty()) effective.ports = lo.ports;
  analyzer::analyzer a(make_analyzer_options(effective), recognizer);
  active_live = live.get();
  std::signal(SIGINT, on_analyze_stop_signal);
  std::signal(SIGTERM, on_analyze_stop_signal);
  analyzer::captured_packet p;
  while (!stop_requested) {
    const auto r = live->next(p);
    if (r == analyzer::live_capture::result::end) break;
    if (r == analyzer::live_capture::result::packet) a.on_packet(p.ts_us, p.link_type, p.data);
    // Lease deadlines pass on the wall clock even when the lock's traffic stops.
    timeline.advance_to(wall_us() - 5000);  // packets carry capture times slightly behind now
  }
  active_live = nullptr;
  a.finish();
  report.finish(timeline);
  if (ro.format == analyzer::report_format::jsonl && !o.no_summary) {
    // stdout stays pure JSON lines: the closing table goes to stderr.
    analyzer::report_options so = ro;
    so.format = analyzer::report_format::summary_only;
    analyzer::lock_report to_stderr(so, [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stderr); });
    to_stderr.write_summary(timeline);
  }
  std::fflush(stdout);
  const auto d = live->stats();
  print_totals(a.stats(), recognizer.stats(), timeline.lock_count(), report.events(),
               std::to_string(d.dropped + d.interface_dropped));
  return 0;
}

}  // namespace

void add_analyze_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<analyze_options>();
  CLI::App* cmd = app.add_subcommand("analyze", "Rebuild each lock's timeline (holders, waiters, anomalies) from traffic");
  cmd->add_option("files", o->files, "pcap/pcapng files (merged by time), - for stdin");
  cmd->add_option("-i,--interface", o->interface, "Capture live on this interface (any for all)");
  cmd->add_option("--port", o->ports, "Redis server port (repeatable; live default 6379). Files: only these flows")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--filter", o->filter, "Live: a raw BPF filter instead of the one built from --port");
  cmd->add_option("--buffer-mb", o->buffer_mb, "Live: kernel capture buffer in MiB")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--flow-timeout", o->flow_timeout, "Seconds of silence before a connection is forgotten")
      ->capture_default_str();
  cmd->add_option("--format", o->format, "text or jsonl")->check(CLI::IsMember({"text", "jsonl"}))->capture_default_str();
  cmd->add_flag("--summary", o->summary, "Only the per-lock summary table");
  cmd->add_flag("--no-summary", o->no_summary, "Text: leave out the summary table");
  cmd->add_option("--lock", o->locks, "Only locks matching NAME or GLOB (repeatable, comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--idle-threshold", o->idle_threshold_ms, "idle_with_waiters: ms a lock may stay free while waited for")
      ->capture_default_str();
  cmd->add_option("--long-hold", o->long_hold_s, "long_hold: seconds a hold may last")->capture_default_str();
  cmd->add_option("--link-window", o->link_window_ms,
                  "ms after a failed attempt in which a SUBSCRIBE from the same IP is linked to it")
      ->capture_default_str();
  cmd->callback([o, &exit_code] {
    if (o->interface.empty() == o->files.empty()) {
      throw CLI::ValidationError("analyze", "give capture files or -i IFACE (one of them)");
    }
    exit_code = run(*o, !o->interface.empty());
  });
}

}  // namespace lockscope::cli
