// `lockscope analyze FILE... | -i IFACE`: each lock's life rebuilt from Redis traffic.
//
// Pipeline: capture → ingest_pipeline (exchanges) → lock_recognizer (operations) → lock
// filter → lock_timeline (events, on a clock) → lock_report (text / jsonl / summary).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "capture_options.hpp"
#include "commands.hpp"
#include "visual_report.hpp"
#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/locks/lock_analysis.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::cli {

namespace {

struct analyze_options {
  capture_options capture;
  std::string format = "text";
  bool summary = false;
  bool no_summary = false;
  std::vector<std::string> locks;
  double idle_threshold_ms = 50;
  double long_hold_s = 60;
  double link_window_ms = 1000;
  unsigned threads = 2;
  bool merge_servers = false;
  double group_window_ms = 1000;
  std::string output;  // -o FILE (html, svg)
  std::size_t html_max_locks = 500;
  std::size_t html_detail = 3000;
};

analyzer::timeline_options make_timeline_options(const analyze_options& o) {
  analyzer::timeline_options t;
  t.idle_threshold_us = static_cast<std::int64_t>(o.idle_threshold_ms * 1e3);
  t.long_hold_us = static_cast<std::int64_t>(o.long_hold_s * 1e6);
  t.link_window_us = static_cast<std::int64_t>(o.link_window_ms * 1e3);
  t.merge_servers = o.merge_servers;
  return t;
}

void write_stdout(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

void print_totals(const analyzer::ingest_stats& s, const analyzer::recognizer_stats& r, std::size_t locks,
                  std::uint64_t events, const std::string& drops) {
  fmt::print(stderr,
             "lockscope analyze: {} packets, {} flows ({} RESP), {} exchanges, {} lock operations ({} inferred), "
             "{} locks, {} events; gaps {}, decode errors {}, kernel drops {}\n",
             s.packets, s.flows, s.resp_flows, s.exchanges + s.pushes, r.operations, r.inferred, locks, events,
             s.gaps, s.decode_errors, drops);
  if (r.scripts_evicted > 0 || r.shas_evicted > 0) {
    fmt::print(stderr, "lockscope analyze: script cache full: {} scripts and {} SHA1s forgotten (least recently used)\n",
               r.scripts_evicted, r.shas_evicted);
  }
  print_flow_summary("analyze", s);
}

int run(const analyze_options& o, bool live_mode) {
  flow_reporter flows("analyze");
  analyzer::report_options ro;
  ro.lock_globs = o.locks;
  ro.summary = !o.no_summary;
  if (o.summary) ro.format = analyzer::report_format::summary_only;
  else if (o.format == "jsonl") ro.format = analyzer::report_format::jsonl;
  else ro.format = live_mode ? analyzer::report_format::stream_text : analyzer::report_format::text;
  if (!live_mode) {
    analyzer::analysis_options ao;
    ao.capture = make_ingest_options(o.capture);
    if (o.capture.verbose) ao.capture.session.observer = &flows;
    ao.timeline = make_timeline_options(o);
    ao.groups.window_us = static_cast<std::int64_t>(o.group_window_ms * 1e3);
    ao.report = ro;
    ao.threads = o.threads;
    if (o.format == "html" || o.format == "svg") {
      return run_visual_report(o.capture.files, ao,
                               {o.format == "svg", o.output, o.html_max_locks, o.html_detail, o.locks});
    }
    try {
      const auto r = analyzer::analyze_files(
          o.capture.files, ao, write_stdout,
          [](const std::string& w) { fmt::print(stderr, "lockscope analyze: warning: {}\n", w); },
          [](const std::string& e) { fmt::print(stderr, "lockscope analyze: error: {}\n", e); });
      std::fflush(stdout);
      print_totals(r.capture, r.recognizer, r.locks, r.events, "n/a");
      if (r.changed_files > 0) return 1;  // the report covers the files only up to the change
    } catch (const analyzer::capture_error& e) {
      fmt::print(stderr, "lockscope analyze: {}\n", e.what());
      return 2;
    } catch (const analyzer::report_error& e) {
      fmt::print(stderr, "lockscope analyze: {}\n", e.what());
      return 2;
    }
    return 0;
  }

  std::unique_ptr<analyzer::live_capture> live = open_live("analyze", o.capture);
  if (!live) return 2;
  analyzer::lock_report report(ro, [](std::string_view s) {
    write_stdout(s);
    std::fflush(stdout);  // live: line-buffered
  });
  auto wall_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  report.set_start_us(wall_us());  // live: times relative to when the capture began
  analyzer::group_options go;
  go.window_us = static_cast<std::int64_t>(o.group_window_ms * 1e3);
  analyzer::lock_groups groups(go, report);
  analyzer::lock_timeline timeline(make_timeline_options(o), groups);
  analyzer::lock_operation_filter filter(report, timeline);
  analyzer::lock_recognizer recognizer(filter.entry());
  analyzer::ingest_options io = make_ingest_options(o.capture);
  if (o.capture.verbose) io.session.observer = &flows;
  analyzer::ingest_pipeline a(io, recognizer, &recognizer);
  const stop_on_signal stop(*live);
  drop_reporter drops("analyze", o.capture.stats_interval);
  silence_notice silence("analyze", o.capture, *live);
  analyzer::captured_packet p;
  while (!stop.requested()) {
    const auto r = live->next(p);
    if (r == analyzer::live_capture::result::end) break;
    if (r == analyzer::live_capture::result::packet) a.on_packet(p.ts_us, p.link_type, p.data);
    // Lease deadlines pass on the wall clock even when the lock's traffic stops.
    timeline.advance_to(wall_us() - 5000);  // packets carry capture times slightly behind now
    groups.advance_to(wall_us() - 5000);
    drops.poll(*live);
    silence.poll(r == analyzer::live_capture::result::packet);
  }
  a.finish();
  timeline.finish(wall_us());
  groups.finish(wall_us());
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
  add_capture_options(*cmd, o->capture);
  cmd->add_option("--format", o->format, "text, jsonl, html (swimlane report) or svg (one --lock's swimlanes)")
      ->check(CLI::IsMember({"text", "jsonl", "html", "svg"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "html, svg: write the report to FILE (default: stdout)");
  cmd->add_option("--html-max-locks", o->html_max_locks,
                  "html: draw the N most active locks (contention and anomalies first)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--html-detail", o->html_detail,
                  "html: a lock with more marks is drawn coarse (how busy each slice of time was) until zoomed in")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
  cmd->add_flag("--merge-servers", o->merge_servers,
                "A lock is its key in any server (one lock service behind several endpoints: a failover, a "
                "resharding); without it the same key on two servers is two locks. Databases stay apart");
  cmd->add_option("--group-window", o->group_window_ms,
                  "ms within which one owner's tries of a key on several servers (RedLock) or of several keys "
                  "(MultiLock) form one group")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "Files: 2 decodes packets on one thread while the timeline runs on another; 1 uses one thread")
      ->check(CLI::Range(1u, 2u))
      ->capture_default_str();
  cmd->callback([o, &exit_code] {
    require_one_source("analyze", o->capture);
    if (o->capture.live() && (o->format == "html" || o->format == "svg")) {
      throw CLI::ValidationError("--format", o->format + " reads capture files, not -i");
    }
    exit_code = run(*o, o->capture.live());
  });
}

}  // namespace lockscope::cli
