// Per-lock hold and wait durations: exact samples up to a limit, then a
// log-linear histogram.
// Private to lock_timeline.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks::timeline_detail {

// One lock's hold or wait durations: every sample while there are at most
// duration_exact_limit of them, then a log-linear histogram (bounded memory whatever
// the capture's length), with count and max kept exact.
class duration_samples {
 public:
  void add(std::int64_t us) {
    ++count_;
    max_ = std::max(max_, us);
    if (!buckets_ && exact_.size() < duration_exact_limit) {
      exact_.push_back(us);
      return;
    }
    if (!buckets_) {
      buckets_ = std::make_unique<bucket_range>();
      buckets_->first = bucket_of(us);
      for (std::int64_t v : exact_) count_in_bucket(v);
      exact_.clear();
      exact_.shrink_to_fit();
    }
    count_in_bucket(us);
  }
  std::uint64_t count() const noexcept { return count_; }
  bool exact() const noexcept { return !buckets_; }
  std::span<const std::int64_t> samples() const noexcept { return exact_; }

  // `leading`: a sample kept outside (the lock's first hold), -1 none.
  duration_stats summarize(std::int64_t leading, std::vector<std::int64_t>& scratch) const {
    duration_stats d;
    d.count = count_ + (leading >= 0 ? 1 : 0);
    if (d.count == 0) return d;
    d.max = std::max(max_, leading);
    if (d.count == 1) {  // most locks
      d.p50 = d.p99 = d.max;
      return d;
    }
    auto rank = [&](double q) {
      std::size_t i = static_cast<std::size_t>(q * static_cast<double>(d.count) + 0.999999);
      return std::min<std::size_t>(std::max<std::size_t>(i, 1), d.count);  // nearest rank, 1-based
    };
    if (exact()) {
      scratch.clear();
      if (leading >= 0) scratch.push_back(leading);
      scratch.insert(scratch.end(), exact_.begin(), exact_.end());
      std::sort(scratch.begin(), scratch.end());
      d.p50 = scratch[rank(0.50) - 1];
      d.p99 = scratch[rank(0.99) - 1];
      return d;
    }
    d.exact = false;
    auto at_rank = [&](std::size_t r) {
      std::uint64_t seen = 0;
      // The leading sample may lie below the range (it is not in it).
      const std::size_t leading_bucket = leading >= 0 ? bucket_of(leading) : SIZE_MAX;
      if (leading_bucket < buckets_->first && r == 1) return std::min(midpoint(leading_bucket), d.max);
      if (leading_bucket < buckets_->first) seen = 1;
      for (std::size_t i = 0; i < buckets_->counts.size(); ++i) {
        const std::size_t b = buckets_->first + i;
        seen += buckets_->counts[i] + (leading_bucket == b ? 1 : 0);
        if (seen >= r) return std::min(midpoint(b), d.max);
      }
      return d.max;
    };
    d.p50 = at_rank(rank(0.50));
    d.p99 = at_rank(rank(0.99));
    return d;
  }

 private:
  static constexpr unsigned sub_bits = 6;  // 64 sub-buckets per power of two
  static std::size_t bucket_of(std::int64_t us) noexcept {
    const auto v = static_cast<std::uint64_t>(std::max<std::int64_t>(us, 0));
    if (v < (1u << sub_bits)) return static_cast<std::size_t>(v);
    const unsigned e = 63u - static_cast<unsigned>(__builtin_clzll(v));  // >= sub_bits
    const std::uint64_t sub = (v >> (e - sub_bits)) & ((1u << sub_bits) - 1);
    return static_cast<std::size_t>(((e - sub_bits + 1) << sub_bits) + sub);
  }
  static std::int64_t midpoint(std::size_t b) noexcept {
    if (b < (1u << sub_bits)) return static_cast<std::int64_t>(b);
    const unsigned e = static_cast<unsigned>(b >> sub_bits) + sub_bits - 1;
    const std::uint64_t sub = b & ((1u << sub_bits) - 1);
    const std::uint64_t low = (std::uint64_t{1} << e) + (sub << (e - sub_bits));
    return static_cast<std::int64_t>(low + (std::uint64_t{1} << (e - sub_bits)) / 2);
  }
  void count_in_bucket(std::int64_t us) {
    const std::size_t b = bucket_of(us);
    std::vector<std::uint32_t>& counts = buckets_->counts;
    if (b < buckets_->first) {
      counts.insert(counts.begin(), buckets_->first - b, 0);
      buckets_->first = b;
    } else if (b - buckets_->first >= counts.size()) {
      counts.resize(b - buckets_->first + 1, 0);
    }
    ++counts[b - buckets_->first];
  }

  // The buckets from the lowest one counted to the highest: a lock's durations span a
  // few powers of two (holds of 1-100 ms: 7), so counting from bucket 0 would keep
  // more empty buckets below them (640 for 1 ms) than buckets in use, and a lock's
  // histogram would weigh more than the 256 exact samples it replaces.
  struct bucket_range {
    std::size_t first = 0;
    std::vector<std::uint32_t> counts;
  };

  std::uint64_t count_ = 0;
  std::int64_t max_ = -1;
  std::vector<std::int64_t> exact_;
  std::unique_ptr<bucket_range> buckets_;  // null while exact
};

}  // namespace lockscope::locks::timeline_detail
