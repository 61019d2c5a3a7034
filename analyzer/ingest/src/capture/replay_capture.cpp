#include "lockscope/ingest/replay_capture.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>

namespace lockscope::ingest {

replay_capture::replay_capture(const std::vector<std::string>& files, double speed,
                               offline_capture::warning_handler warn, offline_capture::warning_handler error,
                               std::chrono::milliseconds max_wait)
    : files_(files, std::move(warn), std::move(error)), speed_(speed < 0 ? 0 : speed), max_wait_(max_wait) {
  turns_of_packets_ = speed_ == 0 && std::all_of(files.begin(), files.end(), [](const std::string& f) {
    std::error_code ec;
    return f != "-" && std::filesystem::is_regular_file(f, ec);
  });
  // The clock starts at the first packet's time, so relative times match `analyze FILE`.
  if (fetch()) now_us_ = first_us_ = pending_.ts_us;
  started_ = std::chrono::steady_clock::now();
}

bool replay_capture::fetch() {
  if (at_end_) return false;
  has_pending_ = files_.next(pending_);
  at_end_ = !has_pending_;
  return has_pending_;
}

packet_source::result replay_capture::next(captured_packet& out) {
  if (stopped_) return result::end;
  if (!has_pending_ && !fetch()) return result::end;
  if (speed_ > 0 && pending_.ts_us > first_us_) {
    const auto due = started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double, std::micro>(static_cast<double>(pending_.ts_us - first_us_) / speed_));
    auto now = std::chrono::steady_clock::now();
    if (now < due) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(due - now, max_wait_));
      now = std::chrono::steady_clock::now();
      if (now < due) {
        // Between packets the replayed clock runs at speed × wall time, up to the packet.
        const double elapsed_us = std::chrono::duration<double, std::micro>(now - started_).count() * speed_;
        now_us_ = std::max(now_us_, std::min(pending_.ts_us, first_us_ + static_cast<std::int64_t>(elapsed_us)));
        return stopped_ ? result::end : result::timeout;
      }
    }
  }
  if (stopped_) return result::end;
  out = pending_;
  has_pending_ = false;  // the next call reads on: `out` stays valid until then
  now_us_ = std::max(now_us_, pending_.ts_us);
  ++delivered_;
  return result::packet;
}

packet_source::result replay_capture::dispatch(int max_packets, packet_callback on_packet) {
  if (!turns_of_packets_) return packet_source::dispatch(max_packets, on_packet);
  captured_packet p;
  result r = next(p);
  for (int n = 1; r == result::packet; ++n) {
    on_packet(p);  // before next() reads on: `p` views the reader's buffer
    if (n >= max_packets) break;
    r = next(p);
    if (r != result::packet) return result::packet;  // the end (or a stop) comes at the next turn
  }
  return r;
}

void replay_capture::stop() noexcept {
  stopped_ = 1;
  files_.stop();  // a pipe waiting for data ends too
}

packet_source::drop_stats replay_capture::stats() const {
  drop_stats d;
  d.received = delivered_;
  // What the capturing tool recorded in the files (pcapng), once read: the replayed
  // capture's own kernel drops.
  d.dropped = files_.recorded_drops().value_or(0);
  return d;
}

}  // namespace lockscope::ingest
