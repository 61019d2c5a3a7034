// Capture files that change while lockscope reads them — tcpdump -C/-W truncates and
// rewrites its ring files in place: the reader stops with an error naming the file and
// the offset, keeps (and prints) what came before, and never crashes. Truncated input
// on stdin and pcapng files end the same way.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <termios.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace std::chrono_literals;

namespace {

// A capture of `count` GET key:i => value-i exchanges on one connection, with the file
// offset where each record ends (computed from the frames, not read back).
struct many_gets {
  std::vector<timed_segment> segments;
  std::vector<std::uint64_t> record_end;
  std::size_t first_exchange_record = 0;  // GET key:0; its reply is the next record

  explicit many_gets(std::size_t count, std::int64_t start_us = 1'700'000'000'000'000) {
    script s(ep("10.0.0.1", 50100), ep("10.0.0.2", 6379));
    s.now = start_us;
    s.handshake();
    first_exchange_record = s.segments.size();
    for (std::size_t i = 0; i < count; ++i) {
      const std::string value = "value-" + std::to_string(i) + std::string(40, 'v');
      s.client(cmd({"GET", "key:" + std::to_string(i)}))
          .server("$" + std::to_string(value.size()) + "\r\n" + value + "\r\n");
    }
    segments = s.segments;
    std::uint64_t offset = 24;
    for (const timed_segment& seg : segments) {
      offset += 16 + make_frame(link_type::en10mb, seg.spec).size();
      record_end.push_back(offset);
    }
  }
  // The exchanges whose reply record ends at or before `offset`.
  std::size_t complete_before(std::uint64_t offset) const {
    std::size_t n = 0;
    while (first_exchange_record + 2 * n + 1 < record_end.size() &&
           record_end[first_exchange_record + 2 * n + 1] <= offset) {
      ++n;
    }
    return n;
  }
};

std::uint64_t stopped_at(const std::string& message) {
  std::smatch m;
  REQUIRE(std::regex_search(message, m, std::regex("stopped at byte ([0-9]+)")));
  return std::stoull(m[1]);
}

// Reads the capture through offline_capture, calling `change` once after the first
// packet (the reader has filled its first buffer then).
struct read_result {
  recording_sink sink;
  std::vector<std::string> warnings;
  std::vector<std::string> errors;
  std::size_t packets = 0;
  std::size_t changed_files = 0;
};

template <class Change>
read_result read_changing(const std::filesystem::path& file, Change&& change) {
  read_result r;
  ingest_pipeline a({}, r.sink);
  offline_capture source(
      {file.string()}, [&](const std::string& w) { r.warnings.push_back(w); },
      [&](const std::string& e) { r.errors.push_back(e); });
  captured_packet p;
  while (source.next(p)) {
    if (r.packets++ == 0) change();
    a.on_packet(p.ts_us, p.link_type, p.data);
  }
  a.finish();
  r.changed_files = source.changed_files();
  return r;
}

void check_prefix(const recording_sink& sink, std::size_t complete) {
  REQUIRE(sink.items.size() >= complete);
  CHECK(sink.items.size() <= complete + 1);  // + a command whose reply was cut off
  for (std::size_t i = 0; i < complete; ++i) {
    const std::string expected = "GET key:" + std::to_string(i) + " => value-" + std::to_string(i);
    if (sink.items[i].summary().rfind(expected, 0) != 0) {
      FAIL_CHECK("exchange " << i << ": " << sink.items[i].summary());
      break;
    }
  }
}

}  // namespace

TEST_CASE("a pcap file truncated while it is read: an error naming file and offset, what came before kept",
          "[capture][changing]") {
  temp_dir dir;
  const auto path = dir / "ring0.pcap";
  const many_gets capture(25000);  // ~5.6 MB: several read buffers
  write_pcap(path, capture.segments);
  const std::uint64_t cut = 1'500'000;  // past the first read buffer, mid-record
  REQUIRE(std::filesystem::file_size(path) > 3 * cut);

  const auto r = read_changing(path, [&] { std::filesystem::resize_file(path, cut); });
  REQUIRE(r.errors.size() == 1);
  CHECK(r.warnings.empty());
  CHECK(r.changed_files == 1);
  CHECK_THAT(r.errors[0], Catch::StartsWith(path.string() + ": the file changed while being read") &&
                              Catch::Contains("shrank from " + std::to_string(capture.record_end.back()) + " to " +
                                              std::to_string(cut) + " bytes"));
  const std::uint64_t at = stopped_at(r.errors[0]);
  CHECK(at <= cut);
  // It stopped exactly at the first record it did not deliver.
  REQUIRE(r.packets >= 1);
  CHECK(at == capture.record_end[r.packets - 1]);
  const std::size_t complete = capture.complete_before(at);
  CHECK(complete > 1000);
  check_prefix(r.sink, complete);
}

TEST_CASE("a pcap file rewritten in place while it is read (same size or larger) is detected", "[capture][changing]") {
  temp_dir dir;
  const auto path = dir / "ring1.pcap";
  const many_gets first(20000);
  write_pcap(path, first.segments);
  const many_gets next(30000, 1'700'000'100'000'000);  // the ring's next round: later, and larger

  const auto r = read_changing(path, [&] { write_pcap(path, next.segments); });  // truncates, then writes
  REQUIRE(r.errors.size() == 1);
  CHECK_THAT(r.errors[0], Catch::Contains("ring1.pcap: the file changed while being read") &&
                              Catch::Contains("rewritten"));
  const std::uint64_t at = stopped_at(r.errors[0]);
  CHECK(at == first.record_end[r.packets - 1]);
  check_prefix(r.sink, first.complete_before(at));
  for (const recorded& item : r.sink.items) CHECK(item.request_us < 1'700'000'100'000'000);  // nothing of the new round
}

TEST_CASE("a pcapng file truncated while it is read ends with an error, what came before kept", "[capture][changing]") {
  temp_dir dir;
  const auto path = dir / "ring.pcapng";
  const many_gets capture(20000);
  {
    pcapng_file_writer w(path.string());
    const auto eth = w.add_interface(link_type::en10mb);
    for (const auto& seg : capture.segments) w.write(eth, seg.ts_us, make_frame(link_type::en10mb, seg.spec));
  }
  const auto r = read_changing(path, [&] { std::filesystem::resize_file(path, 1'500'000); });
  REQUIRE(r.errors.size() == 1);
  CHECK_THAT(r.errors[0], Catch::Contains("ring.pcapng: the file changed while being read") &&
                              Catch::Contains("stopped at byte"));
  CHECK(r.sink.items.size() > 1000);
  check_prefix(r.sink, r.sink.items.size() - 1);
}

namespace {

std::string slurp(int fd) {
  std::string out;
  char buffer[65536];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  return out;
}

// The read offset of `pid`'s descriptor open on `file` (from /proc), or -1.
long long read_offset(pid_t pid, const std::filesystem::path& file) {
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    if (std::filesystem::read_symlink(fd.path(), ec) != file) continue;
    std::ifstream info("/proc/" + std::to_string(pid) + "/fdinfo/" + fd.path().filename().string());
    std::string key;
    long long pos = -1;
    while (info >> key) {
      if (key == "pos:") {
        info >> pos;
        return pos;
      }
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("lockscope decode: a capture truncated while it reads it, an error and the exchanges before",
          "[cli][changing]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  // The file, and the same through the live loop (--replay), which exited 0 after its error.
  const bool replay = GENERATE(false, true);
  CAPTURE(replay);
  temp_dir dir;
  const auto path = std::filesystem::canonical(dir.path) / "ring2.pcap";
  const many_gets capture(60000);  // ~12 MB
  write_pcap(path, capture.segments);

  // lockscope writes its output into a pipe nobody reads yet: it stalls there, in the
  // middle of the file, deterministically. Then the file is cut past where it read.
  int out[2];
  int err[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(err) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    if (replay) {
      ::execl(binary.c_str(), binary.c_str(), "decode", "--max-argument", "0", "--replay-speed", "0", "--replay",
              path.c_str(), static_cast<char*>(nullptr));
    } else {
      ::execl(binary.c_str(), binary.c_str(), "decode", "--max-argument", "0", path.c_str(), static_cast<char*>(nullptr));
    }
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  long long offset = -1;
  int unchanged = 0;
  for (int i = 0; i < 300 && unchanged < 4; ++i) {  // until it stops moving (4 × 100 ms)
    std::this_thread::sleep_for(100ms);
    const long long now = read_offset(pid, path);
    unchanged = now > 0 && now == offset ? unchanged + 1 : 0;
    offset = now;
  }
  REQUIRE(offset > 0);
  const auto size = static_cast<long long>(std::filesystem::file_size(path));
  REQUIRE(offset + 1'000'000 < size);  // stalled in the middle
  const std::uint64_t cut = static_cast<std::uint64_t>(offset) + 777;
  std::filesystem::resize_file(path, cut);

  std::string errors;
  std::thread drain_errors([&] { errors = slurp(err[0]); });
  const std::string text = slurp(out[0]);
  drain_errors.join();
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(out[0]);
  ::close(err[0]);

  REQUIRE(WIFEXITED(status));  // no SIGBUS
  CHECK(WEXITSTATUS(status) == 1);
  INFO(errors);
  CHECK_THAT(errors, Catch::Contains("lockscope decode: error: " + path.string() + ": the file changed while being read"));
  const std::uint64_t at = stopped_at(errors);
  CHECK(at <= cut);
  const std::size_t complete = capture.complete_before(at);
  CHECK(complete > 1000);
  // Every exchange before the stop was printed, in order, and nothing after it.
  std::size_t printed = 0;
  std::size_t position = 0;
  while ((position = text.find("GET key:", position)) != std::string::npos) {
    const std::string expected = "GET key:" + std::to_string(printed) + " ";
    if (text.compare(position, expected.size(), expected) != 0) {
      FAIL_CHECK("line " << printed << ": " << text.substr(position, 40));
      break;
    }
    ++printed;
    position += expected.size();
  }
  CHECK(printed >= complete);
  CHECK(printed <= complete + 1);
  CHECK_THAT(errors, Catch::Contains(" exchanges, "));  // the closing summary was printed
}

namespace {

struct cli_run {
  int status = -1;
  std::string out, err;
};

// Runs lockscope with `args` and its stdin a pseudo-terminal that holds `input` and whose
// other end is closed: the reads return `input`, then fail with EIO, as a disk's bad
// block does (which no test can make on demand).
cli_run run_on_failing_stdin(const std::string& binary, const std::vector<std::string>& args, const std::string& input) {
  cli_run r;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  REQUIRE(master >= 0);
  REQUIRE(::grantpt(master) == 0);
  REQUIRE(::unlockpt(master) == 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  REQUIRE(slave >= 0);
  termios raw{};
  REQUIRE(::tcgetattr(slave, &raw) == 0);
  ::cfmakeraw(&raw);  // the bytes as they are: no newline translation, no echo
  REQUIRE(::tcsetattr(slave, TCSANOW, &raw) == 0);
  REQUIRE(input.size() < 16384);  // what the terminal buffers without a reader
  REQUIRE(::write(slave, input.data(), input.size()) == static_cast<ssize_t>(input.size()));
  ::close(slave);
  int out[2], err[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(err) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(master, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(master);
  ::close(out[1]);
  ::close(err[1]);
  std::thread drain_errors([&] { r.err = slurp(err[0]); });
  r.out = slurp(out[0]);
  drain_errors.join();
  ::waitpid(pid, &r.status, 0);
  ::close(out[0]);
  ::close(err[0]);
  return r;
}

}  // namespace

TEST_CASE("lockscope decode and analyze: a read error (EIO) is an error, exit 1, the output up to it kept",
          "[cli][changing]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  temp_dir dir;
  const auto path = dir / "gets.pcap";
  const many_gets capture(40);
  write_pcap(path, capture.segments);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string whole = read_command_output(binary + " decode " + path.string() + " 2>/dev/null");
  REQUIRE(whole.find("GET key:39 ") != std::string::npos);
  for (const std::string command : {"decode", "analyze"}) {
    CAPTURE(command);
    const cli_run r = run_on_failing_stdin(binary, {command, "-"}, bytes);
    INFO(r.err);
    REQUIRE(WIFEXITED(r.status));
    CHECK(WEXITSTATUS(r.status) == 1);
    CHECK_THAT(r.err, Catch::Contains("lockscope " + command + ": error: -: read error at byte " +
                                      std::to_string(bytes.size()) +
                                      ": Input/output error; stopped there, everything before it was read"));
    CHECK_THAT(r.err, !Catch::Contains("warning"));
    if (command == "decode") CHECK(r.out == whole);  // every exchange read before the error
  }
}

TEST_CASE("lockscope decode and analyze: a truncated capture on stdin is read up to the cut, no crash",
          "[cli][changing]") {
  LOCKSCOPE_REQUIRE_CLI(binary);
  temp_dir dir;
  const auto path = dir / "cut.pcap";
  const many_gets capture(3000);
  write_pcap(path, capture.segments);
  const std::uint64_t cut = capture.record_end[capture.first_exchange_record + 2 * 1000 + 1] + 30;  // mid-record
  std::filesystem::resize_file(path, cut);
  for (const std::string command : {"decode", "analyze"}) {
    CAPTURE(command);
    // Through a pipe, not a file: stdin cannot be sized or mapped.
    const std::string shell = "cat " + path.string() + " | " + binary + " " + command + " - 2>&1; echo rc=$?";
    const std::string output = read_command_output(shell);
    CHECK_THAT(output, Catch::Contains("warning: -: truncated dump file; the record at byte " +
                                       std::to_string(capture.record_end[capture.first_exchange_record + 2 * 1000 + 1])) &&
                           Catch::Contains("rc=0"));
    if (command == "decode") {
      CHECK_THAT(output, Catch::Contains("GET key:1000 ") && !Catch::Contains("GET key:1001 "));
    }
  }
}
