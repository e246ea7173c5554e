#include "bench/common/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace rdmarpc::bench {

progress::progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(STDERR_FILENO) == 1) {}

void progress::begin(std::string label, closed_loop::clock::time_point now) {
  label_ = std::move(label);
  begin_ = now;
  next_draw_ = now;
}

void progress::tick(const closed_loop& loop, closed_loop::clock::time_point now) {
  if (!tty_ || now < next_draw_) return;
  next_draw_ = now + std::chrono::milliseconds(200);
  const double elapsed = std::chrono::duration<double>(now - begin_).count();
  if (!loop.measuring()) {
    std::fprintf(stderr, "\r\033[K%s  warming up %.1f s", label_.c_str(), elapsed);
  } else {
    const double measured = std::chrono::duration<double>(loop.measured_time(now)).count();
    const double rate = measured > 0 ? static_cast<double>(loop.completed()) / measured : 0;
    std::fprintf(stderr, "\r\033[K%s  %.1f s  %llu calls  %.0f calls/s  p50 %.1f us", label_.c_str(), elapsed,
                 static_cast<unsigned long long>(loop.completed()), rate,
                 static_cast<double>(loop.latency().percentile(50)) / 1e3);
  }
  std::fflush(stderr);
  line_open_ = true;
}

void progress::end(const bench_result& r) {
  if (!enabled_) return;
  std::fprintf(stderr, "%s%s  %.0f calls/s  %.2f MB/s  p50 %.1f us  p99 %.1f us  errors %llu\n",
               line_open_ ? "\r\033[K" : "", label_.c_str(), r.calls_per_s, r.mb_per_s, r.p50_us, r.p99_us,
               static_cast<unsigned long long>(r.errors));
  line_open_ = false;
}

void progress::note(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "%s%s\n", line_open_ ? "\r\033[K" : "", text.c_str());
  line_open_ = false;
}

}  // namespace rdmarpc::bench
