// server_connection_impl's life: starting, figures, going away, heartbeats, protocol
// violations and closing (server_connection_impl.hpp).
#include "rpc/server_connection_impl.hpp"

namespace rdmarpc::server_connection_detail {

void connection_impl::start() {
  conn_->start(shared_from_this());
  // Half a period after the clients' grid: a client and its server then never decide to ping at
  // the same instant.
  heartbeats_.start(ex_, heartbeats_.tick_period() / 2,
                    [weak = weak_from_this()](clock::time_point instant, clock::time_point ran_at) {
                      if (auto self = weak.lock()) self->heartbeat_tick(instant, ran_at);
                    });
}

connection_figures connection_impl::figures() const {
  connection_figures f;
  f.peer = *peer_;
  f.kind = peer_info_.transport;
  f.age = clock::now() - accepted_at_;
  f.calls_started = calls_started_;
  f.calls_in_flight = unary_calls_in_flight() + streams_.size();
  f.pings_sent = pings_sent_;
  f.pongs_received = pongs_received_;
  f.pings_received = pings_received_;
  f.counters = conn_->stats();
  return f;
}

void connection_impl::go_away() {
  if (closed_ || going_away_sent_) return;
  going_away_sent_ = true;
  frame::header h;
  h.kind = frame::kind::going_away;
  const auto head = frame::encode_full_header(h);
  if (conn_->send_copy(boost::asio::buffer(head)) != boost::asio::error::would_block) return;
  // Behind what waits for room already; the server's grace bounds the wait.
  conn_->async_reserve(frame::kHeaderSize, [self = shared_from_this(), head](boost::system::error_code ec,
                                                                             transport::send_reservation r) {
    if (ec || self->closed_) return;
    std::memcpy(r.data().data(), head.data(), head.size());
    r.commit(head.size());
  });
}

void connection_impl::on_close(const boost::system::error_code& reason) {
  table_starting_record();
  // A connection this side ended for a fault was logged (at warning, with why) by end_connection's
  // caller; any other end is logged here, once.
  if (!closed_)
    rdmarpc::logger()->info("rdmarpc server: connection from {} closed: {}", *peer_, reason.message());
  closed_ = true;
  heartbeats_.stop();
  cancel_all_calls();
  deadlines_.stop();
  fail_streams("connection ended: " + reason.message());
  server_->connection_ended(this);
  // conn_ is kept: calls still running hold us, and send() on a closed connection is harmless.
}

void connection_impl::violation(const char* why) {
  rdmarpc::logger()->warn("rdmarpc server: closing connection from {}: {}", *peer_, why);
  end_connection(std::string("connection closed: protocol error: ") + why);
}

void connection_impl::end_connection(const std::string& why) {
  closed_ = true;
  heartbeats_.stop();
  cancel_all_calls();
  deadlines_.stop();
  fail_streams(why);
  conn_->close();
}

void connection_impl::heartbeat_tick(clock::time_point instant, clock::time_point ran_at) {
  if (closed_) return;
  switch (heartbeats_.tick(instant, ran_at, has_work(), *conn_)) {
    case connection_heartbeats::tick_result::none: return;
    case connection_heartbeats::tick_result::ping_sent:
      ++pings_sent_;
      server_->heartbeats().pings_sent.fetch_add(1, std::memory_order_relaxed);
      return;
    case connection_heartbeats::tick_result::peer_dead: {
      server_->heartbeats().timeouts.fetch_add(1, std::memory_order_relaxed);
      const auto reason = make_error_code(transport::errc::connection_lost);
      rdmarpc::logger()->warn(
          "rdmarpc server: no answer from {} to a heartbeat within {} ms: {}", *peer_,
          std::chrono::duration_cast<std::chrono::milliseconds>(opts_.heartbeat_timeout).count(),
          reason.message());
      return end_connection("connection lost: " + reason.message() + " (no heartbeat answer)");
    }
  }
}

void connection_impl::on_ping(std::uint64_t value) {
  ++pings_received_;
  server_->heartbeats().pings_received.fetch_add(1, std::memory_order_relaxed);
  const auto now = clock::now();
  if (policer_.on_ping(now)) return too_many_pings();
  heartbeats_.on_peer_ping();  // the client runs heartbeats: ours are its pongs while it does
  (void)heartbeats_.send(frame::kind::pong, value,
                         *conn_);  // no room: whatever fills the queue is traffic too
  heard_heartbeat(now);
}

void connection_impl::too_many_pings() {
  server_->heartbeats().too_many_pings.fetch_add(1, std::memory_order_relaxed);
  rdmarpc::logger()->warn(
      "rdmarpc server: closing connection from {}: too_many_pings (more than {} pings sooner than {} ms "
      "apart)",
      *peer_, opts_.max_ping_strikes,
      std::chrono::duration_cast<std::chrono::milliseconds>(opts_.min_ping_interval_allowed).count());
  // A reset for call 0 is about the connection; the close flushes it first.
  (void)respond(0, status_code::resource_exhausted, "too_many_pings", frame::kind::reset);
  end_connection("connection closed: too_many_pings");
}

void connection_impl::cancel_all_calls() {
  table_starting_record();
  std::vector<std::uint32_t> ids;
  ids.reserve(calls_.size());
  for (const auto& [id, c] : calls_) ids.push_back(id);
  for (const auto id : ids)
    if (const auto it = calls_.find(id); it != calls_.end()) cancel(*it->second);
}

}  // namespace rdmarpc::server_connection_detail
