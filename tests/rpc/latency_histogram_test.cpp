// latency_histogram (pure): bucket boundaries, percentiles within a bucket's half-width, merge.
#include "rpc/latency_histogram.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using rdmarpc::latency_histogram;
using namespace std::chrono_literals;

TEST_CASE("latency_histogram: every value falls in the bucket whose bounds hold it", "[histogram]") {
  for (std::uint64_t us :
       {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 17ull, 100ull, 1000ull, 123456ull, (1ull << 32) + 5}) {
    CAPTURE(us);
    const auto b = latency_histogram::bucket_of(us);
    CHECK(latency_histogram::lower_us(b) <= us);
    CHECK(us < latency_histogram::upper_us(b));
    // Each bucket is at most 1/8 of its lower bound wide (from 8 µs on).
    if (us >= 8)
      CHECK(latency_histogram::upper_us(b) - latency_histogram::lower_us(b) <=
            latency_histogram::lower_us(b) / 8);
  }
  // Buckets tile the line: each starts where the previous ended.
  for (std::size_t b = 0; b + 1 < latency_histogram::kBuckets; ++b)
    CHECK(latency_histogram::upper_us(b) == latency_histogram::lower_us(b + 1));
  // Beyond the last bucket's start: the last bucket.
  CHECK(latency_histogram::bucket_of(~0ull) == latency_histogram::kBuckets - 1);
}

TEST_CASE("latency_histogram: percentiles are within 1/16 of the recorded values", "[histogram]") {
  latency_histogram h;
  // 1..1000 µs, one each: p50 ~ 500, p99 ~ 990.
  for (int us = 1; us <= 1000; ++us) h.record(std::chrono::microseconds(us));
  const auto s = h.take();
  CHECK(s.count == 1000);
  CHECK(s.sum_us == 500500);
  for (double q : {0.5, 0.9, 0.99}) {
    CAPTURE(q);
    const double want = q * 1000;
    CHECK(std::abs(s.percentile_us(q) - want) <= want / 16 + 1);
  }
  CHECK(s.percentile_us(0) >= 1);
  CHECK(s.percentile_us(1) >= 937);  // the last bucket [960, 1024) holds 1000
  latency_histogram::snapshot empty;
  CHECK(empty.percentile_us(0.5) == 0);
  auto merged = s;
  merged.merge(s);
  CHECK(merged.count == 2000);
  CHECK(std::abs(merged.percentile_us(0.5) - 500) <= 500.0 / 16 + 1);
  h.record(-5us);  // a clock going backwards counts as 0
  CHECK(h.take().counts[0] == 1);
}
