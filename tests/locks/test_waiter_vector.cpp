// A lock's waiters with dormant records (waiter_vector.hpp, private to the locks
// library) against a plain std::vector<waiter> doing the same: under random arrivals
// (some a dormant record holds, some it cannot), reads that make them full again,
// updates, removals in one pass (remove_if) and by position, the two hold the same
// waiters in the same order, and the earliest deadline is the vector's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
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

// A new waiter at the end of both, subscribed (never dormant) but one in `one_in`.
void arrive_subscribed(waiter_vector& ws, std::vector<waiter>& truth, std::mt19937_64& random, std::uint64_t seq,
                       std::int64_t now, unsigned one_in) {
  waiter w = arrival(random, seq, now);
  if (random() % one_in != 0) w.sub_connection = 5;
  ws.emplace_back() = w;
  truth.push_back(w);
}

// truth[i] leaves both, found by its seq first (a herd's woken waiter); its seq is kept
// in `gone_seqs`, to be looked up again.
void leave_by_seq(waiter_vector& ws, std::vector<waiter>& truth, std::size_t i, std::vector<std::uint64_t>& gone_seqs) {
  waiter* const w = ws.find_seq(truth[i].seq);
  REQUIRE(w != nullptr);
  REQUIRE(*w == truth[i]);
  gone_seqs.push_back(truth[i].seq);
  ws.erase(w);
  truth.erase(truth.begin() + static_cast<std::ptrdiff_t>(i));
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
        waiter* const at = ws.find_seq(truth[i].seq);
        REQUIRE(at != nullptr);
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
        ws.erase(&*std::next(ws.begin(), static_cast<std::ptrdiff_t>(i)));
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

// The dormancy check compares a waiter's bytes with a default waiter's once the fields its
// record keeps are set aside; the reference below is the plain one (build the record, give
// the waiter back from it, compare field by field). Waiters as they arrive, each with one
// field changed from what a record gives back, or none: the same answer and record.
TEST_CASE("dormant_record::of answers what giving the waiter back and comparing it answers", "[timeline][waiters]") {
  using dormant = waiter_vector::dormant;
  const auto reference_of = [](const waiter& w) -> std::optional<dormant> {
    const std::int64_t reply = w.last_attempt_us - w.first_us;
    const std::int64_t deadline = w.deadline_us - w.last_attempt_us;
    if (w.conn == 0xffffffffu || w.attempts != 1 || w.sub_connection != 0 || w.subscribed_us >= 0 || reply < 0 ||
        reply > dormant::reply_mask || w.deadline_us < 0 || deadline < 0 || deadline > 0xffffffffll ||
        w.last_ttl_us != w.first_ttl_us || w.last_ttl_us < -1 || w.last_ttl_us % 1000 != 0 ||
        w.last_ttl_us / 1000 > 0x7fffffff) {
      return std::nullopt;
    }
    const dormant d{w.client, w.first_us, w.seq, w.owner, w.conn,
                    static_cast<std::uint32_t>(reply) | (w.pubsub ? dormant::pubsub_bit : 0) | (w.mid_stream ? dormant::mid_stream_bit : 0),
                    static_cast<std::uint32_t>(deadline), w.last_ttl_us < 0 ? -1 : static_cast<std::int32_t>(w.last_ttl_us / 1000)};
    if (!(d.materialize(w.seq, table) == w)) return std::nullopt;
    return d;
  };
  using change = void (*)(waiter&, std::uint64_t);
  const std::vector<change> changes = {
      [](waiter&, std::uint64_t) {},
      [](waiter& w, std::uint64_t) { w.confidence = lockscope::locks::link_confidence::low; },
      [](waiter& w, std::uint64_t) { w.ip_tag ^= 1; },
      [](waiter& w, std::uint64_t) { w.connection += 1; },
      [](waiter& w, std::uint64_t) { w.notified = true; },
      [](waiter& w, std::uint64_t) { w.timeout_reported = true; },
      [](waiter& w, std::uint64_t) { w.lost_reported = true; },
      [](waiter& w, std::uint64_t) { w.left_channel = true; },
      [](waiter& w, std::uint64_t) { w.quick_second = true; },
      [](waiter& w, std::uint64_t) { w.gaps_shrank = true; },
      [](waiter& w, std::uint64_t v) { w.first_gap_ms = static_cast<std::uint16_t>(1 + v % 100); },
      [](waiter& w, std::uint64_t) { w.attempts = 2; },
      [](waiter& w, std::uint64_t) { w.owner_repeated = true; },
      [](waiter& w, std::uint64_t) { w.fresh_values = true; },
      [](waiter& w, std::uint64_t) { w.withdrawn = true; },
      [](waiter& w, std::uint64_t) { w.cleaned_up = true; },
      [](waiter& w, std::uint64_t) { w.left_unexplained = true; },
      [](waiter& w, std::uint64_t) { w.hold_in_first_gap = true; },
      [](waiter& w, std::uint64_t) { w.connection_per_attempt = true; },
      [](waiter& w, std::uint64_t v) { w.last_gap_ms = static_cast<std::uint16_t>(1 + v % 100); },
      [](waiter& w, std::uint64_t v) { w.longest_gap_us = static_cast<std::int64_t>(1 + v % 1000); },
      [](waiter& w, std::uint64_t v) { w.unexplained_us = static_cast<std::int64_t>(v % 1000); },
      [](waiter& w, std::uint64_t v) { w.unexplained_end_us = static_cast<std::int64_t>(v % 1000); },
      [](waiter& w, std::uint64_t) { w.sub_connection = 9; },
      [](waiter& w, std::uint64_t v) { w.subscribed_us = static_cast<std::int64_t>(v % 1000); },
      [](waiter& w, std::uint64_t v) { w.unsubscribed_us = static_cast<std::int64_t>(v % 1000); },
      [](waiter& w, std::uint64_t v) { w.lost_release_us = static_cast<std::int64_t>(v % 1000); },
      [](waiter& w, std::uint64_t) { w.first_ttl_us += 1000; },
      [](waiter& w, std::uint64_t) { w.last_ttl_us = w.first_ttl_us = -1; },
      [](waiter& w, std::uint64_t) { w.deadline_us = w.last_attempt_us - 1; },
      [](waiter& w, std::uint64_t) { w.last_attempt_us = w.first_us - 1; },
      [](waiter& w, std::uint64_t) { w.conn = 0xffffffffu; },
  };
  std::mt19937_64 random(45);
  std::int64_t now = 1'800'000'000'000'000;
  std::size_t dormant_count = 0, refused = 0;
  for (int round = 0; round < 20'000; ++round) {
    now += static_cast<std::int64_t>(random() % 1000);
    waiter w = arrival(random, static_cast<std::uint64_t>(round) * 0x10001u, now);
    if (random() % 2 == 0) changes[random() % changes.size()](w, random());  // else as it arrived
    const std::optional<dormant> expected = reference_of(w);
    const std::optional<dormant> got = dormant::of(w, table);
    REQUIRE(got.has_value() == expected.has_value());
    if (got) {
      REQUIRE(got->materialize(w.seq, table) == w);
      ++dormant_count;
    } else {
      ++refused;
    }
  }
  CHECK(dormant_count > 2'000);
  CHECK(refused > 2'000);
}

// A herd's waiters leave mostly from the front (the oldest is woken; a connection's end
// takes a few of thousands): erase() leaves a hole unless at an end, remove_if() closes
// a gap from its shorter side, and the room at the front is taken back as waiters come. Against a std::vector doing
// the same, with leaves at the front, at the back, in clusters and spread, and waiters
// that a record can hold (dormant, then made full again) or cannot.
TEST_CASE("waiter_vector's removals at either end keep what a std::vector keeps", "[timeline][waiters]") {
  std::mt19937_64 random(4343);
  for (int round = 0; round < 12; ++round) {
    waiter_vector ws;
    if (round % 3 == 2) ws.set_context(&table);
    std::vector<waiter> truth;
    std::uint64_t next_seq = 0;
    std::int64_t now = 1'800'000'000'000'000;
    const std::size_t herd = round % 2 == 0 ? 400 : 40;
    for (int step = 0; step < 4000; ++step) {
      now += static_cast<std::int64_t>(random() % 1000);
      const unsigned op = static_cast<unsigned>(random() % 100);
      if (op < 45 || truth.size() < herd / 2) {
        arrive_subscribed(ws, truth, random, next_seq++, now, 3);
      } else if (op < 70 && !truth.empty()) {
        // One leaves by position, mostly the oldest.
        const std::size_t i = random() % 3 == 0 ? random() % truth.size() : random() % std::min<std::size_t>(truth.size(), 3);
        ws.erase(&*std::next(ws.begin(), static_cast<std::ptrdiff_t>(i)));
        truth.erase(truth.begin() + static_cast<std::ptrdiff_t>(i));
        if (i < truth.size()) REQUIRE(*std::next(ws.begin(), static_cast<std::ptrdiff_t>(i)) == truth[i]);
      } else if (op < 95 && !truth.empty()) {
        // A pass where a few leave: around one place (a connection's waiters, near the
        // front or the back) or anywhere.
        const std::size_t centre = random() % 2 == 0 ? random() % std::min<std::size_t>(truth.size(), 8) : random() % truth.size();
        const std::uint64_t spread = random() % 4 == 0 ? truth.size() : 6;
        const std::uint64_t salt = random();
        std::vector<std::uint64_t> leaving;
        for (std::size_t i = 0; i < truth.size(); ++i) {
          const std::size_t d = i > centre ? i - centre : centre - i;
          if (d < spread && (truth[i].seq ^ salt) % 3 == 0) leaving.push_back(truth[i].seq);
        }
        const auto leaves = [&](const waiter& w) { return std::find(leaving.begin(), leaving.end(), w.seq) != leaving.end(); };
        std::vector<std::uint64_t> gone;
        ws.remove_if([&](waiter& w) { return leaves(w); }, [&](const waiter& w) { gone.push_back(w.seq); },
                     [](const waiter_vector::dormant&) { return true; });
        REQUIRE(gone == leaving);
        std::erase_if(truth, leaves);
      } else {
        REQUIRE(ws.earliest_deadline() == earliest_of(truth));
      }
      REQUIRE(ws.size() == truth.size());
      if (step % 10 == 0) {
        REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
        REQUIRE((truth.empty() || ws.front() == truth.front()));
      }
    }
    REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
  }
}

// A waiter that leaves from the middle leaves a hole (erase, remove_among), closed once
// holes are an eighth of the waiters or before an access that needs the records
// contiguous. Against a std::vector doing the same, with leaves anywhere (a herd's woken
// waiter), keyed passes, arrivals past the room, reads by seq (a waiter gone: none), by
// index, and the passes over every record, holes too.
TEST_CASE("waiter_vector's holes keep what a std::vector keeps", "[timeline][waiters]") {
  std::mt19937_64 random(4318);
  for (int round = 0; round < 16; ++round) {
    waiter_vector ws;
    if (round % 4 == 3) ws.set_context(&table);
    std::vector<waiter> truth;
    std::uint64_t next_seq = round % 5 == 4 ? 0xfffffff0u : 0;
    std::int64_t now = 1'800'000'000'000'000;
    const std::size_t herd = round % 2 == 0 ? 500 : 50;
    std::vector<std::uint64_t> gone_seqs;  // leaves of the latest steps, looked up again
    for (int step = 0; step < 5000; ++step) {
      now += static_cast<std::int64_t>(random() % 1000);
      const unsigned op = static_cast<unsigned>(random() % 100);
      if (op < 40 || truth.size() < herd / 2) {
        arrive_subscribed(ws, truth, random, next_seq++, now, 4);
      } else if (op < 65 && !truth.empty()) {
        // One leaves from anywhere, now and then one of the ends.
        const unsigned where = static_cast<unsigned>(random() % 8);
        leave_by_seq(ws, truth, where == 0 ? 0 : where == 1 ? truth.size() - 1 : random() % truth.size(), gone_seqs);
      } else if (op < 75 && !truth.empty()) {
        // A keyed pass: a few seqs asked (some of waiters gone), those picked leave.
        std::vector<std::uint64_t> asked;
        for (const waiter& w : truth) {
          if (random() % 16 == 0) asked.push_back(w.seq);
        }
        for (std::size_t k = 0; k < 3 && !gone_seqs.empty(); ++k) asked.push_back(gone_seqs[random() % gone_seqs.size()]);
        std::sort(asked.begin(), asked.end());
        asked.erase(std::unique(asked.begin(), asked.end()), asked.end());
        const std::uint64_t salt = random();
        const auto leaves = [&](const waiter& w) { return (w.seq ^ salt) % 2 == 0; };
        std::vector<std::uint64_t> gone, gone_truth;
        ws.remove_among(asked, [&](waiter& w) { return leaves(w); }, [&](const waiter& w) { gone.push_back(w.seq); });
        std::erase_if(truth, [&](const waiter& w) {
          const bool out = std::binary_search(asked.begin(), asked.end(), w.seq) && leaves(w);
          if (out) gone_truth.push_back(w.seq);
          return out;
        });
        REQUIRE(gone == gone_truth);
        gone_seqs.insert(gone_seqs.end(), gone.begin(), gone.end());
      } else if (op < 80) {
        // A pass over every record, holes too: only waiters' changes are seen.
        for (waiter& w : ws.records_with_holes()) w.lost_release_us = now;
        for (waiter& w : truth) w.lost_release_us = now;
      } else if (op < 85 && !gone_seqs.empty()) {
        REQUIRE(ws.find_seq(gone_seqs[random() % gone_seqs.size()]) == nullptr);
      } else if (op < 90 && !truth.empty()) {
        const std::size_t i = random() % truth.size();
        REQUIRE(ws[i] == truth[i]);
        REQUIRE(ws.front() == truth.front());
        REQUIRE(ws.back() == truth.back());
      } else if (op < 93) {
        // A pass: some leave (remove_if).
        const std::uint64_t salt = random();
        const auto leaves = [&](const waiter& w) { return (w.seq ^ salt) % 9 == 0; };
        ws.remove_if([&](waiter& w) { return leaves(w); }, [](const waiter&) {}, [](const waiter_vector::dormant&) { return true; });
        std::erase_if(truth, leaves);
      } else {
        REQUIRE(ws.earliest_deadline() == earliest_of(truth));
      }
      if (gone_seqs.size() > 64) gone_seqs.erase(gone_seqs.begin(), gone_seqs.begin() + 32);
      REQUIRE(ws.size() == truth.size());
      REQUIRE(ws.empty() == truth.empty());
      if (step % 7 == 0) {
        const waiter_vector& seen = ws;
        REQUIRE(std::vector<waiter>(seen.begin(), seen.end()) == truth);
      }
    }
    REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
  }
}

// A lookup by seq reads the record's position from a table by seq, made again when the
// records move (holes closed, the front's room given back, passes that remove, promotions
// and demotions) and joined by new waiters at the next lookup. Against a std::vector
// doing the same, every step looks up waiters that wait (their record), waiters gone and
// seqs never given (none): with leaves anywhere, at the ends and in passes, arrivals in
// bursts, dormant records or not, and one waiter left behind while thousands come and go
// (its seqs too far apart for a table).
TEST_CASE("waiter_vector's positions by seq find what a search finds", "[timeline][waiters]") {
  std::mt19937_64 random(2143);
  for (int round = 0; round < 12; ++round) {
    waiter_vector ws;
    if (round % 3 == 2) ws.set_context(&table);
    std::vector<waiter> truth;
    std::uint64_t next_seq = round % 4 == 3 ? 0xffffff00u : 0;
    std::int64_t now = 1'800'000'000'000'000;
    const std::size_t herd = round % 2 == 0 ? 600 : 60;
    const bool left_behind = round % 4 == 1;  // the first waiter stays throughout
    std::vector<std::uint64_t> gone_seqs;
    const auto look_up = [&] {
      for (int k = 0; k < 4 && !truth.empty(); ++k) {
        const waiter& t = truth[random() % truth.size()];
        waiter* const w = ws.find_seq(t.seq);
        REQUIRE(w != nullptr);
        REQUIRE(*w == t);
      }
      if (!gone_seqs.empty()) REQUIRE(ws.find_seq(gone_seqs[random() % gone_seqs.size()]) == nullptr);
      REQUIRE(ws.find_seq(next_seq + random() % 3) == nullptr);
    };
    for (int step = 0; step < 6000; ++step) {
      now += static_cast<std::int64_t>(random() % 1000);
      const unsigned op = static_cast<unsigned>(random() % 100);
      if (op < 38 || truth.size() < herd / 2) {
        const std::size_t burst = random() % 8 == 0 ? 1 + random() % 40 : 1;
        for (std::size_t b = 0; b < burst; ++b) arrive_subscribed(ws, truth, random, next_seq++, now, round % 3 == 2 ? 3 : 50);
      } else if (op < 70 && truth.size() > (left_behind ? 1u : 0u)) {
        // One leaves: from anywhere (woken), now and then one of the ends.
        const std::size_t first = left_behind ? 1 : 0;
        const unsigned where = static_cast<unsigned>(random() % 8);
        leave_by_seq(ws, truth, where == 0 ? first : where == 1 ? truth.size() - 1 : first + random() % (truth.size() - first), gone_seqs);
      } else if (op < 78 && !truth.empty()) {
        // A keyed pass: a few leave (a connection's end).
        std::vector<std::uint64_t> asked;
        for (std::size_t i = left_behind ? 1 : 0; i < truth.size(); ++i) {
          if (random() % 24 == 0) asked.push_back(truth[i].seq);
        }
        std::vector<std::uint64_t> gone;
        ws.remove_among(asked, [](waiter&) { return true; }, [&](const waiter& w) { gone.push_back(w.seq); });
        REQUIRE(gone == asked);
        std::erase_if(truth, [&](const waiter& w) { return std::binary_search(asked.begin(), asked.end(), w.seq); });
        gone_seqs.insert(gone_seqs.end(), gone.begin(), gone.end());
      } else if (op < 81) {
        // A pass that removes (every record moved up).
        const std::uint64_t salt = random();
        const auto leaves = [&](const waiter& w) { return (w.seq ^ salt) % 11 == 0 && !(left_behind && w.seq == truth.front().seq); };
        ws.remove_if([&](waiter& w) { return leaves(w); }, [&](const waiter& w) { gone_seqs.push_back(w.seq); },
                     [](const waiter_vector::dormant&) { return true; });
        std::erase_if(truth, leaves);
      } else if (op < 86 && !truth.empty()) {
        const std::size_t i = random() % truth.size();  // (holes closed first)
        REQUIRE(ws[i] == truth[i]);
      } else if (op < 90) {
        REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);  // (dormant ones made full)
      }
      look_up();
      if (gone_seqs.size() > 64) gone_seqs.erase(gone_seqs.begin(), gone_seqs.begin() + 32);
      REQUIRE(ws.size() == truth.size());
    }
    REQUIRE(std::vector<waiter>(ws.begin(), ws.end()) == truth);
  }
}
