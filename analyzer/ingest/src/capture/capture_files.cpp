#include "capture_files.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/clock_steps.hpp"

namespace lockscope::ingest::capture_files {

namespace {

// 128-bit products for time units (GCC and clang; __extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

// How long a read of a pipe waits before it checks the stop flags again: a signal may
// be handled on another thread than the one blocked in read().
constexpr int stop_check_ms = 100;

std::uint32_t load32(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

// ---- byte_source ----

byte_source::byte_source(std::string name, int fd, bool owns_fd, const volatile std::sig_atomic_t& stopped)
    : name_(std::move(name)), fd_(fd), owns_fd_(owns_fd), stopped_(stopped) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    regular_ = true;
    size_at_open_ = static_cast<std::uint64_t>(st.st_size);
  }
}

byte_source::~byte_source() {
  if (owns_fd_) ::close(fd_);
}

ssize_t byte_source::read_some(char* out, std::size_t max) {
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
    if (reading_captures_stopped() || stopped_) return 0;
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

std::string byte_source::changed_message(std::uint64_t at) const {
  const std::string how = rewritten_ ? "its first bytes differ now: it was rewritten"
                                     : "it shrank from " + std::to_string(size_at_open_) + " to " +
                                           std::to_string(changed_size_.value_or(0)) + " bytes";
  return "the file changed while being read (" + how +
         "; tcpdump -C/-W does this to its ring files); stopped at byte " + std::to_string(at) +
         ", everything before it was read";
}

bool byte_source::file_changed() {
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

// ---- record_reader ----

record_reader::record_reader(byte_source& source) : source_(source), buffer_(new char[buffer_size]) {}

std::string_view record_reader::peek(std::size_t n) {
  fill(n);
  return {data(), std::min(n, available())};
}

void record_reader::take_buffer(record_reader& from) {
  buffer_ = std::move(from.buffer_);
  begin_ = from.begin_;
  end_ = from.end_;
  base_ = from.base_;
  read_errno_ = from.read_errno_;
  from.begin_ = from.end_ = 0;
}

bool record_reader::refill(std::size_t need) {
  if (begin_ > 0) {
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    base_ += begin_;
    end_ -= begin_;
    begin_ = 0;
  }
  // Pipes return what is there: decode it now rather than wait for a full buffer.
  while (end_ < need) {
    const ssize_t n = source_.read_some(buffer_.get() + end_, std::min(buffer_size - end_, std::max(read_bytes, need - end_)));
    if (n <= 0) {
      if (n < 0) read_errno_ = errno;
      return false;
    }
    end_ += static_cast<std::size_t>(n);
  }
  return true;
}

bool record_reader::skip(std::uint64_t n) {
  for (;;) {
    const std::size_t have = end_ - begin_;
    if (n <= have) {
      begin_ += static_cast<std::size_t>(n);
      return true;
    }
    n -= have;
    base_ += end_;
    begin_ = end_ = 0;
    const ssize_t got = source_.read_some(buffer_.get(), read_bytes);
    if (got <= 0) {
      if (got < 0) read_errno_ = errno;
      return false;
    }
    end_ = static_cast<std::size_t>(got);
  }
}

int record_reader::stop(const char* what, std::uint64_t at, std::uint64_t need, std::string& error) const {
  const std::uint64_t have = base_ + end_ - at;
  if (source_.changed()) {
    error = source_.changed_message(at);
  } else if (read_errno_ != 0) {
    error = "read error at byte " + std::to_string(base_ + end_) + ": " + std::strerror(read_errno_) +
            "; stopped there, everything before it was read";
  } else if (have == 0) {
    return 0;
  } else {
    error = fmt::format("truncated dump file; the {} at byte {} needs {} bytes, only {} remain", what, at, need, have);
  }
  return -1;
}

// ---- classic pcap ----

bool is_classic_pcap_magic(std::uint32_t magic) noexcept {
  return magic == 0xa1b2c3d4u || magic == 0xa1b23c4du || magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
}

bool pcap_reader::open() {
  const std::string_view h = peek(24);
  if (h.size() < 24) return false;
  const std::uint32_t magic = load32(h.data());
  if (!is_classic_pcap_magic(magic)) return false;
  swapped_ = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
  nanos_ = magic == 0xa1b23c4du || magic == 0x4d3cb2a1u;
  std::uint32_t network = load32(h.data() + 20);
  if (swapped_) network = __builtin_bswap32(network);
  link_type_ = static_cast<int>(network & 0x03ffffffu);  // the high bits carry FCS flags
  consume(24);
  return true;
}

int pcap_reader::next(file_record& out, std::string& error) {
  const std::uint64_t at = position();
  if (!fill(16)) return stop("record", at, 16, error);
  std::uint32_t f[4];
  std::memcpy(f, data(), 16);
  if (swapped_) for (auto& v : f) v = __builtin_bswap32(v);
  const std::uint32_t caplen = f[2];
  if (caplen > max_record) {
    error = "bad dump file format; a record of " + std::to_string(caplen) + " bytes at byte " + std::to_string(at);
    return -1;
  }
  if (!fill(16 + caplen)) return stop("record", at, 16 + caplen, error);
  out.ts_us = static_cast<std::int64_t>(f[0]) * 1'000'000 + (nanos_ ? f[1] / 1000 : f[1]);
  out.data = std::string_view(data() + 16, caplen);
  out.wire_length = f[3];
  out.link_type = link_type_;
  out.interface = 0;
  consume(16 + caplen);
  return 1;
}

// ---- pcapng ----

namespace {

constexpr std::uint32_t section_header_block = 0x0A0D0D0Au;  // the same in either byte order
constexpr std::uint32_t interface_description_block = 1;
constexpr std::uint32_t obsolete_packet_block = 2;
constexpr std::uint32_t simple_packet_block = 3;
constexpr std::uint32_t enhanced_packet_block = 6;
constexpr std::uint32_t byte_order_magic = 0x1A2B3C4Du;

constexpr std::uint16_t opt_endofopt = 0;
constexpr std::uint16_t if_tsresol = 9;
constexpr std::uint16_t if_tsoffset = 14;
constexpr std::uint16_t if_name = 2;
constexpr std::uint32_t interface_statistics_block = 5;
constexpr std::uint16_t isb_ifdrop = 5;
constexpr std::uint16_t isb_osdrop = 7;
constexpr std::uint64_t unknown_count = ~std::uint64_t{0};  // dumpcap's "no statistics"

constexpr std::int64_t powers_of_ten[] = {1,           10,           100,           1'000,          10'000,
                                          100'000,     1'000'000,    10'000'000,    100'000'000,    1'000'000'000,
                                          10'000'000'000, 100'000'000'000, 1'000'000'000'000};

}  // namespace

std::uint16_t pcapng_reader::u16(const char* p) const noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return swapped_ ? __builtin_bswap16(v) : v;
}
std::uint32_t pcapng_reader::u32(const char* p) const noexcept {
  const std::uint32_t v = load32(p);
  return swapped_ ? __builtin_bswap32(v) : v;
}
std::uint64_t pcapng_reader::u64(const char* p) const noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return swapped_ ? __builtin_bswap64(v) : v;
}

bool pcapng_reader::open() {
  const std::string_view h = peek(12);
  return h.size() >= 12 && load32(h.data()) == section_header_block;
}

int pcapng_reader::damaged(std::uint64_t at, const std::string& what, std::string& error) const {
  error = fmt::format("bad pcapng block at byte {}: {}", at, what);
  return -1;
}

int pcapng_reader::section_header(std::uint64_t at, std::uint32_t length, std::string& error) {
  if (length < 28) return damaged(at, fmt::format("a section header of {} bytes (at least 28)", length), error);
  const std::uint16_t major = u16(data() + 12);
  const std::uint16_t minor = u16(data() + 14);
  if (major != 1) return damaged(at, fmt::format("pcapng version {}.{} (only 1.x is known)", major, minor), error);
  // Interface numbers start again in every section.
  earlier_interfaces_ += static_cast<std::uint32_t>(interfaces_.size());
  interfaces_.clear();
  return 1;
}

int pcapng_reader::interface_description(std::uint64_t at, std::uint32_t length, std::string& error) {
  if (length < 20) return damaged(at, fmt::format("an interface description of {} bytes (at least 20)", length), error);
  if (interfaces() >= max_interfaces) {
    return damaged(at, fmt::format("a file that describes more than {} interfaces", max_interfaces), error);
  }
  interface i;
  i.link_type = u16(data() + 8);
  i.snaplen = u32(data() + 12);
  const char* p = data() + 16;
  const char* const end = data() + length - 4;
  while (end - p >= 4) {
    const std::uint16_t code = u16(p);
    const std::uint16_t size = u16(p + 2);
    p += 4;
    if (code == opt_endofopt) break;
    if (size > end - p) return damaged(at, fmt::format("interface option {} runs past the block", code), error);
    if (code == if_tsresol && size >= 1) {
      i.resolution = static_cast<std::uint8_t>(*p);
      const unsigned exponent = i.resolution & 0x7fu;
      if ((i.resolution & 0x80u) == 0 ? exponent > 12 : exponent > 63) {
        return damaged(at, fmt::format("a time resolution of {}^-{} s (finer than this reader takes)",
                                       (i.resolution & 0x80u) == 0 ? 10 : 2, exponent),
                       error);
      }
    } else if (code == if_name) {
      i.name.assign(p, std::min<std::size_t>(size, max_name_bytes));
      if (const auto nul = i.name.find('\0'); nul != std::string::npos) i.name.resize(nul);
    } else if (code == if_tsoffset && size >= 8) {
      // Seconds; a damaged offset of more than ±292,000 years is clamped.
      constexpr std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 1'000'000;
      i.offset_us = std::clamp(static_cast<std::int64_t>(u64(p)), -limit, limit) * 1'000'000;
    }
    p += (size + 3u) & ~3u;
  }
  names_.push_back(i.name);
  dropped_.push_back(unknown_count);
  interfaces_.push_back(std::move(i));
  return 1;
}

void pcapng_reader::interface_statistics(std::uint32_t length) {
  // Statistics are no packets: a block too short, of an interface not described, or with
  // options that run past it, is left out rather than ending the file.
  if (length < 24) return;
  const std::uint32_t id = u32(data() + 8);
  if (id >= interfaces_.size()) return;
  std::uint64_t ifdrop = unknown_count, osdrop = unknown_count;
  const char* p = data() + 20;
  const char* const end = data() + length - 4;
  while (end - p >= 4) {
    const std::uint16_t code = u16(p);
    const std::uint16_t size = u16(p + 2);
    p += 4;
    if (code == opt_endofopt || size > end - p) break;
    if (code == isb_ifdrop && size == 8) ifdrop = u64(p);
    if (code == isb_osdrop && size == 8) osdrop = u64(p);
    p += (size + 3u) & ~3u;
  }
  if (ifdrop == unknown_count && osdrop == unknown_count) return;
  dropped_[earlier_interfaces_ + id] =
      (ifdrop == unknown_count ? 0 : ifdrop) + (osdrop == unknown_count ? 0 : osdrop);
}

std::vector<record_reader::recorded_drops> pcapng_reader::drops() const {
  std::vector<recorded_drops> out;
  for (std::uint32_t i = 0; i < dropped_.size(); ++i) {
    if (dropped_[i] != unknown_count) out.push_back({i, names_[i], dropped_[i]});
  }
  return out;
}

std::int64_t pcapng_reader::time_us(const interface& i, std::uint32_t high, std::uint32_t low) noexcept {
  const std::uint64_t units = (static_cast<std::uint64_t>(high) << 32) | low;
  const unsigned exponent = i.resolution & 0x7fu;
  int128 us;
  if ((i.resolution & 0x80u) != 0) {
    us = static_cast<int128>((static_cast<uint128>(units) * 1'000'000u) >> exponent);
  } else if (exponent <= 6) {
    us = static_cast<int128>(units) * powers_of_ten[6 - exponent];
  } else {
    us = units / static_cast<std::uint64_t>(powers_of_ten[exponent - 6]);
  }
  us += i.offset_us;
  // Damaged times (a file of the year 300,000, or of before 1970 through a negative
  // if_tsoffset) are clamped rather than wrapped, to 0 … 2^62 - 1 µs (146,000 years), the
  // range of a classic pcap and more. Not the int64 range: the merge and the clock-step
  // check subtract two packets' times, and the timeline adds leases to them, which must
  // not overflow. Not below 0: times print as seconds.micros, and -1 means "none" in the
  // timeline.
  constexpr int128 largest = max_time_us;
  if (us < 0 || us > largest) ++clamped_times_;
  return static_cast<std::int64_t>(std::clamp<int128>(us, 0, largest));
}

int pcapng_reader::next(file_record& out, std::string& error) {
  for (;;) {
    const std::uint64_t at = position();
    if (!fill(8)) return stop("block", at, 8, error);
    const std::uint32_t type_raw = load32(data());
    if (type_raw == section_header_block) {
      // A new section may change the byte order: its magic says which.
      if (!fill(12)) return stop("block", at, 12, error);
      const std::uint32_t magic = load32(data() + 8);
      if (magic == byte_order_magic) swapped_ = false;
      else if (magic == __builtin_bswap32(byte_order_magic)) swapped_ = true;
      else return damaged(at, fmt::format("a section header with byte-order magic {:#010x}", magic), error);
    }
    const std::uint32_t type = swapped_ ? __builtin_bswap32(type_raw) : type_raw;
    const std::uint32_t length = u32(data() + 4);
    if (length < 12 || length % 4 != 0) {
      return damaged(at, fmt::format("a block length of {} (a multiple of 4, at least 12)", length), error);
    }
    const bool packet = type == enhanced_packet_block || type == simple_packet_block || type == obsolete_packet_block;
    if (!packet && type != section_header_block && type != interface_description_block &&
        (type != interface_statistics_block || length > buffer_size)) {
      if (!skip(length)) return stop("block", at, length, error);
      continue;
    }
    if (length > buffer_size) {
      return damaged(at, fmt::format("a block of {} bytes (a packet's block is at most {})", length, buffer_size),
                     error);
    }
    if (!fill(length)) return stop("block", at, length, error);
    if (const std::uint32_t trailing = u32(data() + length - 4); trailing != length) {
      return damaged(at, fmt::format("its trailing length {} differs from its leading length {}", trailing, length),
                     error);
    }
    if (type == interface_statistics_block) {
      interface_statistics(length);
      consume(length);
      continue;
    }
    if (type == section_header_block || type == interface_description_block) {
      const int rc = type == section_header_block ? section_header(at, length, error)
                                                  : interface_description(at, length, error);
      if (rc < 0) return rc;
      consume(length);
      continue;
    }
    const char* body = data() + 8;
    const std::uint32_t body_length = length - 12;
    std::uint32_t interface_id = 0;
    std::uint32_t captured = 0;
    std::uint32_t header = 20;
    if (type == simple_packet_block) {
      if (body_length < 4) return damaged(at, "a simple packet block with no length", error);
      header = 4;
      out.wire_length = u32(body);
    } else {
      if (body_length < 20) return damaged(at, fmt::format("a packet block of {} bytes (at least 32)", length), error);
      interface_id = type == enhanced_packet_block ? u32(body) : u16(body);
      captured = u32(body + 12);
      out.wire_length = u32(body + 16);
    }
    if (interface_id >= interfaces_.size()) {
      return damaged(at, fmt::format("a packet of interface {}, but its section describes {}", interface_id,
                                     interfaces_.size()),
                     error);
    }
    const interface& i = interfaces_[interface_id];
    if (type == simple_packet_block) {
      // No captured length and no time: the packet fills the block up to the snaplen,
      // and it is given the previous packet's time (pcapng leaves its time unknown).
      captured = std::min(out.wire_length, body_length - header);
      if (i.snaplen != 0) captured = std::min(captured, i.snaplen);
      out.ts_us = last_ts_us_;
    } else {
      if (captured > body_length - header) {
        return damaged(at, fmt::format("a packet of {} bytes in a block with room for {}", captured, body_length - header),
                       error);
      }
      out.ts_us = time_us(i, u32(body + 4), u32(body + 8));
      if (clamped_times_ == 1 && first_clamped_at_ == 0) first_clamped_at_ = at;
    }
    if (captured > max_record) {
      return damaged(at, fmt::format("a packet of {} bytes (at most {})", captured, max_record), error);
    }
    out.data = std::string_view(body + header, captured);
    out.link_type = i.link_type;
    out.interface = earlier_interfaces_ + interface_id;
    last_ts_us_ = out.ts_us;
    consume(length);
    return 1;
  }
}

// ---- interface_merge ----

namespace {
// Popped packets' buffers kept for reuse, at most this many bytes.
constexpr std::size_t max_spare_bytes = 4u << 20;
}  // namespace

interface_merge::held interface_merge::hold(const file_record& r) {
  held h;
  if (!spare_.empty()) {
    h.bytes = std::move(spare_.back());
    spare_.pop_back();
    spare_bytes_ -= h.bytes.capacity();
  }
  h.bytes.assign(r.data);
  h.record = r;
  h.order = next_order_++;
  return h;
}

void interface_merge::enqueue(held h) {
  const std::uint32_t id = h.record.interface;
  if (id >= queues_.size()) queues_.resize(id + 1);
  if (!queues_[id]) queues_[id] = std::make_unique<interface_queue>();
  interface_queue& q = *queues_[id];
  if (q.packets.empty()) {
    ++nonempty_;
    heads_.push_back({h.record.ts_us, h.order, id});
    std::push_heap(heads_.begin(), heads_.end(), later);
  }
  q.last_us = h.record.ts_us;
  newest_us_ = std::max(newest_us_, h.record.ts_us);
  bytes_ += h.bytes.capacity();
  ++queued_;
  q.packets.push_back(std::move(h));
}

void interface_merge::describe(std::uint32_t interfaces) { described_ = std::max(described_, interfaces); }

void interface_merge::push(const file_record& r) {
  describe(r.interface + 1);
  const interface_queue* q = r.interface < queues_.size() ? queues_[r.interface].get() : nullptr;
  if (q != nullptr && q->last_us != std::numeric_limits<std::int64_t>::max() &&
      r.ts_us <= q->last_us - min_clock_step_us) {
    // The clock stepped back: what came before the step goes out first, as captured.
    pending_.emplace(hold(r));
    return;
  }
  enqueue(hold(r));
}

bool interface_merge::ready() const noexcept {
  if (pending_.has_value()) return true;
  if (queued_ == 0) return false;
  if (nonempty_ == described_ || bytes_ >= max_bytes) return true;
  return newest_us_ - heads_.front().ts_us >= window_us;
}

const file_record& interface_merge::pop() {
  if (queued_ == 0) {
    // Only the first packet after a step is left: the merge starts again from it.
    newest_us_ = released_us_ = pending_->record.ts_us;
    held first = std::move(*pending_);
    pending_.reset();
    enqueue(std::move(first));
  }
  std::pop_heap(heads_.begin(), heads_.end(), later);
  const std::uint32_t id = heads_.back().interface;
  heads_.pop_back();
  interface_queue& q = *queues_[id];
  if (current_.bytes.capacity() > 0 && spare_bytes_ + current_.bytes.capacity() <= max_spare_bytes) {
    spare_bytes_ += current_.bytes.capacity();
    spare_.push_back(std::move(current_.bytes));
  }
  current_ = std::move(q.packets.front());
  q.packets.pop_front();
  if (q.packets.empty()) {
    --nonempty_;
  } else {
    heads_.push_back({q.packets.front().record.ts_us, q.packets.front().order, id});
    std::push_heap(heads_.begin(), heads_.end(), later);
  }
  --queued_;
  bytes_ -= current_.bytes.capacity();
  current_.record.data = current_.bytes;
  if (current_.record.ts_us < released_us_) ++late_;
  released_us_ = std::max(released_us_, current_.record.ts_us);
  return current_.record;
}

}  // namespace lockscope::ingest::capture_files
