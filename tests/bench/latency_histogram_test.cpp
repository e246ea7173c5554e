#include "bench/common/latency_histogram.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

using rdmarpc::bench::latency_histogram;

namespace {

// The exact p-th percentile by the same rank rule (ceil(p/100 * n)-th smallest).
std::uint64_t exact_percentile(std::vector<std::uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

}  // namespace

TEST_CASE("bucket layout is contiguous and each bucket holds exactly its own range", "[histogram]") {
  for (std::size_t i = 0; i + 1 < latency_histogram::kBucketCount; ++i) {
    const auto lo = latency_histogram::bucket_lowest(i);
    const auto hi = latency_histogram::bucket_highest(i);
    REQUIRE(lo <= hi);
    REQUIRE(latency_histogram::bucket_lowest(i + 1) == hi + 1);
    REQUIRE(latency_histogram::bucket_index(lo) == i);
    REQUIRE(latency_histogram::bucket_index(hi) == i);
  }
  // A bucket is never wider than 1/128 of the values it holds.
  for (std::size_t i = 2 * latency_histogram::kSubBuckets; i + 1 < latency_histogram::kBucketCount; ++i) {
    const auto width = latency_histogram::bucket_highest(i) - latency_histogram::bucket_lowest(i) + 1;
    REQUIRE(width * latency_histogram::kSubBuckets <= latency_histogram::bucket_lowest(i));
  }
}

TEST_CASE("small values are exact, huge ones saturate the last bucket", "[histogram]") {
  for (std::uint64_t v = 0; v < 256; ++v) REQUIRE(latency_histogram::bucket_index(v) == v);
  REQUIRE(latency_histogram::bucket_index(UINT64_MAX) == latency_histogram::kBucketCount - 1);
  REQUIRE(latency_histogram::bucket_index(std::uint64_t{1} << 45) == latency_histogram::kBucketCount - 1);

  auto h = std::make_unique<latency_histogram>();
  h->record(std::uint64_t{1} << 50);
  h->record(7);
  REQUIRE(h->count() == 2);
  REQUIRE(h->min() == 7);
  REQUIRE(h->max() == std::uint64_t{1} << 50);
  REQUIRE(h->percentile(50) == 7);
  REQUIRE(h->percentile(100) == std::uint64_t{1} << 50);
  REQUIRE(h->percentile(99.9) == std::uint64_t{1} << 50);  // clamped to max, not the bucket's middle
}

TEST_CASE("an empty histogram reports zeros", "[histogram]") {
  auto h = std::make_unique<latency_histogram>();
  REQUIRE(h->count() == 0);
  REQUIRE(h->min() == 0);
  REQUIRE(h->max() == 0);
  REQUIRE(h->mean() == 0.0);
  REQUIRE(h->percentile(50) == 0);
  REQUIRE(h->percentile(100) == 0);
}

TEST_CASE("percentiles of 1..1000 us follow the rank rule within bucket precision", "[histogram]") {
  auto h = std::make_unique<latency_histogram>();
  for (std::uint64_t us = 1; us <= 1000; ++us) h->record(us * 1000);
  REQUIRE(h->count() == 1000);
  REQUIRE(h->min() == 1000);
  REQUIRE(h->max() == 1'000'000);
  REQUIRE(h->mean() == Approx(500'500.0));
  const struct {
    double p;
    std::uint64_t exact;
  } cases[] = {{50, 500'000}, {90, 900'000}, {99, 990'000}, {99.9, 999'000}, {100, 1'000'000}, {0.05, 1000}};
  for (const auto& c : cases) {
    INFO("p" << c.p);
    REQUIRE(static_cast<double>(h->percentile(c.p)) ==
            Approx(static_cast<double>(c.exact)).epsilon(1.0 / 256));
  }
}

TEST_CASE("random samples: every percentile within 1/256 of the exact one", "[histogram]") {
  std::mt19937_64 rng(12345);
  // Log-normal-ish latencies from ~1 us to ~100 ms, like a real run with a tail.
  std::lognormal_distribution<double> dist(10.0, 1.5);
  std::vector<std::uint64_t> values;
  auto h = std::make_unique<latency_histogram>();
  for (int i = 0; i < 100'000; ++i) {
    const auto v = static_cast<std::uint64_t>(dist(rng));
    values.push_back(v);
    h->record(v);
  }
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    INFO("p" << p);
    const auto exact = static_cast<double>(exact_percentile(values, p));
    REQUIRE(static_cast<double>(h->percentile(p)) == Approx(exact).epsilon(1.0 / 256).margin(1));
  }
}

TEST_CASE("merge equals recording everything into one histogram - reset empties", "[histogram]") {
  auto a = std::make_unique<latency_histogram>();
  auto b = std::make_unique<latency_histogram>();
  auto all = std::make_unique<latency_histogram>();
  for (std::uint64_t v = 100; v < 5000; v += 7) {
    a->record(v);
    all->record(v);
  }
  for (std::uint64_t v = 3'000'000; v < 9'000'000; v += 1013) {
    b->record(v);
    all->record(v);
  }
  a->merge(*b);
  REQUIRE(a->count() == all->count());
  REQUIRE(a->min() == all->min());
  REQUIRE(a->max() == all->max());
  REQUIRE(a->mean() == Approx(all->mean()));
  for (double p : {10.0, 50.0, 90.0, 99.0, 99.9}) REQUIRE(a->percentile(p) == all->percentile(p));
  a->reset();
  REQUIRE(a->count() == 0);
  REQUIRE(a->percentile(50) == 0);
}
