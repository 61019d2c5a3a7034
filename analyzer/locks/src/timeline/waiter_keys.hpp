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
#include <cstdint>
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
