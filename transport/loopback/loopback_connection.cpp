#include "transport/loopback/loopback_connection.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace rdmarpc::transport::loopback {

namespace {
constexpr std::size_t kDeliveryBatch = 64;  // messages delivered per posted handler (fairness)
}

loopback_connection::loopback_connection(boost::asio::any_io_executor ex, const loopback_options& options,
                                         loopback_faults faults, std::string name)
    : ex_(std::move(ex)),
      options_(options),
      faults_(faults),
      name_(std::move(name)),
      delay_timer_(ex_),
      waiters_(ex_) {
  options_.capacity = std::max<std::size_t>(options_.capacity, 1);
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
  if (state_ != state::idle || !handler) return;
  handler_ = std::move(handler);
  state_ = state::open;
  if (!inbound_.empty() || peer_end_) schedule_delivery();
}

boost::system::error_code loopback_connection::send(std::span<const boost::asio::const_buffer> parts) {
  if (state_ != state::open) return errc::not_connected;
  std::size_t size = 0;
  for (const auto& part : parts) size += part.size();
  if (size > options_.connection.max_message_size) return errc::message_too_large;
  if (send_queue_.size() >= options_.connection.send_queue_limit) return errc::send_queue_full;
  std::vector<std::byte> message(size);
  std::size_t offset = 0;
  for (const auto& part : parts) {
    if (part.size() != 0) std::copy_n(static_cast<const std::byte*>(part.data()), part.size(), message.data() + offset);
    offset += part.size();
  }
  send_queue_.push_back(std::move(message));
  pump();  // only posts to the peer: nothing user-visible runs inside send()
  return {};
}

void loopback_connection::async_wait_writable_impl(boost::asio::any_completion_handler<wait_signature> handler) {
  if (state_ == state::idle) {
    writable_waiters::post_completion(ex_, std::move(handler), errc::not_connected);
  } else if (state_ != state::open) {
    writable_waiters::post_completion(ex_, std::move(handler), end_reason_);
  } else if (send_queue_.size() < options_.connection.send_queue_limit) {
    writable_waiters::post_completion(ex_, std::move(handler), {});
  } else {
    waiters_.add(std::move(handler));
  }
}

void loopback_connection::close() {
  switch (state_) {
    case state::idle:
      end_reason_ = errc::closed_locally;
      state_ = state::closed;
      notify_peer(errc::closed_by_peer);
      return;
    case state::open:
      state_ = state::closing;
      end_reason_ = errc::closed_locally;
      // No more deliveries after close(); what already arrived is dropped, its capacity returned.
      for (std::size_t i = 0; i < inbound_.size(); ++i) return_capacity();
      inbound_.clear();
      waiters_.complete_all(errc::closed_locally);
      pump();
      maybe_finish_close();
      return;
    case state::closing:
    case state::closed:
      return;
  }
}

void loopback_connection::pump() {
  while (!delaying_ && (state_ == state::open || state_ == state::closing) && !send_queue_.empty() &&
         in_flight_ < options_.capacity) {
    std::vector<std::byte> message = std::move(send_queue_.front());
    send_queue_.pop_front();
    const std::uint64_t number = ++sequence_;
    if (number == faults_.close_at) {
      finish(errc::connection_lost, errc::connection_lost);
      return;
    }
    if (number == faults_.drop_at) {
      ++stats_.messages_sent;
      stats_.bytes_sent += message.size();
      continue;
    }
    if (number == faults_.corrupt_at) {
      for (auto& b : message) b = ~b;
    }
    if (number == faults_.delay_at && faults_.delay.count() > 0) {
      // Everything behind it waits too: the pipe stays ordered.
      delaying_ = true;
      delay_timer_.expires_after(faults_.delay);
      delay_timer_.async_wait([self = self(), message = std::move(message)](boost::system::error_code ec) mutable {
        self->delaying_ = false;
        if (ec || self->state_ == state::closed) return;
        self->hand_to_peer(std::move(message));
        self->pump();
      });
      return;
    }
    hand_to_peer(std::move(message));
  }
  if (state_ == state::open && send_queue_.size() < options_.connection.send_queue_limit) {
    waiters_.complete_all({});
  }
  maybe_finish_close();
}

void loopback_connection::hand_to_peer(std::vector<std::byte> message) {
  ++stats_.messages_sent;
  stats_.bytes_sent += message.size();
  if (auto peer = peer_.lock()) {
    ++in_flight_;
    boost::asio::post(peer->ex_, [peer, message = std::move(message)]() mutable { peer->on_arrival(std::move(message)); });
  }
}

void loopback_connection::return_capacity() {
  if (auto peer = peer_.lock()) {
    boost::asio::post(peer->ex_, [peer] { peer->on_delivered(); });
  }
}

void loopback_connection::notify_peer(boost::system::error_code reason) {
  if (notified_peer_) return;
  notified_peer_ = true;
  if (auto peer = peer_.lock()) {
    boost::asio::post(peer->ex_, [peer, reason] { peer->on_peer_end(reason); });
  }
}

void loopback_connection::on_arrival(std::vector<std::byte> message) {
  if (state_ == state::closing || state_ == state::closed) {
    return_capacity();  // dropped, but the sender must not stall waiting for it
    return;
  }
  inbound_.push_back(std::move(message));
  schedule_delivery();
}

void loopback_connection::on_delivered() {
  if (in_flight_ > 0) --in_flight_;
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
    case state::closed:
      return;
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
    std::vector<std::byte> message = std::move(inbound_.front());
    inbound_.pop_front();
    ++stats_.messages_received;
    stats_.bytes_received += message.size();
    return_capacity();
    auto handler = handler_;  // on_message may close() us, which drops handler_
    handler->on_message(received_message(std::move(message)));
  }
  if (state_ != state::open) return;
  if (!inbound_.empty()) {
    schedule_delivery();
  } else if (peer_end_) {
    finish(*peer_end_, {});
  }
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
  for (std::size_t i = 0; i < inbound_.size(); ++i) return_capacity();
  inbound_.clear();
  delay_timer_.cancel();
  waiters_.complete_all(reason);
  if (peer_reason) notify_peer(peer_reason);
  if (handler_) {
    boost::asio::post(ex_, [handler = std::move(handler_), reason] { handler->on_close(reason); });
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
