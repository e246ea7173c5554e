#pragma once
// spin_window: how long cq_reactor's adaptive mode keeps polling after the last completion before
// it arms the CQ and sleeps. It starts at the base spin and learns from each sleep: a sleep no
// longer than the maximum (a longer spin would have caught the completion that ended it) doubles
// the window, up to the maximum; a longer one (the connection went quiet: no spin would have
// helped) sets it back to the base. So a connection under load stops paying a wake-up per gap in
// its traffic, while an idle one (heartbeats every few hundred ms) spins only the base after each
// exchange. The price: completions less than the maximum apart keep a thread polling.
// Pure: no clock of its own. Layer: transport (rdma). Threading: one reactor's, no locking.

#include <algorithm>
#include <chrono>

namespace rdmarpc::transport::rdma {

class spin_window {
 public:
  using duration = std::chrono::microseconds;

  // max below base is taken as base (a fixed window).
  spin_window(duration base, duration max) noexcept
      : base_(base), max_(std::max(base, max)), window_(base_) {}

  // The CQ woke us after sleeping `slept` (from the arm to the wake-up).
  void woke_after(std::chrono::steady_clock::duration slept) noexcept {
    if (slept > max_) {
      window_ = base_;
    } else {
      window_ = std::min(max_, std::max(window_ * 2, duration{1}));
    }
  }

  // How long to keep polling after a completion.
  duration window() const noexcept { return window_; }

 private:
  duration base_;
  duration max_;
  duration window_;
};

}  // namespace rdmarpc::transport::rdma
