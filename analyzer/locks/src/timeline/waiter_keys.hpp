// A lock's waiters by the keys a subscriber's message looks them up by: its subscriber
// connection and its client; and by the connection of their latest attempt (a
// connection's end, a SUBSCRIBE on a waiter's own connection) and that connection's
// address (a SUBSCRIBE looks for the waiters of its own address: a herd's 4,000 a lock
// come from 200 hosts). For a lock with many waiters (a herd: 4,000 a lock, each
// release's publish reaching 200 subscriber connections of 20 waiters each), where a
// scan of every waiter for each message was half of the analysis. Values are the
// waiters' seqs (their lock's `waiters` is in seq order: a binary search away).
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

namespace lockscope::locks::timeline_detail {

struct waiter_keys {
  using seqs = std::vector<std::uint64_t>;  // unordered: a key's waiters, few
  using map = std::unordered_map<std::uint64_t, seqs>;
  map by_sub;     // sub_connection (not 0) -> seqs
  map by_client;  // client -> seqs
  map by_conn;    // conn (the connection table's index) -> seqs
  map by_ip;      // ip_tag (its connection's address's) -> seqs

  // The lock's latest attempts (each waiter's noted as it came), for a SUBSCRIBE's
  // check for another client's failure nearly as recent as the one it follows: a herd's
  // SUBSCRIBE found none by a look at every waiter. A waiter's latest attempt is here
  // unless it is no later than `forgotten_until_us` (an entry's time, once overwritten,
  // or the keys' start).
  struct attempt {
    std::int64_t at_us = std::numeric_limits<std::int64_t>::min();
    std::uint64_t seq = 0;
  };
  std::array<attempt, 128> recent{};
  std::uint32_t next_recent = 0;
  std::int64_t forgotten_until_us = std::numeric_limits<std::int64_t>::min();

  void note_attempt(std::uint64_t seq, std::int64_t at_us) {
    attempt& a = recent[next_recent++ % recent.size()];
    forgotten_until_us = std::max(forgotten_until_us, a.at_us);
    a = {at_us, seq};
  }
  // Whether `recent` holds every waiter whose latest attempt came after `after_us`.
  bool recent_holds_after(std::int64_t after_us) const noexcept { return forgotten_until_us <= after_us; }

  static void add(std::unordered_map<std::uint64_t, seqs>& m, std::uint64_t key, std::uint64_t seq) {
    m[key].push_back(seq);
  }
  static void remove(std::unordered_map<std::uint64_t, seqs>& m, std::uint64_t key, std::uint64_t seq) {
    const auto it = m.find(key);
    if (it == m.end()) return;
    seqs& v = it->second;
    const auto at = std::find(v.begin(), v.end(), seq);
    if (at == v.end()) return;
    *at = v.back();
    v.pop_back();
    if (v.empty()) m.erase(it);
  }
  static const seqs* of(const std::unordered_map<std::uint64_t, seqs>& m, std::uint64_t key) {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  }
  // The key's seqs in `out`, ascending (the waiters' order).
  static void sorted(const std::unordered_map<std::uint64_t, seqs>& m, std::uint64_t key, seqs& out) {
    out.clear();
    if (const seqs* v = of(m, key)) out.assign(v->begin(), v->end());
    std::sort(out.begin(), out.end());
  }
  // The key's earliest seq, if any.
  static std::optional<std::uint64_t> first(const std::unordered_map<std::uint64_t, seqs>& m, std::uint64_t key) {
    const seqs* v = of(m, key);
    if (v == nullptr) return std::nullopt;
    return *std::min_element(v->begin(), v->end());
  }
};

}  // namespace lockscope::locks::timeline_detail
