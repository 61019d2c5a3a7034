// Writes the soak benchmark's synthetic capture: a long-running SET-based lock
// workload (redis-py / redlock style) of short-lived connections with fresh owners.
//
//   lock_soak_capture OUT.pcap [SCALE] [--fresh-names]
//   lock_soak_capture OUT.pcap --connections N [--fresh-names]   (a small one, for tests)
//
// SCALE × 20,000 connections, each running 40 cycles of
//   SET lock:<j> <fresh token> NX PX 5000   (retried with the same token while held)
//   EVALSHA <release sha> 1 lock:<j> <token>
// on 64 lock names, two workers per lock (so some attempts are contended): SCALE ×
// 800,000 distinct owners. The release script is redis-py's compare-and-delete, loaded
// once with SCRIPT LOAD at the start. Connections open with a handshake and close with
// FIN; 128 run at once. Timestamps never go backwards. Deterministic (fixed seed).
// --fresh-names: every cycle locks a name never used before ("order:<n>", a lock per
// order id), so SCALE × 800,000 distinct lock names, and no contention.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/pcap_writer.hpp"
#include "lockscope/test/splitmix64.hpp"

namespace {

using namespace lockscope::ingest;

constexpr int locks = 64;
constexpr int workers = 2 * locks;
constexpr int cycles_per_connection = 40;
constexpr std::int64_t reply_latency_us = 40;

constexpr std::string_view release_script =
    "local token = redis.call('get', KEYS[1])\n"
    "if not token or token ~= ARGV[1] then\n"
    "    return 0\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "return 1\n";

std::string bulk_array(std::initializer_list<std::string_view> items) {
  std::string s = fmt::format("*{}\r\n", items.size());
  for (std::string_view i : items) s += fmt::format("${}\r\n{}\r\n", i.size(), i);
  return s;
}

enum class phase { connect, set, release, close, done };

struct worker {
  int lock = 0;
  std::uint64_t connections_left = 0;
  std::uint32_t next_port = 10000;
  std::optional<tcp_conversation> conn;
  int cycles = 0;
  phase next = phase::connect;
  std::string token;
  std::string name;  // the lock this cycle takes
};

class generator {
 public:
  generator(const std::string& path, std::uint64_t connections, bool fresh_names)
      : out_(path, link_type::en10mb), sha_(lockscope::lock::sha1_hex(release_script)), fresh_names_(fresh_names) {
    for (int w = 0; w < workers; ++w) {
      worker& k = workers_.emplace_back();
      k.lock = w % locks;
      k.connections_left = connections / workers + (static_cast<std::uint64_t>(w) < connections % workers ? 1 : 0);
      k.next_port = static_cast<std::uint32_t>(10000 + w % 7);
      if (k.connections_left > 0) queue_.emplace(static_cast<std::int64_t>(w) * 37, w);
    }
    holder_.assign(locks, -1);
  }

  void run() {
    while (!queue_.empty()) {
      const auto [at, w] = queue_.top();
      queue_.pop();
      step(w, std::max(at, now_));
    }
    out_.close();
  }
  std::uint64_t owners() const noexcept { return owners_; }
  std::uint64_t packets() const noexcept { return packets_; }

 private:
  void send(std::int64_t at, const tcp_segment_spec& s) {
    now_ = std::max(now_, at);
    out_.write(now_, make_frame(link_type::en10mb, s));
    ++packets_;
  }
  void exchange(worker& k, std::int64_t at, const std::string& command, std::string_view reply) {
    send(at, k.conn->client_sends(command));
    send(at + reply_latency_us, k.conn->server_sends(reply));
  }
  std::string fresh_token() {
    ++owners_;
    return fmt::format("{:016x}{:016x}", rng_.next(), rng_.next());  // like uuid1().hex
  }

  void step(int w, std::int64_t at) {
    worker& k = workers_[w];
    if (k.name.empty()) k.name = fresh_names_ ? fmt::format("order:{}", names_++) : fmt::format("lock:{}", k.lock);
    const std::string& lock = k.name;
    std::int64_t next_at = at;
    switch (k.next) {
      case phase::connect: {
        const endpoint client = make_endpoint(fmt::format("10.1.{}.{}", w / 200, w % 200 + 1),
                                              static_cast<std::uint16_t>(k.next_port));
        k.next_port = k.next_port + 7 > 60000 ? 10000 + (k.next_port + 7) % 7 : k.next_port + 7;
        k.conn.emplace(client, server_, static_cast<std::uint32_t>(rng_.next()),
                       static_cast<std::uint32_t>(rng_.next()));
        for (const tcp_segment_spec& s : k.conn->handshake()) send(at, s);
        if (!script_loaded_) {
          script_loaded_ = true;
          exchange(k, at + 10, bulk_array({"SCRIPT", "LOAD", release_script}), fmt::format("${}\r\n{}\r\n", 40, sha_));
        }
        k.cycles = 0;
        k.token = fresh_token();
        k.next = phase::set;
        next_at = at + 100;
        break;
      }
      case phase::set: {
        const bool free = fresh_names_ || holder_[k.lock] < 0;
        exchange(k, at, bulk_array({"SET", lock, k.token, "NX", "PX", "5000"}), free ? "+OK\r\n" : "$-1\r\n");
        if (free) {
          if (!fresh_names_) holder_[k.lock] = w;
          k.next = phase::release;
          next_at = at + static_cast<std::int64_t>(rng_.between(800, 2500));  // the critical section
        } else {
          next_at = at + static_cast<std::int64_t>(rng_.between(200, 600));  // redis-py's sleep, then retry
        }
        break;
      }
      case phase::release: {
        if (!fresh_names_) holder_[k.lock] = -1;
        exchange(k, at, bulk_array({"EVALSHA", sha_, "1", lock, k.token}), ":1\r\n");
        if (fresh_names_) k.name.clear();  // the next cycle: another order
        if (++k.cycles == cycles_per_connection) {
          k.next = phase::close;
          next_at = at + 100;
        } else {
          k.token = fresh_token();
          k.next = phase::set;
          next_at = at + static_cast<std::int64_t>(rng_.between(300, 1500));
        }
        break;
      }
      case phase::close: {
        send(at, k.conn->client_fin());
        send(at + 30, k.conn->server_fin());
        send(at + 60, k.conn->client_acks());
        k.conn.reset();
        k.next = --k.connections_left > 0 ? phase::connect : phase::done;
        next_at = at + static_cast<std::int64_t>(rng_.between(100, 1000));
        break;
      }
      case phase::done:
        return;
    }
    if (k.next != phase::done) queue_.emplace(next_at, w);
  }

  pcap_file_writer out_;
  const std::string sha_;
  const endpoint server_ = make_endpoint("10.0.0.1", 6379);
  std::vector<worker> workers_;
  std::vector<int> holder_;  // per lock: the worker holding it, -1 free
  using item = std::pair<std::int64_t, int>;
  std::priority_queue<item, std::vector<item>, std::greater<>> queue_;
  lockscope::test::splitmix64 rng_{20240613};
  std::int64_t now_ = 1'700'000'000'000'000;
  bool script_loaded_ = false;
  const bool fresh_names_;
  std::uint64_t names_ = 0;
  std::uint64_t owners_ = 0;
  std::uint64_t packets_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const bool fresh_names = argc >= 3 && std::string_view(argv[argc - 1]) == "--fresh-names";
  if (fresh_names) --argc;
  const bool by_count = argc == 4 && std::string_view(argv[2]) == "--connections";
  if (argc < 2 || (argc > 3 && !by_count)) {
    std::fprintf(stderr, "usage: lock_soak_capture OUT.pcap [SCALE | --connections N] [--fresh-names]\n");
    return 2;
  }
  const std::uint64_t count = by_count ? std::stoull(argv[3]) : 20'000 * (argc == 3 ? std::stoull(argv[2]) : 1);
  if (count == 0) {
    std::fprintf(stderr, "lock_soak_capture: SCALE and N must be at least 1\n");
    return 2;
  }
  try {
    generator g(argv[1], count, fresh_names);
    g.run();
    std::fprintf(stderr, "lock_soak_capture: %s: %llu connections, %llu owners, %llu packets\n", argv[1],
                 static_cast<unsigned long long>(count), static_cast<unsigned long long>(g.owners()),
                 static_cast<unsigned long long>(g.packets()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lock_soak_capture: %s\n", e.what());
    return 1;
  }
  return 0;
}
