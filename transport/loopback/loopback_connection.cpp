#include "transport/loopback/loopback_connection.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>

namespace rdmarpc::transport::loopback {

namespace {
constexpr std::size_t kDeliveryBatch = 64;  // messages delivered per posted handler (fairness)
}

template <typename F>
void loopback_connection::post_here(F&& f) {
  if (io_ex_ != nullptr) {
    boost::asio::post(*io_ex_, std::forward<F>(f));
  } else {
    boost::asio::post(ex_, std::forward<F>(f));
  }
}

loopback_connection::loopback_connection(boost::asio::any_io_executor ex, const loopback_options& options,
                                         loopback_faults faults, std::string name)
    : connection(options.connection.max_message_size),
      ex_(std::move(ex)),
      io_ex_(ex_.target<boost::asio::io_context::executor_type>()),
      options_(options),
      faults_(faults),
      name_(std::move(name)),
      buffers_(0, options.connection.send_queue_bytes),
      delay_timer_(ex_) {
  options_.capacity = std::max<std::size_t>(options_.capacity, 1);
  return_every_ = std::max<std::size_t>(1, options_.capacity / 2);
  for (const std::uint64_t at : {faults_.close_at, faults_.drop_at, faults_.corrupt_at, faults_.delay_at}) {
    if (at != 0) first_fault_ = std::min(first_fault_, at);
  }
}

loopback_connection::~loopback_connection() {
  // Vanishing without close() is what a crashed peer looks like.
  if (!notified_peer_) {
    if (auto peer = peer_.lock()) {
      boost::asio::post(peer->ex_, [peer] { peer->on_peer_end(errc::connection_lost); });
    }
  }
}

void loopback_connection::link(const std::shared_ptr<loopback_connection>& a,
                               const std::shared_ptr<loopback_connection>& b) {
  a->peer_ = b;
  b->peer_ = a;
  a->peer_name_ = b->name_;
  b->peer_name_ = a->name_;
}

void loopback_connection::start(std::shared_ptr<connection_handler> handler) {
  if (!handler) return;
  if (state_ == state::closed && end_reason_ == errc::closed_locally && !close_reported_) {
    // close() before start(): the handler still hears how the connection ended, once.
    close_reported_ = true;
    boost::asio::post(ex_,
                      [handler = std::move(handler), reason = end_reason_] { handler->on_close(reason); });
    return;
  }
  if (state_ != state::idle) return;
  handler_ = std::move(handler);
  state_ = state::open;
  if (!inbound_.empty() || peer_end_) schedule_delivery();
}

send_reservation loopback_connection::reserve_now(std::size_t bytes, boost::system::error_code& ec) {
  if (state_ != state::open) [[unlikely]] {
    ec = errc::not_connected;
    return {};
  }
  if (!buffers_.has_room(bytes)) {
    ec = boost::asio::error::would_block;
    return {};
  }
  return buffers_.reserve(this, bytes);
}

void loopback_connection::commit_reservation(std::uint64_t token, std::size_t size,
                                             bool /*coalesce*/) noexcept {
  auto message = buffers_.take(token, size);
  if (state_ != state::open) {  // ended (or closing) since the reservation: dropped
    buffers_.written(size);
    buffers_.recycle(std::move(message));
    return;
  }
  // Nothing queued ahead and capacity left: straight to the peer, without the queue (the common
  // case; ordering holds because the queue is empty).
  if (send_queue_.empty() && !delaying_ && in_flight_ < options_.capacity) {
    if (send_one(std::move(message))) room_freed();
    return;
  }
  send_queue_.push_back(std::move(message));
  pump();  // only posts to the peer: nothing user-visible runs inside commit()
}

void loopback_connection::cancel_reservation(std::uint64_t token) noexcept {
  buffers_.cancel(token);
  room_freed();
}

void loopback_connection::close() {
  switch (state_) {
    case state::idle:
      end_reason_ = errc::closed_locally;
      state_ = state::closed;
      // Never started, never said goodbye: the peer hears what tcp's and rdma's peers hear then.
      notify_peer(errc::connection_lost);
      end_reservations(end_reason_);
      return;
    case state::open:
      state_ = state::closing;
      end_reason_ = errc::closed_locally;
      // No more deliveries after close(); what already arrived is dropped, its capacity returned.
      for (std::size_t i = 0; i < inbound_.size(); ++i) return_capacity();
      inbound_.clear();
      end_reservations(errc::closed_locally);
      pump();
      maybe_finish_close();
      return;
    case state::closing:
    case state::closed: return;
  }
}

void loopback_connection::pump() {
  while (!delaying_ && (state_ == state::open || state_ == state::closing) && !send_queue_.empty() &&
         in_flight_ < options_.capacity) {
    if (!send_one(send_queue_.pop_front())) return;
  }
  if (state_ == state::open) room_freed();
  maybe_finish_close();
}

// The next message in order to the peer, through the armed faults. False when that ended the
// connection or started a delay (nothing more may be sent now).
bool loopback_connection::send_one(message_buffers::buffer&& message) {
  const std::uint64_t number = ++sequence_;
  if (number < first_fault_) [[likely]] {
    hand_to_peer(std::move(message));
    return true;
  }
  if (number == faults_.close_at) {
    finish(errc::connection_lost, errc::connection_lost);
    return false;
  }
  if (number == faults_.drop_at) {
    ++stats_.messages_sent;
    stats_.bytes_sent += message->size;
    buffers_.written(message->size);
    buffers_.recycle(std::move(message));
    return true;
  }
  if (number == faults_.corrupt_at) {
    for (auto& b : message->bytes()) b = ~b;
  }
  if (number == faults_.delay_at && faults_.delay.count() > 0) {
    // Everything behind it waits too: the pipe stays ordered.
    delaying_ = true;
    delay_timer_.expires_after(faults_.delay);
    delay_timer_.async_wait(
        [self = self(), message = std::move(message)](boost::system::error_code ec) mutable {
          self->delaying_ = false;
          if (ec || self->state_ == state::closed) return;
          self->hand_to_peer(std::move(message));
          self->pump();
        });
    return false;
  }
  hand_to_peer(std::move(message));
  return true;
}

void loopback_connection::hand_to_peer(message_buffers::buffer&& message) {
  ++stats_.messages_sent;
  stats_.bytes_sent += message->size;
  buffers_.written(message->size);
  if (auto peer = peer_.lock()) {
    ++in_flight_;
    auto& target = *peer;
    target.post_here(
        [peer = std::move(peer), message = std::move(message), returned = std::exchange(owed_, 0)]() mutable {
          peer->on_arrival(std::move(message), returned);
        });
  }
}

void loopback_connection::return_capacity() {
  if (++owed_ < return_every_) return;
  if (auto peer = peer_.lock()) {
    peer->post_here([peer, returned = std::exchange(owed_, 0)] { peer->on_delivered(returned); });
  }
}

void loopback_connection::take_back_capacity(std::size_t returned) {
  in_flight_ -= std::min(in_flight_, returned);
}

void loopback_connection::notify_peer(boost::system::error_code reason) {
  if (notified_peer_) return;
  notified_peer_ = true;
  if (auto peer = peer_.lock()) {
    boost::asio::post(peer->ex_, [peer, reason] { peer->on_peer_end(reason); });
  }
}

void loopback_connection::on_arrival(message_buffers::buffer&& message, std::size_t returned) {
  ++stats_.peer_activity;
  if (returned > 0) {
    take_back_capacity(returned);
    // Capacity only moves the queue (reservations wait for buffer room, not capacity).
    if (!send_queue_.empty() || state_ == state::closing) pump();
  }
  if (state_ == state::closing || state_ == state::closed) {
    return_capacity();  // dropped, but the sender must not stall waiting for it
    return;
  }
  // Delivered in this handler (no second hop), behind anything already waiting for a delivery.
  if (state_ == state::open && !delivery_scheduled_ && inbound_.empty()) {
    deliver_one(std::move(message));  // nothing ahead of it: no queue
    return after_delivery();
  }
  inbound_.push_back(std::move(message));
  if (state_ == state::open && !delivery_scheduled_) deliver();
}

void loopback_connection::on_delivered(std::size_t returned) {
  take_back_capacity(returned);
  pump();
}

void loopback_connection::on_peer_end(boost::system::error_code reason) {
  if (peer_end_) return;
  peer_end_ = reason;
  notified_peer_ = true;  // it is gone: nobody left to tell
  switch (state_) {
    case state::idle:  // delivered after start(), behind what already arrived
      return;
    case state::open:
      schedule_delivery();  // ends the connection once everything that arrived before is delivered
      return;
    case state::closing:  // the flush cannot complete any more
      finish(errc::closed_locally, {});
      return;
    case state::closed: return;
  }
}

void loopback_connection::schedule_delivery() {
  if (delivery_scheduled_ || state_ != state::open) return;
  delivery_scheduled_ = true;
  boost::asio::post(ex_, [self = self()] {
    self->delivery_scheduled_ = false;
    self->deliver();
  });
}

void loopback_connection::deliver() {
  for (std::size_t n = 0; n < kDeliveryBatch && state_ == state::open && !inbound_.empty(); ++n) {
    message_buffers::buffer message = std::move(inbound_.front());
    inbound_.pop_front();
    deliver_one(std::move(message));
  }
  after_delivery();
}

// The rest of what arrived in a later handler; the peer's end once everything before it is delivered.
void loopback_connection::after_delivery() {
  if (state_ != state::open) return;
  if (!inbound_.empty()) {
    schedule_delivery();
  } else if (peer_end_) {
    finish(*peer_end_, {});
  }
}

void loopback_connection::deliver_one(message_buffers::buffer&& message) {
  ++stats_.messages_received;
  stats_.bytes_received += message->size;
  return_capacity();
  // Lent, not given: its buffer comes back on release and carries our next message.
  const std::uint64_t token = message_buffers::lend(std::move(message));
  // No copy of handler_ (two atomic operations a message): if on_message closes us, finish() hands
  // it to the posted on_close, which keeps it alive until after this call. The message is lent:
  // our callers' reference (the post on_arrival runs in, or the posted delivery) keeps us alive meanwhile.
  handler_->on_message(received_message(message_buffers::lent(token), *this, token));
}

void loopback_connection::maybe_finish_close() {
  if (state_ == state::closing && send_queue_.empty() && !delaying_) {
    finish(errc::closed_locally, errc::closed_by_peer);
  }
}

void loopback_connection::finish(boost::system::error_code reason, boost::system::error_code peer_reason) {
  if (state_ == state::closed) return;
  state_ = state::closed;
  end_reason_ = reason;
  send_queue_.clear();
  buffers_.clear();
  for (std::size_t i = 0; i < inbound_.size(); ++i) return_capacity();
  inbound_.clear();
  delay_timer_.cancel();
  end_reservations(reason);
  if (peer_reason) notify_peer(peer_reason);
  if (handler_) {
    close_reported_ = true;
    // A copy, reset after the post: were the post to throw, handler_ would still own the handler,
    // which may be inside on_message (deliver_one calls it through handler_).
    boost::asio::post(ex_, [handler = handler_, reason] { handler->on_close(reason); });
    handler_.reset();
  }
}

std::pair<std::shared_ptr<connection>, std::shared_ptr<connection>> make_loopback_pair(
    boost::asio::any_io_executor a, boost::asio::any_io_executor b, const loopback_options& options) {
  auto first = std::make_shared<loopback_connection>(std::move(a), options, options.a_to_b, "a");
  auto second = std::make_shared<loopback_connection>(std::move(b), options, options.b_to_a, "b");
  loopback_connection::link(first, second);
  return {std::move(first), std::move(second)};
}

}  // namespace rdmarpc::transport::loopback
