#pragma once
// connection_heartbeats: one connection's heartbeats as both sides run them: its liveness
// (rpc/liveness.hpp), its subscription to the executor's heartbeat_ticker, and what a received
// frame, a tick, a ping or a pong does with them. The channel keeps one per endpoint, a server
// connection one; each decides what a dead peer ends and counts what was sent.
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
  connection_liveness& liveness() noexcept { return *live_; }

  // A new connection: a fresh liveness, and ticks on `ex` at the grid instants shifted by `phase`,
  // each calling `on_tick(instant, ran_at)` (which calls tick()). Nothing ticks when disabled.
  void start(const boost::asio::any_io_executor& ex, clock::duration phase, heartbeat_ticker::tick_function on_tick);
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
  // The ticker's tick on the grid `instant`, run at `ran_at`. Decided on the instant, not on when the
  // timer ran: with `now`, a tick running a little less late than the one that saw the last frame
  // measures 299.9 ms of silence against a 300 ms interval and waits a whole period more (measured:
  // 1.2 s detection, not 0.9). A tick that ran late (a stall) times a ping it sends from when it ran
  // and lets the next tick judge an overdue one (liveness::ping_stamp, holds_verdict). `in_use`: the
  // connection carries calls or streams, so it checks its own path too (connection_liveness).
  tick_result tick(clock::time_point instant, clock::time_point ran_at, bool in_use, transport::connection& conn);

  // A ping or pong named the peer's heartbeat grid: from now on this connection shares its liveness
  // with the executor's other connections to that grid (one ping for all while idle).
  void share_with(const frame::view& heartbeat);
  // The peer's pong (after share_with).
  void on_pong(const frame::view& pong) { live_->on_pong(pong.header.timeout_us); }

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
  std::optional<connection_liveness> live_;  // always engaged; re-made for each connection
  heartbeat_ticker::subscription subscription_;  // ticks while connected
};

}  // namespace rdmarpc
