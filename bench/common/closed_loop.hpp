#pragma once
// rdmarpc::bench::closed_loop: the load pattern every echo client runs for one (payload,
// concurrency) point: keep N calls in flight, warm up, then measure for a duration or a call count.
// Layer: bench, transport-neutral (rdmarpc and gRPC clients drive it the same way).
// Threading: not synchronized; drive it from the one thread that completes the calls.

#include <chrono>
#include <cstdint>

#include "bench/common/latency_histogram.hpp"

namespace rdmarpc::bench {

struct load_spec {
  // Warm-up ends once both are reached. A call-count warm-up makes runs repeatable (callgrind).
  std::chrono::nanoseconds warmup{std::chrono::milliseconds(500)};
  std::uint64_t warmup_calls = 0;
  // Measure for `duration`, or for exactly `calls` calls when calls > 0.
  std::chrono::nanoseconds duration{std::chrono::seconds(2)};
  std::uint64_t calls = 0;
};

class closed_loop {
 public:
  using clock = std::chrono::steady_clock;

  closed_loop(const load_spec& spec, clock::time_point start) noexcept : spec_(spec), start_(start) {}

  // Ask before starting a call; then call on_start() when it has been started.
  bool may_start() const noexcept {
    if (stopping_) return false;
    // In call-count mode the calls still in flight will complete inside the window too.
    return !(measuring_ && spec_.calls > 0 && completed_ + errors_ + outstanding_ >= spec_.calls);
  }
  void on_start() noexcept { ++outstanding_; }
  // A call started at `started` finished at `now`. Every call that completes inside the measured
  // window counts, including those started during warm-up: with slow calls (1 MiB x 64 in flight
  // take seconds on Soft-RoCE) nearly every completion in a short window started before it.
  void on_complete(clock::time_point started, clock::time_point now, bool ok) noexcept;

  // Measuring is over and every call has come back: the point's numbers are final.
  bool finished() const noexcept { return stopping_ && outstanding_ == 0; }
  bool measuring() const noexcept { return measuring_; }

  const latency_histogram& latency() const noexcept { return histogram_; }
  std::uint64_t completed() const noexcept { return completed_; }  // measured calls that succeeded
  std::uint64_t errors() const noexcept { return errors_; }        // measured calls that failed
  std::uint64_t outstanding() const noexcept { return outstanding_; }
  // Length of the measured window (so far, if still measuring).
  std::chrono::nanoseconds measured_time(clock::time_point now) const noexcept;
  // A point that makes no progress until then is stuck (server gone): callers give up.
  clock::time_point give_up_at() const noexcept;

 private:
  load_spec spec_;
  clock::time_point start_;
  clock::time_point measure_start_{};
  clock::time_point measure_end_{};
  bool measuring_ = false;
  bool stopping_ = false;
  std::uint64_t warmup_done_ = 0;
  std::uint64_t outstanding_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t errors_ = 0;
  latency_histogram histogram_;
};

}  // namespace rdmarpc::bench
