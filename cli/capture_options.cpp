#include "capture_options.hpp"

#include <unistd.h>

#include <csignal>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lockscope/live/diagnostics.hpp"
#include "option_checks.hpp"

#include "lockscope/ingest/counted.hpp"
#include "lockscope/ingest/replay_capture.hpp"

namespace lockscope::cli {

namespace {
std::atomic<bool> stop_requested{false};
std::atomic<ingest::packet_source*> stopping_live{nullptr};

extern "C" void on_stop_signal(int) {
  stop_requested = true;
  if (ingest::packet_source* source = stopping_live.load()) source->stop();
}
}  // namespace

void add_capture_options(CLI::App& cmd, capture_options& o) {
  cmd.add_option("files", o.files, "pcap/pcapng files (merged by time), - for stdin");
  cmd.add_option("-i,--interface", o.interface, "Capture live on this interface (any for all)");
  cmd.add_option("--port", o.ports, "Redis server port (repeatable; live default 6379). Files: only these flows")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(number_check(1, true, 65535));  // each one
  cmd.add_option("--filter", o.filter, "Live: a raw BPF filter instead of the one built from --port");
  cmd.add_option("--buffer-mb", o.buffer_mb, "Live: kernel capture buffer in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--stats-interval", o.stats_interval, "Live: seconds between kernel drop reports (0: only at the end)")
      ->check(zero_or_more())
      ->capture_default_str();
  // 0 or less would end every connection at its next packet: each packet a new flow.
  cmd.add_option("--flow-timeout", o.flow_timeout, "Seconds of silence before a connection is forgotten")
      ->check(more_than_zero())
      ->capture_default_str();
  cmd.add_flag("-v,--verbose", o.verbose, "Say for each flow which end is the server and why (SYN, --port, content, port)");
  cmd.add_option("--max-buffer-per-flow", o.max_buffer_per_flow, "Out-of-order bytes buffered per direction (e.g. 4MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--max-buffer-total", o.max_buffer_total,
                 "What all connections together buffer (out-of-order segments, commands awaiting replies); "
                 "beyond it, the connection that grows gives up its holes and its oldest waiting commands (0: no cap)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--max-flows", o.max_flows,
                 "Connections followed at once; beyond, the one silent the longest is ended (about 3.5 KB each)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32))
      ->capture_default_str();
}

void flow_reporter::on_flow_note(const ingest::flow_note& n) {
  switch (n.kind) {
    case ingest::flow_note_kind::sides_decided:
    case ingest::flow_note_kind::sides_corrected:
      live::print_diagnostic("lockscope {}: flow {}: client {} → server {}{} by {}{}{}\n", command_, n.connection,
                 n.client->to_string(), n.server->to_string(),
                 n.kind == ingest::flow_note_kind::sides_corrected ? " (corrected)" : "",
                 to_string(n.reason), n.detail.empty() ? "" : ": ", n.detail);
      break;
    case ingest::flow_note_kind::other_protocol:
      live::print_diagnostic("lockscope {}: flow {}: {} ↔ {}: {}\n", command_, n.connection, n.client->to_string(),
                 n.server->to_string(), ingest::describe(n.protocol));
      break;
  }
}

void print_flow_summary(const char* command, const ingest::ingest_stats& s) {
  if (s.snaplen_cut_segments > 0) {
    live::print_diagnostic(
               "lockscope {}: {} packets were cut short by the capture's snapshot length ({} bytes of TCP payload "
               "missing, counted in the gaps): the commands and replies in them cannot be decoded. Capture whole "
               "packets (tcpdump -s 0, its default)\n",
               command, s.snaplen_cut_segments, s.snaplen_cut_bytes);
  }
  if (s.evicted_flows > 0 || s.capped_flows > 0) {
    live::print_diagnostic("lockscope {}: {} ended idle (--flow-timeout), {} ended over --max-flows\n", command,
               ingest::counted(s.evicted_flows, "flow"), s.capped_flows);
  }
  for (const std::string& line : ingest::describe_other_protocols(s)) {
    live::print_diagnostic("lockscope {}: {}\n", command, line);
  }
  if (s.side_corrections > 0) {
    live::print_diagnostic("lockscope {}: {} had their client and server swapped after a guess (see -v)\n", command,
               ingest::counted(s.side_corrections, "flow"));
  }
  if (s.buffer_sheds > 0) {
    std::string named;
    for (const std::string& flow : s.shed_examples) named += (named.empty() ? "" : ", ") + flow;
    if (s.shed_flows > s.shed_examples.size()) named += ", …";
    live::print_diagnostic(
               "lockscope {}: the connections together held more than --max-buffer-total ({} bytes at the peak): "
               "{} times the connection that grew gave it back: its holes were given up (in the gaps) and {} "
               "commands were shown without a reply; {} connections gave back: {}\n",
               command, s.held_bytes_peak, s.buffer_sheds, s.pending_shed, s.shed_flows, named);
  }
  if (s.pending_overflow > 0) {
    live::print_diagnostic(
               "lockscope {}: {} shown without a reply: too many bytes waiting for replies on one "
               "connection (a capture of one direction?)\n",
               command, ingest::counted(s.pending_overflow, "command"));
  }
}

void require_one_source(const std::string& command, const capture_options& o) {
  if (o.interface.empty() == o.files.empty()) {
    throw CLI::ValidationError(command, "give capture files or -i IFACE (one of them)");
  }
}

void refuse_live_options(const CLI::App& cmd, const capture_options& o, bool replay) {
  if (o.live()) return;
  for (const char* name : {"--filter", "--buffer-mb", "-Z", "--no-drop"}) {
    if (cmd.count(name) == 0) continue;
    throw CLI::ValidationError(name, fmt::format("only for live capture (-i IFACE): {} read as it is, without it",
                                                 replay ? "--replay's file is" : "a capture file is"));
  }
  if (!replay && cmd.count("--stats-interval") > 0) {
    throw CLI::ValidationError("--stats-interval", "only for live capture (-i IFACE) or --replay: a capture file's "
                                                   "totals are printed once, at its end");
  }
}

ingest::ingest_options make_ingest_options(const capture_options& o) {
  ingest::ingest_options a;
  a.ports = o.ports;
  if (o.live() && a.ports.empty() && o.filter.empty()) a.ports = {6379};
  a.tcp.max_buffer = static_cast<std::size_t>(o.max_buffer_per_flow);
  a.max_buffer_total = static_cast<std::size_t>(o.max_buffer_total);
  a.session.show_secrets = o.show_secrets;
  a.flow_timeout_us = static_cast<std::int64_t>(o.flow_timeout * 1e6);
  a.max_flows = o.max_flows;
  return a;
}

std::unique_ptr<ingest::live_capture> open_live(const char* command, const capture_options& o) {
  ingest::live_options lo;
  lo.interface = o.interface;
  lo.ports = o.ports.empty() ? std::vector<std::uint16_t>{6379} : o.ports;
  lo.filter = o.filter;
  lo.buffer_mb = o.buffer_mb;
  lo.immediate = o.immediate;
  std::unique_ptr<ingest::live_capture> live;
  try {
    live = std::make_unique<ingest::live_capture>(lo);
  } catch (const ingest::capture_error& e) {
    live::print_diagnostic("lockscope {}: {}\n", command, e.what());
    return nullptr;
  }
  // As tcpdump does: say what is being listened to before anything (or nothing) arrives.
  if (o.filter.empty()) {
    live::print_diagnostic("lockscope {}: listening on {}, {} {} (BPF \"{}\")\n", command, lo.interface,
               lo.ports.size() == 1 ? "port" : "ports", fmt::join(lo.ports, ", "), live->filter());
  } else {
    live::print_diagnostic("lockscope {}: listening on {} (BPF \"{}\")\n", command, lo.interface, live->filter());
  }
  return live;
}

silence_notice::silence_notice(const char* command, const capture_options& o, const ingest::live_capture& live,
                               std::chrono::steady_clock::duration after)
    : command_(command),
      interface_(o.interface),
      filter_(live.filter()),
      by_filter_(!o.filter.empty()),
      enabled_(isatty(STDERR_FILENO) == 1),
      after_(after),
      last_packet_(std::chrono::steady_clock::now()) {}

void silence_notice::poll(bool got_packet) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (got_packet) {
    last_packet_ = now;
    said_ = false;
    return;
  }
  if (said_ || now - last_packet_ < after_) return;
  said_ = true;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(after_).count();
  if (by_filter_) {
    live::print_diagnostic(
               "lockscope {}: nothing arrived on {} for {} s (BPF \"{}\"); check the --filter expression, or "
               "give the Redis server's port with --port PORT instead\n",
               command_, interface_, seconds, filter_);
  } else {
    live::print_diagnostic(
               "lockscope {}: nothing arrived on {} for {} s (BPF \"{}\"); if Redis listens on another port, "
               "give it with --port PORT (or a BPF expression with --filter), or try -i any\n",
               command_, interface_, seconds, filter_);
  }
}

void clock_step_notice::poll() {
  // CLOCK_BOOTTIME goes on while the host is suspended, as the wall clock does: a
  // suspend is not a step.
  const auto read = [](clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return static_cast<std::int64_t>(t.tv_sec) * 1'000'000 + t.tv_nsec / 1000;
  };
  poll(read(CLOCK_REALTIME), read(CLOCK_BOOTTIME));
}

void clock_step_notice::poll(std::int64_t wall_us, std::int64_t monotonic_us) {
  const std::int64_t step = watch_.on_tick(wall_us, monotonic_us);
  if (step == 0) return;
  const std::time_t at = static_cast<std::time_t>(wall_us / 1'000'000);
  std::tm utc{};
  gmtime_r(&at, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &utc);
  live::print_diagnostic(
             "lockscope {}: warning: the wall clock, which stamps the packets, was stepped {} {:.3f} s (now {} UTC): "
             "waits, holds and leases that span the step are measured across it{}\n",
             command_, step > 0 ? "forward" : "back", static_cast<double>(step > 0 ? step : -step) / 1e6, when,
             step > 0 ? "; leases held across it ran out early, as they do on a Redis server whose clock stepped too"
                      : "");
}

stop_on_signal::stop_on_signal(ingest::packet_source& source) {
  stop_requested = false;
  stopping_live = &source;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

stop_on_signal::~stop_on_signal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  stopping_live = nullptr;
}

bool stop_on_signal::requested() const noexcept { return stop_requested; }

namespace {
volatile std::sig_atomic_t reading_stopped_by = 0;  // the signal
extern "C" void on_stop_reading_signal(int signal) {
  reading_stopped_by = signal;
  ingest::stop_reading_captures();
}
}  // namespace

stop_reading_on_signal::stop_reading_on_signal() {
  struct sigaction action {};
  action.sa_handler = on_stop_reading_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // the second signal: the default action
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

stop_reading_on_signal::~stop_reading_on_signal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

int stop_reading_on_signal::exit_status(const char* command) const {
  if (!ingest::reading_captures_stopped()) return 0;
  live::print_diagnostic("lockscope {}: interrupted: the output covers the packets read before the signal\n", command);
  return 128 + (reading_stopped_by != 0 ? static_cast<int>(reading_stopped_by) : SIGINT);
}

int capture_exit_status(const char* command, const ingest::packet_source& source) {
  // A replayed file that changed or could not be read on was named as an error when it
  // happened (as for capture files): the same exit status, 1.
  if (const auto* replay = dynamic_cast<const ingest::replay_capture*>(&source); replay && replay->failed_files() > 0) {
    return 1;
  }
  const std::string failure = source.failure();
  if (failure.empty()) return 0;
  live::print_diagnostic("lockscope {}: the capture failed: {}; the report covers the traffic before that\n", command,
             failure);
  return 1;
}

drop_reporter::drop_reporter(const char* command, double interval_s)
    : command_(command),
      interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(interval_s))),
      next_(std::chrono::steady_clock::now() + interval_) {}

void drop_reporter::poll(const ingest::packet_source& live) {
  if (interval_.count() <= 0 || std::chrono::steady_clock::now() < next_) return;
  next_ += interval_;
  const auto d = live.stats();
  live::print_diagnostic("lockscope {}: kernel: {} received, {} dropped, {} dropped by the interface\n", command_,
             d.received, d.dropped, d.interface_dropped);
}

std::string file_drops_text(const std::optional<std::uint64_t>& recorded) {
  return recorded ? fmt::format("{} (as the capture file records them)", *recorded) : std::string("n/a");
}

}  // namespace lockscope::cli
