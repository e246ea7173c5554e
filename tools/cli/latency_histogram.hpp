#pragma once
// latency_histogram: the bench command's record of call latencies. Log-linear buckets (64 per
// power of two, under 1.6 % apart) over nanoseconds, so percentiles are close without keeping every
// sample; plus the coarse bars of the printed chart. Layer: tools/cli. Threading: one thread.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmarpc::cli {

class latency_histogram {
 public:
  latency_histogram();

  void record(std::uint64_t nanoseconds);

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept {
    return count_ == 0 ? 0 : static_cast<double>(sum_) / static_cast<double>(count_);
  }
  // The latency at quantile q (0..1): within one bucket of the exact value, never above max().
  std::uint64_t percentile(double q) const;

  struct bar {
    std::uint64_t from_ns, to_ns;  // [from, to]
    std::uint64_t count;
  };
  // About `n` bars from min() to max(): log-spaced when max/min is large, evenly spaced otherwise.
  std::vector<bar> bars(std::size_t n) const;

 private:
  static std::size_t index_of(std::uint64_t v) noexcept;
  static std::uint64_t upper_of(std::size_t index) noexcept;

  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0, min_ = 0, max_ = 0, sum_ = 0;
};

}  // namespace rdmarpc::cli
