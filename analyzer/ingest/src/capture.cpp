#include "lockscope/ingest/capture.hpp"

#include <pcap/pcap.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "lockscope/ingest/clock_steps.hpp"

namespace lockscope::analyzer {

namespace {

std::uint32_t swap32(std::uint32_t v) noexcept { return __builtin_bswap32(v); }

// The compression a file's first bytes show ("gzip", "zstd", …), or empty. Captures are
// often kept compressed; libpcap reads none of these, and only says "unknown file format".
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

// How long a read of a pipe waits before it checks reading_stopped again: a signal may
// be handled on another thread than the one blocked in read().
constexpr int stop_check_ms = 100;

bool is_classic_pcap_magic(std::uint32_t magic) noexcept {
  return magic == 0xa1b2c3d4u || magic == 0xa1b23c4du || magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
}

// One input's bytes, read with read(), whatever reads them (our pcap reader or libpcap).
//
// Why read() and not mmap (which this code used before): a capture file truncated or
// rewritten while it is read — `tcpdump -C … -W …` recycles its ring files — turns
// every later touch of a mapped page past the new end into SIGBUS. The touches happen
// anywhere a packet view is read, in the decoder long after the capture code returned
// it, so a sigsetjmp guard around the capture code's own accesses cannot cover them,
// and a process-wide SIGBUS handler in a library would fight the application's and the
// sanitizers' own. With read(), a truncation can only show up as a short read: the
// bytes already copied stay valid, everything before the damage is decoded, and the
// reader stops with an error naming the file and the offset. The one extra copy (kernel
// to a buffer that stays in cache) is cheap next to decoding; read() also serves pipes,
// FIFOs and stdin, so every input goes the same way.
class byte_source {
 public:
  // `stopped`: the owner's stop flag (offline_capture::stop), checked with the global one.
  byte_source(std::string name, int fd, bool owns_fd, const volatile std::sig_atomic_t& stopped)
      : name_(std::move(name)), fd_(fd), owns_fd_(owns_fd), stopped_(stopped) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      regular_ = true;
      size_at_open_ = static_cast<std::uint64_t>(st.st_size);
    }
  }
  ~byte_source() {
    if (owns_fd_) ::close(fd_);
  }
  byte_source(const byte_source&) = delete;
  byte_source& operator=(const byte_source&) = delete;

  // Up to `max` bytes into `out`; 0 at the end (or when the file changed: see changed()),
  // -1 on a read error (errno set). A regular file is read up to the size it had when
  // opened, so one still being written ends where it ended then.
  ssize_t read_some(char* out, std::size_t max) {
    if (regular_) {
      // Checked before every read (two system calls per buffer refill): a file that
      // shrank was truncated, one whose first bytes (the file header and the first
      // record's timestamp) changed was rewritten — what it holds now is not the
      // continuation of what was read.
      if (consumed_ > 0 && file_changed()) return 0;
      max = static_cast<std::size_t>(std::min<std::uint64_t>(max, size_at_open_ - consumed_));
      if (max == 0) return 0;
    }
    for (;;) {
      if (reading_stopped || stopped_) return 0;
      if (!regular_) {
        pollfd ready{fd_, POLLIN, 0};
        if (::poll(&ready, 1, stop_check_ms) <= 0) continue;  // nothing yet, or EINTR
      }
      const ssize_t n = ::read(fd_, out, max);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0 && consumed_ == 0) first_bytes_.assign(out, std::min<std::size_t>(static_cast<std::size_t>(n), 40));
      if (n > 0) consumed_ += static_cast<std::uint64_t>(n);
      if (n == 0 && regular_ && consumed_ < size_at_open_) {
        // Shrunk between the fstat and the read.
        struct stat st {};
        changed_size_ = ::fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : consumed_;
      }
      return n;
    }
  }

  const std::string& name() const noexcept { return name_; }
  bool regular() const noexcept { return regular_; }
  std::uint64_t size_at_open() const noexcept { return size_at_open_; }
  std::uint64_t consumed() const noexcept { return consumed_; }
  bool changed() const noexcept { return changed_size_.has_value(); }

  // The error for a file that changed under the reader; `at`: where reading stopped.
  std::string changed_message(std::uint64_t at) const {
    const std::string how = rewritten_ ? "its first bytes differ now: it was rewritten"
                                       : "it shrank from " + std::to_string(size_at_open_) + " to " +
                                             std::to_string(changed_size_.value_or(0)) + " bytes";
    return "the file changed while being read (" + how +
           "; tcpdump -C/-W does this to its ring files); stopped at byte " + std::to_string(at) +
           ", everything before it was read";
  }

 private:
  bool file_changed() {
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < size_at_open_) {
      changed_size_ = static_cast<std::uint64_t>(st.st_size);
      return true;
    }
    char now[40];
    const ssize_t n = ::pread(fd_, now, first_bytes_.size(), 0);
    if (n >= 0 && std::string_view(now, static_cast<std::size_t>(n)) != first_bytes_) {
      rewritten_ = true;
      changed_size_ = static_cast<std::uint64_t>(st.st_size);
      return true;
    }
    return false;
  }

  std::string name_;
  int fd_;
  bool owns_fd_;
  const volatile std::sig_atomic_t& stopped_;
  bool regular_ = false;
  std::uint64_t size_at_open_ = 0;
  std::uint64_t consumed_ = 0;
  std::optional<std::uint64_t> changed_size_;
  std::string first_bytes_;  // as read first: compared before every later read
  bool rewritten_ = false;
};

// Classic pcap records handed out as views into one buffer, refilled with read(): no
// copy per record (libpcap copies every record again through stdio).
class pcap_reader {
 public:
  // libpcap's largest snaplen (MAXIMUM_SNAPLEN); larger records are damage.
  static constexpr std::size_t max_record = 262144;
  static constexpr std::size_t buffer_size = 1u << 20;

  explicit pcap_reader(byte_source& source) : source_(source), buffer_(new char[buffer_size]) {}

  // Reads up to the first `n` bytes; what the buffer holds, for sniffing the format.
  std::string_view peek(std::size_t n) {
    fill(n);
    return {buffer_.get() + begin_, end_ - begin_};
  }

  // Takes the file header once peek() showed classic pcap magic.
  bool open() {
    const std::string_view h = peek(24);
    if (h.size() < 24) return false;
    std::uint32_t magic;
    std::memcpy(&magic, h.data(), 4);
    if (!is_classic_pcap_magic(magic)) return false;
    swapped_ = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
    nanos_ = magic == 0xa1b23c4du || magic == 0x4d3cb2a1u;
    std::uint32_t network;
    std::memcpy(&network, h.data() + 20, 4);
    if (swapped_) network = swap32(network);
    link_type_ = static_cast<int>(network & 0x03ffffffu);  // the high bits carry FCS flags
    begin_ += 24;
    return true;
  }

  int link_type() const noexcept { return link_type_; }
  // The file offset of the next record.
  std::uint64_t position() const noexcept { return base_ + begin_; }
  // The bytes read but not yet handed out (libpcap gets them first when the file is
  // not classic pcap).
  std::string_view buffered() const noexcept { return {buffer_.get() + begin_, end_ - begin_}; }

  // 1: a record (`data` valid until the next call); 0: the end; -1: damage or a file
  // changed under the reader (`error` says what, naming the offset).
  int next(std::int64_t& ts_us, std::string_view& data, std::uint32_t& wire_length, std::string& error) {
    if (!fill(16)) return stop(16, error);
    std::uint32_t f[4];
    std::memcpy(f, buffer_.get() + begin_, 16);
    if (swapped_) for (auto& v : f) v = swap32(v);
    const std::uint32_t caplen = f[2];
    if (caplen > max_record) {
      error = "bad dump file format; a record of " + std::to_string(caplen) + " bytes at byte " +
              std::to_string(position());
      return -1;
    }
    if (!fill(16 + caplen)) return stop(16 + caplen, error);
    ts_us = static_cast<std::int64_t>(f[0]) * 1'000'000 + (nanos_ ? f[1] / 1000 : f[1]);
    data = std::string_view(buffer_.get() + begin_ + 16, caplen);
    wire_length = f[3];
    begin_ += 16 + caplen;
    return 1;
  }

 private:
  // Makes `need` bytes available at begin_; false when the input ends (or fails) first.
  bool fill(std::size_t need) {
    if (end_ - begin_ >= need) return true;
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      base_ += begin_;
      end_ -= begin_;
      begin_ = 0;
    }
    // Pipes return what is there: decode it now rather than wait for a full buffer.
    while (end_ < need) {
      const ssize_t n = source_.read_some(buffer_.get() + end_, buffer_size - end_);
      if (n <= 0) {
        if (n < 0) read_errno_ = errno;
        return false;
      }
      end_ += static_cast<std::size_t>(n);
    }
    return true;
  }

  int stop(std::size_t need, std::string& error) {
    const std::size_t have = end_ - begin_;
    if (source_.changed()) {
      error = source_.changed_message(position());
    } else if (read_errno_ != 0) {
      error = "read error at byte " + std::to_string(base_ + end_) + ": " + std::strerror(read_errno_);
    } else if (have == 0) {
      return 0;
    } else {
      error = "truncated dump file; the record at byte " + std::to_string(position()) + " needs " +
              std::to_string(need) + " bytes, only " + std::to_string(have) + " remain";
    }
    return -1;
  }

  byte_source& source_;
  std::unique_ptr<char[]> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t base_ = 0;  // the file offset of buffer_[0]
  int read_errno_ = 0;
  bool swapped_ = false;
  bool nanos_ = false;
  int link_type_ = 0;
};

// A stdio stream for libpcap (pcapng) over a byte_source: it first returns the bytes
// already read to sniff the format (stdin and pipes cannot seek back), and counts the
// offset for error messages.
struct libpcap_stream {
  byte_source* source;
  std::string prefix;
  std::size_t prefix_used = 0;
  std::uint64_t offset = 0;

  static ssize_t read(void* cookie, char* out, std::size_t size) {
    auto* s = static_cast<libpcap_stream*>(cookie);
    if (s->prefix_used < s->prefix.size()) {
      const std::size_t n = std::min(size, s->prefix.size() - s->prefix_used);
      std::memcpy(out, s->prefix.data() + s->prefix_used, n);
      s->prefix_used += n;
      s->offset += n;
      return static_cast<ssize_t>(n);
    }
    const ssize_t n = s->source->read_some(out, size);
    if (n > 0) s->offset += static_cast<std::uint64_t>(n);
    return n;
  }
  // Only "where am I" (ftell) is supported.
  static int seek(void* cookie, off64_t* where, int whence) {
    if (whence != SEEK_CUR || *where != 0) {
      errno = ESPIPE;
      return -1;
    }
    *where = static_cast<off64_t>(static_cast<libpcap_stream*>(cookie)->offset);
    return 0;
  }
};

}  // namespace

struct offline_capture::file {
  std::unique_ptr<byte_source> source;
  std::unique_ptr<pcap_reader> reader;     // classic pcap
  std::unique_ptr<libpcap_stream> stream;  // pcapng: libpcap reads through it
  std::unique_ptr<char[]> buffer;          // the stream's stdio buffer: must outlive the handle
  pcap_t* handle = nullptr;
  int link_type = 0;
  bool has_packet = false;
  bool done = false;
  std::string_view data;
  std::uint32_t wire_length = 0;
  std::int64_t ts_us = 0;
  std::size_t index = 0;
  std::uint64_t packets = 0;  // read so far: the number of the current one
  packet_clock_watch clock;
  unsigned clock_steps = 0;   // reported
  ~file() {
    if (handle != nullptr) pcap_close(handle);  // closes the stream; before `buffer` is freed
  }
};

offline_capture::offline_capture(const std::vector<std::string>& files, warning_handler warn, warning_handler error)
    : warn_(std::move(warn)), error_(std::move(error)) {
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
    f->reader = std::make_unique<pcap_reader>(*f->source);
    if (f->reader->open()) {
      f->link_type = f->reader->link_type();
      files_.push_back(std::move(f));
      continue;
    }
    // pcapng (or not a capture): libpcap, through a stream that replays the sniffed
    // bytes, with a large stdio buffer (libpcap reads record by record).
    f->stream = std::make_unique<libpcap_stream>();
    f->stream->source = f->source.get();
    f->stream->prefix = std::string(f->reader->buffered());
    f->reader.reset();
    std::FILE* fp = ::fopencookie(f->stream.get(), "rb",
                                  cookie_io_functions_t{&libpcap_stream::read, nullptr, &libpcap_stream::seek, nullptr});
    if (fp == nullptr) throw capture_error(name + ": " + std::strerror(errno));
    f->buffer = std::make_unique<char[]>(pcap_reader::buffer_size);
    std::setvbuf(fp, f->buffer.get(), _IOFBF, pcap_reader::buffer_size);
    char message[PCAP_ERRBUF_SIZE] = {};
    f->handle = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_MICRO, message);
    if (f->handle == nullptr) {
      std::fclose(fp);  // on success pcap_close closes it
      if (const std::string_view how = compressed_as(f->stream->prefix); !how.empty()) {
        throw capture_error(name + ": " + std::string(how) + "-compressed, not a capture: decompress it first (" +
                            std::string(decompressor_of(how)) + " " + name + " | lockscope … -)");
      }
      throw capture_error(name + ": " + message);
    }
    f->link_type = pcap_datalink(f->handle);
    files_.push_back(std::move(f));
  }
  for (auto& f : files_) advance(*f);
}

offline_capture::~offline_capture() = default;

void stop_reading_captures() noexcept { reading_stopped = 1; }

bool reading_captures_stopped() noexcept { return reading_stopped != 0; }

void offline_capture::report(const file& f, const std::string& message) {
  if (f.source->changed()) {
    ++changed_files_;
    if (error_) error_(f.source->name() + ": " + message);
    else if (warn_) warn_(f.source->name() + ": " + message);
  } else if (warn_) {
    warn_(f.source->name() + ": " + message + "; read up to the damage");
  }
}

void offline_capture::check_clock(file& f) {
  ++f.packets;
  const std::int64_t back = f.clock.on_packet(f.ts_us);
  if (back == 0 || !warn_) return;
  constexpr unsigned max_reported = 10;
  if (++f.clock_steps > max_reported) return;
  warn_(fmt::format("{}: packet {}: its time is {:.6f} s before the previous packet's: the capturing host's clock "
                    "was stepped back; waits, holds and leases that span it are measured across the step{}",
                    f.source->name(), f.packets, static_cast<double>(back) / 1e6,
                    f.clock_steps == max_reported ? " (further steps in this file are not reported)" : ""));
}

bool offline_capture::advance(file& f) {
  f.has_packet = false;
  if (f.done) return false;
  if (f.reader) {
    std::string error;
    const int rc = f.reader->next(f.ts_us, f.data, f.wire_length, error);
    if (rc == 1) {
      f.has_packet = true;
      check_clock(f);
      return true;
    }
    f.done = true;
    if (rc < 0) report(f, error);
    return false;
  }
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(f.handle, &header, &data);
  if (rc == 1) {
    f.has_packet = true;
    f.ts_us = static_cast<std::int64_t>(header->ts.tv_sec) * 1'000'000 + header->ts.tv_usec;
    f.data = std::string_view(reinterpret_cast<const char*>(data), header->caplen);
    f.wire_length = header->len;
    // pcapng may change the link type per interface.
    f.link_type = pcap_datalink(f.handle);
    check_clock(f);
    return true;
  }
  f.done = true;
  if (f.source->changed()) {
    // libpcap saw the end of a shrunk file; where its last whole block ended is not
    // known to it, so name where the bytes stopped.
    report(f, f.source->changed_message(f.stream->offset));
  } else if (rc == PCAP_ERROR) {
    // Typically "truncated dump file": everything before the damage was read.
    report(f, std::string(pcap_geterr(f.handle)) + " (the input ended at byte " + std::to_string(f.stream->offset) +
                  ")");
  }
  return false;
}

bool offline_capture::next(captured_packet& out) {
  if (last_ != nullptr) {
    advance(*last_);
    last_ = nullptr;
  }
  file* best = nullptr;
  for (auto& f : files_) {
    if (f->has_packet && (best == nullptr || f->ts_us < best->ts_us)) best = f.get();
  }
  if (best == nullptr) return false;
  out.ts_us = best->ts_us;
  out.link_type = best->link_type;
  out.data = best->data;
  out.wire_length = best->wire_length;
  out.source = best->index;
  last_ = best;
  return true;
}

std::uint64_t offline_capture::bytes_read() const {
  std::uint64_t total = 0;
  for (const auto& f : files_) {
    if (!f->source->regular()) continue;
    if (f->done) total += f->source->size_at_open();
    else if (f->reader) total += f->reader->position();
    else total += f->stream->offset;
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
}

live_capture::~live_capture() {
  if (handle_ != nullptr) pcap_close(static_cast<pcap_t*>(handle_));
}

bool live_capture::wait_for_packets() {
  const int fd = pcap_get_selectable_fd(static_cast<pcap_t*>(handle_));
  if (fd >= 0) {
    pollfd waiter{fd, POLLIN, 0};
    ::poll(&waiter, 1, timeout_ms_);  // EINTR (a signal) is fine: stopped_ says
  }
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
  return result::packet;
}

namespace {
struct dispatch_context {
  packet_source::packet_callback& on_packet;
  int link_type;
};

void on_ring_packet(u_char* user, const pcap_pkthdr* header, const u_char* data) {
  const auto& c = *reinterpret_cast<dispatch_context*>(user);
  captured_packet p;
  p.ts_us = static_cast<std::int64_t>(header->ts.tv_sec) * 1'000'000 + header->ts.tv_usec;
  p.link_type = c.link_type;
  p.data = std::string_view(reinterpret_cast<const char*>(data), header->caplen);
  p.wire_length = header->len;
  c.on_packet(p);
}
}  // namespace

packet_source::result packet_source::dispatch(int max_packets, packet_callback on_packet) {
  static_cast<void>(max_packets);
  captured_packet p;
  const result r = next(p);
  if (r == result::packet) on_packet(p);
  return r;
}

live_capture::result live_capture::dispatch(int max_packets, packet_callback on_packet) {
  if (stopped_) return result::end;
  auto* p = static_cast<pcap_t*>(handle_);
  dispatch_context context{on_packet, link_type_};
  auto* user = reinterpret_cast<u_char*>(&context);
  const int count = std::max(max_packets, 1);
  int rc = pcap_dispatch(p, count, on_ring_packet, user);
  if (rc == 0) {
    if (!wait_for_packets()) return result::end;
    rc = pcap_dispatch(p, count, on_ring_packet, user);
  }
  return rc > 0 ? result::packet : ended_or_timeout(rc);
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

}  // namespace lockscope::analyzer
