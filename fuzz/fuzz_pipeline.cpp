// libFuzzer target for the whole analyzer after the capture reader: frames → packet
// decoding → flows → TCP reassembly → RESP sessions → lock recognizer → lock timeline →
// lock groups → report (JSONL or text).
//
//   cmake --preset fuzz && cmake --build build/fuzz --target fuzz_pipeline
//   build/fuzz/fuzz/fuzz_pipeline -max_total_time=60 -dict=fuzz/pipeline.dict \
//       /tmp/corpus fuzz/corpus/pipeline
//
// Raw bytes rarely survive IP and TCP checksums and sequence numbers, so the input is a
// program for a small traffic generator rather than frames: each record picks one of
// four connections (to two servers) and sends client or server bytes, opens or ends it,
// skips sequence space (a capture gap), retransmits, reorders, advances the clock, or
// splices in one of the lock scripts' exact texts or SHA1s (so the recognizer's paths are
// reached without the fuzzer having to guess 300-byte Lua texts). Every frame is valid
// IP/TCP; what it carries is arbitrary. A tenth of the frames are damaged after
// building (byte flips in the headers too). The clock may start at the edges of the
// times a capture file can give (options bit 7).
//
// Checked, beyond ASan/UBSan: every packet is counted; every JSONL line the report
// writes is one JSON object; finish() leaves no flow open and no byte held; with options bit 6, the
// report is the same with the sessions' long arguments interned and copied.
#include <boost/json/parse.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/lock_groups.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/locks/operation_batch.hpp"
#include "lockscope/test/pcap_writer.hpp"

namespace {

namespace az = lockscope::locks;
namespace in = lockscope::ingest;
namespace lk = lockscope::lock;

[[noreturn]] void violation(const char* what, std::uint64_t detail = 0) {
  std::fprintf(stderr, "fuzz_pipeline: %s (%llu)\n", what, static_cast<unsigned long long>(detail));
  __builtin_trap();
}

class input_reader {
 public:
  input_reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const noexcept { return at_ >= size_; }
  std::uint8_t byte() noexcept { return at_ < size_ ? data_[at_++] : 0; }
  std::string_view bytes(std::size_t n) noexcept {
    if (n > size_ - at_) n = size_ - at_;
    const std::string_view out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// Four connections: 0 and 1 to server A, 2 and 3 to server B (a RedLock's other master).
struct connection {
  in::tcp_conversation tcp;
  bool opened = false;
};

std::vector<connection> make_connections() {
  std::vector<connection> c;
  for (std::uint16_t i = 0; i < 4; ++i) {
    in::endpoint client, server;
    in::endpoint::parse(i % 2 ? "10.0.0.2" : "10.0.0.1", static_cast<std::uint16_t>(40000 + i), client);
    in::endpoint::parse("10.0.0.9", i < 2 ? 6379 : 6380, server);
    c.push_back({in::tcp_conversation(client, server, 1000u + i * 7919u, 5000u + i * 104729u)});
  }
  return c;
}

// "EVAL <text>" or "EVALSHA <sha>" as the head of a RESP array of `count` elements; the
// fuzzer's bytes that follow supply numkeys, keys and arguments.
std::string script_head(const lk::script_info& s, bool by_sha, std::uint8_t count) {
  const std::string_view body = by_sha ? s.sha1 : s.text;
  std::string out = "*" + std::to_string(count) + "\r\n";
  out += by_sha ? "$7\r\nEVALSHA\r\n" : "$4\r\nEVAL\r\n";
  out += "$" + std::to_string(body.size()) + "\r\n";
  out.append(body);
  out += "\r\n";
  return out;
}

// LOCKSCOPE_FUZZ_PRINT=1: the report goes to stdout too, to see what a seed reaches.
const bool print_report = std::getenv("LOCKSCOPE_FUZZ_PRINT") != nullptr;

struct checking_output {
  bool jsonl = false;
  bool print = print_report;
  std::string pending;
  std::string all;  // everything written, to compare two runs
  void operator()(std::string_view text) {
    all.append(text);
    if (print) std::fwrite(text.data(), 1, text.size(), stdout);
    if (!jsonl) return;
    pending.append(text);
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line(pending.data() + start, nl - start);
      boost::system::error_code ec;
      const auto value = boost::json::parse(line, ec);
      if (ec || !value.is_object()) {
        std::fprintf(stderr, "bad JSONL line: %.*s\n", static_cast<int>(line.size()), line.data());
        violation("a JSONL line is not a JSON object");
      }
    }
    pending.erase(0, start);
  }
};

// The program run once; returns what the report wrote. `intern`: the sessions' long
// repeated arguments interned (session_options::intern_arguments).
std::string run_program(const std::uint8_t* data, std::size_t size, bool intern, bool print) {
  input_reader in(data, size);
  const std::uint8_t options_byte = in.byte();

  in::ingest_options ingest;
  if (options_byte & 1) ingest.ports = {6379, 6380};
  ingest.tcp.max_buffer = (options_byte & 2) ? 512 : 1u << 20;
  // Tight buffers for all flows too: connections give back what they hold (shed()).
  ingest.max_buffer_total = (options_byte & 2) ? 2048 : in::ingest_options::default_max_buffer_total;
  ingest.session.max_message_bytes = (options_byte & 4) ? 200 : 1u << 20;
  ingest.max_flows = (options_byte & 8) ? 2 : in::ingest_options::default_max_flows;
  ingest.session.intern_arguments = intern;
  az::timeline_options timeline_opts;
  timeline_opts.merge_servers = (options_byte & 16) != 0;
  az::report_options report_opts;
  report_opts.format = (options_byte & 32) ? az::report_format::text : az::report_format::jsonl;

  checking_output output;
  output.print = print;
  output.jsonl = report_opts.format == az::report_format::jsonl;
  {
    az::lock_report report(report_opts, std::ref(output));
    az::lock_groups groups({}, report);
    az::lock_timeline timeline(timeline_opts, groups);
    // As the live loop runs it: operations held per packet, announced, then handled.
    az::operation_batch batch(timeline, 40, 4096);
    az::lock_recognizer recognizer(batch);
    in::ingest_pipeline pipeline(ingest, recognizer, &recognizer);

    auto connections = make_connections();
    const auto scripts = lk::all_scripts();
    // Options bit 7: the clock starts at an edge of the range the capture readers hand on
    // (0 … 2^62 - 1 µs: a damaged pcapng time is clamped into it), a minute before the
    // latest or at 0; the next byte picks which. Leases and deadlines are added to it.
    constexpr std::int64_t furthest_us = (std::int64_t{1} << 62) - 1;
    std::int64_t now_us = 1'700'000'000'000'000;
    if (options_byte & 128) now_us = (in.byte() & 1) == 0 ? furthest_us - 60'000'000 : 0;
    const auto advance = [&](std::int64_t us) { now_us = std::min(now_us + us, furthest_us); };
    std::uint64_t sent = 0;
    std::string last_frame;
    std::vector<std::string> held_back;  // frames delayed to arrive out of order
    std::uint8_t damage_counter = 0;

    const auto emit = [&](const in::tcp_segment_spec& segment) {
      std::string frame = in::make_frame(in::link_type::en10mb, segment);
      if (++damage_counter % 10 == 0 && !frame.empty()) {
        frame[(damage_counter * 131u) % frame.size()] ^= static_cast<char>(damage_counter);
      }
      pipeline.on_packet(now_us, in::link_type::en10mb, frame);
      batch.flush();
      ++sent;
      last_frame = std::move(frame);
    };

    for (int records = 0; !in.empty() && records < 4096; ++records) {
      const std::uint8_t op = in.byte();
      connection& c = connections[op & 3];
      advance(1000);
      const int kind = ((op >> 2) & 15) % 10;  // bits 6 and 7 are flags
      if (!c.opened && kind != 9) {
        for (const auto& s : c.tcp.handshake()) emit(s);
        c.opened = true;
      }
      switch (kind) {
        case 0: emit(c.tcp.client_sends(in.bytes(in.byte()))); break;
        case 1: emit(c.tcp.server_sends(in.bytes(in.byte()))); break;
        case 2: {  // a lock script, then the fuzzer's bytes as its arguments
          const std::uint8_t pick = in.byte();
          std::string payload = script_head(scripts[(pick & 0x7f) % scripts.size()], pick & 0x80, in.byte() % 12);
          payload.append(in.bytes(in.byte()));
          emit(c.tcp.client_sends(payload));
          break;
        }
        case 3: emit((op & 0x40) ? c.tcp.client_fin() : c.tcp.server_fin()); break;
        case 4: emit(c.tcp.client_rst()); c.opened = false; break;
        case 5: {  // bytes sent but never captured: a gap in one direction
          const std::string lost(in.byte() + 1u, 'x');
          (void)((op & 0x40) ? c.tcp.client_sends(lost) : c.tcp.server_sends(lost));
          break;
        }
        case 6:  // a retransmission
          if (!last_frame.empty()) {
            pipeline.on_packet(now_us, in::link_type::en10mb, last_frame);
            ++sent;
          }
          break;
        case 7: {  // this segment arrives after the next one
          held_back.push_back(in::make_frame(in::link_type::en10mb, c.tcp.client_sends(in.bytes(in.byte()))));
          break;
        }
        case 8: advance(static_cast<std::int64_t>(in.byte()) << 16); break;  // up to 16 s of silence
        default: c.opened = true; break;  // mid-stream: the connection was open before the capture
      }
      if (held_back.size() > 1 || (!held_back.empty() && (op & 0x80))) {
        for (const std::string& f : held_back) pipeline.on_packet(now_us, in::link_type::en10mb, f);
        sent += held_back.size();
        held_back.clear();
      }
    }
    for (const std::string& f : held_back) pipeline.on_packet(now_us, in::link_type::en10mb, f);
    sent += held_back.size();
    pipeline.finish();
    batch.flush();
    timeline.finish(now_us);
    groups.finish(now_us);
    report.finish(timeline);
    if (pipeline.stats().packets != sent) violation("packets counted != packets given", pipeline.stats().packets);
    if (pipeline.active_flows() != 0) violation("flows left open after finish()", pipeline.active_flows());
    // What the connections hold is accounted to the byte: nothing once they are gone.
    if (pipeline.stats().held_bytes != 0) violation("bytes held after finish()", pipeline.stats().held_bytes);
  }
  if (!output.pending.empty()) violation("JSONL output does not end with a newline", output.pending.size());
  return std::move(output.all);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string interned = run_program(data, size, true, print_report);
  // Options bit 6: the same program with the arguments copied must report the same.
  if (size > 0 && (data[0] & 64) != 0 && run_program(data, size, false, false) != interned) {
    violation("interning the sessions' arguments changed the report");
  }
  return 0;
}
