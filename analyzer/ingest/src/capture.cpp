#include "lockscope/ingest/capture.hpp"

#include <pcap/pcap.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockscope::analyzer {

namespace {

constexpr std::size_t read_buffer_size = 1u << 20;

std::uint32_t swap32(std::uint32_t v) noexcept { return __builtin_bswap32(v); }

// Classic pcap files read with pread() into one reused buffer, records handed out as
// views of it. Not mmap: a mapped file that shrinks under the reader (a `tcpdump -C/-W`
// ring recycling it) kills the process with SIGBUS, and faulting in every page of a
// large capture costs more than the kernel's copy into a buffer that stays in cache
// (the analyze benchmark ran about twice as fast). libpcap itself copies each record
// through stdio a second time; this reads each byte once. pcapng and stdin go through
// libpcap.
class buffered_pcap {
 public:
  // > the largest record: libpcap allows 256 KiB for the link types that carry TCP
  // (larger records get the "bad dump file format" error below).
  static constexpr std::size_t buffer_size = 1u << 20;
  static constexpr std::size_t max_record = 256u << 10;

  ~buffered_pcap() { if (fd_ >= 0) ::close(fd_); }

  // Takes over `fd` when it holds a classic pcap file; false (fd untouched) otherwise.
  bool open(int fd, std::uint64_t size) {
    if (size < 24) return false;
    fd_ = fd;
    size_ = size;
    buffer_ = std::make_unique_for_overwrite<unsigned char[]>(buffer_size);
    std::string ignored;
    const unsigned char* h = ensure(24, ignored);
    if (h == nullptr) return fail_open();
    std::uint32_t magic;
    std::memcpy(&magic, h, 4);
    switch (magic) {
      case 0xa1b2c3d4u: break;
      case 0xa1b23c4du: nanos_ = true; break;
      case 0xd4c3b2a1u: swapped_ = true; break;
      case 0x4d3cb2a1u: swapped_ = nanos_ = true; break;
      default: return fail_open();
    }
    std::uint32_t network;
    std::memcpy(&network, h + 20, 4);
    if (swapped_) network = swap32(network);
    link_type_ = static_cast<int>(network & 0x03ffffffu);  // the high bits carry FCS flags
    consume(24);
    return true;
  }

  int link_type() const noexcept { return link_type_; }
  std::uint64_t position() const noexcept { return pos_; }

  // 1: a record; 0: the end; -1: damage (`error` says what, with the byte offset).
  // The record's bytes stay valid until the next call.
  int next(std::int64_t& ts_us, std::string_view& data, std::uint32_t& wire_length, std::string& error) {
    if (pos_ == size_) return 0;
    if (pos_ + 16 > size_) {
      error = "truncated dump file; the last record header is cut at byte " + std::to_string(pos_);
      return -1;
    }
    const unsigned char* h = ensure(16, error);
    if (h == nullptr) return -1;
    std::uint32_t f[4];
    std::memcpy(f, h, 16);
    if (swapped_) for (auto& v : f) v = swap32(v);
    const std::uint32_t caplen = f[2];
    if (caplen > max_record) {
      error = "bad dump file format; a record of " + std::to_string(caplen) + " bytes at byte " + std::to_string(pos_);
      return -1;
    }
    if (pos_ + 16 + caplen > size_) {
      error = "truncated dump file; tried to read " + std::to_string(caplen) + " captured bytes, only got " +
              std::to_string(size_ - pos_ - 16);
      return -1;
    }
    const unsigned char* record = ensure(16 + caplen, error);
    if (record == nullptr) return -1;
    ts_us = static_cast<std::int64_t>(f[0]) * 1'000'000 + (nanos_ ? f[1] / 1000 : f[1]);
    data = std::string_view(reinterpret_cast<const char*>(record + 16), caplen);
    wire_length = f[3];
    consume(16 + caplen);
    return 1;
  }

 private:
  bool fail_open() {
    fd_ = -1;  // the caller still owns it
    return false;
  }
  void consume(std::size_t n) noexcept {
    begin_ += n;
    pos_ += n;
  }
  // The next `length` bytes of the file (from pos_), refilling the buffer if needed;
  // nullptr with `error` set when the file ends early (it shrank since it was opened)
  // or cannot be read.
  const unsigned char* ensure(std::size_t length, std::string& error) {
    if (end_ - begin_ >= length) return buffer_.get() + begin_;
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    while (end_ < length) {
      const std::uint64_t file_offset = pos_ + end_;
      const ssize_t n = ::pread(fd_, buffer_.get() + end_, buffer_size - end_, static_cast<off_t>(file_offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = "read failed at byte " + std::to_string(file_offset) + ": " + std::strerror(errno);
        return nullptr;
      }
      if (n == 0) {
        error = "the file shrank while it was read (rewritten or truncated?): it ends at byte " +
                std::to_string(file_offset) + ", it held " + std::to_string(size_) + " bytes when opened";
        return nullptr;
      }
      end_ += static_cast<std::size_t>(n);
    }
    return buffer_.get();
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;  // file offset of buffer_[begin_]
  std::unique_ptr<unsigned char[]> buffer_;
  std::size_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  std::size_t end_ = 0;
  bool swapped_ = false;
  bool nanos_ = false;
  int link_type_ = 0;
};

}  // namespace

struct offline_capture::file {
  std::unique_ptr<char[]> buffer;  // the FILE's buffer: must outlive the handle
  std::unique_ptr<buffered_pcap> classic;  // classic pcap files; the rest go through libpcap
  std::string name;
  pcap_t* handle = nullptr;
  int link_type = 0;
  bool has_packet = false;
  bool done = false;
  std::string_view data;
  std::uint32_t wire_length = 0;
  std::int64_t ts_us = 0;
  std::size_t index = 0;
  ~file() {
    if (handle != nullptr) pcap_close(handle);  // before `buffer` is freed (declared first)
  }
};

offline_capture::offline_capture(const std::vector<std::string>& files, warning_handler warn)
    : warn_(std::move(warn)) {
  bool stdin_used = false;
  for (const std::string& name : files) {
    char error[PCAP_ERRBUF_SIZE] = {};
    auto f = std::make_unique<file>();
    f->name = name;
    f->index = files_.size();
    if (name == "-") {
      if (stdin_used) throw capture_error("-: standard input can be read only once");
      stdin_used = true;
      f->handle = pcap_fopen_offline_with_tstamp_precision(stdin, PCAP_TSTAMP_PRECISION_MICRO, error);
    } else {
      const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw capture_error(name + ": " + std::strerror(errno));
      struct stat st {};
      if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        total_bytes_ += static_cast<std::uint64_t>(st.st_size);
        auto classic = std::make_unique<buffered_pcap>();
        if (classic->open(fd, static_cast<std::uint64_t>(st.st_size))) {
          f->classic = std::move(classic);
          f->link_type = f->classic->link_type();
          files_.push_back(std::move(f));
          continue;
        }
      }
      // pcapng, a pipe, ...: libpcap, through a FILE with a large buffer (libpcap reads
      // record by record through stdio; the default 4 KiB buffer costs many read()s).
      std::FILE* fp = ::fdopen(fd, "rb");
      if (fp == nullptr) {
        ::close(fd);
        throw capture_error(name + ": " + std::strerror(errno));
      }
      f->buffer = std::make_unique<char[]>(read_buffer_size);
      std::setvbuf(fp, f->buffer.get(), _IOFBF, read_buffer_size);
      f->handle = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_MICRO, error);
      if (f->handle == nullptr) std::fclose(fp);  // on success pcap_close closes it
    }
    if (f->handle == nullptr) throw capture_error(name + ": " + error);
    f->link_type = pcap_datalink(f->handle);
    files_.push_back(std::move(f));
  }
  for (auto& f : files_) advance(*f);
}

offline_capture::~offline_capture() = default;

bool offline_capture::advance(file& f) {
  f.has_packet = false;
  if (f.done) return false;
  if (f.classic) {
    std::string error;
    const int rc = f.classic->next(f.ts_us, f.data, f.wire_length, error);
    if (rc == 1) {
      f.has_packet = true;
      return true;
    }
    f.done = true;
    if (rc < 0 && warn_) warn_(f.name + ": " + error + "; read up to the damage");
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
    return true;
  }
  f.done = true;
  if (rc == PCAP_ERROR && warn_) {
    // Typically "truncated dump file": everything before the damage was read.
    warn_(f.name + ": " + pcap_geterr(f.handle) + "; read up to the damage");
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
    if (f->name == "-") continue;
    if (f->done) {
      struct stat st {};
      if (::stat(f->name.c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
      continue;
    }
    if (f->classic) {
      total += f->classic->position();
      continue;
    }
    std::FILE* fp = pcap_file(f->handle);
    if (fp != nullptr) {
      const long at = std::ftell(fp);
      if (at > 0) total += static_cast<std::uint64_t>(at);
    }
  }
  return total;
}

std::string port_filter(const std::vector<std::uint16_t>& ports) {
  std::string ports_expr;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) ports_expr += " or ";
    ports_expr += "tcp port " + std::to_string(ports[i]);
  }
  if (ports_expr.empty()) return "tcp";
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
  pcap_set_immediate_mode(p, 1);
  pcap_set_buffer_size(p, options.buffer_mb * 1024 * 1024);
  const int rc = pcap_activate(p);
  if (rc < 0) {
    std::string message;
    if (rc == PCAP_ERROR_PERM_DENIED) {
      message = options.interface +
                ": permission denied: live capture needs CAP_NET_RAW (run as root, or "
                "`setcap cap_net_raw,cap_net_admin=eip` on the lockscope binary)";
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
  const std::string filter = options.filter.empty() ? port_filter(options.ports) : options.filter;
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

live_capture::result live_capture::next(captured_packet& out) {
  if (stopped_) return result::end;
  auto* p = static_cast<pcap_t*>(handle_);
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  int rc = pcap_next_ex(p, &header, &data);
  if (rc == 0) {
    const int fd = pcap_get_selectable_fd(p);
    if (fd >= 0) {
      pollfd waiter{fd, POLLIN, 0};
      ::poll(&waiter, 1, timeout_ms_);  // EINTR (a signal) is fine: the caller checks
    }
    if (stopped_) return result::end;
    rc = pcap_next_ex(p, &header, &data);
  }
  if (rc == 0) return result::timeout;
  if (rc != 1) return result::end;
  out.ts_us = static_cast<std::int64_t>(header->ts.tv_sec) * 1'000'000 + header->ts.tv_usec;
  out.link_type = link_type_;
  out.data = std::string_view(reinterpret_cast<const char*>(data), header->caplen);
  out.wire_length = header->len;
  out.source = 0;
  return result::packet;
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
