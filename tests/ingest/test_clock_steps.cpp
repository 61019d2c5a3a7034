// Clock steps (clock_steps.hpp): a capture whose clock was stepped back is read whole
// and the step is named by its packet number, which tshark finds on its own; reordering
// and slewing are not steps.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <filesystem>
#include <string>

#include "helpers.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/clock_steps.hpp"
#include "lockscope/test/real_capture.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace lockscope::test;

TEST_CASE("clock steps: packet times a second or more back are a step, reordering is not", "[capture][clock]") {
  packet_clock_watch watch;
  CHECK(watch.on_packet(5'000'000) == 0);  // the first packet
  CHECK(watch.on_packet(5'000'100) == 0);
  CHECK(watch.on_packet(5'000'050) == 0);  // 50 µs back: multi-queue reordering
  CHECK(watch.on_packet(5'000'200) == 0);
  CHECK(watch.on_packet(4'000'201) == 0);  // 999,999 µs back: still not a step
  CHECK(watch.on_packet(5'000'300) == 0);
  CHECK(watch.on_packet(4'000'300) == 1'000'000);
  CHECK(watch.on_packet(4'000'400) == 0);  // the clock goes on from where it stepped to
  CHECK(watch.on_packet(-25'999'600) == 30'000'000);
  CHECK(watch.on_packet(3'600'000'000) == 0);  // forward: cannot be told from a quiet hour
}

TEST_CASE("clock steps: the wall clock against a monotonic one tells steps from slewing", "[capture][clock]") {
  wall_clock_watch watch;
  std::int64_t wall = 1'764'000'000'000'000, mono = 1'000'000;
  CHECK(watch.on_tick(wall, mono) == 0);
  // NTP slewing at its fastest (500 ppm) for a day, read every second: 43 s in all.
  for (int i = 0; i < 86'400; ++i) {
    mono += 1'000'000;
    wall += 1'000'500;
    REQUIRE(watch.on_tick(wall, mono) == 0);
  }
  mono += 1'000;
  wall += 1'000 + 3'600'000'000;  // stepped an hour forward
  CHECK(watch.on_tick(wall, mono) == 3'600'000'000);
  mono += 1'000;
  wall += 1'000;
  CHECK(watch.on_tick(wall, mono) == 0);
  mono += 2'000;
  wall += 2'000 - 30'000'000;  // 30 s back
  CHECK(watch.on_tick(wall, mono) == -30'000'000);
  mono += 500'000;
  wall += 500'000 - 999'999;  // just under a second back
  CHECK(watch.on_tick(wall, mono) == 0);
}

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `editcap`/`mergecap` (Wireshark's) make a copy of `from` whose packets after the first
// half are moved by `shift` seconds, kept in capture order.
bool time_shifted_copy(const std::filesystem::path& from, const std::filesystem::path& dir, const std::string& shift,
                  const std::filesystem::path& to) {
  const std::string n = read_command_output("capinfos -c -M " + from.string() + " | awk '/Number of packets/ {print $NF}'");
  const int packets = std::stoi(n);
  const int half = packets / 2;
  const auto a = dir / "a.pcap", b = dir / "b.pcap", c = dir / "c.pcap";
  const std::string cmd = "editcap -r " + from.string() + " " + a.string() + " 1-" + std::to_string(half) +
                          " && editcap -r " + from.string() + " " + b.string() + " " + std::to_string(half + 1) + "-" +
                          std::to_string(packets) + " && editcap -t " + shift + " " + b.string() + " " + c.string() +
                          " && mergecap -F pcap -a -w " + to.string() + " " + a.string() + " " + c.string();
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

struct clock_run {
  std::string out, err;
  int status = -1;
};

clock_run analyze_stepped(const std::filesystem::path& pcap, const std::filesystem::path& dir) {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const auto err = dir / "err.txt";
  clock_run r;
  r.out = read_command_output(cli + " analyze --format jsonl --no-summary " + pcap.string() + " 2>" + err.string() +
                              "; echo \"status $?\"");
  r.err = read_command_output("cat " + err.string());
  return r;
}

}  // namespace

TEST_CASE("clock steps: a capture stepped back is analyzed whole, and the warning names the packet tshark finds",
          "[capture][clock][tshark]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  if (!on_path("editcap") || !on_path("mergecap") || !on_path("tshark") || !on_path("capinfos")) {
    WARN("Wireshark's editcap, mergecap, capinfos or tshark is not installed: skipped");
    return;
  }
  temp_dir dir;
  const std::filesystem::path original = std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / "captures/recorded/contend.pcap";
  const auto back = dir / "back.pcap", jitter = dir / "jitter.pcap";
  REQUIRE(time_shifted_copy(original, dir.path, "-30", back));
  REQUIRE(time_shifted_copy(original, dir.path, "-0.5", jitter));
  // tshark's own view of where the time went back.
  const std::string frame = read_command_output("tshark -r " + back.string() +
                                                " -Y 'frame.time_delta < -1' -T fields -e frame.number 2>/dev/null");
  REQUIRE(!frame.empty());
  REQUIRE(frame.find('\n') == frame.size() - 1);  // one step
  const std::string number = frame.substr(0, frame.size() - 1);

  // The same as pcapng, which libpcap reads for lockscope.
  const auto back_ng = dir / "back.pcapng";
  REQUIRE(std::system(("editcap -F pcapng " + back.string() + " " + back_ng.string()).c_str()) == 0);
  const clock_run stepped_ng = analyze_stepped(back_ng, dir.path);
  CHECK(stepped_ng.err.find(back_ng.string() + ": packet " + number + ": its time is 30.000000 s before") !=
        std::string::npos);
  CHECK(count_of(stepped_ng.err, "clock was stepped back") == 1);

  const clock_run plain = analyze_stepped(original, dir.path);
  const clock_run stepped = analyze_stepped(back, dir.path);
  const clock_run reordered = analyze_stepped(jitter, dir.path);
  INFO(stepped.err);
  CHECK(plain.out.find("\nstatus 0\n") != std::string::npos);
  CHECK(stepped.out.find("\nstatus 0\n") != std::string::npos);
  CHECK(plain.err.find("clock") == std::string::npos);
  CHECK(reordered.err.find("clock") == std::string::npos);
  CHECK(count_of(stepped.err, "clock was stepped back") == 1);
  CHECK(stepped.err.find(back.string() + ": packet " + number +
                         ": its time is 30.000000 s before the previous packet's: the capturing host's clock was "
                         "stepped back; waits, holds and leases that span it are measured across the step") !=
        std::string::npos);
  // Nothing is dropped: every operation is still an event.
  CHECK(count_of(stepped.out, "\"event\"") == count_of(plain.out, "\"event\""));
  CHECK(count_of(stepped.out, "\"event\"") > 40);
}
