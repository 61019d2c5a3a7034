// libFuzzer target for the capture file readers (analyzer/ingest/src/capture/capture_files.hpp):
// classic pcap and pcapng, read through offline_capture as `lockscope analyze FILE` reads
// them. The input is the file itself, written to a memfd and opened by its /proc path.
//
//   cmake --preset fuzz && cmake --build build/fuzz --target fuzz_capture_files
//   build/fuzz/fuzz/fuzz_capture_files -max_total_time=60 -dict=fuzz/capture_files.dict \
//       /tmp/corpus fuzz/corpus/capture_files
//
// Checked, beyond ASan/UBSan: opening either succeeds or throws capture_error naming the
// file; every packet lies within the input (its bytes are read, so ASan sees a view
// into freed or foreign memory) and is no larger than the largest record; there are no
// more packets than the input has room for; a damaged file ends with one warning that
// names the byte offset; bytes_read() never passes the file's size.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/ingest/capture.hpp"

namespace {

void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

// Where the packets' bytes are summed to, so that reading them is not optimized away.
volatile unsigned bytes_touched = 0;

int file_descriptor() {
  static const int fd = ::memfd_create("capture", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create", "failed");
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lockscope::ingest;
  const int fd = file_descriptor();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) fail("pwrite", "failed");
  const std::string path = "/proc/self/fd/" + std::to_string(fd);

  std::vector<std::string> warnings;
  try {
    offline_capture capture({path}, [&](const std::string& w) { warnings.push_back(w); });
    captured_packet p;
    std::size_t packets = 0;
    unsigned sum = 0;
    while (capture.next(p)) {
      ++packets;
      if (p.data.size() > 262144) fail("packet larger than a record can be", std::to_string(p.data.size()));
      for (const char c : p.data) sum += static_cast<unsigned char>(c);
      if (capture.bytes_read() > size) fail("bytes_read past the end", std::to_string(capture.bytes_read()));
    }
    // A pcap record header is 16 bytes, the smallest pcapng packet block 16.
    if (packets > size / 16) fail("more packets than the input has room for", std::to_string(packets));
    std::size_t damage = 0;
    for (const std::string& w : warnings) {
      if (w.rfind(path + ": ", 0) != 0) fail("a warning that does not name the file", w);
      if (w.find("; read up to the damage") != std::string::npos) {
        ++damage;
        if (w.find("byte ") == std::string::npos) fail("damage without its byte offset", w);
      }
    }
    if (damage > 1) fail("more than one damage warning for one file", std::to_string(damage));
    bytes_touched = sum;
  } catch (const capture_error& e) {
    if (std::string_view(e.what()).rfind(path + ": ", 0) != 0) fail("an error that does not name the file", e.what());
  }
  return 0;
}
