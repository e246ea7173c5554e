#include "rpc/connection_heartbeats.hpp"

#include <boost/asio/buffer.hpp>
#include <utility>

namespace rdmarpc {

void connection_heartbeats::start(const boost::asio::any_io_executor& ex, clock::duration phase,
                                  heartbeat_ticker::tick_function on_tick) {
  live_.emplace(interval_, timeout_, clock::now());
  if (!live_->enabled()) return;
  subscription_ = heartbeat_ticker::of(ex).subscribe(ex, live_->tick_period(), phase, std::move(on_tick));
}

void connection_heartbeats::stop() noexcept {
  subscription_.reset();
  live_.emplace(interval_, timeout_, clock::now());  // (the old one leaves its shared state)
}

connection_heartbeats::tick_result connection_heartbeats::tick(clock::time_point instant,
                                                               clock::time_point ran_at, bool in_use,
                                                               transport::connection& conn) {
  live_->note_activity(conn.stats().peer_activity);
  auto result = tick_result::none;
  switch (live_->tick(instant, ran_at, in_use)) {
    case liveness::action::none: break;
    case liveness::action::send_ping:
      // No room now: another connection sharing the liveness may send it; if none can, the timeout
      // still runs, so a peer that stopped reading (or granting credits) is cut off like a silent one.
      if (!send(frame::kind::ping, live_->ping_value(), conn)) {
        result = tick_result::ping_sent;
      } else {
        live_->ping_not_sent();
      }
      break;
    case liveness::action::peer_dead: return tick_result::peer_dead;
  }
  subscription_.set_due(live_->next_due(in_use, instant + live_->tick_period()));
  return result;
}

void connection_heartbeats::share_with(const frame::view& heartbeat) {
  const std::uint64_t peer_domain = frame::heartbeat_domain(heartbeat);
  if (live_->shared() || peer_domain == 0 || !live_->enabled()) return;
  live_->share(subscription_.share(peer_domain, live_->make_shareable(clock::now())));
}

boost::system::error_code connection_heartbeats::send(frame::kind kind, std::uint64_t value,
                                                      transport::connection& conn) const {
  const auto head = frame::encode_heartbeat(kind, value, subscription_.domain());
  return conn.send_copy(boost::asio::buffer(head));
}

}  // namespace rdmarpc
