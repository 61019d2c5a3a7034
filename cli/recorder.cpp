#include "recorder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "lockscope/live/capture_writer.hpp"
#include "lockscope/ingest/replay_capture.hpp"
#include "option_checks.hpp"

namespace lockscope::cli {

void add_replay_options(CLI::App& cmd, recorder_options& o) {
  cmd.add_option("--replay", o.replay,
                 "Test mode: feed this capture file through the live code path (streamed events, timers, "
                 "--save-anomalies, --write) at --replay-speed; the clock follows the packets' times")
      ->excludes("-i")
      ->excludes("files");
  cmd.add_option("--replay-speed", o.replay_speed, "--replay: X times the capture's speed (0: as fast as possible)")
      ->needs("--replay")
      ->check(zero_or_more())
      ->capture_default_str();
}

void add_recorder_options(CLI::App& cmd, recorder_options& o) {
  add_replay_options(cmd, o);
  cmd.add_option("-w,--write", o.write,
                 "Live: also write the captured packets to this pcap file, as tcpdump -w (with -G: a strftime "
                 "pattern)")
      ->check(CLI::Validator(
          [](const std::string& path) {
            // tcpdump -w - writes to stdout; here stdout carries the events and report.
            return path == "-" ? std::string("- (stdout) carries the events and report: give a file") : std::string();
          },
          "FILE"));
  cmd.add_option("-C", o.rotate_mb, "--write: start a new file (FILE1, FILE2, …) once one is larger than this many "
                                    "millions of bytes, as tcpdump -C")
      ->needs("--write")
      ->check(more_than_zero());  // 0 would be no rotation at all, as if -C were not given (tcpdump refuses it too)
  cmd.add_option("-G", o.rotate_s, "--write: start a new file every this many seconds (FILE through strftime), as "
                                   "tcpdump -G")
      ->needs("--write")
      ->check(more_than_zero());
  cmd.add_option("--save-anomalies", o.save_dir,
                 "Live: flight recorder: on each anomaly write DIR/<utc time>-<lock>-<kind>.pcap (the packets of "
                 "the lock's connections in the last --save-window) and .json (the event)");
  cmd.add_option("--save-window", o.save_window_s,
                 "--save-anomalies: seconds of packets kept (also: at most one file per lock and kind this often)")
      ->needs("--save-anomalies")
      ->check(more_than_zero())
      ->capture_default_str();
  cmd.add_option("--save-after", o.save_after_s,
                 "--save-anomalies: seconds of packets after the anomaly also saved (the file is written then)")
      ->needs("--save-anomalies")
      ->check(zero_or_more())
      ->capture_default_str();
  cmd.add_option("--save-buffer", o.save_buffer, "--save-anomalies: memory for the kept packets (e.g. 64MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->needs("--save-anomalies")
      ->check(CLI::Range(std::uint64_t{4} << 20, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd.add_option("--save-max-mb", o.save_max_mb,
                 "--save-anomalies: the directory's .pcap and .json files are kept under this many MB (the "
                 "oldest deleted first)")
      ->needs("--save-anomalies")
      ->check(more_than_zero())
      ->capture_default_str();
}

void require_live_for_recording(const std::string& command, const capture_options& c, const recorder_options& o) {
  if (c.live() || !o.replay.empty()) return;
  if (!o.save_dir.empty() || !o.write.empty()) {
    throw CLI::ValidationError(command, "--save-anomalies and --write work on live capture (-i) or --replay, not on "
                                        "capture files");
  }
}

void refuse_reused_rotation_names(const recorder_options& o) {
  if (o.rotate_s <= 0) return;
  // tcpdump's trap: a name that does not change within an interval's length names two
  // intervals alike, and the later one's file overwrites the earlier.
  const double span = live::strftime_name_span_s(o.write);
  if (span == 0) {
    throw CLI::ValidationError(
        "-G", fmt::format("--write {} has no strftime time conversion (%S, %M, %H, %d…): every {} s the new "
                          "file would overwrite the last one; put the time in the name, e.g. NAME-%Y%m%d-%H%M%S.pcap",
                          o.write, o.rotate_s));
  }
  if (span > o.rotate_s) {
    throw CLI::ValidationError(
        "-G", fmt::format("--write {}: its finest time conversion changes every {} s, more than -G {}: files of "
                          "intervals within one of its values get the same name and overwrite each other; use a "
                          "finer one (%S, %M) or -G {} or more",
                          o.write, span, o.rotate_s, span));
  }
}

void refuse_overwriting_inputs(const capture_options& c, const recorder_options& o, const std::string& output) {
  std::vector<std::string> inputs = c.files;
  if (!o.replay.empty()) inputs.push_back(o.replay);
  auto same_file = [](const std::string& a, const std::string& b) {
    struct stat sa {}, sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  };
  for (const std::string& input : inputs) {
    if (input == "-") continue;
    if (!output.empty() && output != "-" && same_file(output, input)) {
      throw CLI::ValidationError("-o", fmt::format("{} is the input capture {}: it would be overwritten", output, input));
    }
    if (o.write.empty()) continue;
    if (same_file(o.write, input)) {
      throw CLI::ValidationError("--write", fmt::format("{} is the input capture {}: it would be overwritten", o.write, input));
    }
    // -C's later files: FILE1, FILE2, ... beside FILE.
    const std::string name = std::filesystem::path(input).filename().string();
    const std::string base = std::filesystem::path(o.write).filename().string();
    if (o.rotate_mb > 0 && name.size() > base.size() && name.starts_with(base) &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(base.size()), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      std::error_code ec;
      const auto dir_of = [&](const std::string& p) {
        return std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec).parent_path(), ec);
      };
      if (dir_of(input) == dir_of(o.write)) {
        throw CLI::ValidationError("--write", fmt::format("-C would write {}, the input capture {}", name, input));
      }
    }
  }
}

std::unique_ptr<ingest::packet_source> open_packet_source(const char* command, const capture_options& c,
                                                            const recorder_options& o) {
  if (o.replay.empty()) return open_live(command, c);
  try {
    auto r = std::make_unique<ingest::replay_capture>(
        std::vector<std::string>{o.replay}, o.replay_speed,
        [command](const std::string& w) { live::print_diagnostic("lockscope {}: warning: {}\n", command, w); },
        [command](const std::string& e) { live::print_diagnostic("lockscope {}: error: {}\n", command, e); });
    live::print_diagnostic("lockscope {}: replaying {} through the live path at {}\n", command, o.replay,
               o.replay_speed > 0 ? fmt::format("{}× its speed", o.replay_speed) : std::string("full speed"));
    return r;
  } catch (const ingest::capture_error& e) {
    live::print_diagnostic("lockscope {}: {}\n", command, e.what());
    return nullptr;
  }
}

}  // namespace lockscope::cli
