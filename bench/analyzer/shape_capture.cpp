// Writes the synthetic captures of the traffic-shape benchmark (shapes_bench.sh): the
// shapes an SRE analyses that the recorded benchmark capture (one uncontended acquire per
// packet) does not have.
//
//   lock_shape_capture storm   OUT.pcap [MB]   an anomaly storm
//   lock_shape_capture herd    OUT.pcap [MB]   20,000 waiters on 5 locks, woken in turn
//   lock_shape_capture servers OUT.pcap [MB] [N]   RedLock quorums over N servers (3)
//
// Each writes until the file holds MB megabytes (default 300). Deterministic (fixed seed);
// timestamps never go backwards; every connection opens with a handshake.
//   storm:   20 connections send Redisson acquire EVALs (the seed's script) on 1,000 lock
//            names with random owners: the first per name acquires for 30 s, the rest are
//            refused; then unlock EVALs with random owners pipelined 8 to a segment, nearly
//            all refused (not the holder's): acquires and unlocks alternate in rounds of
//            100,000 operations.
//   herd:    a holder takes 5 locks; 200 client processes (a command and a subscriber
//            connection each) hold 100 waiting threads each, 20 per lock, who try and
//            subscribe. Each release publishes; every process with waiters retries one:
//            one acquires (round robin), the rest are refused, and the winner releases
//            1 ms later. A process whose last waiter on a lock acquired unsubscribes.
//   servers: 20 clients with a connection to each of N servers take node-redlock style
//            locks (SET NX PX with one token on every server, then a compare-and-delete
//            script on every server) on 1,000 names, a fifth of the tries on 20 hot
//            names: those collide, some lose their quorum and release at once.
#include <cstdint>
#include <cstdio>
#include <filesystem>
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
namespace lk = lockscope::lock;

constexpr std::int64_t reply_latency_us = 40;

std::string bulk_array(std::initializer_list<std::string_view> items) {
  std::string s = fmt::format("*{}\r\n", items.size());
  for (std::string_view i : items) s += fmt::format("${}\r\n{}\r\n", i.size(), i);
  return s;
}
std::string bulk(std::string_view s) { return fmt::format("${}\r\n{}\r\n", s.size(), s); }
std::string integer(std::int64_t v) { return fmt::format(":{}\r\n", v); }
const std::string nil = "$-1\r\n";

// The pcap file and its clock, shared by every shape.
class writer {
 public:
  explicit writer(const std::string& path, std::uint64_t target_bytes)
      : out_(path, link_type::en10mb), target_(target_bytes) {}
  void send(std::int64_t at, const tcp_segment_spec& s) {
    now_ = std::max(now_, at);
    const std::string frame = make_frame(link_type::en10mb, s);
    out_.write(now_, frame);
    bytes_ += frame.size() + 16;
    ++packets_;
  }
  // A command and its reply on `c`, the reply reply_latency_us later.
  void exchange(tcp_conversation& c, std::int64_t at, std::string_view command, std::string_view reply) {
    send(at, c.client_sends(command));
    send(at + reply_latency_us, c.server_sends(reply));
  }
  tcp_conversation open(endpoint client, endpoint server, std::int64_t at) {
    tcp_conversation c(client, server, static_cast<std::uint32_t>(rng.next()), static_cast<std::uint32_t>(rng.next()));
    for (const tcp_segment_spec& s : c.handshake()) send(at, s);
    return c;
  }
  bool full() const noexcept { return bytes_ >= target_; }
  std::int64_t now() const noexcept { return now_; }
  std::uint64_t packets() const noexcept { return packets_; }
  void close() { out_.close(); }

  lockscope::test::splitmix64 rng{20261129};

 private:
  pcap_file_writer out_;
  std::uint64_t target_;
  std::uint64_t bytes_ = 24;
  std::uint64_t packets_ = 0;
  std::int64_t now_ = 1'800'000'000'000'000;
};

std::string redisson_owner(lockscope::test::splitmix64& rng, std::uint64_t thread) {
  const std::uint64_t a = rng.next(), b = rng.next();
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}:{}", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                     b & 0xffffffffffffull, thread);
}

void storm(writer& w) {
  const std::string acquire(lk::script(lk::script_kind::acquire).text);
  const std::string unlock(lk::script(lk::script_kind::unlock).text);
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  std::vector<tcp_conversation> conns;
  for (int i = 0; i < 20; ++i) conns.push_back(w.open(make_endpoint("10.1.0.1", static_cast<std::uint16_t>(40000 + i)), server, w.now()));
  std::vector<std::int64_t> held_until(1000, -1);
  std::int64_t t = w.now() + 1000;
  while (!w.full()) {
    for (int k = 0; k < 100'000 && !w.full(); ++k) {  // acquires, one per packet
      const std::size_t lock = w.rng.next() % held_until.size();
      const std::string name = fmt::format("myLock:{}", lock);
      const std::string owner = redisson_owner(w.rng, w.rng.next() % 64 + 1);
      const bool free = held_until[lock] < t;
      if (free) held_until[lock] = t + 30'000'000;
      w.exchange(conns[static_cast<std::size_t>(k) % conns.size()], t,
                 bulk_array({"EVAL", acquire, "1", name, "30000", owner}),
                 free ? nil : integer((held_until[lock] - t) / 1000));
      t += 2;
    }
    for (int k = 0; k < 100'000 / 8 && !w.full(); ++k) {  // unlocks, pipelined 8 to a segment
      std::string commands, replies;
      for (int p = 0; p < 8; ++p) {
        const std::size_t lock = w.rng.next() % held_until.size();
        const std::string name = fmt::format("myLock:{}", lock);
        commands += bulk_array({"EVAL", unlock, "2", name, "redisson_lock__channel:{" + name + "}", "0", "30000",
                                redisson_owner(w.rng, w.rng.next() % 64 + 1)});
        replies += nil;  // not the holder's owner: refused
      }
      w.exchange(conns[static_cast<std::size_t>(k) % conns.size()], t, commands, replies);
      t += 16;
    }
  }
}

void herd(writer& w) {
  const std::string acquire(lk::script(lk::script_kind::acquire).text);
  const std::string unlock(lk::script(lk::script_kind::unlock).text);
  constexpr int locks = 5, processes = 200, threads_per_lock = 20;
  const endpoint server = make_endpoint("10.0.0.1", 6379);
  auto name_of = [](int lock) { return fmt::format("herd:{}", lock); };
  auto channel_of = [&](int lock) { return "redisson_lock__channel:{" + name_of(lock) + "}"; };
  struct process {
    std::optional<tcp_conversation> command, subscriber;
    std::vector<std::string> owners;              // its threads'
    std::vector<std::vector<std::size_t>> waiting;  // per lock: its threads still waiting (owner indices)
  };
  std::vector<process> ps(processes + 1);  // the last one is the first holder
  std::int64_t t = w.now() + 1000;
  for (int p = 0; p <= processes; ++p) {
    process& pr = ps[static_cast<std::size_t>(p)];
    const endpoint ip = make_endpoint(fmt::format("10.2.{}.{}", p / 250, p % 250 + 1), 50000);
    endpoint sub = ip;
    sub.port = 50001;
    pr.command = w.open(ip, server, t);
    pr.subscriber = w.open(sub, server, t);
    pr.waiting.resize(locks);
    for (int i = 0; i < locks * threads_per_lock; ++i) pr.owners.push_back(redisson_owner(w.rng, static_cast<std::uint64_t>(i + 1)));
  }
  const std::int64_t lease_ms = 30000;
  std::vector<std::string> holder(locks);  // the owner holding each lock
  std::vector<int> holder_process(locks);
  for (int l = 0; l < locks; ++l) {
    holder[static_cast<std::size_t>(l)] = ps[processes].owners[static_cast<std::size_t>(l)];
    holder_process[static_cast<std::size_t>(l)] = processes;
    w.exchange(*ps[processes].command, t, bulk_array({"EVAL", acquire, "1", name_of(l), "30000", holder[static_cast<std::size_t>(l)]}), nil);
    t += 10;
  }
  for (int p = 0; p < processes; ++p) {  // every thread tries once, then the process subscribes
    process& pr = ps[static_cast<std::size_t>(p)];
    for (int l = 0; l < locks; ++l) {
      for (int k = 0; k < threads_per_lock; ++k) {
        const std::size_t owner = static_cast<std::size_t>(l * threads_per_lock + k);
        pr.waiting[static_cast<std::size_t>(l)].push_back(owner);
        w.exchange(*pr.command, t, bulk_array({"EVAL", acquire, "1", name_of(l), "30000", pr.owners[owner]}), integer(lease_ms - 5));
        t += 3;
      }
      const std::string channel = channel_of(l);
      w.exchange(*pr.subscriber, t, bulk_array({"SUBSCRIBE", channel}),
                 "*3\r\n$9\r\nsubscribe\r\n" + bulk(channel) + ":1\r\n");
      t += 3;
    }
  }
  std::vector<int> next_winner(locks, 0);
  while (!w.full()) {
    bool any = false;
    for (int l = 0; l < locks && !w.full(); ++l) {
      const auto lu = static_cast<std::size_t>(l);
      const std::string name = name_of(l), channel = channel_of(l);
      // The holder releases; the script publishes to every subscriber.
      process& from = ps[static_cast<std::size_t>(holder_process[lu])];
      w.exchange(*from.command, t, bulk_array({"EVAL", unlock, "2", name, channel, "0", "30000", holder[lu]}), integer(1));
      t += 50;
      std::vector<int> woken;
      for (int p = 0; p < processes; ++p) {
        if (ps[static_cast<std::size_t>(p)].waiting[lu].empty()) continue;
        woken.push_back(p);
        w.send(t, ps[static_cast<std::size_t>(p)].subscriber->server_sends("*3\r\n$7\r\nmessage\r\n" + bulk(channel) + "$1\r\n0\r\n"));
      }
      if (woken.empty()) continue;
      any = true;
      t += 20;
      const int winner = woken[static_cast<std::size_t>(next_winner[lu]++) % woken.size()];
      for (const int p : woken) {  // each woken process retries its first waiter
        process& pr = ps[static_cast<std::size_t>(p)];
        const std::size_t owner = pr.waiting[lu].front();
        const bool wins = p == winner;
        w.exchange(*pr.command, t, bulk_array({"EVAL", acquire, "1", name, "30000", pr.owners[owner]}),
                   wins ? nil : integer(lease_ms - 1));
        t += 2;
        if (!wins) continue;
        holder[lu] = pr.owners[owner];
        holder_process[lu] = p;
        pr.waiting[lu].erase(pr.waiting[lu].begin());
        if (pr.waiting[lu].empty()) {
          w.exchange(*pr.subscriber, t, bulk_array({"UNSUBSCRIBE", channel}),
                     "*3\r\n$11\r\nunsubscribe\r\n" + bulk(channel) + ":0\r\n");
        }
      }
      t += 1000;  // the winner's critical section
    }
    if (!any) break;
  }
}

void servers(writer& w, int n) {
  const std::string release = "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end";
  std::vector<endpoint> ends;
  for (int s = 0; s < n; ++s) ends.push_back(make_endpoint(fmt::format("10.0.0.{}", s + 1), 6379));
  constexpr int clients = 20;
  std::vector<std::vector<tcp_conversation>> conns(clients);
  std::int64_t t = w.now() + 1000;
  for (int c = 0; c < clients; ++c) {
    for (int s = 0; s < n; ++s) {
      conns[static_cast<std::size_t>(c)].push_back(
          w.open(make_endpoint(fmt::format("10.3.0.{}", c + 1), static_cast<std::uint16_t>(41000 + s)), ends[static_cast<std::size_t>(s)], t));
    }
  }
  struct key_state {
    std::string token;
    std::int64_t until = -1;
  };
  std::vector<std::vector<key_state>> held(static_cast<std::size_t>(n), std::vector<key_state>(1000));
  struct open_hold {
    int client;
    std::size_t lock;
    std::string token;
    std::vector<bool> won;
    std::int64_t release_at;
  };
  auto by_time = [](const open_hold& a, const open_hold& b) { return a.release_at > b.release_at; };
  std::priority_queue<open_hold, std::vector<open_hold>, decltype(by_time)> holds(by_time);
  std::uint64_t tries = 0;
  auto release_all = [&](const open_hold& h, std::int64_t at) {
    for (int s = 0; s < n; ++s) {
      key_state& k = held[static_cast<std::size_t>(s)][h.lock];
      const bool mine = k.token == h.token && k.until >= at;
      if (mine) k = key_state{};
      w.exchange(conns[static_cast<std::size_t>(h.client)][static_cast<std::size_t>(s)], at,
                 bulk_array({"EVAL", release, "1", fmt::format("rl:{}", h.lock), h.token}), integer(mine ? 1 : 0));
      at += 5;
    }
  };
  while (!w.full()) {
    while (!holds.empty() && holds.top().release_at <= t) {
      release_all(holds.top(), t);
      holds.pop();
      t += 10;
    }
    const int client = static_cast<int>(tries++ % clients);
    const std::size_t lock = w.rng.next() % 5 == 0 ? w.rng.next() % 20 : w.rng.next() % 1000;
    open_hold h{client, lock, fmt::format("{:016x}{:016x}", w.rng.next(), w.rng.next()), std::vector<bool>(static_cast<std::size_t>(n)), 0};
    int votes = 0;
    for (int s = 0; s < n; ++s) {
      key_state& k = held[static_cast<std::size_t>(s)][lock];
      const bool free = k.until < t;
      if (free) k = key_state{h.token, t + 10'000'000};
      h.won[static_cast<std::size_t>(s)] = free;
      votes += free ? 1 : 0;
      w.exchange(conns[static_cast<std::size_t>(client)][static_cast<std::size_t>(s)], t,
                 bulk_array({"SET", fmt::format("rl:{}", lock), h.token, "NX", "PX", "10000"}), free ? "+OK\r\n" : nil);
      t += 5;
    }
    if (votes >= n / 2 + 1) {
      h.release_at = t + 2000 + static_cast<std::int64_t>(w.rng.next() % 4000);
      holds.push(std::move(h));
    } else {
      release_all(h, t);  // no quorum: give back what it took
    }
    t += 50;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: lock_shape_capture storm|herd|servers OUT.pcap [MB] [SERVERS]\n");
    return 2;
  }
  const std::string_view shape = argv[1];
  const std::uint64_t mb = argc >= 4 ? std::stoull(argv[3]) : 300;
  const int n = argc >= 5 ? std::stoi(argv[4]) : 3;
  if (shape != "storm" && shape != "herd" && shape != "servers") {
    std::fprintf(stderr, "lock_shape_capture: unknown shape '%s' (storm, herd, servers)\n", argv[1]);
    return 2;
  }
  if (mb == 0 || n < 2 || n > 64) {
    std::fprintf(stderr, "lock_shape_capture: MB must be at least 1 and SERVERS 2 to 64\n");
    return 2;
  }
  try {
    writer w(argv[2], mb * 1'000'000);
    if (shape == "storm") storm(w);
    else if (shape == "herd") herd(w);
    else servers(w, n);
    w.close();
    std::fprintf(stderr, "lock_shape_capture: %s: %s, %llu packets, %.0f MB\n", argv[2], argv[1],
                 static_cast<unsigned long long>(w.packets()),
                 static_cast<double>(std::filesystem::file_size(argv[2])) / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lock_shape_capture: %s\n", e.what());
    return 1;
  }
  return 0;
}
