#pragma once
// rdmarpc::bench::latency_histogram: fixed-size log-linear (HDR-style) histogram of latencies in
// nanoseconds, with percentiles. Layer: bench (no library dependency).
// Threading: not synchronized; one histogram per thread, merge() them afterwards.
// record() never allocates: every bucket exists from construction on.

#include <array>
#include <cstddef>
#include <cstdint>

namespace rdmarpc::bench {

class latency_histogram {
 public:
  // 2^kSubBucketBits buckets per power of two: a value lands in a bucket at most 1/128 of it wide,
  // so a reported percentile is within 0.4 % of the true one (we report the bucket's middle).
  static constexpr unsigned kSubBucketBits = 7;
  static constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBucketBits;
  // Values up to 2^40 ns (~18 min) are bucketed; larger ones share the last bucket (max stays exact).
  static constexpr unsigned kMaxValueBits = 40;
  static constexpr std::size_t kBucketCount = kSubBuckets * (kMaxValueBits - kSubBucketBits) + kSubBuckets;

  void record(std::uint64_t nanoseconds) noexcept;
  void merge(const latency_histogram& other) noexcept;
  void reset() noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept;

  // The value below which `percent` % of the recorded values lie (0 < percent <= 100), as the
  // middle of its bucket clamped to [min, max]. 100 gives max() exactly; an empty histogram 0.
  std::uint64_t percentile(double percent) const noexcept;

  // Bucket arithmetic, public so that tests can check the layout.
  static std::size_t bucket_index(std::uint64_t value) noexcept;
  static std::uint64_t bucket_lowest(std::size_t index) noexcept;
  static std::uint64_t bucket_highest(std::size_t index) noexcept;

 private:
  std::array<std::uint64_t, kBucketCount> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  // For mean(): exact up to 2^64 ns (584 years of summed latency). An integer, not a long double:
  // record() runs inside every measured call, and x87 arithmetic is slow under the VM's emulation
  // (~50 ns an add under TCG, where an integer add takes ~1).
  std::uint64_t sum_ = 0;
};

}  // namespace rdmarpc::bench
