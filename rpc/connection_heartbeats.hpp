#pragma once
// connection_heartbeats: one connection's liveness and heartbeat_ticker subscription, and what a
// frame, a tick, a ping or a pong does with them; the same for a channel's endpoint and a server's.
// Layer: rpc. Threading: on its connection's executor only (start and stop too).

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <optional>

#include "rpc/frame.hpp"
#include "rpc/heartbeat_ticker.hpp"
#include "rpc/liveness.hpp"
#include "transport/connection.hpp"

namespace rdmarpc {

class connection_heartbeats {
 public:
  using clock = std::chrono::steady_clock;

  // `interval` zero: disabled (nothing ticks; pings from the peer are still answered).
  connection_heartbeats(clock::duration interval, clock::duration timeout)
      : interval_(interval), timeout_(timeout), live_(std::in_place, interval, timeout, clock::now()) {}

  bool enabled() const noexcept { return live_->enabled(); }
  clock::duration tick_period() const noexcept { return live_->tick_period(); }
  const connection_liveness& state() const noexcept { return *live_; }

  // A new connection: a fresh liveness, and ticks on `ex` at the grid instants shifted by `phase`,
  // each calling `on_tick(instant, ran_at)` (which calls tick()). Nothing ticks when disabled.
  void start(const boost::asio::any_io_executor& ex, clock::duration phase,
             heartbeat_ticker::tick_function on_tick);
  // The connection ended: no more ticks, and a shared liveness is left (a ping it carried is
  // forgotten, not left to time out the others). start() may follow, for the next connection.
  void stop() noexcept;

  // Any frame arrived, of `kind` (per message: two flags). Past the instants the ticker skips for
  // this connection, a frame other than a ping or pong needs the next tick (heard() times those).
  void on_frame(frame::kind kind) {
    if (live_->on_received() && !frame::is_heartbeat(kind)) [[unlikely]]
      subscription_.set_due(clock::time_point::min());
  }

  // What a tick did; on peer_dead the caller ends the connection (and stops this).
  enum class tick_result : std::uint8_t { none, ping_sent, peer_dead };
  // The ticker's tick on the grid `instant`, run at `ran_at` (liveness::tick says why both). `in_use`:
  // the connection carries calls or streams, so it checks its own path too (connection_liveness).
  tick_result tick(clock::time_point instant, clock::time_point ran_at, bool in_use,
                   transport::connection& conn);

  // A ping or pong named the peer's heartbeat grid: from now on this connection shares its liveness
  // with the executor's other connections to that grid (one ping for all while idle).
  void share_with(const frame::view& heartbeat);
  // The peer's pong (after share_with).
  void on_pong(const frame::view& pong) { live_->on_pong(pong.header.timeout_us); }
  // The peer's ping (after share_with): the peer runs heartbeats, so our pongs are its pings' answers.
  void on_peer_ping() noexcept { live_->on_peer_ping(); }

  // A ping or pong that arrived at `now` counts as heard at the next grid instant, so that instant's
  // tick need not run: an idle connection's timer sleeps until one can act
  // (connection_liveness::next_due). `in_use()`: as for tick(), asked only when enabled.
  template <typename InUse>
  void heard(clock::time_point now, const transport::connection& conn, InUse&& in_use) {
    if (!live_->enabled()) return;
    const auto slot_end = subscription_.next_instant(now);
    live_->heard_by(slot_end, conn.stats().peer_activity);
    subscription_.set_due(live_->next_due(in_use(), slot_end));
  }

  // Calls or a stream begin: a shared connection whose ticks were skipped checks its own path from
  // the next instant (connection_liveness::work_begins).
  void work_begins() {
    if (live_->work_begins()) [[unlikely]]
      subscription_.set_due(clock::time_point::min());
  }

  // A ping or pong through the connection's ordinary reserve/commit; no waiting for room (an error
  // when there is none now: whatever fills the queue is traffic too).
  boost::system::error_code send(frame::kind kind, std::uint64_t value, transport::connection& conn) const;

 private:
  clock::duration interval_, timeout_;
  std::optional<connection_liveness> live_;      // always engaged; re-made for each connection
  heartbeat_ticker::subscription subscription_;  // ticks while connected
};

}  // namespace rdmarpc
