// A lock's waiters with dormant records (waiter_vector.hpp, private to the locks
// library) against a plain std::vector<waiter> doing the same: under random arrivals
// (some a dormant record holds, some it cannot), reads that make them full again,
// updates, removals in one pass (remove_if) and by position, the two hold the same
// waiters in the same order, and the earliest deadline is the vector's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "timeline/timeline_types.hpp"

using lockscope::locks::timeline_detail::waiter;
using lockscope::locks::timeline_detail::waiter_context;
using lockscope::locks::timeline_detail::waiter_vector;

namespace {

// What a record leaves out, as the timeline's connection table would give it.
struct connection_table final : waiter_context {
  void complete(waiter& w) const override {
    w.connection = 1000 + w.conn;
    w.ip_tag = static_cast<std::uint16_t>(w.conn * 7 + 1);
  }
};
const connection_table table;

// A waiter as on_contended leaves it after a first refused attempt; now and then one that
// a record cannot hold (a retry, a subscription, a deadline far off, a TTL not in ms).
waiter arrival(std::mt19937_64& random, std::uint64_t seq, std::int64_t now) {
  waiter w;
  w.seq = seq;
  w.owner = static_cast<std::uint32_t>(random() % 100'000);
  w.conn = static_cast<std::uint32_t>(random() % 20);
  table.complete(w);
  w.client = random() | (std::uint64_t{1} << 63);
  w.pubsub = random() % 2 == 0;
  w.mid_stream = random() % 7 == 0;
  w.first_us = now;
  w.last_attempt_us = now + static_cast<std::int64_t>(random() % 200);
  w.last_ttl_us = w.first_ttl_us = random() % 5 == 0 ? -1 : static_cast<std::int64_t>(random() % 60'000) * 1000;
  w.deadline_us = w.last_attempt_us + (w.last_ttl_us < 0 ? 30'000'000 : w.last_ttl_us) + 2'000'000;
  switch (random() % 12) {
    case 0: w.attempts = 2; break;
    case 1: w.sub_connection = 7; break;
    case 2: w.deadline_us = w.last_attempt_us + (std::int64_t{1} << 33); break;  // too far for 32 bits
    case 3: w.last_ttl_us = 1500; break;                                         // not whole milliseconds
    case 4: w.notified = true; break;
    case 5: w.ip_tag = 0; break;  // not what its connection gives
    default: break;
  }
  return w;
}

std::int64_t earliest_of(const std::vector<waiter>& v) {
  std::int64_t e = -1;
  for (const waiter& w : v) {
    if (w.deadline_us >= 0 && (e < 0 || w.deadline_us < e)) e = w.deadline_us;
  }
  return e;
}

}  // namespace

TEST_CASE("waiter_vector holds what a std::vector holds, dormant records or not", "[timeline][waiters]") {
  std::mt19937_64 random(43);
  for (int round = 0; round < 20; ++round) {
    waiter_vector ws;
    ws.set_context(&table);
    std::vector<waiter> truth;
    std::uint64_t next_seq = round % 4 == 3 ? 0xfffffff0u : 0;  // seqs past 2^32 (records keep 32 bits)
    std::int64_t now = 1'800'000'000'000'000;
    const int herd = round % 2 == 0 ? 300 : 60;  // arrivals before the lock drains
    for (int step = 0; step < 3000; ++step) {
      now += static_cast<std::int64_t>(random() % 1000);
      const unsigned op = static_cast<unsigned>(random() % 100);
      if (op < 60 || truth.size() < static_cast<std::size_t>(herd / 4)) {
        const waiter w = arrival(random, next_seq++, now);
        ws.emplace_back() = w;
        truth.push_back(w);
      } else if (op < 70 && !truth.empty()) {
        // A retry: found by seq, as find_waiter does (a generic read), and updated.
        const std::size_t i = random() % truth.size();
        const auto at = std::lower_bound(ws.begin(), ws.end(), truth[i].seq,
                                         [](const waiter& w, std::uint64_t s) { return w.seq < s; });
        REQUIRE(at != ws.end());
        REQUIRE(*at == truth[i]);
        ++at->attempts;
        ++truth[i].attempts;
      } else if (op < 85) {
        // A pass: some leave; some kept ones are updated (a subscription ended).
        const std::uint64_t salt = random();
        const auto leaves = [&](const waiter& w) { return (w.seq ^ salt) % 5 == 0; };
        const auto touched = [&](const waiter& w) { return (w.seq ^ salt) % 11 == 1; };
        std::vector<std::uint64_t> gone, gone_truth;
        ws.remove_if(
            [&](waiter& w) {
              if (leaves(w)) return true;
              if (touched(w)) w.unsubscribed_us = now;
              return false;
            },
            [&](const waiter& w) { gone.push_back(w.seq); }, [](const waiter_vector::dormant&) { return true; });
        std::vector<waiter> kept;
        for (waiter w : truth) {
          if (leaves(w)) {
            gone_truth.push_back(w.seq);
            continue;
          }
          if (touched(w)) w.unsubscribed_us = now;
          kept.push_back(w);
        }
        truth = kept;
        REQUIRE(gone == gone_truth);  // in seq order, as one pass over a vector
      } else if (op < 92 && !truth.empty()) {
        // One leaves by position (drop_waiter's erase).
        const std::size_t i = random() % truth.size();
        ws.erase(ws.begin() + static_cast<std::ptrdiff_t>(i));
        truth.erase(truth.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        REQUIRE(ws.earliest_deadline() == earliest_of(truth));
      }
      REQUIRE(ws.size() == truth.size());
      if (step % 50 == 0) {
        REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
      }
    }
    REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
  }
}

TEST_CASE("waiter_vector keeps a storm's refused-once waiters dormant until one is read", "[timeline][waiters]") {
  std::mt19937_64 random(7);
  waiter_vector ws;
  ws.set_context(&table);
  std::vector<waiter> truth;
  std::int64_t now = 1'800'000'000'000'000;
  for (std::uint64_t seq = 0; seq < 1000; ++seq) {
    waiter w;
    w.seq = seq;
    w.owner = static_cast<std::uint32_t>(seq);
    w.conn = static_cast<std::uint32_t>(seq % 20);
    table.complete(w);
    w.client = random();
    w.pubsub = true;
    w.first_us = now;
    w.last_attempt_us = now + 40;
    w.last_ttl_us = w.first_ttl_us = 29'000'000;
    w.deadline_us = w.last_attempt_us + 31'000'000;
    now += 3;
    ws.emplace_back() = w;
    truth.push_back(w);
  }
  // All but the newest (made dormant when the next comes).
  CHECK(ws.dormant_count() == 999);
  CHECK(ws.earliest_deadline() == truth.front().deadline_us);
  CHECK(ws.dormant_count() > 0);  // read in place
  CHECK(std::vector<waiter>(ws.begin(), ws.end()) == truth);
  CHECK(ws.dormant_count() == 0);  // a generic read made them full
}
