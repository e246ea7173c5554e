#include "cm_pingpong/rtt_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace cm_pingpong {
namespace {

// Nearest-rank percentile of sorted, non-empty samples: the smallest value with at least p% of
// the samples at or below it.
double nearest_rank(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

rtt_summary summarize(std::vector<double> samples_us) {
  rtt_summary s;
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  s.count = samples_us.size();
  s.min_us = samples_us.front();
  s.max_us = samples_us.back();
  s.median_us = nearest_rank(samples_us, 50);
  s.p99_us = nearest_rank(samples_us, 99);
  s.mean_us = std::accumulate(samples_us.begin(), samples_us.end(), 0.0) / static_cast<double>(s.count);
  return s;
}

std::string to_string(const rtt_summary& s) {
  char line[160];
  std::snprintf(line, sizeof line, "n=%zu min=%.1f median=%.1f p99=%.1f max=%.1f mean=%.1f us", s.count,
                s.min_us, s.median_us, s.p99_us, s.max_us, s.mean_us);
  return line;
}

}  // namespace cm_pingpong
