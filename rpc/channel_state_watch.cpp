#include "rpc/channel_state_watch.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <utility>

namespace rdmarpc {

void channel_state_watch::publish(channel_state now) {
  if (static_cast<channel_state>(
          state_.exchange(static_cast<std::uint8_t>(now), std::memory_order_acq_rel)) == now)
    return;
  std::vector<waiter> due;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->last_observed != now) {
      due.push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& w : due) complete(std::move(w), {}, now);
}

bool channel_state_watch::add(waiter w, channel_state now) {
  if (w.last_observed == channel_state::shutdown && now == channel_state::shutdown) {
    complete(std::move(w), boost::asio::error::shut_down, now);
    return false;
  }
  if (w.last_observed != now) {
    complete(std::move(w), {}, now);
    return false;
  }
  waiters_.push_back(std::move(w));
  return true;
}

void channel_state_watch::cancel(std::uint64_t id, channel_state now) {
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->id == id) {
      auto w = std::move(*it);
      waiters_.erase(it);
      return complete(std::move(w), boost::asio::error::operation_aborted, now);
    }
  }
}

void channel_state_watch::complete(waiter w, boost::system::error_code ec, channel_state s) {
  // Through ex_ to the handler's associated executor (never inline: the channel may be inside a call).
  boost::asio::post(ex_, boost::asio::append(std::move(w.handler), ec, s));
}

}  // namespace rdmarpc
