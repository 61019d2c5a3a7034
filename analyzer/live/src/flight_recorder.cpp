#include "flight_recorder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>
#include <fmt/format.h>

#include <fmt/format.h>

#include "anomaly_file_names.hpp"
#include "lockscope/live/capture_writer.hpp"
#include "lockscope/live/diagnostics.hpp"
#include "lockscope/live/lock_connections.hpp"
#include "lockscope/live/packet_ring.hpp"
#include "lockscope/locks/event_jsonl.hpp"

namespace lockscope::live {

// --save-anomalies: the ring and the lock bookkeeping on the capture thread; files are
// written by a thread of their own through a bounded queue, so a slow disk costs saved
// files (counted), never packets.
class flight_recorder::impl {
 public:
  impl(const char* command, const recorder_options& o)
      : command_(command),
        dir_(o.save_dir),
        max_bytes_(static_cast<std::uint64_t>(o.save_max_mb * 1e6)),
        queue_limit_bytes_(o.save_buffer),
        window_us_(static_cast<std::int64_t>(o.save_window_s * 1e6)),
        after_us_(static_cast<std::int64_t>(o.save_after_s * 1e6)),
        ring_({static_cast<std::size_t>(o.save_buffer), window_us_ + after_us_ + save_pass_interval_us}) {
    check_directory();
    scan_directory();
    thread_ = std::thread([this] { write_loop(); });
  }
  ~impl() { stop(); }

  lock_event_sink& chain(lock_event_sink& next) {
    lock_connections_options co;
    co.window_us = window_us_;
    co.min_interval_us = window_us_;
    connections_ = std::make_unique<lock_connections>(
        co, next, [this](const lock_event& e, std::span<const connection_ref> c) { defer(e, c); });
    return *connections_;
  }

  void on_packet(const captured_packet& p) { ring_.add(p); }

  // Saves the anomalies whose --save-after has passed on the loop's clock (all of them
  // at the end: `now_us` < 0). Those due together share one pass over the ring, and
  // passes come at most every save_pass_interval_us, so a burst costs one pass. Those
  // that do not fit in the writer's queue wait, in order, for the next pass (at the end,
  // for the writer to make room); one that has waited a whole --save-window is dropped,
  // as the packets before its anomaly have left the ring.
  void save_due(std::int64_t now_us) {
    if (pending_.empty()) return;
    if (next_pass_us_ - now_us > save_pass_interval_us) next_pass_us_ = now_us;  // the clock was set back
    if (now_us >= 0 && (now_us < next_pass_us_ || pending_.front().ts_us + after_us_ > now_us)) return;
    next_pass_us_ = now_us + save_pass_interval_us;
    if (now_us >= 0) {
      // The writer is still on the last pass's files: a pass now would queue little.
      std::lock_guard lock(mutex_);
      if (queued_bytes_ > queue_limit_bytes_ / 2) {
        ++passes_put_off_;
        return;
      }
    }
    for (;;) {
      std::vector<pending_save> due;
      while (!pending_.empty() && (now_us < 0 || pending_.front().ts_us + after_us_ <= now_us)) {
        due.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      const std::size_t taken = save(due);
      ++ring_passes_;
      for (std::size_t k = due.size(); k-- > taken;) {
        if (now_us >= 0 && now_us - (due[k].ts_us + after_us_) > window_us_) {
          std::lock_guard lock(mutex_);
          ++dropped_;
          continue;
        }
        pending_.push_front(std::move(due[k]));
      }
      if (now_us >= 0 || pending_.empty()) return;
      std::unique_lock lock(mutex_);
      drained_.wait(lock, [&] { return queue_.empty(); });
    }
  }

  void stop() {
    save_due(-1);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // The writer thread's counts are read once stop() has joined it.
  recorder_stats stats() const {
    recorder_stats out;
    out.saved = saved_;
    out.rate_limited = connections_ ? connections_->stats().rate_limited : 0;
    out.dropped = dropped_;
    out.write_errors = failed_;
    out.deleted = deleted_;
    out.ring_passes = ring_passes_;
    out.ring_scans = ring_scans_;
    out.passes_put_off = passes_put_off_;
    return out;
  }

  void print_summary() {
    stop();
    const auto s = connections_ ? connections_->stats() : lock_connections_stats{};
    print_diagnostic(
               "lockscope {}: flight recorder: {} anomalies saved to {}, {} not saved: {} rate-limited (one per lock "
               "and kind per {} s), {} dropped (the writer was behind), {} write errors; {} old files deleted "
               "(--save-max-mb)\n",
               command_, saved_, dir_, s.rate_limited + dropped_ + failed_, s.rate_limited,
               static_cast<double>(window_us_) / 1e6, dropped_, failed_, deleted_);
    if (ring_.evicted_in_window() > 0) {
      print_diagnostic(
                 "lockscope {}: flight recorder: {} packets left the ring before --save-window passed "
                 "(raise --save-buffer)\n",
                 command_, ring_.evicted_in_window());
    }
    if (!first_error_.empty()) print_diagnostic("lockscope {}: flight recorder: {}\n", command_, first_error_);
  }

 private:
  // A burst is what an incident looks like: a Redis stall lets hundreds of leases run
  // out at once, each lock's anomaly a file of its own. Memory is what bounds the
  // writer's queue (--save-buffer bytes of copied packets), so the counts are set for
  // bursts, not for memory: besides its packets, a file waiting costs its JSON line and
  // at most 64 connections (under 4 KB).
  static constexpr std::size_t max_pending_saves = 4096;  // waiting for --save-after
  static constexpr std::size_t max_queued_files = 4096;   // waiting for the writer
  // A save may wait this much past its --save-after for others to share its pass (the
  // ring keeps this much longer than the window, so none of the window is lost).
  static constexpr std::int64_t save_pass_interval_us = 100'000;

  struct job {
    std::string base;  // DIR/<utc time>-<lock>-<kind>
    std::string json;
    int link_type = 0;
    std::vector<char> records;  // pcap records (header + frame), ready to write
  };

  void check_directory() {
    struct stat st {};
    if (::stat(dir_.c_str(), &st) != 0) {
      throw std::runtime_error(fmt::format("--save-anomalies {}: {}", dir_, std::strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("--save-anomalies {}: not a directory", dir_));
    // As the user that will write (after -Z): create and remove a file.
    const std::string probe = fmt::format("{}/.lockscope-probe-{}", dir_, ::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      throw std::runtime_error(fmt::format("--save-anomalies {}: cannot write there as uid {}: {}", dir_, ::geteuid(),
                                           std::strerror(errno)));
    }
    ::close(fd);
    ::unlink(probe.c_str());
  }

  // The files of earlier runs already there count towards --save-max-mb, oldest first.
  void scan_directory() {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return;
    std::vector<std::tuple<std::int64_t, std::string, std::uint64_t>> found;
    while (const dirent* entry = ::readdir(d)) {
      const std::string_view name = entry->d_name;
      if (!is_saved_anomaly_name(name)) continue;
      const std::string path = dir_ + "/" + std::string(name);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      found.emplace_back(static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, path,
                         static_cast<std::uint64_t>(st.st_size));
    }
    ::closedir(d);
    std::sort(found.begin(), found.end());
    for (auto& [at, path, size] : found) {
      files_.emplace_back(path, size);
      total_bytes_ += size;
    }
  }

  // An anomaly waiting for --save-after: the packets after it show what it led to, and
  // carry a file's clock past a deadline (an idle lock, a long hold: a file's analysis
  // ends at its last packet).
  static constexpr std::uint64_t not_sized = std::numeric_limits<std::uint64_t>::max();
  struct pending_save {
    std::int64_t ts_us;
    std::string base;
    std::string json;
    std::vector<connection_ref> connections;
    // The pcap's bytes, from its first pass; kept while it waits, so that a wait costs
    // each later pass one scan (the copy), not two. The ring only loses packets, so the
    // size kept is at least the file's.
    std::uint64_t bytes = not_sized;
  };

  void defer(const lock_event& e, std::span<const connection_ref> connections) {
    if (pending_.size() >= max_pending_saves) {
      ++dropped_;
      return;
    }
    pending_save s{e.ts_us, fmt::format("{}/{}-{}-{}", dir_, utc_stamp(e.ts_us), file_name_part(e.lock),
                                        to_string(e.kind)),
                   {}, {connections.begin(), connections.end()}};
    append_event_jsonl(s.json, e);
    s.json += '\n';
    pending_.push_back(std::move(s));
  }

  // For looking the due saves up by their connections' client endpoints.
  struct endpoint_hash {
    std::size_t operator()(const endpoint& e) const noexcept {
      std::uint64_t low, high;
      std::memcpy(&low, e.address.data(), 8);
      std::memcpy(&high, e.address.data() + 8, 8);
      std::uint64_t h = (std::uint64_t{e.port} << 8 | e.family) * 0x9e3779b97f4a7c15ull;
      h ^= low + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
      h ^= high + 0x85ebca6b27d4eb4full + (h << 6) + (h >> 2);
      return static_cast<std::size_t>(h);
    }
  };

  // Calls f(k, record) for each ring record that goes into due[k]'s file: one of its
  // connections, within its window, of the link type of its first such record.
  template <class F>
  void for_each_match(std::span<const pending_save> due, F&& f) const {
    std::unordered_map<endpoint, std::vector<std::uint32_t>, endpoint_hash> by_client;
    std::int64_t since = std::numeric_limits<std::int64_t>::max();
    for (std::size_t k = 0; k < due.size(); ++k) {
      since = std::min(since, due[k].ts_us - window_us_);
      for (const connection_ref& c : due[k].connections) {
        std::vector<std::uint32_t>& saves = by_client[c.client];
        if (saves.empty() || saves.back() != k) saves.push_back(static_cast<std::uint32_t>(k));
      }
    }
    std::vector<int> link_type(due.size(), -1);
    std::vector<std::uint64_t> last_record(due.size(), 0);  // a record goes into a file once
    std::uint64_t record = 0;
    ring_.for_each_since(since, [&](const packet_ring::record& r) {
      ++record;
      for (const endpoint* end : {&r.source, &r.destination}) {
        const auto found = by_client.find(*end);
        if (found == by_client.end()) continue;
        for (const std::uint32_t k : found->second) {
          const pending_save& s = due[k];
          if (last_record[k] == record || r.ts_us < s.ts_us - window_us_ || r.ts_us > s.ts_us + after_us_) continue;
          if (std::none_of(s.connections.begin(), s.connections.end(),
                           [&](const connection_ref& c) { return c.matches(r.source, r.destination); })) {
            continue;
          }
          last_record[k] = record;
          if (link_type[k] < 0) link_type[k] = r.link_type;
          if (r.link_type == link_type[k]) f(k, r);  // one link type per pcap file
        }
      }
    });
  }

  // Queues the files of a prefix of `due`, in order, as many as the writer's queue has
  // room for, and returns how many it took (a file larger than the whole queue is
  // dropped, and taken). Two scans of the ring: the sizes of the files not sized yet
  // (those that waited come first in `due`, already sized), then the packets of those
  // taken, each copied once into a buffer of its size. A pass per anomaly would cost the
  // capture thread the whole ring each time, seconds for a burst on a busy port.
  std::size_t save(std::span<pending_save> due) {
    std::size_t first_unsized = 0;
    while (first_unsized < due.size() && due[first_unsized].bytes != not_sized) ++first_unsized;
    if (first_unsized < due.size()) {
      const auto unsized = due.subspan(first_unsized);
      for (pending_save& s : unsized) s.bytes = 0;
      ++ring_scans_;
      for_each_match(unsized, [&](std::size_t k, const packet_ring::record& r) {
        unsized[k].bytes += 16 + r.data.size();
      });
    }
    std::uint64_t room;
    std::size_t files;
    {
      std::lock_guard lock(mutex_);
      room = queue_limit_bytes_ > queued_bytes_ ? queue_limit_bytes_ - queued_bytes_ : 0;
      files = max_queued_files > queue_.size() ? max_queued_files - queue_.size() : 0;
    }
    std::size_t taken = 0, too_large = 0;
    std::vector<bool> queued(due.size(), false);
    for (; taken < due.size(); ++taken) {
      const std::uint64_t bytes = due[taken].bytes;
      if (bytes > queue_limit_bytes_) {
        ++too_large;
        continue;
      }
      if (bytes > room || files == 0) break;
      room -= bytes;
      --files;
      queued[taken] = true;
    }
    std::vector<job> jobs(taken);
    for (std::size_t k = 0; k < taken; ++k) {
      jobs[k].base = due[k].base;
      jobs[k].json = due[k].json;
      jobs[k].link_type = 1;
      jobs[k].records.reserve(queued[k] ? due[k].bytes : 0);
    }
    const std::size_t files_queued = taken - too_large;
    if (files_queued > 0) {
      ++ring_scans_;
      for_each_match(due.first(taken), [&](std::size_t k, const packet_ring::record& r) {
        if (!queued[k]) return;
        job& j = jobs[k];
        if (j.records.empty()) j.link_type = r.link_type;
        const std::uint32_t header[4] = {static_cast<std::uint32_t>(r.ts_us / 1'000'000),
                                         static_cast<std::uint32_t>(r.ts_us % 1'000'000),
                                         static_cast<std::uint32_t>(r.data.size()), r.wire_length};
        const char* h = reinterpret_cast<const char*>(header);
        j.records.insert(j.records.end(), h, h + sizeof header);
        j.records.insert(j.records.end(), r.data.begin(), r.data.end());
      });
    }
    {
      std::lock_guard lock(mutex_);
      dropped_ += too_large;
      for (std::size_t k = 0; k < taken; ++k) {
        if (!queued[k]) continue;
        queued_bytes_ += jobs[k].records.size();
        queue_.push_back(std::move(jobs[k]));
      }
    }
    wake_.notify_one();
    return taken;
  }

  void write_loop() {
    for (;;) {
      job j;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is written
        j = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= j.records.size();
      }
      drained_.notify_all();
      write_job(j);
    }
  }

  void note_error(const std::string& e) {
    ++failed_;
    if (first_error_.empty()) first_error_ = e;
  }

  void write_job(const job& j) {
    std::string base = j.base;
    for (int n = 2; ::access((base + ".pcap").c_str(), F_OK) == 0; ++n) base = fmt::format("{}-{}", j.base, n);
    const std::string pcap_path = base + ".pcap", json_path = base + ".json";
    savefile_writer f;
    std::string err = f.open(pcap_path, j.link_type);
    if (err.empty()) {
      std::size_t at = 0;
      while (at + 16 <= j.records.size() && err.empty()) {
        std::uint32_t header[4];
        std::memcpy(header, j.records.data() + at, sizeof header);
        const std::string_view frame(j.records.data() + at + 16, header[2]);
        err = f.write(static_cast<std::int64_t>(header[0]) * 1'000'000 + header[1], frame, header[3]);
        at += 16 + header[2];
      }
    }
    if (std::string c = f.close(); err.empty()) err = c;
    std::FILE* json = err.empty() ? std::fopen(json_path.c_str(), "we") : nullptr;
    if (err.empty() && json == nullptr) err = json_path + ": " + std::strerror(errno);
    if (json != nullptr) {
      const bool ok = std::fwrite(j.json.data(), 1, j.json.size(), json) == j.json.size();
      if ((std::fclose(json) != 0 || !ok) && err.empty()) err = json_path + ": " + std::strerror(errno);
    }
    if (!err.empty()) {
      ::unlink(pcap_path.c_str());
      ::unlink(json_path.c_str());
      note_error(err);
      return;
    }
    ++saved_;
    for (const std::string& path : {pcap_path, json_path}) {
      struct stat st {};
      const std::uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
      files_.emplace_back(path, size);
      total_bytes_ += size;
    }
    // --save-max-mb: the oldest anomaly goes first, its .pcap and .json together (one
    // without the other is no use to anyone), never the pair just written.
    while (total_bytes_ > max_bytes_ && !files_.empty()) {
      const std::string oldest(anomaly_of(files_.front().first));  // a copy: its file is erased below
      if (oldest == base) break;
      for (auto it = files_.begin(); it != files_.end();) {
        if (anomaly_of(it->first) != oldest) {
          ++it;
          continue;
        }
        if (::unlink(it->first.c_str()) == 0 || errno == ENOENT) ++deleted_;
        total_bytes_ -= it->second;
        it = files_.erase(it);
      }
    }
  }

  // DIR/<utc time>-<lock>-<kind>: a saved file's path without its .pcap/.json.
  static std::string_view anomaly_of(std::string_view path) {
    return path.ends_with(".pcap") || path.ends_with(".json") ? path.substr(0, path.size() - 5) : path;
  }

  const char* command_;
  std::string dir_;
  std::uint64_t max_bytes_;
  std::uint64_t queue_limit_bytes_;
  std::int64_t window_us_;
  std::int64_t after_us_;
  packet_ring ring_;
  std::deque<pending_save> pending_;
  std::int64_t next_pass_us_ = 0;  // the loop's clock: no pass over the ring before it
  std::uint64_t ring_passes_ = 0;
  std::uint64_t ring_scans_ = 0;
  std::uint64_t passes_put_off_ = 0;
  std::unique_ptr<lock_connections> connections_;

  std::mutex mutex_;
  std::condition_variable wake_;     // the writer: a job is queued, or stop
  std::condition_variable drained_;  // the capture thread, at the end: room in the queue
  std::deque<job> queue_;
  std::uint64_t queued_bytes_ = 0;
  bool stopping_ = false;
  std::uint64_t dropped_ = 0;  // capture thread, under mutex_
  std::thread thread_;
  // The writer thread's own (read after join):
  std::deque<std::pair<std::string, std::uint64_t>> files_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t saved_ = 0, failed_ = 0, deleted_ = 0;
  std::string first_error_;
};

flight_recorder::flight_recorder(const char* command, const recorder_options& o)
    : impl_(std::make_unique<impl>(command, o)) {}
flight_recorder::~flight_recorder() = default;
lock_event_sink& flight_recorder::chain(lock_event_sink& next) { return impl_->chain(next); }
void flight_recorder::on_packet(const captured_packet& p) { impl_->on_packet(p); }
void flight_recorder::save_due(std::int64_t now_us) { impl_->save_due(now_us); }
recorder_stats flight_recorder::stats() const { return impl_->stats(); }
void flight_recorder::print_summary() { impl_->print_summary(); }

}  // namespace lockscope::live
