// Capture sources: the only part of the analyzer that touches libpcap.
//
//   offline_capture files({"a.pcap", "b.pcapng"}, warn);   // "-" reads stdin
//   captured_packet p;
//   while (files.next(p)) analyzer.on_packet(p.ts_us, p.link_type, p.data);
//
//   live_capture live({.interface = "lo", .ports = {6379}});
//   while (running) if (live.next(p) == live_capture::result::packet) ...
//   while (running) live.dispatch(256, handle);   // no copy: each packet in the ring
//
// Opening failures throw capture_error with a one-line message naming the file or
// interface (and, for a permission failure, the missing CAP_NET_RAW).
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lockscope/ingest/capture_gathering.hpp"

namespace lockscope::ingest {

namespace capture_files {
struct file_record;
}

struct capture_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct captured_packet {
  std::int64_t ts_us = 0;
  int link_type = 0;
  std::string_view data;          // valid until the next call to next()
  std::uint32_t wire_length = 0;  // the frame's length before snaplen
  std::size_t source = 0;         // index of the file it came from
};

// Several capture files read as one, in timestamp order (pcap and pcapng; regular
// files, FIFOs, or "-" for stdin). Files are read with read(), never mapped: a file
// truncated or rewritten while it is read (tcpdump -C/-W ring files) cannot crash the
// reader, it only ends that file early.
class offline_capture {
 public:
  // Called with one line naming the file and the byte offset.
  using warning_handler = std::function<void(const std::string&)>;

  // `warn`: a damaged file (a record cut short, a bad block), read up to the damage;
  // a packet whose time is a second or more before the previous one's in its file
  // (clock_steps.hpp), named by its number in the file; an interface whose recorded
  // statistics count dropped packets, when the file ends.
  // `error`: a file that shrank while being read (truncated or rewritten), or a read
  // that failed (EIO); reading it stopped there, what came before was delivered.
  // Without `error`, `warn` gets those.
  // Throws capture_error for a file that cannot be opened, a directory, input that is
  // no capture, and a file header cut short.
  offline_capture(const std::vector<std::string>& files, warning_handler warn = {}, warning_handler error = {});
  ~offline_capture();
  offline_capture(const offline_capture&) = delete;
  offline_capture& operator=(const offline_capture&) = delete;

  // The next packet of all files by timestamp (ties: file order); false at the end.
  bool next(captured_packet& out);

  // Bytes read so far and the total size of the regular files (0 for stdin).
  std::uint64_t bytes_read() const;
  std::uint64_t total_bytes() const noexcept { return total_bytes_; }
  // How many files changed under the reader so far (each reported to `error`).
  std::size_t changed_files() const noexcept { return changed_files_; }
  // How many files ended early on an error (each reported to `error`): changed under
  // the reader, or a read that failed. What they delivered is only part of them.
  std::size_t failed_files() const noexcept { return changed_files_ + read_error_files_; }
  // The packets the capturing tool counted as dropped, as the files record it (pcapng
  // interface statistics, which dumpcap writes when a capture ends; classic pcap records
  // none): the sum over every interface that has a count, nullopt when none has. Known
  // once the files are read to the end; each interface with drops is also a warning.
  std::optional<std::uint64_t> recorded_drops() const;
  // From a signal handler: these files end at their next read, as if they ended there
  // (a pipe waiting for data notices within 0.1 s).
  void stop() noexcept { stopped_ = 1; }

 private:
  struct file;
  bool advance(file& f);
  // Reads f's next record in file order; false at its end or damage (reported).
  bool read_record(file& f, capture_files::file_record& r);
  void check_clock(file& f, const capture_files::file_record& r);  // warns when its time stepped back
  void report(const file& f, const std::string& message);

  volatile std::sig_atomic_t stopped_ = 0;  // read by the byte sources: declared before them
  std::vector<std::unique_ptr<file>> files_;
  warning_handler warn_;
  warning_handler error_;
  std::size_t changed_files_ = 0;
  std::size_t read_error_files_ = 0;
  std::uint64_t total_bytes_ = 0;
  file* last_ = nullptr;  // the file whose packet was returned last; advanced lazily
};

struct live_options {
  std::string interface;
  std::vector<std::uint16_t> ports{6379};
  std::string filter;  // raw BPF; replaces the one built from ports
  int buffer_mb = 32;
  int snaplen = 262144;
  int timeout_ms = 100;  // how long next() waits before reporting a timeout
  // Immediate mode: every packet is handed over as it arrives (for printing events as
  // they happen). Off, the kernel fills buffer blocks and hands them over when full or
  // after timeout_ms: far fewer wake-ups under load (--summary, metrics only).
  bool immediate = true;
  // Out of immediate mode: how long dispatch() may let packets gather in the buffer
  // once the ring has run empty and more arrive (capture_gathering.hpp); 0: no wait.
  std::int64_t max_gather_us = 250'000;
};

// The command that lets a user without root capture live with this program, e.g.
// "sudo setcap cap_net_raw=eip /usr/local/bin/lockscope" (the running binary's path);
// the permission error names it, and the README gives the same.
std::string capture_capability_command();

// The BPF expression for a list of server ports on an interface whose link type is
// `datalink` (a DLT_ value). On Ethernet, VLAN-tagged traffic is included. Other link
// types carry no tags in the frame (Linux cooked capture, `-i any`, sees a VLAN's packets
// untagged on the VLAN's own device), and libpcap cannot compile `vlan` for them.
std::string port_filter(const std::vector<std::uint16_t>& ports, int datalink);

// Whether the named interface is a loopback (IFF_LOOPBACK); false when there is none.
bool is_loopback_interface(const std::string& name);

// From a signal handler (async-signal-safe): every capture file being read ends at its
// next read, as if it ended there, within 0.1 s for a pipe that is waiting for data. So
// `tcpdump -w - | lockscope analyze -` stopped with Ctrl-C still reports what it read.
void stop_reading_captures() noexcept;
bool reading_captures_stopped() noexcept;

// What the live loop reads from: a live interface (live_capture) or a capture file
// replayed at capture speed (replay_capture.hpp). The loop's clock is now_us(), so a
// replay drives lease deadlines by the replayed packets' times, not the wall clock.
class packet_source {
 public:
  enum class result { packet, timeout, end };
  struct drop_stats {
    std::uint64_t received = 0;
    std::uint64_t dropped = 0;            // by the kernel: the buffer was full
    std::uint64_t interface_dropped = 0;  // by the interface or driver
  };

  // A call per packet, without owning it: (context, packet). The packet is valid only
  // during the call.
  class packet_callback {
   public:
    template <class F>
      requires(!std::is_same_v<std::remove_cv_t<F>, packet_callback>)
    packet_callback(F& f) noexcept  // NOLINT(google-explicit-constructor): a lambda, in place
        : context_(&f), call_([](void* c, const captured_packet& p) { (*static_cast<F*>(c))(p); }) {}
    void operator()(const captured_packet& p) const { call_(context_, p); }

   private:
    void* context_;
    void (*call_)(void*, const captured_packet&);
  };

  virtual ~packet_source() = default;
  // A packet (`out` valid until the next call), or timeout after a short wait.
  virtual result next(captured_packet& out) = 0;
  // Up to `max_packets` packets (at least 1) to `on_packet`, each valid only during its
  // call; packet when some were handed over, else timeout after a short wait, or end.
  // A live capture hands them straight from the kernel's ring: next() has to copy each
  // one out, since libpcap gives the ring's block back to the kernel after its last
  // packet. This default takes one packet from next().
  virtual result dispatch(int max_packets, packet_callback on_packet);
  // From a signal handler: makes next() return end.
  virtual void stop() noexcept = 0;
  // Why the source ended when nobody stopped it and it had not run out (a live
  // interface that went down or disappeared: libpcap's words); empty otherwise.
  virtual std::string failure() const { return {}; }
  virtual drop_stats stats() const = 0;
  // The loop's clock, epoch microseconds: the wall clock live, the replayed time in a
  // replay (never past the next packet's time).
  virtual std::int64_t now_us() const = 0;
  // A live interface: packets come on the wall clock, and may wait in the kernel.
  virtual bool live() const noexcept { return false; }
  // Whether the kernel holds packets it has received but not handed over yet (out of
  // immediate mode, in a block that waits for its timeout, which a loaded host runs late):
  // the loop's clock must not pass them. False when the source cannot tell.
  virtual bool holds_unhanded_packets() { return false; }
  // After stop(): hands over what the source had captured before it (packets waiting in
  // the kernel, a block whose timeout has not run yet). `packet` while it hands some
  // over, `timeout` while it waits for a block, `end` once nothing is left.
  virtual result drain(int /*max_packets*/, packet_callback /*on_packet*/) { return result::end; }
  // drain() until nothing is left, for at most budget_us on the source's clock.
  void drain_all(int max_packets, packet_callback on_packet, std::int64_t budget_us);
};

class live_capture final : public packet_source {
 public:
  explicit live_capture(const live_options& options);
  ~live_capture() override;
  live_capture(const live_capture&) = delete;
  live_capture& operator=(const live_capture&) = delete;

  result next(captured_packet& out) override;
  result dispatch(int max_packets, packet_callback on_packet) override;
  void stop() noexcept override;
  std::string failure() const override { return failure_; }
  drop_stats stats() const override;
  std::int64_t now_us() const override;
  bool live() const noexcept override { return true; }
  bool holds_unhanded_packets() override;
  result drain(int max_packets, packet_callback on_packet) override;
  int link_type() const noexcept { return link_type_; }
  // The BPF expression in use (--filter, or the one built from the ports).
  const std::string& filter() const noexcept { return filter_; }
  // On a loopback interface, whether the kernel's filter also rejects each packet's
  // sent copy (the kernel shows a capture both copies; libpcap keeps the received one).
  bool sent_copies_rejected() const noexcept { return sent_copies_rejected_; }

 private:
  // Waits (up to the timeout) for the ring to have packets; false once stopped. `ready`:
  // poll() said packets are waiting (not a timeout).
  bool poll_ready();  // waits up to a block's timeout for the kernel to hand one over
  bool wait_for_packets(bool* ready = nullptr);
  // Out of immediate mode, after the ring ran empty and packets arrived: lets more
  // gather (capture_gathering); false once stopped.
  bool gather(bool after_idle);
  // On a loopback interface: the kernel's filter also rejects each packet's sent copy.
  void reject_sent_copies(const std::string& filter);
  // What libpcap's read returned, as a result (PCAP_ERROR keeps its message).
  result ended_or_timeout(int rc);

  void* handle_ = nullptr;  // pcap_t
  std::string failure_;
  std::string filter_;
  int link_type_ = 0;
  int timeout_ms_ = 100;
  bool sent_copies_rejected_ = false;
  volatile std::sig_atomic_t stopped_ = 0;
  std::optional<capture_gathering> gathering_;  // out of immediate mode only
  std::uint64_t bytes_since_wake_ = 0;          // what the ring held of the packets taken
  bool idle_since_wake_ = false;                // a poll timed out with nothing since
  // Packets handed over, against the kernel's count of those it received: only where
  // libpcap skips none of them (out of immediate mode; on loopback once the kernel
  // rejects the sent copies, which libpcap would skip; not on `any`, which has them too).
  bool counts_handed_ = false;
  bool drain_waited_ = false;  // drain() has waited a block's timeout once
  std::uint32_t handed_ = 0;  // wraps as the kernel's count does
  // The kernel's count less those handed over: when it last changed, and the value it
  // settled at, which libpcap skipped (what reached the ring before the filter was set).
  std::uint32_t unhanded_seen_ = 0, unhanded_settled_ = 0;
  std::int64_t unhanded_since_us_ = 0;
};

}  // namespace lockscope::ingest
