#include "bench/common/closed_loop.hpp"

namespace rdmarpc::bench {

void closed_loop::on_complete(clock::time_point started, clock::time_point now, bool ok) noexcept {
  if (outstanding_ > 0) --outstanding_;
  if (!measuring_) {
    ++warmup_done_;
    if (warmup_done_ >= spec_.warmup_calls && now - start_ >= spec_.warmup) {
      measuring_ = true;
      measure_start_ = now;
    }
    return;
  }
  if (stopping_) return;
  if (ok) {
    ++completed_;
    histogram_.record(static_cast<std::uint64_t>(std::chrono::nanoseconds(now - started).count()));
  } else {
    ++errors_;
  }
  const bool done =
      spec_.calls > 0 ? completed_ + errors_ >= spec_.calls : now - measure_start_ >= spec_.duration;
  if (done) {
    stopping_ = true;
    measure_end_ = now;
  }
}

std::chrono::nanoseconds closed_loop::measured_time(clock::time_point now) const noexcept {
  if (!measuring_) return std::chrono::nanoseconds(0);
  return (stopping_ ? measure_end_ : now) - measure_start_;
}

closed_loop::clock::time_point closed_loop::give_up_at() const noexcept {
  // Generous: TCG VMs stall for milliseconds, 1 MiB calls over rxe take tens of ms each.
  auto budget = spec_.warmup + spec_.duration + std::chrono::seconds(30);
  if (spec_.calls > 0) budget += std::chrono::milliseconds(100) * static_cast<std::int64_t>(spec_.calls);
  return start_ + budget;
}

}  // namespace rdmarpc::bench
