#pragma once
// A channel's connectivity: the states it reports (channel_state, as gRPC's), and the pure pieces
// of its reconnect and load-balancing policies: reconnect_backoff (exponential, with jitter),
// aggregate_state (one state for a channel of many endpoints) and load_balancer (which endpoint
// carries a call, which ones connect). No I/O, no clock, no randomness of their own: tests drive
// every transition by hand. Layer: rpc. Threading: plain values (a load_balancer: its channel's
// executor).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
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

// How a channel of several endpoints picks the connection for a call (README, Channels).
enum class load_balancing_policy : std::uint8_t {
  // One connection: to the first endpoint in list order that connects. When it fails, the next
  // one is tried at once; calls stay on whichever connected until it fails.
  pick_first,
  // A connection to every endpoint; each call goes to the next ready one in turn. An endpoint
  // that fails is skipped until it reconnects.
  round_robin,
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
// (state_of(i): endpoint i's state, for i < n.)
template <class StateOf>
constexpr channel_state aggregate_state(std::size_t n, StateOf&& state_of) noexcept {
  bool connecting = false, idle = false, failed = false;
  for (std::size_t i = 0; i < n; ++i) {
    switch (state_of(i)) {
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
constexpr channel_state aggregate_state(std::span<const channel_state> endpoints) noexcept {
  return aggregate_state(endpoints.size(), [endpoints](std::size_t i) { return endpoints[i]; });
}

// One endpoint as the load balancer sees it.
struct endpoint_status {
  channel_state state = channel_state::idle;
  // The server is going away: the connection serves what it carries and takes nothing new. The
  // endpoint counts as idle, but reconnects only after that connection closed.
  bool draining = false;
  bool reserving = false;  // its connection has a wait for send room outstanding

  constexpr bool takes_calls() const noexcept { return state == channel_state::ready && !draining; }
  // What the endpoint counts as in the channel's state.
  constexpr channel_state effective() const noexcept { return draining ? channel_state::idle : state; }
};

// The channel's load-balancing policy over its endpoints (indexes into its list, in order). The
// channel owns the endpoints and hands their statuses in: status_of(e) -> const endpoint_status&,
// for e < n. Only round_robin's turn is state of its own.
class load_balancer {
 public:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  explicit load_balancer(load_balancing_policy policy) noexcept : policy_(policy) {}

  // The endpoint for the next call, or none. need_room: not one whose connection waits for send
  // room already (pick_first uses one endpoint only: none then, rather than another).
  template <class StatusOf>
  std::size_t pick(std::size_t n, StatusOf&& status_of, bool need_room) noexcept {
    if (policy_ == load_balancing_policy::pick_first) {
      for (std::size_t e = 0; e < n; ++e) {
        const endpoint_status& s = status_of(e);
        if (s.takes_calls()) return need_room && s.reserving ? none : e;
      }
      return none;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t e = (next_ + i) % n;
      const endpoint_status& s = status_of(e);
      if (s.takes_calls() && !(need_room && s.reserving)) {
        next_ = (e + 1) % n;
        return e;
      }
    }
    return none;
  }

  // Something waits for a connection: connect(e) for each endpoint that should connect now.
  // pick_first: the first idle one in order, unless one takes calls or is connecting already.
  // round_robin: every idle one. (connect(e) may change e's status, no other's.)
  template <class StatusOf, class Connect>
  void connect_wanted(std::size_t n, StatusOf&& status_of, Connect&& connect) const {
    if (policy_ == load_balancing_policy::pick_first) {
      for (std::size_t e = 0; e < n; ++e) {
        const endpoint_status& s = status_of(e);
        if (s.takes_calls() || s.state == channel_state::connecting) return;
      }
      for (std::size_t e = 0; e < n; ++e) {
        if (status_of(e).state == channel_state::idle) return connect(e);
      }
      return;
    }
    for (std::size_t e = 0; e < n; ++e) {
      if (status_of(e).state == channel_state::idle) connect(e);
    }
  }

  // The channel's state from its endpoints' (aggregate_state of what each counts as).
  template <class StatusOf>
  static channel_state aggregate(std::size_t n, StatusOf&& status_of) noexcept {
    return aggregate_state(n, [&](std::size_t e) { return status_of(e).effective(); });
  }

 private:
  load_balancing_policy policy_;
  std::size_t next_ = 0;  // round_robin's next endpoint to try
};

}  // namespace rdmarpc
