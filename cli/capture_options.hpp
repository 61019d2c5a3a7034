// What `decode` and `analyze` share: where packets come from (capture files or a live
// interface) and how the ingest pipeline treats them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/clock_steps.hpp"

namespace lockscope::cli {

struct capture_options {
  std::vector<std::string> files;
  std::string interface;
  std::vector<std::uint16_t> ports;
  std::string filter;
  int buffer_mb = 32;
  double stats_interval = 10;
  double flow_timeout = 600;
  std::uint64_t max_buffer_per_flow = 4u << 20;
  std::uint64_t max_buffer_total = ingest::ingest_options::default_max_buffer_total;
  std::size_t max_flows = ingest::ingest_options::default_max_flows;
  bool show_secrets = false;
  bool verbose = false;
  // Live: pcap immediate mode (each packet handed over at once), for printing events
  // as they happen; off, packets come in kernel buffer blocks (fewer wake-ups).
  bool immediate = true;

  bool live() const noexcept { return !interface.empty(); }
};

// Registers FILE..., -i, --port, --filter, --buffer-mb, --stats-interval, --flow-timeout,
// --max-buffer-per-flow, --max-buffer-total and --max-flows on `cmd`.
void add_capture_options(CLI::App& cmd, capture_options& o);

// Throws CLI::ValidationError unless exactly one of capture files and -i was given.
void require_one_source(const std::string& command, const capture_options& o);

// Throws CLI::ValidationError for an option of live capture given without -i (-Z,
// --no-drop, --filter, --buffer-mb; --stats-interval also works with --replay): capture
// files are read whole, and an option that does nothing would let the user believe it
// did (a file "filtered" by --filter).
void refuse_live_options(const CLI::App& cmd, const capture_options& o, bool replay);

// The ingest pipeline's options. Live capture without --port or --filter selects port
// 6379, so that end is the server.
ingest::ingest_options make_ingest_options(const capture_options& o);

// -v: one stderr line per flow when its sides are decided (and why), corrected, or
// found to carry another protocol. Same lines for decode and analyze.
class flow_reporter final : public ingest::flow_observer {
 public:
  explicit flow_reporter(const char* command) : command_(command) {}
  void on_flow_note(const ingest::flow_note& n) override;

 private:
  const char* command_;
};

// The end-of-run lines about flows: other protocols (named once each, with their
// flows), flows ended idle or over --max-flows, side corrections, pending-command
// overflow. Nothing when all is well.
void print_flow_summary(const char* command, const ingest::ingest_stats& s);

// Opens -i IFACE and prints, as tcpdump does, what it listens to:
//   lockscope decode: listening on lo, port 6379 (BPF "(tcp port 6379) or (vlan and (tcp port 6379))")
// On failure prints "lockscope COMMAND: <reason>" (CAP_NET_RAW and the setcap command
// named when that is the cause) and returns nullptr.
std::unique_ptr<ingest::live_capture> open_live(const char* command, const capture_options& o);

// The live loops' packets per packet_source::dispatch(): enough that a busy port's
// packets are taken from the ring in runs, few enough (a few ms of work) that the
// timers, drop reports, metrics and signals between runs stay prompt.
inline constexpr int packets_per_pass = 256;

// While alive, the first SIGINT or SIGTERM ends the capture files being read, as if they
// ended there (ingest::stop_reading_captures), so that the report of what was read is
// still printed: `tcpdump -w - | lockscope analyze -` is ended with Ctrl-C. A second
// signal kills the process as usual.
class stop_reading_on_signal {
 public:
  stop_reading_on_signal();
  ~stop_reading_on_signal();
  stop_reading_on_signal(const stop_reading_on_signal&) = delete;
  stop_reading_on_signal& operator=(const stop_reading_on_signal&) = delete;
  // The exit status once the report is out: 0, or 128 + the signal (130 for Ctrl-C) after
  // saying that a signal cut the input short.
  int exit_status(const char* command) const;
};

// The live loops' exit status once `source` has ended: 0, 1 for a replayed file that
// ended on an error (already printed), or 1 after saying why the capture failed (the
// interface went down or disappeared), as tcpdump does:
//   lockscope analyze: the capture failed: The interface disappeared; the report covers the traffic before that
int capture_exit_status(const char* command, const ingest::packet_source& source);

// While alive, SIGINT and SIGTERM stop `source` (its next() returns end) instead of
// killing the process, so the caller can print its summary.
class stop_on_signal {
 public:
  explicit stop_on_signal(ingest::packet_source& source);
  ~stop_on_signal();
  stop_on_signal(const stop_on_signal&) = delete;
  stop_on_signal& operator=(const stop_on_signal&) = delete;
  bool requested() const noexcept;
};

// When stderr is a terminal and nothing arrived for `after` (since the start or the
// last packet), says so once and suggests --port (or checking --filter).
class silence_notice {
 public:
  silence_notice(const char* command, const capture_options& o, const ingest::live_capture& live,
                 std::chrono::steady_clock::duration after = std::chrono::seconds(10));
  void poll(bool got_packet);

 private:
  const char* command_;
  std::string interface_;
  std::string filter_;
  bool by_filter_;
  bool enabled_;
  bool said_ = false;
  std::chrono::steady_clock::duration after_;
  std::chrono::steady_clock::time_point last_packet_;
};

// Live: says when the wall clock, which stamps the packets, was stepped (clock_steps.hpp).
class clock_step_notice {
 public:
  explicit clock_step_notice(const char* command) : command_(command) {}
  void poll();
  // The same with both clocks given (µs); for tests.
  void poll(std::int64_t wall_us, std::int64_t monotonic_us);

 private:
  const char* command_;
  ingest::wall_clock_watch watch_;
};

// The totals' "kernel drops" of a run over files: what the capturing tool recorded in
// them (pcapng interface statistics), or "n/a" (classic pcap records none).
std::string file_drops_text(const std::optional<std::uint64_t>& recorded);

// Prints the kernel's drop counters every --stats-interval seconds (never when 0).
class drop_reporter {
 public:
  drop_reporter(const char* command, double interval_s);
  void poll(const ingest::packet_source& source);

 private:
  const char* command_;
  std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace lockscope::cli
