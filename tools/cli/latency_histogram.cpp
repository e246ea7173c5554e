#include "latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace rdmarpc::cli {

namespace {
constexpr unsigned kSubBits = 6;  // 64 buckets per power of two
constexpr std::size_t kSub = std::size_t{1} << kSubBits;
constexpr std::size_t kBuckets = kSub + (64 - kSubBits) * kSub;
}  // namespace

latency_histogram::latency_histogram() : buckets_(kBuckets) {}

std::size_t latency_histogram::index_of(std::uint64_t v) noexcept {
  if (v < kSub) return static_cast<std::size_t>(v);
  const unsigned exponent = static_cast<unsigned>(std::bit_width(v)) - 1;  // >= kSubBits
  const unsigned shift = exponent - kSubBits;
  const std::size_t mantissa = static_cast<std::size_t>(v >> shift) - kSub;  // 0..63
  return kSub + shift * kSub + mantissa;
}

std::uint64_t latency_histogram::upper_of(std::size_t index) noexcept {
  if (index < kSub) return index;
  const std::size_t shift = (index - kSub) / kSub;
  const std::size_t mantissa = (index - kSub) % kSub;
  return ((static_cast<std::uint64_t>(kSub + mantissa + 1)) << shift) - 1;
}

void latency_histogram::record(std::uint64_t v) {
  ++buckets_[index_of(v)];
  min_ = count_ == 0 ? v : std::min(min_, v);
  max_ = std::max(max_, v);
  ++count_;
  sum_ += v;
}

std::uint64_t latency_histogram::percentile(double q) const {
  if (count_ == 0) return 0;
  const auto rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(upper_of(i), min_, max_);
  }
  return max_;
}

std::vector<latency_histogram::bar> latency_histogram::bars(std::size_t n) const {
  std::vector<bar> out;
  if (count_ == 0 || n == 0) return out;
  const double lo = static_cast<double>(std::max<std::uint64_t>(min_, 1)), hi = static_cast<double>(max_);
  const bool log_spaced = hi / lo > 4;
  std::uint64_t from = min_;
  for (std::size_t b = 0; b < n && from <= max_; ++b) {
    const double f = static_cast<double>(b + 1) / static_cast<double>(n);
    auto to = b + 1 == n
                  ? max_
                  : static_cast<std::uint64_t>(log_spaced ? lo * std::pow(hi / lo, f) : lo + (hi - lo) * f);
    to = std::max(to, from);
    out.push_back({from, to, 0});
    from = to + 1;
  }
  // Each fine bucket goes to the bar holding its upper bound (within 1.6 %).
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i] == 0) continue;
    const std::uint64_t v = std::clamp(upper_of(i), min_, max_);
    auto it = std::find_if(out.begin(), out.end(), [v](const bar& x) { return v <= x.to_ns; });
    if (it == out.end()) it = out.end() - 1;
    it->count += buckets_[i];
  }
  return out;
}

}  // namespace rdmarpc::cli
