// RESP decoding throughput and heap traffic: lockscope::resp::decoder against hiredis'
// redisReader, on the same deterministic buffers fed in TCP-sized chunks.
//
//   build/default/bench/resp_decode_bench                      # every benchmark
//   bench/decode_ratio.py                                      # the ratio table
//
// Benchmarks are named decode/<decoder>/<workload>/<chunk>. Each reports
// bytes_per_second, msgs_per_s and allocs_per_msg (heap allocations per decoded
// message in steady state, counted after a warm-up pass).
#include <hiredis/hiredis.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/lock/scripts.hpp"
#include "lockscope/resp/decoder.hpp"
#include "lockscope/test/splitmix64.hpp"

// ---------------------------------------------------------------------------------
// Heap allocation counting.
//
// hiredis 0.14 (Debian 12) has no hiredisSetAllocators, so malloc/calloc/realloc are
// interposed here and forwarded to glibc's own entry points: the executable's
// definitions win over libc's for every shared object, libhiredis included. operator
// new goes straight to glibc too, so a `new` is counted once. aligned_alloc,
// posix_memalign and memalign are not interposed; neither decoder uses them.
// The counter is a relaxed load+store, not a locked add, so counting costs hiredis
// about one instruction per malloc: this benchmark is single-threaded.
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);
void __libc_free(void* pointer);
}

namespace {

std::atomic<std::uint64_t> heap_allocations{0};

inline void count_allocation() noexcept {
  heap_allocations.store(heap_allocations.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
}

void* allocate_or_throw(std::size_t size) {
  for (;;) {
    count_allocation();
    if (void* p = __libc_malloc(size == 0 ? 1 : size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* allocate_aligned_or_throw(std::size_t size, std::align_val_t alignment) {
  for (;;) {
    count_allocation();
    void* p = nullptr;
    const auto align = static_cast<std::size_t>(alignment);
    if (posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, size == 0 ? 1 : size) == 0) {
      return p;
    }
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

extern "C" void* malloc(std::size_t size) noexcept {
  count_allocation();
  return __libc_malloc(size);
}
extern "C" void* calloc(std::size_t count, std::size_t size) noexcept {
  count_allocation();
  return __libc_calloc(count, size);
}
extern "C" void* realloc(void* pointer, std::size_t size) noexcept {
  count_allocation();
  return __libc_realloc(pointer, size);
}
extern "C" void free(void* pointer) noexcept { __libc_free(pointer); }

void* operator new(std::size_t size) { return allocate_or_throw(size); }
void* operator new[](std::size_t size) { return allocate_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return allocate_aligned_or_throw(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return allocate_aligned_or_throw(size, alignment);
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return allocate_aligned_or_throw(size, alignment);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return allocate_aligned_or_throw(size, alignment);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }

namespace {

namespace resp = lockscope::resp;

// ---------------------------------------------------------------------------------
// Workloads. Built once, deterministically, into ~2 MiB buffers that end on a message
// boundary, so every pass over a buffer decodes the same whole messages.

constexpr std::size_t workload_target_bytes = 2u << 20;

// The Redisson scripts from the one source of truth (the seed's §4.2 forms).
constexpr std::string_view acquire_script = lockscope::lock::scripts::acquire;
constexpr std::string_view unlock_script = lockscope::lock::scripts::unlock;
constexpr std::string_view renew_script = lockscope::lock::scripts::renew;

using rng = lockscope::test::splitmix64;

// Writes RESP by hand rather than with resp::writer so that an encoder bug cannot
// skew what both decoders are measured on.
class wire {
 public:
  explicit wire(std::string& out) : out_(out) {}
  void header(char prefix, std::int64_t n) {
    out_.push_back(prefix);
    number(n);
    out_.append("\r\n");
  }
  void bulk(std::string_view s) {
    header('$', static_cast<std::int64_t>(s.size()));
    out_.append(s);
    out_.append("\r\n");
  }
  void bulk(std::int64_t n) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    bulk(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }
  void simple(std::string_view s) {
    out_.push_back('+');
    out_.append(s);
    out_.append("\r\n");
  }
  void integer(std::int64_t n) { header(':', n); }
  void null_bulk() { out_.append("$-1\r\n"); }

 private:
  void number(std::int64_t n) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    out_.append(digits, static_cast<std::size_t>(end - digits));
  }
  std::string& out_;
};

// Redisson lock traffic, both directions interleaved as a capture would show them:
// EVAL requests carrying the acquire/renew/unlock scripts, their replies ($-1 when the
// lock is taken, a pttl when it is not, :1/:0 for renew and unlock), +OK and the
// unlock notifications pushed to subscribers.
std::string build_lock_mix() {
  std::string out;
  out.reserve(workload_target_bytes + 4096);
  wire w(out);
  rng random(0x10CC5C09E);
  while (out.size() < workload_target_bytes) {
    const std::string lock = "lock-" + std::to_string(random.below(64));
    const std::string channel = "redisson_lock__channel:{" + lock + "}";
    const std::string owner =
        "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:" + std::to_string(1 + random.below(32));
    const std::uint64_t pick = random.below(100);
    if (pick < 14) {
      w.header('*', 6);
      w.bulk("EVAL");
      w.bulk(acquire_script);
      w.bulk("1");
      w.bulk(lock);
      w.bulk("30000");
      w.bulk(owner);
    } else if (pick < 22) {
      w.header('*', 6);
      w.bulk("EVAL");
      w.bulk(renew_script);
      w.bulk("1");
      w.bulk(lock);
      w.bulk("30000");
      w.bulk(owner);
    } else if (pick < 30) {
      w.header('*', 8);
      w.bulk("EVAL");
      w.bulk(unlock_script);
      w.bulk("2");
      w.bulk(lock);
      w.bulk(channel);
      w.bulk("0");
      w.bulk("30000");
      w.bulk(owner);
    } else if (pick < 44) {
      w.null_bulk();
    } else if (pick < 58) {
      w.integer(static_cast<std::int64_t>(1 + random.below(30000)));
    } else if (pick < 70) {
      w.integer(static_cast<std::int64_t>(random.below(2)));
    } else if (pick < 82) {
      w.simple("OK");
    } else {
      w.header('*', 3);
      w.bulk("message");
      w.bulk(channel);
      w.bulk("0");
    }
  }
  return out;
}

std::string build_bulk_4k() {
  std::string out;
  out.reserve(workload_target_bytes + 8192);
  wire w(out);
  rng random(0xB01C4);
  std::string body(4096, '\0');
  while (out.size() < workload_target_bytes) {
    for (char& c : body) c = static_cast<char>('a' + random.below(26));
    w.bulk(body);
  }
  return out;
}

// Arrays nested 8 deep (hiredis 0.14's limit is 8 levels of arrays). Every array has
// 2-3 elements; the first is always an array until the eighth level, the others are
// arrays one time in three, else small integer or bulk leaves.
void nested_array(wire& w, rng& random, int level) {
  constexpr int array_levels = 8;
  const auto elements = static_cast<int>(2 + random.below(2));
  w.header('*', elements);
  for (int i = 0; i < elements; ++i) {
    const bool deeper = level + 1 < array_levels && (i == 0 || random.below(3) == 0);
    if (deeper) {
      nested_array(w, random, level + 1);
    } else if (random.below(2) == 0) {
      w.integer(static_cast<std::int64_t>(random.below(1000)));
    } else {
      static constexpr std::string_view words[] = {"a", "id", "key", "lock", "owner:12", "30000"};
      w.bulk(words[random.below(std::size(words))]);
    }
  }
}

std::string build_nested() {
  std::string out;
  out.reserve(workload_target_bytes + 65536);
  wire w(out);
  rng random(0x4E57ED);
  while (out.size() < workload_target_bytes) nested_array(w, random, 0);
  return out;
}

struct workload {
  std::string name;
  std::string bytes;
  std::uint64_t messages = 0;  // per pass, agreed on by both decoders
};

std::vector<workload>& workloads() {
  static std::vector<workload> all = [] {
    std::vector<workload> w;
    w.push_back({"lock_mix", build_lock_mix(), 0});
    w.push_back({"bulk_4k", build_bulk_4k(), 0});
    w.push_back({"nested", build_nested(), 0});
    return w;
  }();
  return all;
}

// ---------------------------------------------------------------------------------
// The two decoders, each driven the way its users drive it.

// The least a real consumer does: look at every node. Summing value sizes keeps the
// compiler from discarding the work.
struct counting_handler final : resp::handler {
  std::uint64_t messages = 0;
  std::uint64_t value_bytes = 0;
  void on_node(const resp::node& n) override {
    value_bytes += n.value.size();
    messages += n.ends_message() ? 1 : 0;
  }
};

class lockscope_driver {
 public:
  // Decodes one pass; returns false on a decode error.
  bool pass(std::string_view bytes, std::size_t chunk) {
    for (std::size_t pos = 0; pos < bytes.size(); pos += chunk) {
      decoder_.feed(bytes.substr(pos, chunk), handler_);
    }
    return !decoder_.error() && decoder_.at_message_boundary();
  }
  std::uint64_t messages() const noexcept { return handler_.messages; }
  std::uint64_t value_bytes() const noexcept { return handler_.value_bytes; }
  std::string error() const {
    return decoder_.error().message() + " at offset " + std::to_string(decoder_.error_offset());
  }

 private:
  resp::decoder decoder_;
  counting_handler handler_;
};

class hiredis_driver {
 public:
  hiredis_driver() : reader_(redisReaderCreate()) {}
  ~hiredis_driver() { redisReaderFree(reader_); }
  hiredis_driver(const hiredis_driver&) = delete;
  hiredis_driver& operator=(const hiredis_driver&) = delete;

  // Feeds each chunk, then takes every complete reply and frees it, as a hiredis user
  // does. `inspect` sees each reply first (used only by the cross-check).
  template <class Inspect>
  bool pass(std::string_view bytes, std::size_t chunk, Inspect&& inspect) {
    for (std::size_t pos = 0; pos < bytes.size(); pos += chunk) {
      const std::string_view piece = bytes.substr(pos, chunk);
      if (redisReaderFeed(reader_, piece.data(), piece.size()) != REDIS_OK) return false;
      for (;;) {
        void* reply = nullptr;
        if (redisReaderGetReply(reader_, &reply) != REDIS_OK) return false;
        if (reply == nullptr) break;
        ++messages_;
        inspect(static_cast<const redisReply*>(reply));
        freeReplyObject(reply);
      }
    }
    return true;
  }
  bool pass(std::string_view bytes, std::size_t chunk) {
    return pass(bytes, chunk, [](const redisReply*) {});
  }
  std::uint64_t messages() const noexcept { return messages_; }
  std::string error() const { return reader_->errstr; }

 private:
  redisReader* reader_;
  std::uint64_t messages_ = 0;
};

// String payload bytes hiredis saw in a reply tree (integers carry no text in hiredis).
std::uint64_t hiredis_string_bytes(const redisReply* r) {
  if (r->type == REDIS_REPLY_ARRAY) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < r->elements; ++i) sum += hiredis_string_bytes(r->element[i]);
    return sum;
  }
  return r->type == REDIS_REPLY_INTEGER ? 0 : r->len;
}

// Integer digits lockscope reports as value bytes but hiredis does not keep as text.
std::uint64_t integer_text_bytes(std::string_view bytes) {
  struct integer_bytes final : resp::handler {
    std::uint64_t sum = 0;
    void on_node(const resp::node& n) override {
      if (n.type == resp::type::integer) sum += n.value.size();
    }
  } h;
  resp::decoder d;
  d.feed(bytes, h);
  return h.sum;
}

// Before timing anything: both decoders must agree on every workload, whole and in
// each chunk size, on the message count and the string payload bytes.
bool cross_check(const std::vector<std::size_t>& chunks) {
  bool ok = true;
  for (workload& w : workloads()) {
    for (std::size_t chunk : chunks) {
      lockscope_driver ours;
      hiredis_driver theirs;
      std::uint64_t their_bytes = 0;
      const bool ours_ok = ours.pass(w.bytes, chunk);
      const bool theirs_ok =
          theirs.pass(w.bytes, chunk, [&](const redisReply* r) { their_bytes += hiredis_string_bytes(r); });
      const std::uint64_t our_bytes = ours.value_bytes() - integer_text_bytes(w.bytes);
      if (!ours_ok || !theirs_ok || ours.messages() != theirs.messages() || ours.messages() == 0 ||
          our_bytes != their_bytes) {
        std::fprintf(stderr,
                     "cross-check failed: %s/%zu: lockscope %s, %llu messages, %llu string bytes; "
                     "hiredis %s, %llu messages, %llu string bytes\n",
                     w.name.c_str(), chunk, ours_ok ? "ok" : ours.error().c_str(),
                     static_cast<unsigned long long>(ours.messages()),
                     static_cast<unsigned long long>(our_bytes),
                     theirs_ok ? "ok" : theirs.error().c_str(),
                     static_cast<unsigned long long>(theirs.messages()),
                     static_cast<unsigned long long>(their_bytes));
        ok = false;
      }
      w.messages = ours.messages();
    }
  }
  return ok;
}

// The counter must see operator new and malloc alike, or allocs_per_msg means nothing.
bool allocation_counter_works() {
  const std::uint64_t before = heap_allocations.load(std::memory_order_relaxed);
  auto* text = new std::string(100, 'x');  // the object and its buffer
  benchmark::DoNotOptimize(text);
  delete text;
  void* block = std::malloc(10);
  benchmark::DoNotOptimize(block);
  std::free(block);
  return heap_allocations.load(std::memory_order_relaxed) - before >= 3;
}

// ---------------------------------------------------------------------------------
// Benchmarks.

template <class Driver>
void run_decode(benchmark::State& state, const workload& w, std::size_t chunk) {
  Driver driver;
  // The warm-up pass grows every buffer the driver keeps to its steady-state size.
  if (!driver.pass(w.bytes, chunk)) {
    state.SkipWithError(("warm-up decode failed: " + driver.error()).c_str());
    return;
  }
  const std::uint64_t allocations_before = heap_allocations.load(std::memory_order_relaxed);
  const std::uint64_t messages_before = driver.messages();
  const bool counted_ok = driver.pass(w.bytes, chunk);
  const std::uint64_t allocations = heap_allocations.load(std::memory_order_relaxed) - allocations_before;
  const std::uint64_t messages_per_pass = driver.messages() - messages_before;
  if (!counted_ok || messages_per_pass != w.messages) {
    state.SkipWithError("a pass decoded a different number of messages than the cross-check");
    return;
  }

  for (auto _ : state) {
    if (!driver.pass(w.bytes, chunk)) {
      state.SkipWithError(("decode failed: " + driver.error()).c_str());
      return;
    }
  }
  benchmark::DoNotOptimize(driver.messages());

  const auto passes = static_cast<std::int64_t>(state.iterations());
  state.SetBytesProcessed(passes * static_cast<std::int64_t>(w.bytes.size()));
  state.counters["msgs_per_s"] =
      benchmark::Counter(static_cast<double>(passes) * static_cast<double>(messages_per_pass),
                         benchmark::Counter::kIsRate);
  state.counters["allocs_per_msg"] =
      static_cast<double>(allocations) / static_cast<double>(messages_per_pass);
  state.counters["bytes_per_msg"] =
      static_cast<double>(w.bytes.size()) / static_cast<double>(messages_per_pass);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  if (!allocation_counter_works()) {
    std::fprintf(stderr, "the heap allocation counter is not being called\n");
    return 2;
  }
  const std::vector<std::size_t> chunks = {1460, 16384};
  if (!cross_check(chunks)) return 2;

  for (const workload& w : workloads()) {
    for (std::size_t chunk : chunks) {
      const std::string suffix = w.name + "/" + std::to_string(chunk);
      benchmark::RegisterBenchmark(("decode/lockscope/" + suffix).c_str(),
                                   [&w, chunk](benchmark::State& s) { run_decode<lockscope_driver>(s, w, chunk); });
      benchmark::RegisterBenchmark(("decode/hiredis/" + suffix).c_str(),
                                   [&w, chunk](benchmark::State& s) { run_decode<hiredis_driver>(s, w, chunk); });
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
