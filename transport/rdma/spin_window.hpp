#pragma once
// spin_window: how long cq_reactor's adaptive mode polls after the last completion before it
// sleeps, learnt from the gaps between completions: a gap no longer than the maximum (a spin that
// long would have caught it) doubles the window, up to the maximum; a longer gap sets it back to
// the base. Pure. Layer: transport (rdma). Threading: one reactor's.

#include <algorithm>
#include <chrono>

namespace rdmarpc::transport::rdma {

class spin_window {
 public:
  using duration = std::chrono::microseconds;
  // Longest window: beyond it a thread spins on nothing for longer than any gap worth bridging.
  static constexpr duration kLongest = std::chrono::seconds(1);

  // Both clamped to [0, kLongest]; max below base is taken as base (a fixed window).
  spin_window(duration base, duration max) noexcept
      : base_(std::clamp(base, duration::zero(), kLongest)),
        max_(std::clamp(max, base_, kLongest)),
        window_(base_) {}

  // A completion came `gap` after the one before it, after a sleep (a gap the spin bridged needs
  // no change).
  void after_gap(std::chrono::steady_clock::duration gap) noexcept {
    window_ = gap > max_ ? base_ : std::min(max_, std::max(window_ * 2, duration{1}));
  }

  // How long to keep polling after a completion.
  duration window() const noexcept { return window_; }

 private:
  duration base_;
  duration max_;
  duration window_;
};

}  // namespace rdmarpc::transport::rdma
