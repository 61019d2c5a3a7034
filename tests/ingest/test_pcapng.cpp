// pcapng files (capture_files.hpp's reader), checked packet by packet against tshark's
// reading of the same file: Wireshark's own writers (mergecap, editcap), and files in
// big-endian order, with other time resolutions, offsets, sections and block kinds that
// our writer makes and tshark has to accept too. Damage ends a file at the named byte,
// with everything before it read, as tshark reads it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/real_capture.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using namespace lockscope::test;
using Catch::Matchers::Equals;
using namespace std::chrono_literals;
namespace ltest = lockscope::test;

namespace {

// One packet as a reader sees it: time, link type, captured and original length, and
// the first bytes.
struct seen_packet {
  std::int64_t ts_us = 0;
  std::string link;  // "eth", "sll", "raw"
  std::size_t captured = 0;
  std::uint32_t wire = 0;
  bool operator==(const seen_packet&) const = default;
};

std::ostream& operator<<(std::ostream& os, const seen_packet& p) {
  return os << "{" << p.ts_us << " " << p.link << " " << p.captured << "/" << p.wire << "}";
}

std::string link_name(int link_type) {
  switch (link_type) {
    case link_type::en10mb: return "eth";
    case link_type::linux_sll: case link_type::linux_sll2: return "sll";
    case link_type::raw: case link_type::raw_linktype: return "raw";
    default: return std::to_string(link_type);
  }
}

struct our_reading {
  std::vector<seen_packet> packets;
  std::vector<std::string> warnings;
};

our_reading read_ours(const std::filesystem::path& file) {
  our_reading r;
  offline_capture source({file.string()}, [&](const std::string& w) { r.warnings.push_back(w); });
  captured_packet p;
  while (source.next(p)) r.packets.push_back({p.ts_us, link_name(p.link_type), p.data.size(), p.wire_length});
  return r;
}

// tshark's reading: frame.time_epoch (to the microsecond, truncated as libpcap and we
// do), the first protocol of the frame, and the lengths.
std::vector<seen_packet> read_tshark(const std::filesystem::path& file) {
  const std::string out = read_command_output("tshark -r " + file.string() +
                                              " -T fields -e frame.time_epoch -e frame.protocols -e frame.cap_len "
                                              "-e frame.len 2>/dev/null");
  std::vector<seen_packet> packets;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
    REQUIRE(fields.size() == 4);
    seen_packet p;
    const std::string& time = fields[0];  // empty when the packet has no time
    if (const auto dot = time.find('.'); dot != std::string::npos) {
      p.ts_us = std::stoll(time.substr(0, dot)) * 1'000'000 + std::stoll((time.substr(dot + 1) + "000000").substr(0, 6));
    }
    p.link = fields[1].substr(0, fields[1].find(':'));
    if (p.link == "data" && time.empty()) continue;  // a custom block: tshark lists it, it is no packet
    p.captured = std::stoul(fields[2]);
    p.wire = static_cast<std::uint32_t>(std::stoul(fields[3]));
    packets.push_back(p);
  }
  return packets;
}

// What offline_capture hands on: a file's packets in time order, ties in file order (a
// file of several interfaces is merged by time; see capture_files::interface_merge).
std::vector<seen_packet> in_time_order(std::vector<seen_packet> packets) {
  std::stable_sort(packets.begin(), packets.end(),
                   [](const seen_packet& a, const seen_packet& b) { return a.ts_us < b.ts_us; });
  return packets;
}

bool have_wireshark_tools() {
  return std::system("command -v tshark mergecap editcap >/dev/null 2>&1") == 0;
}

std::filesystem::path bundled_capture(const std::string& name) { return std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / name; }

void run_tool(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

script get_conversation(std::uint16_t client_port, int gets, std::int64_t start_us = 1'700'000'000'000'000) {
  script s(ep("10.0.0.1", client_port), ep("10.0.0.2", 6379));
  s.now = start_us;
  s.handshake();
  for (int i = 0; i < gets; ++i) s.client(cmd({"GET", "k" + std::to_string(i)})).server("$2\r\nv" + std::to_string(i % 10) + "\r\n");
  s.close();
  return s;
}

// `dumpcap -q [extra] -f FILTER -i IF… -w FILE` for the lifetime of the object, its
// stdout and stderr to `log`. ready() once the file holds the section header and every
// interface's description (dumpcap writes them when all captures are active).
class dumpcap_recording {
 public:
  dumpcap_recording(const std::filesystem::path& file, const std::filesystem::path& log, const std::string& filter,
                    const std::vector<std::string>& interfaces, const std::vector<std::string>& extra = {})
      : file_(file) {
    std::vector<std::string> args{"dumpcap", "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"-f", filter});
    for (const std::string& i : interfaces) args.insert(args.end(), {"-i", i});
    args.insert(args.end(), {"-w", file.string()});
    pid_ = ::fork();
    if (pid_ == 0) {
      if (std::FILE* out = std::fopen(log.c_str(), "w")) {
        ::dup2(::fileno(out), 1);
        ::dup2(::fileno(out), 2);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("dumpcap", argv.data());
      ::_exit(127);
    }
    const std::uintmax_t header = 28 + 20 * interfaces.size();
    for (int i = 0; i < 250 && !ready_ && pid_ > 0; ++i) {
      std::this_thread::sleep_for(20ms);
      std::error_code ec;
      ready_ = std::filesystem::file_size(file, ec) >= header && !ec;
    }
    std::this_thread::sleep_for(300ms);  // the filters are attached just after
  }
  ~dumpcap_recording() { stop(); }
  bool ready() const { return ready_; }
  void stop() {
    if (pid_ <= 0) return;
    // The last packets reach the file when dumpcap's next write comes round: under load
    // that took longer than a fixed wait. Stop once the file has not grown for 500 ms.
    std::uintmax_t size = 0;
    for (int still = 0, i = 0; still < 5 && i < 100; ++i) {
      std::this_thread::sleep_for(100ms);
      std::error_code ec;
      const std::uintmax_t now = std::filesystem::file_size(file_, ec);
      still = !ec && now == size ? still + 1 : 0;
      size = now;
    }
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  std::filesystem::path file_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace

TEST_CASE("pcapng: Wireshark's files, mixed link types too, read packet for packet as tshark reads them",
          "[capture][pcapng]") {
  if (!have_wireshark_tools()) {
    WARN("tshark, mergecap or editcap is not installed: skipping");
    return;
  }
  temp_dir dir;
  // A Linux cooked capture (tcpdump -i any) and an Ethernet one in one pcapng, as
  // mergecap writes it, and as dumpcap writes `-i any -i eth0`: libpcap refuses it.
  const auto cooked = bundled_capture("captures/thirdparty/pylock.pcap");
  const auto ethernet = bundled_capture("captures/seed-redisson.pcap");
  const auto mixed = dir / "mixed.pcapng";
  run_tool("mergecap -F pcapng -w " + mixed.string() + " " + cooked.string() + " " + ethernet.string());
  // Nanosecond time (if_tsresol 9), a packet comment (an EPB option) and a
  // decryption-secrets block, all from editcap.
  const auto nanos = dir / "nanos.pcap", nanos_ng = dir / "nanos.pcapng", keys = dir / "keys.txt";
  std::ofstream(keys) << "CLIENT_RANDOM " << std::string(64, 'a') << " " << std::string(96, 'b') << "\n";
  run_tool("editcap -F nsecpcap " + ethernet.string() + " " + nanos.string());
  run_tool("editcap -F pcapng -a 3:'a comment on the third packet' --inject-secrets tls," + keys.string() + " " +
      nanos.string() + " " + nanos_ng.string());

  for (const auto& file : {mixed, nanos_ng}) {
    CAPTURE(file.filename().string());
    const our_reading ours = read_ours(file);
    CHECK(ours.warnings.empty());
    const auto theirs = read_tshark(file);
    REQUIRE(theirs.size() > 60);
    CHECK_THAT(ours.packets, Equals(in_time_order(theirs)));
  }
  // The cooked and the Ethernet conversations both come out, as from the two files.
  const recording_sink merged = analyze_files({mixed.string()});
  const recording_sink apart = analyze_files({cooked.string(), ethernet.string()});
  REQUIRE(apart.items.size() > 20);
  CHECK_THAT(merged.summaries(), Equals(apart.summaries()));
}

TEST_CASE("pcapng: dumpcap's own file of lo and any (two link types) reads as tshark reads it, each exchange once",
          "[capture][pcapng][real]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  if (!have_wireshark_tools() || !on_path("dumpcap")) {
    WARN("dumpcap or tshark is not installed: skipping");
    return;
  }
  ltest::redis_server server;
  temp_dir dir;
  const auto file = dir / "lo-and-any.pcapng";
  const std::string port = std::to_string(server.port());
  // -f before the first -i is every interface's filter. `any` sees loopback packets too
  // (once: libpcap leaves out their outgoing copy), so each segment is in the file twice,
  // once per link type: the second copy is a retransmission to the reassembler.
  dumpcap_recording recording(file, dir / "dumpcap.log", "tcp port " + port, {"lo", "any"});
  if (!recording.ready()) {
    WARN("dumpcap could not capture on lo and any (needs CAP_NET_RAW): skipping");
    return;
  }
  // Each interface's filter is attached a moment after the file's header, later under
  // load: ping until both interfaces have written one.
  bool both_capture = false;
  for (int i = 0; i < 50 && !both_capture; ++i) {
    CHECK(run(cli(server.port(), "PING")) == 0);
    std::this_thread::sleep_for(100ms);
    std::set<std::string> seen;
    for (const seen_packet& p : read_ours(file).packets) seen.insert(p.link);
    both_capture = seen.size() == 2;
  }
  REQUIRE(both_capture);
  CHECK(run(cli(server.port(), "SET k v")) == 0);
  CHECK(run(cli(server.port(), "GET k")) == 0);
  CHECK(run("sh -c 'for i in $(seq 1 40); do printf \"*2\\r\\n\\$4\\r\\nINCR\\r\\n\\$7\\r\\ncounter\\r\\n\"; done' | "
            "redis-cli -p " + port + " --pipe >/dev/null 2>&1") == 0);
  recording.stop();
  const our_reading ours = read_ours(file);
  CHECK(ours.warnings.empty());
  const auto theirs = read_tshark(file);
  REQUIRE(theirs.size() > 20);
  // dumpcap writes each interface's packets in runs, so the file is not in time order.
  CHECK(ours.packets != theirs);
  CHECK_THAT(ours.packets, Equals(in_time_order(theirs)));
  std::set<std::string> links;
  for (const seen_packet& p : ours.packets) links.insert(p.link);
  CHECK(links == std::set<std::string>{"eth", "sll"});

  const recording_sink sink = analyze_files({file.string()});
  const auto all = sink.summaries();
  CHECK(std::count(all.begin(), all.end(), "SET k v => OK") == 1);
  CHECK(std::count(all.begin(), all.end(), "GET k => v") == 1);
  CHECK(std::count_if(all.begin(), all.end(), [](const std::string& x) { return x.starts_with("INCR counter => "); }) ==
        40);
}

TEST_CASE("pcapng: byte order, time resolutions and offsets, sections and rare blocks read as tshark reads them",
          "[capture][pcapng]") {
  if (!have_wireshark_tools()) {
    WARN("tshark is not installed: skipping");
    return;
  }
  const bool big_endian = GENERATE(false, true);
  CAPTURE(big_endian);
  temp_dir dir;
  const auto path = dir / "rare.pcapng";
  const script a = get_conversation(50001, 6), b = get_conversation(50002, 6, 1'700'000'010'000'000);
  {
    pcapng_file_writer w(path.string(), big_endian);
    const auto eth = w.add_interface(link_type::en10mb);
    const auto nanos = w.add_interface(link_type::linux_sll, {.resolution = 9});
    const auto millis = w.add_interface(link_type::raw, {.resolution = 3});
    const auto binary = w.add_interface(link_type::en10mb, {.resolution = 0x80 | 30});
    const auto shifted = w.add_interface(link_type::en10mb, {.resolution = 9, .offset_s = 1'600'000'000});
    const auto cut = w.add_interface(link_type::en10mb, {.snaplen = 60});
    w.write_block(4, std::string(4, '\0'));              // name resolution: no records
    w.write_block(0xBAD, std::string(4, '\0') + "data");  // custom: a PEN, then its data
    const std::uint32_t spread[] = {eth, nanos, millis, binary, shifted, cut};
    for (std::size_t i = 0; i < a.segments.size(); ++i) {
      const auto& seg = a.segments[i];
      const std::uint32_t on = spread[i % 6];
      const int link = on == nanos ? link_type::linux_sll : on == millis ? link_type::raw : link_type::en10mb;
      if (i % 7 == 3) w.write_obsolete(on, seg.ts_us, make_frame(link, seg.spec));
      else w.write(on, seg.ts_us, make_frame(link, seg.spec));
    }
    w.write_block(5, std::string(12, '\0'));  // interface statistics: interface 0, no options
    w.new_section();  // interface ids start again
    const auto second = w.add_interface(link_type::en10mb, {.resolution = 9});
    for (const auto& seg : b.segments) w.write(second, seg.ts_us, make_frame(link_type::en10mb, seg.spec));
    w.write_simple(make_frame(link_type::en10mb, b.segments.back().spec));  // no time: the previous one's
  }
  const our_reading ours = read_ours(path);
  CHECK(ours.warnings.empty());
  auto theirs = read_tshark(path);
  REQUIRE(theirs.size() == a.segments.size() + b.segments.size() + 1);
  REQUIRE(ours.packets.size() == theirs.size());
  // pcapng gives a simple packet block no time; tshark shows it as 0, we as the previous
  // packet's (so a merge by time keeps it in place).
  CHECK(theirs.back().ts_us == 0);
  theirs.back().ts_us = theirs[theirs.size() - 2].ts_us;
  CHECK_THAT(ours.packets, Equals(in_time_order(theirs)));
  // Interface `cut`'s snaplen.
  CHECK(std::count_if(ours.packets.begin(), ours.packets.end(),
                      [](const seen_packet& p) { return p.captured == 60 && p.wire > 60; }) >= 2);
}

TEST_CASE("pcapng: interfaces written in runs come out in time order, and a clock stepped back keeps capture order",
          "[capture][pcapng]") {
  temp_dir dir;
  const auto path = dir / "runs.pcapng";
  const script s = get_conversation(50004, 40);
  constexpr std::int64_t t0 = 1'700'000'000'000'000;
  std::vector<std::int64_t> file_order;  // the times as written
  {
    pcapng_file_writer w(path.string());
    const auto a = w.add_interface(link_type::en10mb);
    const auto b = w.add_interface(link_type::linux_sll);
    w.add_interface(link_type::en10mb);  // described, never a packet (eth0 with no Redis traffic)
    std::size_t next = 0;
    const auto put = [&](std::uint32_t on, std::int64_t ts) {
      w.write(on, ts, make_frame(on == b ? link_type::linux_sll : link_type::en10mb, s.segments[next++ % s.segments.size()].spec));
      file_order.push_back(ts);
    };
    // dumpcap's runs: ten packets of a, then b's ten of the same second, twice.
    for (int run = 0; run < 2; ++run) {
      for (int i = 0; i < 10; ++i) put(a, t0 + run * 1'000'000 + i * 100'000);
      for (int i = 0; i < 10; ++i) put(b, t0 + run * 1'000'000 + i * 100'000 + 50'000);
    }
    // Then the clock is stepped 30 s back, on both interfaces.
    put(a, t0 + 2'000'000);
    put(b, t0 + 2'050'000);
    for (int i = 0; i < 5; ++i) {
      put(a, t0 - 28'000'000 + i * 100'000);
      put(b, t0 - 28'000'000 + i * 100'000 + 50'000);
    }
  }
  const our_reading ours = read_ours(path);
  std::vector<std::int64_t> times;
  for (const seen_packet& p : ours.packets) times.push_back(p.ts_us);
  REQUIRE(times.size() == file_order.size());
  // Before the step: the 42 packets in time order (the runs put back together).
  const std::vector<std::int64_t> before(times.begin(), times.begin() + 42);
  CHECK(std::is_sorted(before.begin(), before.end()));
  CHECK(before.back() == t0 + 2'050'000);
  CHECK(std::adjacent_find(before.begin(), before.end()) == before.end());
  // After it: the ten stepped packets, after every packet captured before the step.
  const std::vector<std::int64_t> after(times.begin() + 42, times.end());
  CHECK(std::is_sorted(after.begin(), after.end()));
  CHECK(after.front() == t0 - 28'000'000);
  // The step is named on each interface, by its packet number in the file.
  REQUIRE(ours.warnings.size() == 2);
  CHECK_THAT(ours.warnings[0], Catch::Contains(": packet 43: its time is 30.000000 s before the previous packet's"));
  CHECK_THAT(ours.warnings[1], Catch::Contains(": packet 44: its time is 30.000000 s before the previous packet's"));
}

TEST_CASE("pcapng: an interface's run later than the merge waits for is a warning with its count", "[capture][pcapng]") {
  temp_dir dir;
  const auto path = dir / "late.pcapng";
  const script s = get_conversation(50006, 30);
  constexpr std::int64_t t0 = 1'700'000'000'000'000;
  {
    pcapng_file_writer w(path.string());
    const auto a = w.add_interface(link_type::en10mb);
    const auto b = w.add_interface(link_type::en10mb);
    std::size_t next = 0;
    const auto frame = [&] { return make_frame(link_type::en10mb, s.segments[next++ % s.segments.size()].spec); };
    // Four seconds of a, then b's packets of the same four seconds: with a 2 s window,
    // a's packets up to t0 + 2 s are handed on before b's first one is read.
    for (int i = 0; i <= 40; ++i) w.write(a, t0 + i * 100'000, frame());
    for (int i = 0; i <= 40; ++i) w.write(b, t0 + 50'000 + i * 100'000, frame());
  }
  const our_reading ours = read_ours(path);
  REQUIRE(ours.packets.size() == 82);
  REQUIRE(ours.warnings.size() == 1);
  // b's packets at t0 + 0.05 s … 1.95 s: twenty.
  CHECK(ours.warnings[0] == path.string() + ": 20 packets came more than 2 s after later packets of other interfaces "
                                            "(the capturing tool wrote each interface's packets in longer runs than "
                                            "lockscope waits for) and were analyzed out of time order");
  std::size_t out_of_order = 0;
  for (std::size_t i = 1; i < ours.packets.size(); ++i) {
    std::int64_t latest = 0;
    for (std::size_t j = 0; j < i; ++j) latest = std::max(latest, ours.packets[j].ts_us);
    if (ours.packets[i].ts_us < latest) ++out_of_order;
  }
  CHECK(out_of_order == 20);
}

TEST_CASE("pcapng: times far outside any clock are clamped, and steps and the merge across them still work",
          "[capture][pcapng]") {
  // A damaged if_tsoffset or timestamp can put a packet hundreds of thousands of years
  // away, or before 1970. Times are clamped to 0 … 2^62 - 1 µs: the clock-step check and
  // the merge subtract two packets' times and must get a true answer, not an overflow
  // (which UBSan stops on), and a time before 0 would print as `-4611686018427.-386903`.
  temp_dir dir;
  const script s = get_conversation(50008, 1);
  const std::string frame = make_frame(link_type::en10mb, s.segments.front().spec);
  const auto raw_packet = [&](std::uint32_t interface_id, std::uint64_t units) {
    std::string body;
    const auto put32 = [&](std::uint32_t v) { body.append(reinterpret_cast<const char*>(&v), 4); };
    put32(interface_id);
    put32(static_cast<std::uint32_t>(units >> 32));
    put32(static_cast<std::uint32_t>(units));
    put32(static_cast<std::uint32_t>(frame.size()));
    put32(static_cast<std::uint32_t>(frame.size()));
    return body + frame;
  };
  constexpr std::int64_t furthest = (std::int64_t{1} << 62) - 1;  // µs
  constexpr std::int64_t most_negative_offset_s = -9'223'372'036'854;
  constexpr std::uint64_t most_units = ~std::uint64_t{0};
  {
    // One interface counting in whole seconds from an offset as far back as it goes:
    // the first packet is as late as a time can be, the second as early.
    const auto path = dir / "one.pcapng";
    {
      pcapng_file_writer w(path.string());
      w.add_interface(link_type::en10mb, {.resolution = 0, .offset_s = most_negative_offset_s});
      w.write_block(6, raw_packet(0, most_units));
      w.write_block(6, raw_packet(0, 0));
    }
    const our_reading ours = read_ours(path);
    REQUIRE(ours.packets.size() == 2);
    CHECK(ours.packets[0].ts_us == furthest);
    CHECK(ours.packets[1].ts_us == 0);
    REQUIRE(ours.warnings.size() == 2);
    CHECK_THAT(ours.warnings[0], Catch::Contains(": packet 2: its time is 4611686018427.38") &&
                                     Catch::Contains(" s before the previous packet's"));
    // The first packet's block: the two blocks end the file (a block: 12 bytes of framing,
    // the body padded to 4).
    const std::size_t block = 12 + ((raw_packet(0, 0).size() + 3) & ~std::size_t{3});
    const auto first_block_at = std::filesystem::file_size(path) - 2 * block;
    CHECK(ours.warnings[1] == path.string() + ": 2 packets had a time before 1970 or after the year 146,000 (a "
                                              "damaged timestamp or interface time offset; the first in the block "
                                              "at byte " + std::to_string(first_block_at) +
                                  ") and were given the nearest of the two; their waits and holds are not real");
  }
  {
    // The same two times on two interfaces: merged into time order.
    const auto path = dir / "two.pcapng";
    {
      pcapng_file_writer w(path.string());
      w.add_interface(link_type::en10mb, {.resolution = 0});
      w.add_interface(link_type::en10mb, {.resolution = 0, .offset_s = most_negative_offset_s});
      w.write_block(6, raw_packet(0, most_units));
      w.write_block(6, raw_packet(1, 0));
      w.write_block(6, raw_packet(0, most_units));
    }
    const our_reading ours = read_ours(path);
    REQUIRE(ours.warnings.size() == 1);
    CHECK_THAT(ours.warnings[0], Catch::Contains(": 3 packets had a time before 1970"));
    REQUIRE(ours.packets.size() == 3);
    CHECK(ours.packets[0].ts_us == 0);
    CHECK(ours.packets[1].ts_us == furthest);
    CHECK(ours.packets[2].ts_us == furthest);
  }
  {
    // The seed's lock traffic stamped before 1970 (a negative if_tsoffset): analyzed whole,
    // and every JSONL line is JSON by Python's parser (a time before 0 printed as
    // `-4611686018427.-386903`).
    LOCKSCOPE_REQUIRE_CLI(binary);
    const auto path = dir / "before-1970.pcapng";
    std::size_t packets = 0;
    {
      pcapng_file_writer w(path.string());
      const auto on = w.add_interface(link_type::en10mb, {.offset_s = -4'000'000'000});
      offline_capture seed({bundled_capture("captures/seed-redisson.pcap").string()});
      captured_packet p;
      while (seed.next(p)) {
        w.write(on, p.ts_us - 3'000'000'000'000'000, p.data);
        ++packets;
      }
    }
    const our_reading ours = read_ours(path);
    CHECK(ours.packets.size() == packets);
    const std::string events = read_command_output(binary + " analyze " + path.string() + " --format jsonl 2>/dev/null");
    const std::string seed_events =
        read_command_output(binary + " analyze " + bundled_capture("captures/seed-redisson.pcap").string() +
                            " --format jsonl 2>/dev/null");
    CHECK(std::count(events.begin(), events.end(), '\n') > 0);
    const auto check_json = [&](const std::string& jsonl) {
      const auto file = dir / "events.jsonl";
      std::ofstream(file) << jsonl;
      return read_command_output("python3 -c 'import json,sys\nfor l in sys.stdin: json.loads(l)\nprint(\"ok\")' < " +
                                 file.string() + " 2>&1");
    };
    CHECK(check_json(events) == "ok\n");
    CHECK(check_json(seed_events) == "ok\n");
    const std::string warnings = read_command_output(binary + " analyze " + path.string() + " --summary 2>&1 >/dev/null");
    CHECK_THAT(warnings, Catch::Contains(std::to_string(packets) + " packets had a time before 1970"));
  }
}

TEST_CASE("pcapng: the drops a capture file records are the run's kernel drops, an interface with drops a warning",
          "[capture][pcapng]") {
  temp_dir dir;
  const script s = get_conversation(50005, 4);
  const auto path = dir / "drops.pcapng";
  {
    pcapng_file_writer w(path.string());
    const auto eth = w.add_interface(link_type::en10mb, {.name = "eth0"});
    const auto lo = w.add_interface(link_type::en10mb, {.name = "lo"});
    const auto any = w.add_interface(link_type::linux_sll);
    for (const auto& seg : s.segments) w.write(eth, seg.ts_us, make_frame(link_type::en10mb, seg.spec));
    w.write_statistics(eth, 7);
    w.write_statistics(lo, ~std::uint64_t{0});  // dumpcap's "no statistics"
    w.write_statistics(eth, 12, 3);             // the latest count wins: 12, and 3 the OS dropped
    w.write_statistics(any, 0);
  }
  our_reading ours;
  std::optional<std::uint64_t> recorded;
  {
    offline_capture source({path.string()}, [&](const std::string& w) { ours.warnings.push_back(w); });
    captured_packet p;
    while (source.next(p)) ours.packets.push_back({p.ts_us, link_name(p.link_type), p.data.size(), p.wire_length});
    recorded = source.recorded_drops();
  }
  CHECK(ours.packets.size() == s.segments.size());
  CHECK(recorded == std::optional<std::uint64_t>(15));
  REQUIRE(ours.warnings.size() == 1);
  CHECK_THAT(ours.warnings[0], Catch::StartsWith(path.string() + ": the capturing tool counted 15 packets dropped on "
                                                                 "interface 0 (eth0) (the file's interface statistics)"));

  // The totals line says so; a classic pcap records none, nor does a pcapng without
  // known counts.
  LOCKSCOPE_REQUIRE_CLI(cli);
  const auto classic = dir / "drops.pcap";
  write_pcap(classic, s.segments);
  const auto unknown = dir / "unknown.pcapng";
  {
    pcapng_file_writer w(unknown.string());
    const auto eth = w.add_interface(link_type::en10mb);
    for (const auto& seg : s.segments) w.write(eth, seg.ts_us, make_frame(link_type::en10mb, seg.spec));
    w.write_statistics(eth, ~std::uint64_t{0});
  }
  for (const char* command : {"analyze", "decode"}) {
    CAPTURE(command);
    const auto totals = [&](const std::filesystem::path& file) {
      return read_command_output(cli + " " + command + " " + file.string() + " 2>&1 >/dev/null");
    };
    CHECK_THAT(totals(path), Catch::Contains("kernel drops 15 (as the capture file records them)\n"));
    CHECK_THAT(totals(classic), Catch::Contains("kernel drops n/a\n"));
    CHECK_THAT(totals(unknown), Catch::Contains("kernel drops n/a\n"));
  }
  // The HTML report's header.
  const auto html = dir / "drops.html";
  REQUIRE(std::system((cli + " analyze " + path.string() + " --format html -o " + html.string() + " 2>/dev/null").c_str()) ==
          0);
  std::ifstream page(html);
  const std::string text((std::istreambuf_iterator<char>(page)), {});
  CHECK_THAT(text, Catch::Contains("<dt>kernel drops</dt><dd>15 (as the capture file records them)</dd>"));
  // Replayed through the live loop, the file's drops are the run's kernel drops.
  CHECK_THAT(read_command_output(cli + " analyze --replay " + path.string() + " --replay-speed 0 --summary 2>&1 >/dev/null"),
             Catch::Contains("kernel drops 15\n"));
}

TEST_CASE("pcapng: the drops dumpcap records in its file are the ones it reports", "[capture][pcapng][real]") {
  LOCKSCOPE_REQUIRE_CAPTURE_TOOLS();
  if (!on_path("dumpcap") || !on_path("redis-benchmark")) {
    WARN("dumpcap or redis-benchmark is not installed: skipping");
    return;
  }
  ltest::redis_server server;
  temp_dir dir;
  const auto file = dir / "load.pcapng";
  const auto log = dir / "dumpcap.log";
  const std::string port = std::to_string(server.port());
  // A 1 MiB buffer (-B, MiB) under a pipelined load, so that the kernel drops some.
  dumpcap_recording recording(file, log, "tcp port " + port, {"lo"}, {"-B", "1"});
  if (!recording.ready()) {
    WARN("dumpcap could not capture on lo (needs CAP_NET_RAW): skipping");
    return;
  }
  CHECK(run("redis-benchmark -p " + port + " -q -n 200000 -P 64 -c 8 -d 512 -t set >/dev/null 2>&1") == 0);
  recording.stop();
  // dumpcap's own account: "Packets captured: N" and
  // "Packets received/dropped on interface 'Loopback: lo': R/D (pcap:…/dumpcap:…/flushed:…/ps_ifdrop:…)".
  std::ifstream in(log);
  const std::string said((std::istreambuf_iterator<char>(in)), {});
  INFO(said);
  const auto captured_at = said.find("Packets captured: ");
  const auto counts_at = said.find("': ", said.find("Packets received/dropped on interface"));
  REQUIRE(captured_at != std::string::npos);
  REQUIRE(counts_at != std::string::npos);
  const std::uint64_t captured = std::stoull(said.substr(captured_at + 18));
  const std::string counts = said.substr(counts_at + 3);
  const std::uint64_t dropped = std::stoull(counts.substr(counts.find('/') + 1));

  std::uint64_t packets = 0;
  std::vector<std::string> warnings;
  offline_capture source({file.string()}, [&](const std::string& w) { warnings.push_back(w); });
  captured_packet p;
  while (source.next(p)) ++packets;
  CHECK(packets == captured);
  CHECK(source.recorded_drops() == std::optional<std::uint64_t>(dropped));
  CHECK(warnings.size() == (dropped > 0 ? 1u : 0u));
  if (dropped == 0) WARN("dumpcap dropped nothing this time: the count compared was 0");
}

TEST_CASE("pcapng: a file of 65,536 interfaces merges in time order, and an interface past them is damage",
          "[capture][pcapng]") {
  // A damaged or crafted file of interface blocks alone once made the merge hold a queue
  // per interface and scan them all for every packet: 20 MB of blocks took 21 s and
  // 750 MB for 2,000 packets. Now a described interface costs nothing until it has a
  // packet, the earliest head is a heap's, and a file may describe at most 65,536.
  temp_dir dir;
  const script s = get_conversation(50006, 4);
  const std::string frame = make_frame(link_type::en10mb, s.segments.front().spec);
  constexpr std::uint32_t interfaces = 65536;  // pcapng_reader::max_interfaces
  constexpr std::int64_t t0 = 1'700'000'000'000'000;
  const auto path = dir / "many.pcapng";
  std::vector<std::int64_t> written;
  std::uint64_t last_interface_at = 0;
  {
    pcapng_file_writer w(path.string());
    for (std::uint32_t i = 0; i < interfaces; ++i) w.add_interface(link_type::en10mb);
    // Runs of interfaces, each run's times interleaved with the others': interface i's
    // two packets at t0 + i * 7 % 65536 µs and 1 s later (all within the merge's window).
    for (int round = 0; round < 2; ++round) {
      for (std::uint32_t i = 0; i < interfaces; i += 3) {
        const std::int64_t ts = t0 + (std::int64_t{i} * 7) % interfaces + round * 1'000'000;
        w.write(i, ts, frame);
        written.push_back(ts);
      }
    }
    last_interface_at = 28 + 20ull * interfaces + written.size() * (32 + ((frame.size() + 3) & ~std::size_t{3}));
    w.add_interface(link_type::en10mb);  // the 65,537th
    w.write(0, t0 + 3'000'000, frame);   // after the damage: not read
  }
  const our_reading ours = read_ours(path);
  std::vector<std::int64_t> times;
  for (const seen_packet& p : ours.packets) times.push_back(p.ts_us);
  std::sort(written.begin(), written.end());
  CHECK(times == written);  // every packet before the damage, in time order
  REQUIRE(ours.warnings.size() == 1);
  CHECK_THAT(ours.warnings[0], Catch::Contains("bad pcapng block at byte " + std::to_string(last_interface_at) +
                                               ": a file that describes more than 65536 interfaces"));
}

TEST_CASE("pcapng: interfaces' drops name at most ten interfaces, their names escaped and cut", "[capture][pcapng]") {
  temp_dir dir;
  const script s = get_conversation(50007, 2);
  const auto path = dir / "named.pcapng";
  {
    pcapng_file_writer w(path.string());
    std::vector<std::uint32_t> ids;
    ids.push_back(w.add_interface(link_type::en10mb, {.name = "eth0\x1b]0;pwned\x07"}));
    ids.push_back(w.add_interface(link_type::en10mb, {.name = std::string(300, 'n')}));
    for (int i = 2; i < 14; ++i) ids.push_back(w.add_interface(link_type::en10mb, {.name = "if" + std::to_string(i)}));
    for (const auto& seg : s.segments) w.write(ids[0], seg.ts_us, make_frame(link_type::en10mb, seg.spec));
    for (std::size_t i = 0; i < ids.size(); ++i) w.write_statistics(ids[i], i + 1);
  }
  const our_reading ours = read_ours(path);
  REQUIRE(ours.warnings.size() == 11);
  CHECK_THAT(ours.warnings[0], Catch::Contains("1 packets dropped on interface 0 (\"eth0\\x1b]0;pwned\\a\") (the file's"));
  CHECK_THAT(ours.warnings[1], Catch::Contains("2 packets dropped on interface 1 (" + std::string(64, 'n') + "\u2026)"));
  CHECK_THAT(ours.warnings[9], Catch::Contains("10 packets dropped on interface 9 (if9)"));
  // 11 + 12 + 13 + 14 for the other four.
  CHECK_THAT(ours.warnings[10], Catch::EndsWith(": and 4 more interfaces with 50 packets dropped in all (the file's "
                                                "interface statistics)"));
}

TEST_CASE("pcapng: damage ends the file at the named byte, everything before it read as tshark reads it",
          "[capture][pcapng]") {
  temp_dir dir;
  const script s = get_conversation(50003, 20);
  const auto path = dir / "whole.pcapng";
  std::vector<std::uint64_t> block_at;  // the offset of each packet's block
  {
    pcapng_file_writer w(path.string());
    const auto eth = w.add_interface(link_type::en10mb);
    std::uint64_t at = 28 + 20;  // the section header and the interface
    for (const auto& seg : s.segments) {
      const std::string frame = make_frame(link_type::en10mb, seg.spec);
      w.write(eth, seg.ts_us, frame);
      block_at.push_back(at);
      at += 32 + ((frame.size() + 3) & ~std::size_t{3});
    }
  }
  std::string whole;
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(whole.size() == block_at.back() + 32 + ((make_frame(link_type::en10mb, s.segments.back().spec).size() + 3) & ~std::size_t{3}));
  const std::size_t k = 17;  // the damaged packet's index
  const std::uint64_t at = block_at[k];
  const auto put32 = [](std::string& bytes, std::uint64_t offset, std::uint32_t v) { std::memcpy(&bytes[offset], &v, 4); };
  struct damage {
    const char* name;
    std::string bytes;
    std::string expected;
  };
  std::vector<damage> cases;
  {
    std::string b = whole;
    put32(b, at + 4, 30);  // not a multiple of 4
    cases.push_back({"length", b, "bad pcapng block at byte " + std::to_string(at) + ": a block length of 30"});
  }
  {
    std::string b = whole;
    put32(b, at + 8, 3);  // interface 3 of 1
    cases.push_back({"interface", b, "bad pcapng block at byte " + std::to_string(at) +
                                         ": a packet of interface 3, but its section describes 1"});
  }
  {
    std::string b = whole;
    std::uint32_t length;
    std::memcpy(&length, &b[at + 4], 4);
    put32(b, at + length - 4, length + 4);
    cases.push_back({"trailing", b, "bad pcapng block at byte " + std::to_string(at) + ": its trailing length " +
                                        std::to_string(length + 4) + " differs from its leading length"});
  }
  {
    std::string b = whole;
    std::uint32_t length;
    std::memcpy(&length, &b[at + 4], 4);
    put32(b, at + 20, length);  // captured length past the block
    cases.push_back({"captured", b, "bad pcapng block at byte " + std::to_string(at) + ": a packet of " +
                                        std::to_string(length) + " bytes in a block with room for"});
  }
  cases.push_back({"truncated", whole.substr(0, at + 10),
                   "truncated dump file; the block at byte " + std::to_string(at) + " needs"});
  for (const damage& d : cases) {
    CAPTURE(d.name);
    const auto damaged = dir / (std::string(d.name) + ".pcapng");
    std::ofstream(damaged, std::ios::binary) << d.bytes;
    const our_reading ours = read_ours(damaged);
    REQUIRE(ours.warnings.size() == 1);
    CHECK_THAT(ours.warnings[0], Catch::StartsWith(damaged.string() + ": " + d.expected) &&
                                     Catch::EndsWith("; read up to the damage"));
    CHECK(ours.packets.size() == k);
    if (have_wireshark_tools()) CHECK(read_tshark(damaged).size() == k);
  }
}

TEST_CASE("pcapng: input that is neither format is named, with its first bytes", "[capture][pcapng]") {
  temp_dir dir;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  const std::string junk = write("junk.pcap", "this is not a capture");
  CHECK_THROWS_WITH(offline_capture({junk}),
                    junk + ": not a pcap or pcapng capture (it starts with 74 68 69 73 20 69 73 20; 21 bytes in all)");
  const std::string empty = write("empty.pcap", "");
  CHECK_THROWS_WITH(offline_capture({empty}), empty + ": empty, not a capture");
  // Its read() fails (EISDIR), which read as an empty input.
  CHECK_THROWS_WITH(offline_capture({dir.path.string()}), dir.path.string() + ": Is a directory");
  // A valid magic, then the end: cut short (head -c 10), not some other format.
  const std::string cut_pcap = write("cut.pcap", std::string("\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00", 10));
  CHECK_THROWS_WITH(offline_capture({cut_pcap}), cut_pcap + ": truncated pcap file header: 10 of its 24 bytes");
  const std::string cut_ns = write("cut-ns.pcap", std::string("\xa1\xb2\x3c\x4d\x00\x02", 6));
  CHECK_THROWS_WITH(offline_capture({cut_ns}), cut_ns + ": truncated pcap file header: 6 of its 24 bytes");
  const std::string cut_ng = write("cut.pcapng", std::string("\x0a\x0d\x0d\x0a\x1c\x00", 6));
  CHECK_THROWS_WITH(offline_capture({cut_ng}), cut_ng + ": truncated pcapng section header: 6 of at least 28 bytes");
  const std::string kuznetzov = write("kuz.pcap", std::string("\x34\xcd\xb2\xa1", 4) + std::string(20, '\0'));
  CHECK_THROWS_WITH(offline_capture({kuznetzov}), Catch::Contains("patched tcpdump") && Catch::Contains("editcap -F pcap"));
  // A section header with a byte-order magic that is neither order.
  const std::string bad_magic = write("magic.pcapng", std::string("\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x01\x02\x03\x04", 12) +
                                                          std::string(16, '\0'));
  const our_reading r = read_ours(bad_magic);
  CHECK(r.packets.empty());
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Catch::Contains("bad pcapng block at byte 0: a section header with byte-order magic 0x04030201"));
}
