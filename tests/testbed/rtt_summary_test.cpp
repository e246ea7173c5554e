// Unit tests of cm_pingpong's round-trip statistics (examples/cm_pingpong/rtt_summary.hpp).
#include "cm_pingpong/rtt_summary.hpp"

#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

using cm_pingpong::summarize;

TEST_CASE("cm_pingpong rtt: no samples give an empty summary", "[testbed][rtt]") {
  const auto s = summarize({});
  CHECK(s.count == 0);
  CHECK(s.max_us == 0);
}

TEST_CASE("cm_pingpong rtt: nearest-rank percentiles of 1..100 in any order", "[testbed][rtt]") {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);
  std::reverse(v.begin(), v.end());  // summarize must sort
  const auto s = summarize(v);
  CHECK(s.count == 100);
  CHECK(s.min_us == 1.0);
  CHECK(s.median_us == 50.0);
  CHECK(s.p99_us == 99.0);
  CHECK(s.max_us == 100.0);
  CHECK(s.mean_us == Approx(50.5));
}

TEST_CASE("cm_pingpong rtt: one outlier shows in max and p99 of a small run, not in the median",
          "[testbed][rtt]") {
  std::vector<double> v(10, 100.0);
  v[3] = 4000.0;  // a 4 ms tick stall, as seen under TCG
  const auto s = summarize(v);
  CHECK(s.median_us == 100.0);
  CHECK(s.p99_us == 4000.0);  // ceil(0.99 * 10) = 10th of 10
  CHECK(s.max_us == 4000.0);
  CHECK(s.mean_us == Approx(490.0));
  CHECK(cm_pingpong::to_string(s).find("n=10 ") == 0);
}
