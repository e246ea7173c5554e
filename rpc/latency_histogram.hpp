#pragma once
// latency_histogram: call latencies in log-linear buckets (8 per power of two of microseconds, so a
// percentile read from it is within 1/16 of the truth), recorded lock-free from many threads, and
// its snapshot with count, sum and percentiles. Pure: no I/O. Layer: rpc. Threading: record() from
// any thread (relaxed atomics); snapshot() from any thread (a consistent-enough copy: counts
// recorded meanwhile may or may not be in it).

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace rdmarpc {

class latency_histogram {
 public:
  // Buckets 0..7 hold 0..7 µs one each; from 8 µs on, each power of two is split in 8 (bucket
  // 8 + 8k + s holds [(8+s) << k, (9+s) << k) µs). The last holds everything from about 2.3 hours.
  static constexpr std::size_t kPowers = 30;
  static constexpr std::size_t kBuckets = 8 + 8 * kPowers;

  static constexpr std::size_t bucket_of(std::uint64_t us) noexcept {
    if (us < 8) return static_cast<std::size_t>(us);
    const auto shift = static_cast<std::size_t>(std::bit_width(us)) - 4;
    const std::size_t b = 8 + 8 * shift + static_cast<std::size_t>((us >> shift) & 7);
    return b < kBuckets ? b : kBuckets - 1;
  }
  // The smallest latency bucket b holds, in µs.
  static constexpr std::uint64_t lower_us(std::size_t b) noexcept {
    if (b < 8) return b;
    const std::size_t shift = (b - 8) / 8;
    return (8 + (b - 8) % 8) << shift;
  }
  // The first latency above bucket b, in µs (its exclusive upper bound).
  static constexpr std::uint64_t upper_us(std::size_t b) noexcept { return lower_us(b + 1); }

  void record(std::chrono::steady_clock::duration latency) noexcept {
    const auto us = static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(latency).count()));
    counts_[bucket_of(us)].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(us, std::memory_order_relaxed);
  }

  struct snapshot {
    std::array<std::uint64_t, kBuckets> counts{};
    std::uint64_t count = 0;
    std::uint64_t sum_us = 0;

    // The latency below which a fraction q (0..1) of the calls fell, in µs: the middle of the
    // bucket that holds it. 0 when there are none.
    double percentile_us(double q) const noexcept;
    // Adds another snapshot's counts (e.g. several methods' into one).
    void merge(const snapshot& other) noexcept;
  };

  snapshot take() const noexcept {
    snapshot s;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      s.counts[b] = counts_[b].load(std::memory_order_relaxed);
      s.count += s.counts[b];
    }
    s.sum_us = sum_us_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> counts_{};
  std::atomic<std::uint64_t> sum_us_{0};
};

inline double latency_histogram::snapshot::percentile_us(double q) const noexcept {
  if (count == 0) return 0;
  q = q < 0 ? 0 : (q > 1 ? 1 : q);
  // The rank of the call asked for, 1-based: at least the first, at most the last.
  const auto rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(q * static_cast<double>(count) + 0.5));
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < kBuckets; ++b) {
    seen += counts[b];
    if (seen >= rank) return b < 8 ? static_cast<double>(b) : (lower_us(b) + upper_us(b)) / 2.0;
  }
  return static_cast<double>(lower_us(kBuckets - 1));
}

inline void latency_histogram::snapshot::merge(const snapshot& other) noexcept {
  for (std::size_t b = 0; b < kBuckets; ++b) counts[b] += other.counts[b];
  count += other.count;
  sum_us += other.sum_us;
}

}  // namespace rdmarpc
