#pragma once
// Round-trip time statistics of a ping-pong run (min, median, p99, max, mean).
// Layer: examples. Threading: pure function over plain values.

#include <cstddef>
#include <string>
#include <vector>

namespace cm_pingpong {

struct rtt_summary {
  std::size_t count = 0;
  double min_us = 0;
  double median_us = 0;
  double p99_us = 0;  // nearest-rank percentile
  double max_us = 0;
  double mean_us = 0;
};

// samples_us is taken by value because it is sorted. An empty input gives count == 0.
rtt_summary summarize(std::vector<double> samples_us);

std::string to_string(const rtt_summary& s);

}  // namespace cm_pingpong
