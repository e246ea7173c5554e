#include "transport/connection.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <cstring>

#include "transport/track_work.hpp"

namespace rdmarpc::transport {

// One waiting async_reserve. Shared with its cancellation slot, which may outlive the queue entry.
struct connection::waiter {
  // Constructed, never assigned: Boost 1.81's any_completion_handler move-assignment recurses
  // forever (it copies from an lvalue through its converting constructor).
  waiter(std::size_t n, boost::asio::any_completion_handler<reserve_signature> h,
         const boost::asio::any_io_executor& fallback)
      : bytes(n), handler(std::move(h)), work(track_work(handler, fallback)) {}
  std::size_t bytes;
  boost::asio::any_completion_handler<reserve_signature> handler;  // empty once completed or cancelled
  boost::asio::any_completion_executor work;                       // while handler is here
};

namespace {

// A completion on its way to the user. Members are declared in this order so that, should it be
// destroyed without running (its io_context went away), the reservation is dropped while its
// connection is still held.
struct reserve_completion {
  std::shared_ptr<connection> keep_alive;
  boost::asio::any_completion_handler<connection::reserve_signature> handler;
  boost::asio::any_completion_executor work;  // track_work(handler): until it is dispatched
  boost::system::error_code ec;
  send_reservation reservation;

  // Runs on the handler's associated executor.
  struct invoke {
    std::shared_ptr<connection> keep_alive;
    boost::asio::any_completion_handler<connection::reserve_signature> handler;
    boost::system::error_code ec;
    send_reservation reservation;
    void operator()() { std::move(handler)(ec, std::move(reservation)); }
  };

  // Runs on the connection's executor.
  void operator()() {
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) slot.clear();
    auto target = boost::asio::get_associated_executor(handler, keep_alive->get_executor());
    // dispatch: runs at once when the handler's executor is the connection's (the common case).
    boost::asio::dispatch(target,
                          invoke{std::move(keep_alive), std::move(handler), ec, std::move(reservation)});
  }
};

}  // namespace

connection::~connection() = default;

void connection::hold_doorbell() noexcept {
  ++held_commits_;
  if (doorbell_scheduled_) return;
  doorbell_scheduled_ = true;
  seen_commits_ = 0;
  schedule_doorbell_turn(shared_from_this());
}

void connection::schedule_doorbell_turn(std::shared_ptr<connection> self) noexcept {
  try {
    // defer: this thread's own queue when we run on the executor (no lock, no wake-up).
    boost::asio::defer(get_executor(), [self = std::move(self)]() mutable {
      auto* c = self.get();
      c->doorbell_turn(std::move(self));
    });
  } catch (...) {  // no memory for the turn: send now rather than never
    doorbell_scheduled_ = false;
    held_commits_ = 0;
    ring_doorbell();
  }
}

void connection::doorbell_turn(std::shared_ptr<connection> self) noexcept {
  if (held_commits_ > seen_commits_ && held_commits_ < kMaxHeldCommits) {
    seen_commits_ = held_commits_;  // the sender committed again since the last turn: it may go on
    return schedule_doorbell_turn(std::move(self));
  }
  doorbell_scheduled_ = false;
  held_commits_ = 0;
  ring_doorbell();
}

send_reservation connection::refuse_reserve(std::size_t bytes, boost::system::error_code& ec) const {
  if (!is_open()) {
    ec = errc::not_connected;
  } else if (bytes > max_message_size()) {
    ec = errc::message_too_large;
  } else {
    ec = boost::asio::error::would_block;  // async_reserve calls wait ahead
  }
  return {};
}

boost::system::error_code connection::send_copy(std::span<const boost::asio::const_buffer> parts) {
  std::size_t total = 0;
  for (const auto& part : parts) total += part.size();
  boost::system::error_code ec;
  auto r = try_reserve(total, ec);
  if (ec) return ec;
  std::byte* out = r.data().data();
  for (const auto& part : parts) {
    if (part.size() == 0) continue;
    std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
  r.commit();
  return {};
}

void connection::post_reservation(boost::asio::any_completion_handler<reserve_signature> handler,
                                  boost::system::error_code ec, send_reservation reservation) {
  auto ex = get_executor();
  auto work = track_work(handler, ex);
  boost::asio::post(ex, reserve_completion{shared_from_this(), std::move(handler), std::move(work), ec,
                                           std::move(reservation)});
}

void connection::async_reserve_impl(std::size_t bytes,
                                    boost::asio::any_completion_handler<reserve_signature> handler) {
  boost::system::error_code ec;
  send_reservation r = try_reserve(bytes, ec);
  if (ec != boost::asio::error::would_block) return post_reservation(std::move(handler), ec, std::move(r));
  // (Ended inside try_reserve: end_reservations ran before this waiter was queued.)
  if (!is_open()) return post_reservation(std::move(handler), errc::not_connected, {});
  auto w = std::make_shared<waiter>(bytes, std::move(handler), get_executor());
  auto slot = boost::asio::get_associated_cancellation_slot(w->handler);
  if (slot.is_connected()) {
    slot.assign(
        [weak_w = std::weak_ptr<waiter>(w), weak_c = weak_from_this()](boost::asio::cancellation_type type) {
          using ct = boost::asio::cancellation_type;
          if ((type & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
          auto target = weak_w.lock();
          auto self = weak_c.lock();
          if (!target || !target->handler || !self) return;
          self->post_reservation(std::move(target->handler), boost::asio::error::operation_aborted, {});
          target->work = {};
          // Its entry stays until room_freed() or end_reservations() skips it; a waiter behind it may
          // fit now.
          boost::asio::post(self->get_executor(), [self] { self->room_freed(); });
        });
  }
  waiters_.push_back(std::move(w));
}

void connection::grant_waiters() {
  while (!waiters_.empty()) {
    waiter& front = *waiters_.front();
    if (!front.handler) {  // cancelled
      waiters_.pop_front();
      continue;
    }
    if (!is_open()) return;  // end_reservations() completes them
    boost::system::error_code ec;
    send_reservation r = reserve_now(front.bytes, ec);
    if (ec == boost::asio::error::would_block) return;
    // Posted before the entry (and the work it keeps on the handler's executor) goes: that
    // io_context must never see its work run out in between.
    post_reservation(std::move(front.handler), ec, std::move(r));
    waiters_.pop_front();
  }
}

void connection::end_reservations(boost::system::error_code reason) {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) {
    if (w->handler) post_reservation(std::move(w->handler), reason, {});
  }
}

}  // namespace rdmarpc::transport
