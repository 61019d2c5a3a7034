// `lockscope analyze FILE... | -i IFACE`: each lock's life rebuilt from Redis traffic.
//
// The options, and which library runs them: files through locks::analyze_files (or the
// visual report's two passes), -i and --replay through live::run_live; the events go to
// a lock_report (text / jsonl / summary) or a trace_export.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "capture_edges.hpp"
#include "capture_options.hpp"
#include "commands.hpp"
#include "output_file.hpp"
#include "privileges.hpp"
#include "option_checks.hpp"
#include "recorder.hpp"
#include "visual_report.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/counted.hpp"
#include "lockscope/live/live_loop.hpp"
#include "lockscope/live/metrics_server.hpp"
#include "lockscope/live/recorder_hooks.hpp"
#include "lockscope/locks/lock_analysis.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/event_selection.hpp"
#include "lockscope/locks/trace_export.hpp"

namespace lockscope::cli {

namespace {

struct analyze_options {
  capture_options capture;
  std::string format = "text";
  std::string time = "rel";  // --time: text lines' times relative to the capture's start, or absolute
  std::string output;  // -o; empty: stdout
  privilege_options privileges;
  bool summary = false;
  bool no_summary = false;
  std::size_t top = 0;
  std::vector<std::string> locks;
  double idle_threshold_ms = 50;
  double long_hold_s = 60;
  double link_window_ms = 1000;
  unsigned threads = 2;
  bool merge_servers = false;
  double group_window_ms = 1000;
  std::string metrics_listen;
  std::size_t metrics_max_locks = 100;
  std::size_t max_locks = 1'000'000;
  recorder_options recorder;
  std::size_t html_max_locks = 500;
  std::size_t html_detail = 3000;
  std::uint64_t stdin_spool_max = std::uint64_t{4} << 30;  // html/svg from -: bytes copied at most
};

locks::timeline_options make_timeline_options(const analyze_options& o) {
  locks::timeline_options t;
  t.idle_threshold_us = static_cast<std::int64_t>(o.idle_threshold_ms * 1e3);
  t.long_hold_us = static_cast<std::int64_t>(o.long_hold_s * 1e6);
  t.link_window_us = static_cast<std::int64_t>(o.link_window_ms * 1e3);
  t.merge_servers = o.merge_servers;
  t.max_locks = o.max_locks;
  return t;
}

// --format trace: the events go to a trace_export instead of the report.
std::unique_ptr<locks::trace_export> make_trace(const analyze_options& o, output_file& out) {
  if (o.format != "trace" || o.summary) return nullptr;
  locks::trace_options t;
  if (o.capture.live()) t.source = "live: " + o.capture.interface;
  for (const auto& f : o.capture.files) t.source += (t.source.empty() ? "" : " ") + f;
  return std::make_unique<locks::trace_export>(t, [&out](std::string_view s) { out.write(s); });
}

void print_totals(const ingest::ingest_stats& s, const locks::recognizer_stats& r, std::size_t locks,
                  std::uint64_t events, const std::string& drops) {
  using ingest::counted;
  live::print_diagnostic(
             "lockscope analyze: {}, {} ({} RESP), {}, {} ({} inferred), {}, {}; gaps {}, decode errors {}, "
             "kernel drops {}\n",
             counted(s.packets, "packet"), counted(s.flows, "flow"), s.resp_flows,
             counted(s.exchanges + s.pushes, "exchange"), counted(r.operations, "lock operation"), r.inferred,
             counted(locks, "lock"), counted(events, "event"), s.gaps, s.decode_errors, drops);
  if (r.redirects > 0 || r.malformed_redirects > 0 || r.skipped > 0) {
    live::print_diagnostic("lockscope analyze: {} lock calls redirected by Redis Cluster (MOVED/ASK/TRYAGAIN/CLUSTERDOWN), "
               "{} malformed redirects kept as errors, {} (S)SUBSCRIBEs with no channel skipped\n",
               r.redirects, r.malformed_redirects, r.skipped);
  }
  if (r.unread_sha_calls > 0) {
    live::print_diagnostic("lockscope analyze: {} of {} known only by SHA1 read as no lock operation: "
                           "their text never appeared (a client sends it by EVAL or SCRIPT LOAD when it "
                           "starts or after NOSCRIPT), so a lock taken inside them is not seen\n",
                           counted(r.unread_sha_calls, "EVALSHA call"), counted(r.unread_shas, "script"));
  }
  if (r.scripts_evicted > 0 || r.shas_evicted > 0) {
    live::print_diagnostic("lockscope analyze: script cache full: {} scripts and {} SHA1s forgotten (least recently used)\n",
               r.scripts_evicted, r.shas_evicted);
  }
  print_flow_summary("analyze", s);
  report_one_direction("analyze", s);
}

int run(const analyze_options& o, bool live_mode);
int run_live_mode(const analyze_options& o, const locks::report_options& ro, flow_reporter& flows);

// A file -o cannot create or write ends the run with exit code 2, naming it.
int run_reporting_errors(const analyze_options& o, bool live_mode) {
  try {
    return run(o, live_mode);
  } catch (const output_error& e) {
    live::print_diagnostic("lockscope analyze: {}\n", e.what());
    return 2;
  }
}

int run(const analyze_options& o, bool live_mode) {
  flow_reporter flows("analyze");
  locks::report_options ro;
  ro.lock_globs = o.locks;
  ro.summary = !o.no_summary;
  ro.top = o.top;
  if (o.summary) ro.format = locks::report_format::summary_only;
  else if (o.format == "jsonl") ro.format = locks::report_format::jsonl;
  else ro.format = live_mode ? locks::report_format::stream_text : locks::report_format::text;
  ro.line_buffered = live_mode;
  ro.start_line = true;  // text: the capture's start, in absolute time, first
  ro.absolute_time = o.time == "abs";
  const char* tz = std::getenv("TZ");
  ro.local_time = tz != nullptr && *tz != '\0';  // else UTC, whatever /etc/localtime says
  if (!live_mode) {
    locks::analysis_options ao;
    ao.capture = make_ingest_options(o.capture);
    if (o.capture.verbose) ao.capture.session.observer = &flows;
    ao.timeline = make_timeline_options(o);
    ao.groups.window_us = static_cast<std::int64_t>(o.group_window_ms * 1e3);
    ao.report = ro;
    ao.threads = o.threads;
    if (o.format == "html" || o.format == "svg") {  // two passes over the files: its own -o
      std::vector<std::string> files = o.capture.files;
      std::optional<stdin_spool> spool;
      for (std::string& f : files) {
        if (f != "-") continue;
        if (!spool.emplace(o.stdin_spool_max).ok()) {
          live::print_diagnostic("lockscope analyze: {}\n", spool->error());
          return 2;
        }
        f = spool->path();
      }
      return run_visual_report(files, ao,
                               {o.format == "svg", o.output, o.html_max_locks, o.html_detail, o.locks,
                                spool ? &*spool : nullptr});
    }
    output_file out(o.output);
    const auto trace = make_trace(o, out);
    ao.events_to = trace.get();
    const stop_reading_on_signal interrupt;
    try {
      const auto r = locks::analyze_files(
          o.capture.files, ao, [&out](std::string_view s) { out.write(s); },
          [](const std::string& w) { live::print_diagnostic("lockscope analyze: warning: {}\n", w); },
          [](const std::string& e) { live::print_diagnostic("lockscope analyze: error: {}\n", e); });
      if (trace) trace->finish(r.last_packet_us);
      out.commit();
      print_totals(r.capture, r.recognizer, r.locks, trace ? trace->events() : r.events, file_drops_text(r.recorded_drops));
      if (const int status = interrupt.exit_status("analyze"); status != 0) return status;
      if (r.failed_files > 0) return 1;  // the report covers the files only up to the change or read error
      if (const int status = report_port_miss("analyze", o.capture.files, ao.capture, r.capture); status != 0) {
        return status;
      }
      // A lock forgotten at --max-locks matched too: its events were reported.
      // (Every lock is analysed: one matched when an event of it was written.)
      const std::uint64_t events = trace ? trace->events() : r.events;
      if (const int status = no_lock_matched(o.locks, events); status != 0) return status;
    } catch (const ingest::capture_error& e) {
      live::print_diagnostic("lockscope analyze: {}\n", e.what());
      return 2;
    } catch (const locks::report_error& e) {
      live::print_diagnostic("lockscope analyze: {}\n", e.what());
      return 2;
    }
    return 0;
  }

  return run_live_mode(o, ro, flows);
}

int run_live_mode(const analyze_options& o, const locks::report_options& ro, flow_reporter& flows) {
  // Opened before the capture (and any privilege drop after it): it may need a low port.
  std::unique_ptr<live::metrics_server> metrics;
  if (!o.metrics_listen.empty() && !(metrics = live::open_metrics_server("analyze", o.metrics_listen, o.metrics_max_locks))) {
    return 2;
  }
  capture_options co = o.capture;
  co.immediate = ro.format != locks::report_format::summary_only;  // events printed as they happen
  const std::unique_ptr<ingest::packet_source> source = open_packet_source("analyze", co, o.recorder);
  if (!source) return 2;
  // Replays need no privilege; a live capture drops it once open, before anything is
  // written (-o, --write, --save-anomalies DIR are created as the user dropped to).
  auto* const live_source = dynamic_cast<ingest::live_capture*>(source.get());
  if (live_source != nullptr && !drop_privileges("analyze", o.privileges)) return 2;
  live::recorder_hooks hooks("analyze", o.recorder, source->now_us());
  if (!hooks.ready()) return 2;
  output_file out(o.output);  // as the user dropped to
  const auto trace = make_trace(o, out);
  locks::lock_report report(ro, [&out](std::string_view s) {
    out.write(s);
    out.flush();  // live: line-buffered
  });
  report.set_start_us(source->now_us());  // live: times relative to when the capture began
  const stop_on_signal stop(*source);
  drop_reporter drops("analyze", o.capture.stats_interval);
  std::optional<silence_notice> silence;
  std::optional<clock_step_notice> clock_steps;  // a replay's clock is its packets'
  if (live_source != nullptr) {
    silence.emplace("analyze", co, *live_source);
    clock_steps.emplace("analyze");
  }
  live::live_options lo;
  lo.pipeline.capture = make_ingest_options(co);
  if (o.capture.verbose) lo.pipeline.capture.session.observer = &flows;
  lo.pipeline.timeline = make_timeline_options(o);
  lo.pipeline.timeline.capture_start_us = source->now_us();  // holds begun before it are held from then
  // Live: a guessed subscriber link's events (and those behind them) wait at most 1 s for
  // the traffic's decision, so the output stays prompt (files: 10 s of capture time).
  lo.pipeline.timeline.link_hold_us = 1'000'000;
  // Live: an acquisition is shown when it happens, not when its key is next used (files:
  // a key set once and never used again is a marker, not a lock: set_once_keys.hpp).
  lo.pipeline.set_once.hold = false;
  lo.pipeline.groups.window_us = static_cast<std::int64_t>(o.group_window_ms * 1e3);
  lo.immediate = co.immediate;
  lo.stop_requested = [&stop] { return stop.requested(); };
  lo.on_turn = [&](bool got) {
    drops.poll(*source);
    if (clock_steps) clock_steps->poll();
    if (silence) silence->poll(got);
  };
  lo.warn = [](const std::string& w) { live::print_diagnostic("lockscope analyze: warning: {}\n", w); };
  // --lock chooses what is written (the report its own events, the trace here); the
  // timeline, the metrics and the recordings see every lock (event_selection.hpp).
  std::optional<locks::selected_events> chosen_trace;
  if (trace && report.selects_locks()) {
    chosen_trace.emplace([&report](std::string_view lock) { return report.selected(lock); }, *trace);
  }
  const live::live_result r = live::run_live(
      lo, {*source, hooks, metrics.get()},
      chosen_trace ? static_cast<locks::lock_event_sink&>(*chosen_trace)
                   : trace ? static_cast<locks::lock_event_sink&>(*trace) : report,
      {},
      [&](const locks::lock_timeline& timeline) {
        if (trace) trace->finish(source->now_us());
        else report.finish(timeline);
        if ((trace || ro.format == locks::report_format::jsonl) && !o.no_summary) {
          // stdout stays pure JSON lines: the closing table goes to stderr.
          locks::report_options so = ro;
          so.format = locks::report_format::summary_only;
          locks::lock_report to_stderr(so, [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stderr); });
          to_stderr.write_summary(timeline);
        }
      });
  out.commit();
  hooks.finish();
  const auto d = source->stats();
  print_totals(r.capture, r.recognizer, r.locks, trace ? trace->events() : report.events(),
               std::to_string(d.dropped + d.interface_dropped));
  const int status = capture_exit_status("analyze", *source);
  return status != 0 ? status : hooks.write_failed() ? 1 : 0;
}

}  // namespace

void add_analyze_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<analyze_options>();
  CLI::App* cmd = app.add_subcommand("analyze", "Rebuild each lock's timeline (holders, waiters, anomalies) from traffic");
  add_capture_options(*cmd, o->capture);
  cmd->add_option("--format", o->format,
                  "text, jsonl, trace (Chrome/Perfetto Trace Event JSON), html (swimlane report) or svg (one "
                  "--lock's swimlanes)")
      ->check(CLI::IsMember({"text", "jsonl", "trace", "html", "svg"}))
      ->capture_default_str();
  cmd->add_option("--time", o->time,
                  "Text: rel prints each line's time as seconds after the capture's start (its first line "
                  "names the start in UTC); abs prints absolute ISO-8601 times with microseconds, to line them "
                  "up with application logs (UTC, or the local zone with its offset when TZ is set)")
      ->check(CLI::IsMember({"rel", "abs"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output,
                  "Write the output to FILE (as FILE.tmp, renamed when complete) instead of stdout; live, it is "
                  "created after the privilege drop (-Z), as that user")
      ->type_name("FILE");
  cmd->add_option("--html-max-locks", o->html_max_locks,
                  "html: draw the N most active locks (contention and anomalies first)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--html-detail", o->html_detail,
                  "html: a lock with more marks is drawn coarse (how busy each slice of time was) until zoomed in")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--stdin-spool-max", o->stdin_spool_max,
                  "html/svg from - (standard input): the report reads its input twice, so stdin is first copied "
                  "to a file in $TMPDIR (removed at once); at most this much (e.g. 4GiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  add_privilege_options(*cmd, o->privileges);
  add_recorder_options(*cmd, o->recorder);
  cmd->add_flag("--summary", o->summary, "Only the per-lock summary table");
  cmd->add_flag("--no-summary", o->no_summary, "Text: leave out the summary table")->excludes("--summary");
  cmd->add_option("--top", o->top,
                  "Summary table: only the N locks with the most contended acquisitions and anomalies (then "
                  "acquisitions, renewals and expiries), most first, and a line with what the others counted "
                  "(0: every lock, in first-seen order)")
      ->check(zero_or_more())  // -1 would be read as 2^64 - 1
      ->capture_default_str();
  cmd->add_option("--lock", o->locks, "Write only the locks matching NAME or GLOB (repeatable, comma-separated; every lock is analysed)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--idle-threshold", o->idle_threshold_ms, "idle_with_waiters: ms a lock may stay free while waited for")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd->add_option("--long-hold", o->long_hold_s, "long_hold: seconds a hold may last")
      ->check(more_than_zero())
      ->capture_default_str();
  cmd->add_option("--link-window", o->link_window_ms,
                  "ms after a failed attempt in which a SUBSCRIBE from the same IP is linked to it")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd->add_flag("--merge-servers", o->merge_servers,
                "A lock is its key in any server (one lock service behind several endpoints: a failover, a "
                "resharding); without it the same key on two servers is two locks. Databases stay apart");
  cmd->add_option("--group-window", o->group_window_ms,
                  "ms within which one owner's tries of a key on several servers (RedLock) or of several keys "
                  "(MultiLock) form one group")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd->add_option("--max-locks", o->max_locks,
                  "Lock rows kept (0: no limit). A lock's row is its summary; when the rows reach this, the idle "
                  "locks (no holder, waiter or timer) are forgotten and only their totals stay")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "Files: 2 decodes packets on one thread while the timeline runs on another; 1 uses one thread")
      ->check(CLI::Range(1u, 2u))
      ->capture_default_str();
  cmd->add_option("--metrics-listen", o->metrics_listen,
                  "Live: serve Prometheus metrics at http://ADDR:PORT/metrics (IPv6: [ADDR]:PORT)")
      ->check(not_empty("ADDR:PORT"));
  cmd->add_option("--metrics-max-locks", o->metrics_max_locks,
                  "Live metrics: locks with a label of their own (the others: lock=\"_other\")")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}))
      ->capture_default_str();
  cmd->callback([o, cmd, &exit_code] {
    if (o->recorder.replay.empty()) require_one_source("analyze", o->capture);
    refuse_live_options(*cmd, o->capture, !o->recorder.replay.empty());
    require_live_for_recording("analyze", o->capture, o->recorder);
    refuse_overwriting_inputs(o->capture, o->recorder, o->output);
    refuse_reused_rotation_names(o->recorder);
    if ((o->capture.live() || !o->recorder.replay.empty()) && (o->format == "html" || o->format == "svg")) {
      throw CLI::ValidationError("--format", o->format + " reads capture files (two passes), not -i or --replay");
    }
    const bool live_loop = o->capture.live() || !o->recorder.replay.empty();
    if (!o->metrics_listen.empty() && !live_loop) {
      throw CLI::ValidationError("--metrics-listen", "needs a live capture (-i IFACE) or --replay");
    }
    exit_code = run_reporting_errors(*o, live_loop);
  });
}

}  // namespace lockscope::cli
