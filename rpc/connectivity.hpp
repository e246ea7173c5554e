#pragma once
// A channel's connectivity: the states it reports (channel_state, as gRPC's), and the pure pieces
// of its reconnect policy: reconnect_backoff (exponential, with jitter) and aggregate_state (one
// state for a channel of many endpoints). No I/O, no clock, no randomness of their own: tests
// drive every transition by hand. Layer: rpc. Threading: plain values.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

namespace rdmarpc {

enum class channel_state : std::uint8_t {
  idle,               // no connection and none wanted: the next call (or state(true)) connects
  connecting,         // a connection attempt (address resolution, connect, handshake) runs
  ready,              // connected: calls go out at once
  transient_failure,  // the last attempt failed; the next one starts after a backoff
  shutdown,           // close() was called, or a channel over a given connection lost it
};

constexpr std::string_view to_string(channel_state s) noexcept {
  switch (s) {
    case channel_state::idle: return "idle";
    case channel_state::connecting: return "connecting";
    case channel_state::ready: return "ready";
    case channel_state::transient_failure: return "transient_failure";
    case channel_state::shutdown: return "shutdown";
  }
  return "unknown";
}

// How long a channel waits between failed connection attempts to one endpoint. gRPC's shape
// (connection-backoff.md) with datacenter-sized values: gRPC starts at 1 s and caps at 120 s,
// tuned for the internet; inside a datacenter a restarted server is back within a second or two,
// and a channel should find it then, not minutes later.
struct reconnect_backoff_options {
  std::chrono::steady_clock::duration initial = std::chrono::milliseconds(100);
  double multiplier = 1.6;
  double jitter = 0.2;  // each delay is spread uniformly over ±jitter of itself
  std::chrono::steady_clock::duration max = std::chrono::seconds(10);
};

class reconnect_backoff {
 public:
  using clock = std::chrono::steady_clock;

  explicit reconnect_backoff(const reconnect_backoff_options& o = {}) noexcept : options_(o) { reset(); }

  // The delay before the next attempt, after a failed one. `unit_random` in [0, 1) places it
  // within the jitter (the caller owns the random generator, so tests choose it). Each call grows
  // the base delay by the multiplier, up to max.
  clock::duration next(double unit_random) noexcept {
    const double base = current_;
    current_ = std::min(current_ * std::max(options_.multiplier, 1.0), max_count());
    const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
    const double spread = base * jitter * (2.0 * std::clamp(unit_random, 0.0, 1.0) - 1.0);
    return clock::duration(static_cast<clock::rep>(std::max(0.0, base + spread)));
  }

  // A connection succeeded: the next failure starts from `initial` again.
  void reset() noexcept {
    current_ = std::min(static_cast<double>(std::max(options_.initial, clock::duration::zero()).count()),
                        max_count());
  }

 private:
  double max_count() const noexcept {
    return static_cast<double>(std::max(options_.max, clock::duration::zero()).count());
  }

  reconnect_backoff_options options_;
  double current_ = 0;  // in clock ticks
};

// One state for a channel over several endpoints, as gRPC aggregates its subchannels: ready if any
// endpoint is, else connecting if any is, else idle if any is, else transient_failure (every one
// failed). An empty list (nothing resolved yet) is idle.
constexpr channel_state aggregate_state(std::span<const channel_state> endpoints) noexcept {
  bool connecting = false, idle = false, failed = false;
  for (const channel_state s : endpoints) {
    switch (s) {
      case channel_state::ready: return channel_state::ready;
      case channel_state::connecting: connecting = true; break;
      case channel_state::idle: idle = true; break;
      case channel_state::transient_failure: failed = true; break;
      case channel_state::shutdown: break;
    }
  }
  if (connecting) return channel_state::connecting;
  if (idle || !failed) return channel_state::idle;
  return channel_state::transient_failure;
}

}  // namespace rdmarpc
