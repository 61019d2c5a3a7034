// `lockscope decode FILE... | -i IFACE`: every Redis exchange in a capture, one per line.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "capture_edges.hpp"
#include "capture_options.hpp"
#include "lockscope/resp/ascii.hpp"
#include "lockscope/ingest/counted.hpp"
#include "commands.hpp"
#include "output_file.hpp"
#include "option_checks.hpp"
#include "privileges.hpp"
#include "recorder.hpp"
#include "lockscope/resp/ascii.hpp"
#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/output.hpp"

namespace lockscope::cli {

namespace {

struct decode_options {
  privilege_options privileges;
  capture_options capture;
  std::vector<std::string> commands;
  std::string grep;
  std::string format = "text";
  std::size_t max_argument = 40;
  bool no_progress = false;
  recorder_options replay;  // --replay, --replay-speed
};

using resp::iequals;

// The command words --command selects. EVAL stands for every way to run a script
// (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO: a client sends EVALSHA once the script is
// loaded, and a user asking for EVAL wants those calls too), EVALSHA for EVALSHA and
// EVALSHA_RO; every other word is itself.
std::vector<std::string> command_words(const std::vector<std::string>& given) {
  std::vector<std::string> words;
  for (const std::string& c : given) {
    words.push_back(c);
    if (iequals(c, "EVAL")) words.insert(words.end(), {"EVALSHA", "EVAL_RO", "EVALSHA_RO"});
    else if (iequals(c, "EVALSHA")) words.push_back("EVALSHA_RO");
  }
  return words;
}

// Writes exchanges as they complete; applies --command and --grep.
class printer final : public ingest::exchange_sink {
 public:
  printer(const decode_options& o, bool line_buffered)
      : options_(o), command_words_(command_words(o.commands)), line_buffered_(line_buffered) {
    buffer_.reserve(1u << 20);
    for (const std::string& c : o.commands) {
      if (iequals(c, "PUSH") || iequals(c, "MONITOR") || c.find("SUBSCRIBE") != std::string::npos ||
          c.find("subscribe") != std::string::npos) {
        pushes_pass_filter_ = true;
      }
    }
  }
  ~printer() override { flush(); }

  void on_exchange(const ingest::exchange& e) override {
    if (!selected(e)) return;
    if (options_.format == "jsonl") ingest::append_jsonl(buffer_, e);
    else ingest::append_text_line(buffer_, e, {options_.max_argument, true});
    buffer_.push_back('\n');
    ++printed_;
    if (line_buffered_ || buffer_.size() > (1u << 20) - 4096) flush();
  }

  void on_session_event(const ingest::session_event& ev) override {
    const char* direction = ev.from_client ? "client" : "server";
    switch (ev.kind) {
      case ingest::session_event_kind::decode_error:
        clear_progress();
        live::print_diagnostic("lockscope decode: {} → {}: {} stream offset {}: {}; resynchronising\n",
                   ev.from->to_string(), ev.to->to_string(), direction, ev.offset, ev.error.message());
        break;
      case ingest::session_event_kind::gap:
        clear_progress();
        live::print_diagnostic("lockscope decode: {} → {}: {} bytes missing at {} stream offset {}\n",
                   ev.from->to_string(), ev.to->to_string(), ev.bytes, direction, ev.offset);
        break;
      default:
        break;
    }
  }

  // A stdout that takes no more (a full disk, /dev/full) stops the run: the rest of the
  // capture would be decoded for nothing, and the output is not what it claims.
  void flush() {
    if (buffer_.empty()) return;
    errno = 0;
    const bool written = std::fwrite(buffer_.data(), 1, buffer_.size(), stdout) == buffer_.size() &&
                         (!line_buffered_ || std::fflush(stdout) == 0);
    buffer_.clear();
    if (!written) throw output_error(fmt::format("cannot write stdout: {}", std::strerror(errno != 0 ? errno : EIO)));
  }
  std::uint64_t printed() const noexcept { return printed_; }
  bool progress_shown = false;
  void clear_progress() {
    if (progress_shown) {
      std::fputs("\r\033[K", stderr);
      progress_shown = false;
    }
  }

 private:
  bool selected(const ingest::exchange& e) const {
    if (!options_.commands.empty()) {
      if (e.kind == ingest::exchange_kind::push) {
        if (!pushes_pass_filter_) return false;
      } else {
        if (e.command.empty()) return false;
        bool found = false;
        for (const std::string& c : command_words_) {
          if (iequals(c, e.command[0])) {
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
    }
    if (!options_.grep.empty()) {
      for (std::string_view arg : e.command) {
        if (arg.find(options_.grep) != std::string_view::npos) return true;
      }
      if (e.reply != nullptr) {
        for (const ingest::message_node& n : e.reply->nodes()) {
          if (e.reply->text(n).find(options_.grep) != std::string_view::npos) return true;
        }
      }
      return false;
    }
    return true;
  }

  const decode_options& options_;
  std::vector<std::string> command_words_;
  bool line_buffered_;
  bool pushes_pass_filter_ = false;
  std::string buffer_;
  std::uint64_t printed_ = 0;
};

void print_summary(const ingest::ingest_stats& s, std::uint64_t printed, const char* drops) {
  using ingest::counted;
  live::print_diagnostic(
             "lockscope decode: {} ({:.1f} MB), {} ({} RESP), {}, {}, "
             "{} printed; gaps {} ({}), decode errors {}, kernel drops {}\n",
             counted(s.packets, "packet"), static_cast<double>(s.bytes) / 1e6, counted(s.flows, "flow"), s.resp_flows,
             counted(s.exchanges, "exchange"), counted(s.pushes, "push", "pushes"), printed, s.gaps,
             counted(s.gap_bytes, "byte"), s.decode_errors, drops);
  if (s.resyncs > 0 || s.unpaired_replies > 0 || s.not_resp_flows > 0 || s.skipped_bytes > 0) {
    live::print_diagnostic(
               "lockscope decode: {} ({} not RESP, skipped), {} to commands sent before the capture, {}\n",
               counted(s.resyncs, "resync"), counted(s.skipped_bytes, "byte"),
               counted(s.unpaired_replies, "reply", "replies"), counted(s.not_resp_flows, "non-RESP flow"));
  }
  if (s.stray_bytes > 0) {
    live::print_diagnostic("lockscope decode: {} between messages skipped\n", counted(s.stray_bytes, "stray line-end byte"));
  }
  if (s.unsupported_link > 0 || s.malformed > 0 || s.fragments > 0) {
    live::print_diagnostic("lockscope decode: skipped {} frames of unsupported link types, {} malformed, {} IP fragments\n",
               s.unsupported_link, s.malformed, s.fragments);
  }
  print_flow_summary("decode", s);
  report_one_direction("decode", s);
}

int run_files(const decode_options& o) {
  std::unique_ptr<ingest::offline_capture> source;
  try {
    source = std::make_unique<ingest::offline_capture>(
        o.capture.files, [](const std::string& w) { live::print_diagnostic("lockscope decode: warning: {}\n", w); },
        [](const std::string& e) { live::print_diagnostic("lockscope decode: error: {}\n", e); });
  } catch (const ingest::capture_error& e) {
    live::print_diagnostic("lockscope decode: {}\n", e.what());
    return 2;
  }
  printer out(o, false);
  flow_reporter flows("decode");
  ingest::ingest_options io = make_ingest_options(o.capture);
  if (o.capture.verbose) io.session.observer = &flows;
  ingest::ingest_pipeline a(io, out);
  const stop_reading_on_signal interrupt;
  const bool progress = !o.no_progress && isatty(STDERR_FILENO) == 1 && source->total_bytes() > (16u << 20);
  auto last_progress = std::chrono::steady_clock::now();
  ingest::captured_packet p;
  std::uint64_t n = 0;
  while (source->next(p)) {
    a.on_packet(p.ts_us, p.link_type, p.data);
    if (progress && (++n & 0xffff) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::milliseconds(200)) {
        last_progress = now;
        const double fraction = static_cast<double>(source->bytes_read()) / static_cast<double>(source->total_bytes());
        const int filled = static_cast<int>(fraction * 30);
        live::print_diagnostic("\r[{:=<{}}{: <{}}] {:3.0f}% ", "", filled, "", 30 - filled, fraction * 100);
        out.progress_shown = true;
      }
    }
  }
  a.finish();
  out.flush();
  out.clear_progress();
  if (std::fflush(stdout) != 0) throw output_error(fmt::format("cannot write stdout: {}", std::strerror(errno)));
  print_summary(a.stats(), out.printed(), file_drops_text(source->recorded_drops()).c_str());
  if (const int status = interrupt.exit_status("decode"); status != 0) return status;
  if (source->failed_files() > 0) return 1;  // the output is complete only up to the change or read error
  return report_port_miss("decode", o.capture.files, io, a.stats());
}

int run_live(const decode_options& o) {
  const std::unique_ptr<ingest::packet_source> source = open_packet_source("decode", o.capture, o.replay);
  if (!source) return 2;
  // Replays need no privilege; a live capture drops it once open.
  if (dynamic_cast<ingest::live_capture*>(source.get()) != nullptr && !drop_privileges("decode", o.privileges)) return 2;
  printer out(o, true);
  flow_reporter flows("decode");
  ingest::ingest_options io = make_ingest_options(o.capture);
  if (o.capture.verbose) io.session.observer = &flows;
  ingest::ingest_pipeline a(io, out);
  const stop_on_signal stop(*source);
  drop_reporter drops("decode", o.capture.stats_interval);
  std::optional<silence_notice> silence;
  std::optional<clock_step_notice> clock_steps;  // a replay's clock is its packets'
  if (auto* live = dynamic_cast<ingest::live_capture*>(source.get())) {
    silence.emplace("decode", o.capture, *live);
    clock_steps.emplace("decode");
  }
  auto on_packet = [&a](const ingest::captured_packet& p) { a.on_packet(p.ts_us, p.link_type, p.data); };
  while (!stop.requested()) {
    const auto r = source->dispatch(packets_per_pass, on_packet);
    if (r == ingest::packet_source::result::end) break;
    drops.poll(*source);
    if (clock_steps) clock_steps->poll();
    if (silence) silence->poll(r == ingest::packet_source::result::packet);
  }
  a.finish();
  out.flush();
  if (std::fflush(stdout) != 0) throw output_error(fmt::format("cannot write stdout: {}", std::strerror(errno)));
  const auto d = source->stats();
  print_summary(a.stats(), out.printed(), std::to_string(d.dropped + d.interface_dropped).c_str());
  return capture_exit_status("decode", *source);
}

}  // namespace

void add_decode_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<decode_options>();
  CLI::App* cmd = app.add_subcommand("decode", "Print every Redis command, reply and push in a capture or live traffic");
  add_capture_options(*cmd, o->capture);
  add_replay_options(*cmd, o->replay);
  add_privilege_options(*cmd, o->privileges);
  cmd->add_option("--command", o->commands, "Only these commands (comma-separated, e.g. EVAL,SUBSCRIBE; EVAL also selects EVALSHA, EVAL_RO and EVALSHA_RO)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--grep", o->grep, "Only exchanges with an argument or reply containing TEXT");
  cmd->add_option("--format", o->format, "text or jsonl")->check(CLI::IsMember({"text", "jsonl"}))
      ->capture_default_str();
  cmd->add_flag("--show-secrets", o->capture.show_secrets, "Do not redact passwords (in AUTH, HELLO, MIGRATE, CONFIG SET, ACL SETUSER, SENTINEL and in the replies that show them)");
  cmd->add_option("--max-argument", o->max_argument, "Text: cut longer arguments with … (0: never)")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar on a terminal");
  cmd->callback([o, cmd, &exit_code] {
    if (o->replay.replay.empty()) require_one_source("decode", o->capture);
    refuse_live_options(*cmd, o->capture, !o->replay.replay.empty());
    try {
      exit_code = o->capture.live() || !o->replay.replay.empty() ? run_live(*o) : run_files(*o);
    } catch (const output_error& e) {
      live::print_diagnostic("lockscope decode: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace lockscope::cli
