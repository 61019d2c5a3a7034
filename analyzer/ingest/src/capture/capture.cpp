#include "lockscope/ingest/capture.hpp"
#include "lockscope/resp/format.hpp"

#include <pcap/pcap.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "capture_files.hpp"
#include "lockscope/ingest/clock_steps.hpp"

namespace lockscope::ingest {

namespace {

// The compression a file's first bytes show ("gzip", "zstd", …), or empty. Captures are
// often kept compressed; named, the error can say how to read one.
std::string_view compressed_as(std::string_view head) noexcept {
  constexpr std::pair<std::string_view, std::string_view> magics[] = {
      {"\x1f\x8b", "gzip"}, {"\x28\xb5\x2f\xfd", "zstd"}, {"\xfd" "7zXZ\x00", "xz"}, {"BZh", "bzip2"},
      {"\x04\x22\x4d\x18", "lz4"}};
  for (const auto& [magic, name] : magics) {
    if (head.starts_with(magic)) return name;
  }
  return {};
}

std::string_view decompressor_of(std::string_view compression) noexcept {
  if (compression == "gzip") return "zcat";
  if (compression == "zstd") return "zstdcat";
  if (compression == "xz") return "xzcat";
  if (compression == "bzip2") return "bzcat";
  return "lz4cat";
}

// Set from a signal handler by stop_reading_captures().
volatile std::sig_atomic_t reading_stopped = 0;

// The first bytes of an input that is no capture, for the error.
std::string first_bytes_hex(std::string_view head) {
  std::string out;
  for (std::size_t i = 0; i < std::min<std::size_t>(head.size(), 8); ++i) {
    out += fmt::format("{}{:02x}", i == 0 ? "" : " ", static_cast<unsigned char>(head[i]));
  }
  return out;
}

}  // namespace

bool is_loopback_interface(const std::string& name) {
  if (name.size() >= IFNAMSIZ) return false;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq request{};
  std::memcpy(request.ifr_name, name.data(), name.size());
  const bool loopback = ::ioctl(fd, SIOCGIFFLAGS, &request) == 0 && (request.ifr_flags & IFF_LOOPBACK) != 0;
  ::close(fd);
  return loopback;
}

struct offline_capture::file {
  std::unique_ptr<capture_files::byte_source> source;
  std::unique_ptr<capture_files::record_reader> reader;  // pcap or pcapng
  capture_files::file_record record;                     // the current packet, when has_packet
  // Set once the file describes a second interface: from then on packets are copied and merged.
  std::unique_ptr<capture_files::interface_merge> merge;
  bool has_packet = false;
  bool done = false;  // the reader has nothing more (a merge may still hold packets)
  std::size_t index = 0;
  std::uint64_t packets = 0;  // read so far: the number of the last one read
  std::vector<packet_clock_watch> clocks;  // one per interface
  unsigned clock_steps = 0;   // reported
  bool late_reported = false;
};

offline_capture::offline_capture(const std::vector<std::string>& files, warning_handler warn, warning_handler error)
    : warn_(std::move(warn)), error_(std::move(error)) {
  using namespace capture_files;
  bool stdin_used = false;
  for (const std::string& name : files) {
    auto f = std::make_unique<file>();
    f->index = files_.size();
    if (name == "-") {
      if (stdin_used) throw capture_error("-: standard input can be read only once");
      stdin_used = true;
      f->source = std::make_unique<byte_source>(name, STDIN_FILENO, false, stopped_);
    } else {
      const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw capture_error(name + ": " + std::strerror(errno));
      f->source = std::make_unique<byte_source>(name, fd, true, stopped_);
      total_bytes_ += f->source->size_at_open();
    }
    // open() takes a directory, and its read() fails with EISDIR, which would read as
    // an empty input.
    if (struct stat st {}; ::fstat(f->source->fd(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw capture_error(name + ": " + std::strerror(EISDIR));
    }
    auto pcap = std::make_unique<pcap_reader>(*f->source);
    if (pcap->open()) {
      f->reader = std::move(pcap);
    } else {
      auto pcapng = std::make_unique<pcapng_reader>(*f->source);
      pcapng->take_buffer(*pcap);  // stdin and pipes cannot seek back
      if (!pcapng->open()) {
        const std::string_view head = pcapng->peek(24);
        if (const int e = pcapng->read_error(); e != 0) {
          throw capture_error(fmt::format("{}: read error at byte {}: {}", name, head.size(), std::strerror(e)));
        }
        if (const std::string_view how = compressed_as(head); !how.empty()) {
          throw capture_error(name + ": " + std::string(how) + "-compressed, not a capture: decompress it first (" +
                              std::string(decompressor_of(how)) + " " + name + " | lockscope … -)");
        }
        if (head.empty()) throw capture_error(name + ": empty, not a capture");
        // The magic is right but the rest is missing: say so, not "no capture".
        std::uint32_t magic = 0;
        if (head.size() >= 4) std::memcpy(&magic, head.data(), 4);
        if (head.size() < 24 && head.size() >= 4 && capture_files::is_classic_pcap_magic(magic)) {
          throw capture_error(fmt::format("{}: truncated pcap file header: {} of its 24 bytes", name, head.size()));
        }
        if (head.size() < 12 && head.size() >= 4 && head.starts_with("\x0a\x0d\x0d\x0a")) {
          throw capture_error(
              fmt::format("{}: truncated pcapng section header: {} of at least 28 bytes", name, head.size()));
        }
        if (head.starts_with("\x34\xcd\xb2\xa1") || head.starts_with("\xa1\xb2\xcd\x34")) {
          throw capture_error(name + ": a pcap of a patched tcpdump (Kuznetzov's, magic a1b2cd34), which lockscope "
                                     "does not read: convert it first (editcap -F pcap " + name + " OUT.pcap)");
        }
        throw capture_error(name + ": not a pcap or pcapng capture (it starts with " + first_bytes_hex(head) +
                            (head.size() < 24 ? "; " + std::to_string(head.size()) + " bytes in all" : "") + ")");
      }
      f->reader = std::move(pcapng);
    }
    files_.push_back(std::move(f));
  }
  for (auto& f : files_) advance(*f);
}

offline_capture::~offline_capture() = default;

void stop_reading_captures() noexcept { reading_stopped = 1; }

bool reading_captures_stopped() noexcept { return reading_stopped != 0; }

void offline_capture::report(const file& f, const std::string& message) {
  // A file that changed, or that could not be read on, is not damaged: the rest of it
  // exists but was not read, so the output is incomplete. That is an error, not a warning.
  const bool read_failed = !f.source->changed() && f.reader->read_error() != 0;
  if (f.source->changed() || read_failed) {
    ++(read_failed ? read_error_files_ : changed_files_);
    if (error_) error_(f.source->name() + ": " + message);
    else if (warn_) warn_(f.source->name() + ": " + message);
  } else if (warn_) {
    warn_(f.source->name() + ": " + message + "; read up to the damage");
  }
}

void offline_capture::check_clock(file& f, const capture_files::file_record& r) {
  if (r.interface >= f.clocks.size()) f.clocks.resize(r.interface + 1);
  const std::int64_t back = f.clocks[r.interface].on_packet(r.ts_us);
  if (back == 0 || !warn_) return;
  constexpr unsigned max_reported = 10;
  if (++f.clock_steps > max_reported) return;
  warn_(fmt::format("{}: packet {}: its time is {:.6f} s before the previous packet's: the capturing host's clock "
                    "was stepped back; waits, holds and leases that span it are measured across the step{}",
                    f.source->name(), f.packets, static_cast<double>(back) / 1e6,
                    f.clock_steps == max_reported ? " (further steps in this file are not reported)" : ""));
}

bool offline_capture::read_record(file& f, capture_files::file_record& r) {
  if (f.done) return false;
  std::string error;
  const int rc = f.reader->next(r, error);
  if (rc == 1) {
    ++f.packets;
    check_clock(f, r);
    return true;
  }
  f.done = true;
  if (rc < 0) report(f, error);
  if (const std::uint64_t clamped = f.reader->clamped_times(); clamped > 0 && warn_) {
    warn_(fmt::format("{}: {} packets had a time before 1970 or after the year 146,000 (a damaged timestamp or "
                      "interface time offset; the first in the block at byte {}) and were given the nearest of the "
                      "two; their waits and holds are not real",
                      f.source->name(), clamped, f.reader->first_clamped_at()));
  }
  // An interface's name comes from the file: shown as the parsed form shows an argument
  // (escaped, cut), and only the first few interfaces with drops are named.
  constexpr std::size_t max_named_drops = 10;
  std::size_t named = 0;
  std::uint64_t unnamed_interfaces = 0, unnamed_drops = 0;
  for (const auto& d : f.reader->drops()) {
    if (d.dropped == 0 || !warn_) continue;
    if (named == max_named_drops) {
      ++unnamed_interfaces;
      unnamed_drops += d.dropped;
      continue;
    }
    ++named;
    std::string shown;
    if (!d.name.empty()) {
      shown = " (";
      resp::append_parsed_argument(shown, d.name, {.max_argument = 64});
      shown += ")";
    }
    warn_(fmt::format("{}: the capturing tool counted {} packets dropped on interface {}{} (the file's interface "
                      "statistics): gaps in the TCP streams may come from them",
                      f.source->name(), d.dropped, d.interface, shown));
  }
  if (unnamed_interfaces > 0) {
    warn_(fmt::format("{}: and {} more interfaces with {} packets dropped in all (the file's interface statistics)",
                      f.source->name(), unnamed_interfaces, unnamed_drops));
  }
  return false;
}

std::optional<std::uint64_t> offline_capture::recorded_drops() const {
  std::optional<std::uint64_t> total;
  for (const auto& f : files_) {
    for (const auto& d : f->reader->drops()) total = total.value_or(0) + d.dropped;
  }
  return total;
}

bool offline_capture::advance(file& f) {
  f.has_packet = false;
  if (!f.merge) {
    if (!read_record(f, f.record)) return false;
    if (f.reader->interfaces() <= 1) {
      f.has_packet = true;
      return true;
    }
    // A second interface is described (dumpcap describes them all before the first
    // packet): merge from here on.
    f.merge = std::make_unique<capture_files::interface_merge>();
    f.merge->push(f.record);
  }
  capture_files::file_record r;
  for (;;) {
    f.merge->describe(f.reader->interfaces());
    if (f.merge->ready() || !read_record(f, r)) break;
    f.merge->push(r);
  }
  if (f.merge->empty()) {
    if (const std::uint64_t late = f.merge->late(); late > 0 && warn_ && !f.late_reported) {
      f.late_reported = true;
      warn_(fmt::format("{}: {} packets came more than {} s after later packets of other interfaces (the capturing "
                        "tool wrote each interface's packets in longer runs than lockscope waits for) and were "
                        "analyzed out of time order",
                        f.source->name(), late, capture_files::interface_merge::window_us / 1'000'000));
    }
    return false;
  }
  f.record = f.merge->pop();
  f.has_packet = true;
  return true;
}

bool offline_capture::next(captured_packet& out) {
  if (last_ != nullptr) {
    advance(*last_);
    last_ = nullptr;
  }
  file* best = nullptr;
  for (auto& f : files_) {
    if (f->has_packet && (best == nullptr || f->record.ts_us < best->record.ts_us)) best = f.get();
  }
  if (best == nullptr) return false;
  out.ts_us = best->record.ts_us;
  out.link_type = best->record.link_type;
  out.data = best->record.data;
  out.wire_length = best->record.wire_length;
  out.source = best->index;
  last_ = best;
  return true;
}

std::uint64_t offline_capture::bytes_read() const {
  std::uint64_t total = 0;
  for (const auto& f : files_) {
    if (!f->source->regular()) continue;
    total += f->done ? f->source->size_at_open() : f->reader->position();
  }
  return total;
}

std::string capture_capability_command() {
  std::string binary = "lockscope";
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path);
  if (n > 0 && static_cast<std::size_t>(n) < sizeof path) binary.assign(path, static_cast<std::size_t>(n));
  return "sudo setcap cap_net_raw=eip " + binary;
}

std::string port_filter(const std::vector<std::uint16_t>& ports, int datalink) {
  std::string ports_expr;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) ports_expr += " or ";
    ports_expr += "tcp port " + std::to_string(ports[i]);
  }
  if (ports_expr.empty()) return "tcp";
  if (datalink != DLT_EN10MB) return ports_expr;
  return "(" + ports_expr + ") or (vlan and (" + ports_expr + "))";
}

live_capture::live_capture(const live_options& options) {
  char error[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_create(options.interface.c_str(), error);
  if (p == nullptr) throw capture_error(options.interface + ": " + error);
  handle_ = p;
  pcap_set_snaplen(p, options.snaplen);
  pcap_set_promisc(p, 0);
  pcap_set_timeout(p, options.timeout_ms);
  pcap_set_immediate_mode(p, options.immediate ? 1 : 0);
  pcap_set_buffer_size(p, options.buffer_mb * 1024 * 1024);
  const int rc = pcap_activate(p);
  if (rc < 0) {
    std::string message;
    if (rc == PCAP_ERROR_PERM_DENIED) {
      message = options.interface + ": permission denied: live capture needs CAP_NET_RAW (run as root, or once: " +
                capture_capability_command() + ")";
    } else if (rc == PCAP_ERROR_NO_SUCH_DEVICE) {
      message = options.interface + ": no such interface";
    } else {
      message = options.interface + ": " + pcap_geterr(p);
    }
    pcap_close(p);
    handle_ = nullptr;
    throw capture_error(message);
  }
  link_type_ = pcap_datalink(p);
  timeout_ms_ = options.timeout_ms;
  if (!options.immediate && options.max_gather_us > 0) {
    gathering_.emplace(static_cast<std::uint64_t>(options.buffer_mb) * 1024 * 1024, options.max_gather_us);
  }
  // Non-blocking reads plus poll(): in immediate mode a blocking read ignores the
  // timeout, and the caller needs to wake up for periodic drop reports and signals.
  pcap_setnonblock(p, 1, error);
  filter_ = options.filter.empty() ? port_filter(options.ports, link_type_) : options.filter;
  const std::string& filter = filter_;
  bpf_program program{};
  if (pcap_compile(p, &program, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0) {
    const std::string message = "filter \"" + filter + "\": " + pcap_geterr(p);
    pcap_close(p);
    handle_ = nullptr;
    throw capture_error(message);
  }
  const int set = pcap_setfilter(p, &program);
  pcap_freecode(&program);
  if (set != 0) {
    const std::string message = "filter \"" + filter + "\": " + pcap_geterr(p);
    pcap_close(p);
    handle_ = nullptr;
    throw capture_error(message);
  }
  const bool loopback = is_loopback_interface(options.interface);
  if (loopback) reject_sent_copies(filter);
  counts_handed_ = !options.immediate && (loopback ? sent_copies_rejected_ : options.interface != "any");
}

void live_capture::reject_sent_copies(const std::string& filter) {
  // On a loopback interface the kernel shows a capture every packet twice, as sent and as
  // received, copying both into the ring; libpcap then throws the sent copy away. Rejected
  // by the kernel's filter, it is never copied: half the ring traffic, and the drop count
  // no longer counts copies nobody reads. Only the kernel's filter changes: libpcap still
  // filters in userland, with its own program, what reached the ring before its filter
  // was set, and its interpreter cannot read the direction (`inbound` rejects there).
  auto* p = static_cast<pcap_t*>(handle_);
  bpf_program program{};
  if (pcap_compile(p, &program, ("inbound and (" + filter + ")").c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0) return;
  static_assert(sizeof(sock_filter) == sizeof(bpf_insn));  // the same {code, jt, jf, k}
  if (program.bf_len <= 0xffff) {
    const sock_fprog kernel_program{static_cast<unsigned short>(program.bf_len),
                                    reinterpret_cast<sock_filter*>(program.bf_insns)};
    sent_copies_rejected_ =
        ::setsockopt(pcap_fileno(p), SOL_SOCKET, SO_ATTACH_FILTER, &kernel_program, sizeof kernel_program) == 0;
  }
  pcap_freecode(&program);
}

live_capture::~live_capture() {
  if (handle_ != nullptr) pcap_close(static_cast<pcap_t*>(handle_));
}

bool live_capture::poll_ready() {
  const int fd = pcap_get_selectable_fd(static_cast<pcap_t*>(handle_));
  if (fd < 0) return false;
  pollfd waiter{fd, POLLIN, 0};
  return ::poll(&waiter, 1, timeout_ms_) > 0;  // EINTR (a signal) is fine: stopped_ says
}

bool live_capture::wait_for_packets(bool* ready) {
  const bool any = poll_ready();
  if (ready != nullptr) *ready = any;
  return !stopped_;
}

bool live_capture::gather(bool after_idle) {
  const std::int64_t wait = gathering_->wait_us(now_us(), bytes_since_wake_, after_idle);
  bytes_since_wake_ = 0;
  if (wait > 0 && !stopped_) ::poll(nullptr, 0, static_cast<int>((wait + 999) / 1000));  // a signal ends it early
  return !stopped_;
}

live_capture::result live_capture::next(captured_packet& out) {
  if (stopped_) return result::end;
  auto* p = static_cast<pcap_t*>(handle_);
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  int rc = pcap_next_ex(p, &header, &data);
  if (rc == 0) {
    if (!wait_for_packets()) return result::end;
    rc = pcap_next_ex(p, &header, &data);
  }
  if (rc != 1) return ended_or_timeout(rc);
  out.ts_us = static_cast<std::int64_t>(header->ts.tv_sec) * 1'000'000 + header->ts.tv_usec;
  out.link_type = link_type_;
  out.data = std::string_view(reinterpret_cast<const char*>(data), header->caplen);
  out.wire_length = header->len;
  out.source = 0;
  ++handed_;
  return result::packet;
}

namespace {
struct dispatch_context {
  packet_source::packet_callback& on_packet;
  int link_type;
  std::uint64_t ring_bytes = 0;
};

// What a packet takes in the kernel's TPACKET_V3 ring: its captured bytes and its
// header (struct tpacket3_hdr and the link-level address, aligned: about 64 bytes).
constexpr std::uint64_t ring_header_bytes = 64;

void on_ring_packet(u_char* user, const pcap_pkthdr* header, const u_char* data) {
  auto& c = *reinterpret_cast<dispatch_context*>(user);
  c.ring_bytes += header->caplen + ring_header_bytes;
  captured_packet p;
  p.ts_us = static_cast<std::int64_t>(header->ts.tv_sec) * 1'000'000 + header->ts.tv_usec;
  p.link_type = c.link_type;
  p.data = std::string_view(reinterpret_cast<const char*>(data), header->caplen);
  p.wire_length = header->len;
  c.on_packet(p);
}

int dispatch_ring(pcap_t* p, int max_packets, dispatch_context& context) {
  return pcap_dispatch(p, std::max(max_packets, 1), on_ring_packet, reinterpret_cast<u_char*>(&context));
}
}  // namespace

packet_source::result packet_source::dispatch(int max_packets, packet_callback on_packet) {
  static_cast<void>(max_packets);
  captured_packet p;
  const result r = next(p);
  if (r == result::packet) on_packet(p);
  return r;
}

void packet_source::drain_all(int max_packets, packet_callback on_packet, std::int64_t budget_us) {
  const std::int64_t give_up = now_us() + budget_us;
  while (now_us() < give_up && drain(max_packets, on_packet) != result::end) {
  }
}

live_capture::result live_capture::dispatch(int max_packets, packet_callback on_packet) {
  if (stopped_) return result::end;
  auto* p = static_cast<pcap_t*>(handle_);
  dispatch_context context{on_packet, link_type_};
  int rc = dispatch_ring(p, max_packets, context);
  if (rc == 0) {
    bool ready = false;
    if (!wait_for_packets(&ready)) return result::end;
    if (gathering_ && ready && !gather(idle_since_wake_)) return result::end;
    idle_since_wake_ = !ready;
    rc = dispatch_ring(p, max_packets, context);
  }
  bytes_since_wake_ += context.ring_bytes;
  if (rc > 0) handed_ += static_cast<std::uint32_t>(rc);
  return rc > 0 ? result::packet : ended_or_timeout(rc);
}

live_capture::result live_capture::drain(int max_packets, packet_callback on_packet) {
  auto* p = static_cast<pcap_t*>(handle_);
  dispatch_context context{on_packet, link_type_};
  // stop()'s pcap_breakloop ends the first dispatch that looks at it, whichever that is.
  auto dispatch_past_break = [&] {
    int rc = dispatch_ring(p, max_packets, context);
    for (int breaks = 0; rc == PCAP_ERROR_BREAK && breaks < 2; ++breaks) rc = dispatch_ring(p, max_packets, context);
    return rc;
  };
  int rc = dispatch_past_break();
  // A block not handed over yet: the kernel hands it over at its timeout. Where the kernel's
  // counts cannot tell (loopback keeping sent copies, any), one timeout is waited for.
  if (rc == 0 && (holds_unhanded_packets() || (!counts_handed_ && !drain_waited_))) {
    drain_waited_ = true;
    poll_ready();
    rc = dispatch_past_break();
  }
  if (rc > 0) {
    handed_ += static_cast<std::uint32_t>(rc);
    return result::packet;
  }
  return rc == 0 && holds_unhanded_packets() ? result::timeout : result::end;
}

bool live_capture::holds_unhanded_packets() {
  pcap_stat st{};
  if (!counts_handed_ || pcap_stats(static_cast<pcap_t*>(handle_), &st) != 0) return false;
  // ps_recv counts the packets the kernel dropped too (the buffer was full).
  const std::uint32_t unhanded = static_cast<std::uint32_t>(st.ps_recv - st.ps_drop) - handed_;
  const std::int64_t now = now_us();
  if (unhanded != unhanded_seen_) {
    unhanded_seen_ = unhanded;
    unhanded_since_us_ = now;
  } else if (now - unhanded_since_us_ > std::int64_t{timeout_ms_} * 10'000) {
    // Ten times a block's timeout: a count that stays put so long is of packets libpcap
    // will never hand over.
    unhanded_settled_ = unhanded;  // a block's timeout is long past: libpcap skipped them
  }
  return unhanded != unhanded_settled_;
}

live_capture::result live_capture::ended_or_timeout(int rc) {
  if (rc == 0) return result::timeout;
  // PCAP_ERROR_BREAK: stop() (pcap_breakloop). PCAP_ERROR: the interface went down or
  // disappeared, or the socket failed; the caller reports failure().
  if (rc == PCAP_ERROR && !stopped_) failure_ = pcap_geterr(static_cast<pcap_t*>(handle_));
  return result::end;
}

std::int64_t live_capture::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void live_capture::stop() noexcept {
  stopped_ = true;
  if (handle_ != nullptr) pcap_breakloop(static_cast<pcap_t*>(handle_));
}

live_capture::drop_stats live_capture::stats() const {
  pcap_stat st{};
  drop_stats out;
  if (pcap_stats(static_cast<pcap_t*>(handle_), &st) == 0) {
    out.received = st.ps_recv;
    out.dropped = st.ps_drop;
    out.interface_dropped = st.ps_ifdrop;
  }
  return out;
}

}  // namespace lockscope::ingest
