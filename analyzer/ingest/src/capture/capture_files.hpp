// Reading capture files: the bytes of one input (byte_source) and the records of the two
// formats in it (classic pcap, pcapng), handed out as views into one buffer. Internal to
// capture.cpp, which merges the files by time.
//
// Why not libpcap here: it copies every record once more through stdio, and it refuses
// a pcapng whose interfaces have different link types ("an interface has a type 1
// different from the type of the first interface"), which is what dumpcap writes for
// `-i eth0 -i lo` or mergecap for a cooked and an Ethernet capture. Live capture stays
// with libpcap.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <csignal>

namespace lockscope::ingest::capture_files {

// One input's bytes, read with read(), whatever the format.
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
  // `stopped`: the owner's stop flag (offline_capture::stop), checked with the global
  // one (stop_reading_captures()).
  byte_source(std::string name, int fd, bool owns_fd, const volatile std::sig_atomic_t& stopped);
  ~byte_source();
  byte_source(const byte_source&) = delete;
  byte_source& operator=(const byte_source&) = delete;

  // Up to `max` bytes into `out`; 0 at the end (or when the file changed: see changed()),
  // -1 on a read error (errno set). A regular file is read up to the size it had when
  // opened, so one still being written ends where it ended then.
  ssize_t read_some(char* out, std::size_t max);

  const std::string& name() const noexcept { return name_; }
  int fd() const noexcept { return fd_; }
  bool regular() const noexcept { return regular_; }
  std::uint64_t size_at_open() const noexcept { return size_at_open_; }
  bool changed() const noexcept { return changed_size_.has_value(); }
  // The error for a file that changed under the reader; `at`: where reading stopped.
  std::string changed_message(std::uint64_t at) const;

 private:
  bool file_changed();

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

// One packet record of a file. `data` stays valid until the reader's next call.
struct file_record {
  std::int64_t ts_us = 0;
  std::string_view data;
  std::uint32_t wire_length = 0;
  int link_type = 0;  // LINKTYPE_* as the file has it (packet.hpp takes those)
  // The interface it was captured on, numbered across the file's sections (pcap: 0).
  std::uint32_t interface = 0;
};

// A file's records, from either format. Records are views into one buffer refilled with
// read(): no copy per record.
class record_reader {
 public:
  // The largest packet block held whole; a packet record is at most libpcap's largest
  // snaplen (262144), so a bigger one is damage.
  static constexpr std::size_t buffer_size = 1u << 20;
  static constexpr std::size_t max_record = 262144;
  // What one read() asks for (more only when a record needs it): only the buffer's
  // first read_bytes + a record's worth are ever touched, so the rest of its 1 MiB
  // (there for the rare big block) stays out of memory.
  static constexpr std::size_t read_bytes = 256 * 1024;

  explicit record_reader(byte_source& source);
  virtual ~record_reader() = default;
  record_reader(const record_reader&) = delete;
  record_reader& operator=(const record_reader&) = delete;

  // Reads the file header; false when the file is not in this reader's format (the
  // bytes read stay buffered for the next reader: see take_buffer()).
  virtual bool open() = 0;
  // 1: a record; 0: the end; -1: damage, or the file changed under the reader (`error`
  // says what and names the byte offset).
  virtual int next(file_record& out, std::string& error) = 0;

  // The interfaces described so far (in every section); a classic pcap has one.
  virtual std::uint32_t interfaces() const noexcept { return 1; }
  // Packets the capturing tool counted as dropped, by interface, as the file records
  // them (pcapng's interface statistics; classic pcap records none): the latest count of
  // each interface that has one.
  struct recorded_drops {
    std::uint32_t interface = 0;
    std::string name;  // if_name, when described
    std::uint64_t dropped = 0;
  };
  virtual std::vector<recorded_drops> drops() const { return {}; }
  // The latest packet time a reader hands on: 2^62 - 1 µs (the year 146,000). Times are
  // at least 0 (1970). A damaged time outside is clamped, so that any two times subtract
  // and a lease adds to one without overflow.
  static constexpr std::int64_t max_time_us = (std::int64_t{1} << 62) - 1;
  // Packets whose time was outside 0 … max_time_us, and was clamped (pcapng only: a
  // classic pcap's times are 32-bit seconds).
  virtual std::uint64_t clamped_times() const noexcept { return 0; }
  // The file offset of the first such packet's block.
  virtual std::uint64_t first_clamped_at() const noexcept { return 0; }
  // The file offset of the next record (or block).
  std::uint64_t position() const noexcept { return base_ + begin_; }
  // Up to the first `n` bytes of the input (fewer when it is shorter).
  std::string_view peek(std::size_t n);
  // Takes over the bytes `from` buffered, after its open() failed (stdin and pipes cannot
  // seek back); `from` is not to be read again.
  void take_buffer(record_reader& from);
  // The errno of a read that failed (EIO: a bad disk block), or 0. The input ends there.
  int read_error() const noexcept { return read_errno_; }

 protected:
  // Makes `need` bytes available at data(); false when the input ends (or fails) first.
  // Inline: twice a packet, and the bytes are nearly always there already.
  bool fill(std::size_t need) { return end_ - begin_ >= need || refill(need); }
  // Consumes `n` bytes, reading past the buffer when they are not all in it (a block
  // that is skipped); false when the input ends first.
  bool skip(std::uint64_t n);
  const char* data() const noexcept { return buffer_.get() + begin_; }
  std::size_t available() const noexcept { return end_ - begin_; }
  void consume(std::size_t n) noexcept { begin_ += n; }
  // The error (or the end, 0) when fill(need) failed for the `what` ("record", "block")
  // at byte `at`.
  int stop(const char* what, std::uint64_t at, std::uint64_t need, std::string& error) const;

 private:
  bool refill(std::size_t need);  // fill() when the bytes are not all here

  byte_source& source_;
  std::unique_ptr<char[]> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t base_ = 0;  // the file offset of buffer_[0]
  int read_errno_ = 0;
};

// One of classic pcap's four magics (µs or ns, either byte order), as the file's first
// four bytes read in host order.
bool is_classic_pcap_magic(std::uint32_t magic) noexcept;

// Classic pcap (microsecond or nanosecond, either byte order).
class pcap_reader final : public record_reader {
 public:
  using record_reader::record_reader;
  bool open() override;
  int next(file_record& out, std::string& error) override;

 private:
  bool swapped_ = false;
  bool nanos_ = false;
  int link_type_ = 0;
};

// pcapng: sections in either byte order, any number of interfaces each with its own link
// type, time resolution (if_tsresol) and offset (if_tsoffset); enhanced, simple and the
// obsolete packet blocks. Other blocks (statistics, name resolution, decryption secrets,
// custom) are skipped by their length. A block's leading and trailing lengths must agree.
class pcapng_reader final : public record_reader {
 public:
  // Interfaces a file may describe, over all its sections: a real capture has a few
  // (dumpcap one per -i, mergecap one per file merged). More is damage; unbounded, a
  // small file of interface blocks alone would make the merge hold a queue each.
  static constexpr std::uint32_t max_interfaces = 1u << 16;
  // An if_name longer than this is cut (it is only shown in warnings).
  static constexpr std::size_t max_name_bytes = 256;

  using record_reader::record_reader;
  bool open() override;
  int next(file_record& out, std::string& error) override;
  std::uint32_t interfaces() const noexcept override {
    return earlier_interfaces_ + static_cast<std::uint32_t>(interfaces_.size());
  }
  std::vector<recorded_drops> drops() const override;
  std::uint64_t clamped_times() const noexcept override { return clamped_times_; }
  std::uint64_t first_clamped_at() const noexcept override { return first_clamped_at_; }

 private:
  struct interface {
    int link_type = 0;
    std::uint32_t snaplen = 0;
    std::uint8_t resolution = 6;  // if_tsresol: 10^-n s, or 2^-n s with the high bit set
    std::int64_t offset_us = 0;   // if_tsoffset
    std::string name;             // if_name
  };

  std::uint16_t u16(const char* p) const noexcept;
  std::uint32_t u32(const char* p) const noexcept;
  std::uint64_t u64(const char* p) const noexcept;
  // The block at `at` (its length checked) read whole at data(); -1 with `error` set.
  int section_header(std::uint64_t at, std::uint32_t length, std::string& error);
  int interface_description(std::uint64_t at, std::uint32_t length, std::string& error);
  // An interface statistics block: keeps its drop counts (isb_ifdrop, isb_osdrop).
  void interface_statistics(std::uint32_t length);
  // Clamped to 0 … max_time_us (counted in clamped_times_).
  std::int64_t time_us(const interface& i, std::uint32_t high, std::uint32_t low) noexcept;
  int damaged(std::uint64_t at, const std::string& what, std::string& error) const;

  bool swapped_ = false;
  std::vector<interface> interfaces_;  // of the current section
  std::uint32_t earlier_interfaces_ = 0;  // described in the sections before this one
  std::vector<std::string> names_;         // every interface's if_name, across sections
  // Every interface's latest recorded drops (isb_ifdrop + isb_osdrop), across sections;
  // unknown (none recorded, or recorded as unknown: all ones) as max.
  std::vector<std::uint64_t> dropped_;
  std::int64_t last_ts_us_ = 0;        // for simple packet blocks, which carry no time
  std::uint64_t clamped_times_ = 0;
  std::uint64_t first_clamped_at_ = 0;  // a block is never at byte 0 (the section header is)
};

// The packets of a file with several interfaces, put back in time order. dumpcap writes
// `-i eth0 -i lo` as each interface's capture hands its packets over, in runs of one
// interface: a lock's holder seen on one interface and its waiter on the other would
// reach the timeline out of order (and `-i lo -i any` would replay a closed connection
// as a new one). Each interface's own packets are in order, so this is a merge of one
// queue per interface: the earliest head goes out once every interface the file
// describes has a packet queued, or the newest packet read is window_us past it (an
// interface that is quiet, or has no packets at all), or the queued bytes reach
// max_bytes, or the file ends. So a file with a quiet interface holds window_us of
// packets, copied. A file of one interface never comes here: its packets stay views into
// the read buffer, never copied.
class interface_merge {
 public:
  static constexpr std::int64_t window_us = 2'000'000;
  static constexpr std::size_t max_bytes = 32u << 20;

  // How many interfaces the file has described so far (pcapng may describe more later).
  void describe(std::uint32_t interfaces);
  // Queues a copy of `r`.
  void push(const file_record& r);
  // Whether the earliest queued packet can go out now; false means read more first (at
  // the end of the file, everything goes out). After the clock stepped back (a packet a
  // second or more before the previous one of its interface: clock_steps.hpp), the
  // packets before the step go out first.
  bool ready() const noexcept;
  bool empty() const noexcept { return queued_ == 0 && !pending_.has_value(); }
  // The earliest packet queued; its data stays valid until the next pop().
  const file_record& pop();
  // Packets popped after a later one of another interface: their interface's run came
  // more than window_us (or max_bytes) late, so they reach the analysis out of order.
  // After a step back the count starts from the step.
  std::uint64_t late() const noexcept { return late_; }

 private:
  struct held {
    file_record record;
    std::string bytes;
    std::uint64_t order = 0;  // read order: equal times go out in it
  };
  struct interface_queue {
    std::deque<held> packets;
    std::int64_t last_us = std::numeric_limits<std::int64_t>::max();  // the latest time read
  };
  // A non-empty queue's head, in heads_: a min-heap on (time, read order), so that the
  // earliest head is found in O(log q) whatever the number of interfaces described.
  struct head {
    std::int64_t ts_us;
    std::uint64_t order;
    std::uint32_t interface;
  };
  static bool later(const head& a, const head& b) noexcept {
    return a.ts_us != b.ts_us ? a.ts_us > b.ts_us : a.order > b.order;
  }
  held hold(const file_record& r);
  void enqueue(held h);

  // By interface; made at its first packet (most described interfaces never have one).
  std::vector<std::unique_ptr<interface_queue>> queues_;
  std::vector<head> heads_;
  std::uint32_t described_ = 0;
  std::optional<held> pending_;          // the first packet after a step
  held current_;
  std::vector<std::string> spare_;       // popped packets' buffers, for reuse
  std::size_t spare_bytes_ = 0;
  std::size_t queued_ = 0;
  std::uint64_t next_order_ = 0;
  std::size_t nonempty_ = 0;             // queues with packets
  std::size_t bytes_ = 0;                // queued, by capacity
  std::int64_t newest_us_ = std::numeric_limits<std::int64_t>::min();
  std::int64_t released_us_ = std::numeric_limits<std::int64_t>::min();  // the latest popped
  std::uint64_t late_ = 0;
};

}  // namespace lockscope::ingest::capture_files
