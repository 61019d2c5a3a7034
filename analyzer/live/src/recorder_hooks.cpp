#include "lockscope/live/recorder_hooks.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "flight_recorder.hpp"
#include "lockscope/live/capture_writer.hpp"
#include "lockscope/live/diagnostics.hpp"

namespace lockscope::live {

// --write: tcpdump -w's files, on the capture thread (buffered by stdio, as tcpdump).
class packet_writer {
 public:
  explicit packet_writer(const recorder_options& o)
      : options_{o.write, static_cast<std::uint64_t>(o.rotate_mb * 1e6), static_cast<std::int64_t>(o.rotate_s * 1e6)},
        writer_(options_) {}
  // Whether the first file can be written, as this process's user: "" or why not. The
  // writer opens its files only when a packet comes, which would be too late to say so
  // and exit before the capture starts (as --save-anomalies DIR and -o are checked).
  std::string probe(std::int64_t now_us) const {
    const std::string path = rotated_file_name(options_, now_us, 0);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return fmt::format("{}: {}", path, std::strerror(EISDIR));
      // It will be truncated: it must be writable. A FIFO is not opened (that would wait
      // for its reader).
      if (::access(path.c_str(), W_OK) != 0) {
        return fmt::format("{}: cannot write it as uid {}: {}", path, ::geteuid(), std::strerror(errno));
      }
      return {};
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fmt::format("{}: cannot create it as uid {}: {}", path, ::geteuid(), std::strerror(errno));
    ::close(fd);
    ::unlink(path.c_str());
    return {};
  }
  std::string write(const captured_packet& p, std::int64_t now_us) { return writer_.write(p, now_us); }
  std::string close() { return writer_.close(); }
  std::uint64_t files() const noexcept { return writer_.files(); }
  std::uint64_t packets() const noexcept { return writer_.packets(); }

 private:
  rotation_options options_;
  rotating_pcap_writer writer_;
};

recorder_hooks::recorder_hooks(const char* command, const recorder_options& o, std::int64_t now_us)
    : command_(command) {
  if (!o.write.empty()) {
    writer_ = std::make_unique<packet_writer>(o);
    if (std::string err = writer_->probe(now_us); !err.empty()) {
      print_diagnostic("lockscope {}: --write {}\n", command, err);
      ready_ = false;
      return;
    }
  }
  if (!o.save_dir.empty()) {
    try {
      recorder_ = std::make_unique<flight_recorder>(command, o);
    } catch (const std::runtime_error& e) {
      print_diagnostic("lockscope {}: {}\n", command, e.what());
      ready_ = false;
      return;
    }
  }
}

recorder_hooks::~recorder_hooks() = default;

lock_event_sink& recorder_hooks::chain(lock_event_sink& next) {
  return recorder_ ? recorder_->chain(next) : next;
}

void recorder_hooks::on_loop(const captured_packet* p, std::int64_t now_us) {
  if (recorder_) {
    recorder_->save_due(now_us);
    if (p != nullptr) recorder_->on_packet(*p);
  }
  if (p == nullptr) return;
  if (writer_ && write_error_.empty()) {
    if (std::string err = writer_->write(*p, now_us); !err.empty()) {
      print_diagnostic("lockscope {}: --write {}; writing stopped, the analysis goes on\n", command_, err);
      write_error_ = std::move(err);
    }
  }
}

recorder_stats recorder_hooks::stats() const { return recorder_ ? recorder_->stats() : recorder_stats{}; }

void recorder_hooks::finish() {
  if (writer_) {
    if (std::string err = writer_->close(); !err.empty() && write_error_.empty()) write_error_ = std::move(err);
    if (write_error_.empty()) {
      print_diagnostic("lockscope {}: --write: {} packets in {} files\n", command_, writer_->packets(),
                 writer_->files());
    } else {
      print_diagnostic(
                 "lockscope {}: --write failed: {}; writing stopped there, after {} packets in {} files: the "
                 "files lack the packets after it\n",
                 command_, write_error_, writer_->packets(), writer_->files());
    }
  }
  if (recorder_) recorder_->print_summary();
}

}  // namespace lockscope::live
