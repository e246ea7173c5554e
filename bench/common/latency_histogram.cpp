// Bucket layout: values below 2 * kSubBuckets get one bucket each (exact). Above, a value with its
// highest set bit at position m is shifted right by s = m - kSubBucketBits, leaving a "top" in
// [kSubBuckets, 2 * kSubBuckets); its bucket is kSubBuckets * s + top, so consecutive powers of two
// each get kSubBuckets buckets and the indices are contiguous.
#include "bench/common/latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace rdmarpc::bench {

std::size_t latency_histogram::bucket_index(std::uint64_t value) noexcept {
  if (value < 2 * kSubBuckets) return static_cast<std::size_t>(value);
  const unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(value));
  if (msb >= kMaxValueBits) return kBucketCount - 1;
  const unsigned shift = msb - kSubBucketBits;
  return static_cast<std::size_t>(kSubBuckets * shift + (value >> shift));
}

std::uint64_t latency_histogram::bucket_lowest(std::size_t index) noexcept {
  if (index < 2 * kSubBuckets) return index;
  const std::uint64_t shift = index / kSubBuckets - 1;
  const std::uint64_t top = index - kSubBuckets * shift;
  return top << shift;
}

std::uint64_t latency_histogram::bucket_highest(std::size_t index) noexcept {
  if (index + 1 >= kBucketCount) return UINT64_MAX;
  return bucket_lowest(index + 1) - 1;
}

void latency_histogram::record(std::uint64_t nanoseconds) noexcept {
  ++counts_[bucket_index(nanoseconds)];
  ++count_;
  min_ = std::min(min_, nanoseconds);
  max_ = std::max(max_, nanoseconds);
  sum_ += nanoseconds;
}

void latency_histogram::merge(const latency_histogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void latency_histogram::reset() noexcept {
  *this = latency_histogram{};
}

double latency_histogram::mean() const noexcept {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
}

std::uint64_t latency_histogram::percentile(double percent) const noexcept {
  if (count_ == 0) return 0;
  if (percent >= 100.0) return max_;
  // The rank-th smallest value (1-based), rank = ceil(p/100 * count), at least 1.
  const auto wanted = static_cast<std::uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(count_)));
  const std::uint64_t rank = std::clamp<std::uint64_t>(wanted, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const std::uint64_t lo = bucket_lowest(i);
      const std::uint64_t hi = bucket_highest(i);
      const std::uint64_t mid = lo + (hi - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace rdmarpc::bench
