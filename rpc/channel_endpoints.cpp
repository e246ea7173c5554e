// channel_impl's endpoints: resolving names, connecting, reconnect backoff, heartbeats, going_away,
// and closing the channel (channel_impl.hpp).
#include <algorithm>

#include "log/log.hpp"
#include "rpc/channel_impl.hpp"
#include "rpc/extras.hpp"

namespace rdmarpc::channel_detail {

void channel_impl::adopt() {
  boost::asio::post(ex_, [self = shared_from_this()] { self->attach(0, std::move(self->given_)); });
}

void channel_impl::close() {
  boost::asio::post(ex_, [self = shared_from_this()] { self->close_now("channel closed"); });
}

void channel_impl::release() {
  class release_task {
   public:
    explicit release_task(std::shared_ptr<channel_impl> self) : self_(std::move(self)) {}
    release_task(release_task&&) noexcept = default;
    release_task& operator=(release_task&&) = delete;
    ~release_task() {
      if (self_) self_->abandon();
    }
    void operator()() {
      const auto self = std::move(self_);
      self->released_ = true;
      self->maybe_close_released();
    }

   private:
    std::shared_ptr<channel_impl> self_;
  };
  boost::asio::post(ex_, release_task(shared_from_this()));
}

void channel_impl::abandon() noexcept {
  for (auto& slot : slots_) slot->conn.reset();
  given_.reset();
}

channel_state channel_impl::state(bool try_to_connect) {
  const auto s = watch_.published();
  if (try_to_connect && s == channel_state::idle) {
    boost::asio::post(ex_, [self = shared_from_this()] { self->want_connections(); });
  }
  return s;
}

void channel_impl::wait_for_state_change(
    channel_state last, boost::asio::any_completion_handler<channel::state_change_signature> h) {
  const std::uint64_t id = watch_.next_waiter_id();
  auto slot = boost::asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) {
    slot.assign([weak = weak_from_this(), id](boost::asio::cancellation_type type) {
      if (type == boost::asio::cancellation_type::none) return;
      if (auto self = weak.lock()) {
        boost::asio::post(self->ex_, [self, id] { self->watch_.cancel(id, self->aggregate()); });
      }
    });
  }
  channel_state_watch::waiter w{id, last, std::move(h),
                                boost::asio::prefer(ex_, boost::asio::execution::outstanding_work.tracked)};
  boost::asio::post(ex_, [self = shared_from_this(), w = std::move(w)]() mutable {
    // A waiter is demand: an idle or failed channel keeps trying.
    if (self->watch_.add(std::move(w), self->aggregate())) self->want_connections();
  });
}

channel_stats channel_impl::stats() const {
  channel_stats s;
  s.calls_started = calls_started_.load(std::memory_order_relaxed);
  s.calls_ok = calls_ok_.load(std::memory_order_relaxed);
  s.calls_failed = calls_failed_.load(std::memory_order_relaxed);
  s.connects = connects_.load(std::memory_order_relaxed);
  s.connect_failures = connect_failures_.load(std::memory_order_relaxed);
  s.disconnects = disconnects_.load(std::memory_order_relaxed);
  s.going_aways = going_aways_.load(std::memory_order_relaxed);
  s.pings_sent = pings_sent_.load(std::memory_order_relaxed);
  s.pongs_received = pongs_received_.load(std::memory_order_relaxed);
  s.pings_received = pings_received_.load(std::memory_order_relaxed);
  s.heartbeat_timeouts = heartbeat_timeouts_.load(std::memory_order_relaxed);
  s.too_many_pings = too_many_pings_.load(std::memory_order_relaxed);
  return s;
}

void channel_impl::on_close(std::size_t e, std::uint64_t generation,
                            const boost::system::error_code& reason) {
  endpoint_slot& slot = *slots_[e];
  if (generation != slot.generation || !slot.conn) return;
  if (!closed_)
    rdmarpc::logger()->debug("rdmarpc channel: connection to {} ended: {}", slot.name(), reason.message());
  // A clean close (the server shut down, or restarts) leaves the endpoint idle: the next call
  // reconnects at once; so does a local address change (the path moved, the peer is fine).
  // Anything else marks it failed, so calls go elsewhere for its backoff.
  const bool failed = reason != transport::errc::closed_by_peer && reason != transport::errc::address_changed;
  connection_ended(e, closed_ ? std::string("channel closed") : "connection lost: " + reason.message(),
                   failed);
}

channel_state channel_impl::aggregate() const {
  if (closed_) return channel_state::shutdown;
  if (!resolved_) return resolving_ ? channel_state::connecting : resolve_state_;
  return load_balancer::aggregate(slots_.size(), status_of());
}

void channel_impl::want_connections() {
  if (closed_) return;
  if (!resolved_) return start_resolve();
  balancer_.connect_wanted(slots_.size(), status_of(), [this](std::size_t e) { start_connect(e); });
}

void channel_impl::set_endpoints(const std::vector<transport::endpoint>& endpoints) {
  for (const auto& ep : endpoints)
    slots_.push_back(std::make_unique<endpoint_slot>(ex_, ep, options_.reconnect, options_));
  resolved_ = true;
}

void channel_impl::start_resolve() {
  if (resolving_ || closed_) return;
  resolving_ = true;
  publish_state();
  auto found = std::make_shared<std::vector<transport::endpoint>>();
  auto left = std::make_shared<std::size_t>(configured_.size());
  auto errors = std::make_shared<std::string>();
  for (const auto& ep : configured_) {
    transport::async_resolve(ex_, ep,
                             [self = shared_from_this(), ep, found, left, errors](
                                 boost::system::error_code ec, std::vector<transport::endpoint> addresses) {
                               if (ec) {
                                 *errors += (errors->empty() ? "" : "; ") + std::string("cannot resolve ") +
                                            ep.to_uri();
                               }
                               for (auto& a : addresses) {
                                 if (std::find(found->begin(), found->end(), a) == found->end())
                                   found->push_back(std::move(a));
                               }
                               if (--*left == 0) self->resolved(std::move(*found), *errors);
                             });
  }
}

void channel_impl::resolved(std::vector<transport::endpoint> endpoints, const std::string& errors) {
  resolving_ = false;
  if (closed_) return;
  if (endpoints.empty()) {
    // Nothing resolved: the channel fails like an endpoint, and resolves again after a backoff.
    connect_failures_.fetch_add(1, std::memory_order_relaxed);
    resolve_state_ = channel_state::transient_failure;
    last_failure_ = errors;
    resolve_timer_.expires_after(resolve_backoff_.next(unit_random()));
    resolve_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) {
        self->resolve_state_ = channel_state::idle;
        self->publish_state();
        if (self->has_demand()) self->want_connections();
      }
    });
    publish_state();
    fail_waiting_fail_fast();
    return;
  }
  if (!errors.empty()) rdmarpc::logger()->warn("rdmarpc channel: {}", errors);
  set_endpoints(endpoints);
  publish_state();
  want_connections();
}

void channel_impl::start_connect(std::size_t e) {
  endpoint_slot& slot = *slots_[e];
  slot.state = channel_state::connecting;
  publish_state();
  transport::async_connect(ex_, *slot.endpoint, options_.transport,
                           [self = shared_from_this(), e](const boost::system::error_code& ec,
                                                          std::shared_ptr<transport::connection> conn) {
                             self->connected(e, ec, std::move(conn));
                           });
}

void channel_impl::connected(std::size_t e, const boost::system::error_code& ec,
                             std::shared_ptr<transport::connection> conn) {
  endpoint_slot& slot = *slots_[e];
  if (closed_) {
    if (conn) conn->close();
    return;
  }
  if (ec) {
    connect_failures_.fetch_add(1, std::memory_order_relaxed);
    rdmarpc::logger()->debug("rdmarpc channel: connect to {} failed: {}", slot.name(), ec.message());
    return endpoint_failed(e, "cannot connect to " + slot.name() + ": " + ec.message());
  }
  attach(e, std::move(conn));
}

void channel_impl::attach(std::size_t e, std::shared_ptr<transport::connection> conn) {
  endpoint_slot& slot = *slots_[e];
  slot.conn = std::move(conn);
  slot.generation = ++generations_;
  slot.state = channel_state::ready;
  slot.backoff.reset();
  connects_.fetch_add(1, std::memory_order_relaxed);
  rdmarpc::logger()->debug("rdmarpc channel: connected to {}", slot.conn->remote_address());
  slot.conn->start(std::make_shared<connection_events>(shared_from_this(), e, slot.generation));
  start_heartbeats(e);
  publish_state();
  pump();
  attach_waiting_streams();
}

void channel_impl::endpoint_failed(std::size_t e, std::string why) {
  endpoint_slot& slot = *slots_[e];
  last_failure_ = std::move(why);
  if (!slot.endpoint) {
    // A given connection cannot be replaced: the channel is done.
    slot.state = channel_state::shutdown;
    return close_now(last_failure_.c_str());
  }
  slot.state = channel_state::transient_failure;
  slot.retry_timer.expires_after(slot.backoff.next(unit_random()));
  slot.retry_timer.async_wait([weak = weak_from_this(), e](const boost::system::error_code& ec) {
    if (ec) return;  // closed
    if (auto self = weak.lock()) self->retry_due(e);
  });
  publish_state();
  if (watch_.published() == channel_state::transient_failure) return fail_waiting_fail_fast();
  want_connections();
}

void channel_impl::retry_due(std::size_t e) {
  endpoint_slot& slot = *slots_[e];
  if (closed_ || slot.state != channel_state::transient_failure) return;
  slot.state = channel_state::idle;
  publish_state();
  if (has_demand()) want_connections();
}

void channel_impl::connection_ended(std::size_t e, const std::string& why, bool failed) {
  endpoint_slot& slot = *slots_[e];
  auto conn = std::move(slot.conn);
  slot.draining = false;
  disconnects_.fetch_add(1, std::memory_order_relaxed);
  slot.generation = ++generations_;  // its on_close, and a wait for send room on it, are ignored
  slot.reserving = false;
  slot.heartbeats.stop();
  conn->close();
  fail_sent_on(e, status_code::unavailable, why);
  if (closed_) return;
  if (failed || !slot.endpoint) return endpoint_failed(e, why);
  slot.state = channel_state::idle;
  publish_state();
  if (has_demand()) want_connections();
}

void channel_impl::fail_sent_on(std::size_t e, status_code code, const std::string& message) {
  std::vector<std::uint32_t> ids;
  for (auto it = calls_.begin(); it != calls_.end(); ++it) {
    if (it->second->sent_on == e) ids.push_back(it->first);
  }
  for (const auto id : ids) finish(id, code, std::string(message), /*in_queue=*/false);
  std::vector<std::shared_ptr<stream_core>> ended;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->second.endpoint == e) {
      ended.push_back(std::move(it->second.core));
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& core : ended) core->fail(code, message);
}

void channel_impl::fail_waiting_fail_fast() {
  std::vector<std::uint32_t> ids;
  for (const auto id : queue_) {
    if (!calls_.at(id).wait_for_ready) ids.push_back(id);
  }
  for (const auto id : ids) finish(id, status_code::unavailable, std::string(last_failure_));
  std::vector<std::shared_ptr<stream_core>> failed;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->second.endpoint == kNoEndpoint && !it->second.wait_for_ready) {
      failed.push_back(std::move(it->second.core));
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& core : failed) core->fail(status_code::unavailable, last_failure_);
}

void channel_impl::attach_waiting_streams() {
  std::vector<std::uint32_t> waiting;
  for (const auto& [id, s] : streams_) {
    if (s.endpoint == kNoEndpoint) waiting.push_back(id);
  }
  for (const auto id : waiting) {
    auto it = streams_.find(id);  // attaching one may end another
    if (it == streams_.end()) continue;
    const std::size_t e = pick(/*need_room=*/false);
    if (e == kNoEndpoint) return;
    it->second.endpoint = e;
    auto core = it->second.core;
    core->attach(slots_[e]->conn);
    work_begins(e);
  }
}

void channel_impl::start_heartbeats(std::size_t e) {
  endpoint_slot& slot = *slots_[e];
  slot.heartbeats.start(ex_, {},
                        [weak = weak_from_this(), e, gen = slot.generation](clock::time_point instant,
                                                                            clock::time_point ran_at) {
                          if (auto self = weak.lock()) self->heartbeat_tick(e, gen, instant, ran_at);
                        });
}

void channel_impl::heartbeat_tick(std::size_t e, std::uint64_t gen, clock::time_point instant,
                                  clock::time_point ran_at) {
  endpoint_slot& slot = *slots_[e];
  if (gen != slot.generation || !slot.conn) return;
  switch (slot.heartbeats.tick(instant, ran_at, carries_work(e), *slot.conn)) {
    case connection_heartbeats::tick_result::none: return;
    case connection_heartbeats::tick_result::ping_sent:
      pings_sent_.fetch_add(1, std::memory_order_relaxed);
      return;
    case connection_heartbeats::tick_result::peer_dead: return heartbeat_timed_out(e);
  }
}

void channel_impl::heard_heartbeat(std::size_t e) {
  endpoint_slot& slot = *slots_[e];
  slot.heartbeats.heard(clock::now(), *slot.conn, [&] { return carries_work(e); });
}

bool channel_impl::carries_work(std::size_t e) {
  if (in_flight_ == 0 && streams_.empty()) return false;
  if (slots_.size() == 1) return true;
  for (const auto& [id, s] : streams_) {
    if (s.endpoint == e) return true;
  }
  for (auto it = calls_.begin(); in_flight_ > 0 && it != calls_.end(); ++it) {
    if (it->second->sent_on == e) return true;
  }
  return false;
}

void channel_impl::on_ping(std::size_t e, std::uint64_t value) {
  pings_received_.fetch_add(1, std::memory_order_relaxed);
  endpoint_slot& slot = *slots_[e];
  (void)slot.heartbeats.send(frame::kind::pong, value,
                             *slot.conn);  // no room: whatever fills the queue is traffic too
}

void channel_impl::heartbeat_timed_out(std::size_t e) {
  heartbeat_timeouts_.fetch_add(1, std::memory_order_relaxed);
  const auto reason = make_error_code(transport::errc::connection_lost);
  rdmarpc::logger()->warn(
      "rdmarpc channel: no answer from {} to a heartbeat within {} ms: {}", slots_[e]->conn->remote_address(),
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_timeout).count(),
      reason.message());
  connection_ended(e, "connection lost: " + reason.message() + " (no heartbeat answer)", true);
}

void channel_impl::on_going_away(std::size_t e) {
  endpoint_slot& slot = *slots_[e];
  if (slot.draining) return;
  slot.draining = true;
  going_aways_.fetch_add(1, std::memory_order_relaxed);
  rdmarpc::logger()->debug("rdmarpc channel: {} is going away", slot.name());
  frame::header h;
  h.kind = frame::kind::going_away;
  send_header(e, h);  // nothing new was committed after it
  publish_state();
  attach_waiting_streams();
  pump();  // queued calls go to another endpoint, or wait (want_connections)
}

void channel_impl::on_connection_reset(std::size_t e, const frame::view& v) {
  std::string why;
  if (!extras::decode_response(v.extras, why)) return protocol_violation(e, "reset extras do not parse");
  if (why.empty()) why = "connection reset by the server";
  if (why == "too_many_pings") too_many_pings_.fetch_add(1, std::memory_order_relaxed);
  rdmarpc::logger()->warn("rdmarpc channel: {} closed the connection: {} ({})",
                          slots_[e]->conn->remote_address(), why, to_string(v.header.status));
  connection_ended(
      e, "connection closed by the server: " + why + " (" + std::string(to_string(v.header.status)) + ")",
      true);
}

void channel_impl::protocol_violation(std::size_t e, const char* why) {
  rdmarpc::logger()->warn("rdmarpc channel: closing connection to {}: {}", slots_[e]->conn->remote_address(),
                          why);
  // Fail now rather than waiting for on_close: the connection is not trustworthy any more. A wait
  // for send room on the old connection is ignored from now on (connection_ended resets
  // reserving): left set, it would keep pump() from ever sending on the next connection.
  connection_ended(e, std::string("connection closed: protocol error: ") + why, true);
}

void channel_impl::fail_all(status_code code, const std::string& message) {
  auto calls = calls_.take_all();
  queue_.clear();
  in_flight_ = 0;
  for (auto& [id, c] : calls) complete(std::move(c), code, std::string(message));
  auto streams = std::exchange(streams_, {});
  for (auto& [id, s] : streams) s.core->fail(code, message);
}

void channel_impl::close_now(const char* why) {
  const std::string reason = why;  // may point into last_failure_
  if (closed_ && calls_.empty() && streams_.empty()) return;
  closed_ = true;
  resolve_timer_.cancel();
  deadlines_.stop();
  for (auto& slot : slots_) {
    slot->retry_timer.cancel();
    slot->heartbeats.stop();
    slot->state = channel_state::shutdown;
  }
  fail_all(status_code::unavailable, reason);
  for (auto& slot : slots_) {
    // Its on_close follows (ignored: no calls left).
    if (auto conn = std::exchange(slot->conn, nullptr)) conn->close();
    slot->generation = ++generations_;
  }
  given_.reset();
  publish_state();
}

void channel_impl::maybe_close_released() {
  if (released_ && calls_.empty() && streams_.empty() && !closed_) close_now("channel released");
}

}  // namespace rdmarpc::channel_detail
