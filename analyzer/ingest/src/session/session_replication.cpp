// Skipping what a master sends a replica: the PSYNC/SYNC preamble, the RDB and the
// replication stream.
#include "lockscope/ingest/resp_session.hpp"
#include "session_internal.hpp"

#include <algorithm>
#include <charconv>

namespace lockscope::ingest {

using namespace session_detail;

// The server side of PSYNC/SYNC before the replication stream: `+FULLRESYNC` or
// `+CONTINUE` lines, newline keepalives, then the RDB as `$len` + raw bytes (no CRLF)
// or `$EOF:<40-byte mark>` + raw bytes ending with the mark.
std::size_t resp_session::consume_replication(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (replication_ == replication::rdb_body) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(rdb_remaining_, bytes.size() - pos));
      pos += n;
      rdb_remaining_ -= n;
      stats_.replication_bytes += n;
      if (rdb_remaining_ == 0) replication_ = replication::stream;
      if (replication_ == replication::stream) return pos;
      continue;
    }
    if (replication_ == replication::rdb_eof) {
      const std::string_view chunk = bytes.substr(pos);
      const std::string_view mark = rdb_eof_mark_;
      // The mark may straddle two feeds: probe the previous tail joined to this head.
      std::string probe = rdb_tail_;
      probe.append(chunk.substr(0, std::min(chunk.size(), mark.size() - 1)));
      std::size_t end = std::string::npos;
      if (const std::size_t found = probe.find(mark); found != std::string::npos) {
        end = found + mark.size() - rdb_tail_.size();
      } else if (const std::size_t in_chunk = chunk.find(mark); in_chunk != std::string_view::npos) {
        end = in_chunk + mark.size();
      }
      if (end != std::string::npos) {
        pos += end;
        stats_.replication_bytes += end;
        replication_ = replication::stream;
        rdb_tail_.clear();
        return pos;
      }
      stats_.replication_bytes += chunk.size();
      rdb_tail_.append(chunk);
      if (rdb_tail_.size() > mark.size() - 1) rdb_tail_.erase(0, rdb_tail_.size() - (mark.size() - 1));
      return bytes.size();
    }
    // Preamble: one line at a time.
    const std::size_t newline = bytes.find('\n', pos);
    if (newline == std::string_view::npos) {
      if (rdb_line_.size() < 1024) rdb_line_.append(bytes.substr(pos));
      return bytes.size();
    }
    rdb_line_.append(bytes.substr(pos, newline - pos));
    pos = newline + 1;
    std::string_view line = rdb_line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {  // keepalive while the master prepares the RDB
      rdb_line_.clear();
      continue;
    }
    if (line[0] == '$') {
      if (line.substr(1, 4) == "EOF:") {
        rdb_eof_mark_.assign(line.substr(5));
        rdb_tail_.clear();
        replication_ = rdb_eof_mark_.empty() ? replication::stream : replication::rdb_eof;
      } else {
        std::uint64_t length = 0;
        std::from_chars(line.data() + 1, line.data() + line.size(), length);
        rdb_remaining_ = length;
        replication_ = length == 0 ? replication::stream : replication::rdb_body;
      }
      if (count_ > 0 && front().expect == expect_replication) {
        emit(front(), nullptr);  // SYNC: its reply is the RDB itself
        pop_front();
      }
      rdb_line_.clear();
      if (replication_ == replication::stream) return pos;
      continue;
    }
    // A status line: +FULLRESYNC / +CONTINUE answer PSYNC; anything else answers an
    // earlier command.
    const bool error = line[0] == '-';
    reply_.set_single(error ? resp::type::simple_error : resp::type::simple_string, line.substr(1));
    const bool continues = line.substr(1, 8) == "CONTINUE";
    if (count_ > 0) {
      const bool was_psync = front().expect == expect_replication;
      emit(front(), &reply_);
      pop_front();
      if (was_psync && error) {
        replica_link_ = false;
        replication_ = replication::none;
      }
    }
    reply_.clear();
    rdb_line_.clear();
    if (continues) {
      replication_ = replication::stream;
      return pos;
    }
    if (replication_ == replication::none) return pos;
  }
  return pos;
}

}  // namespace lockscope::ingest
