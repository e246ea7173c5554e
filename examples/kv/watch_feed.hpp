#pragma once
// kv::watch_feed: the events of one Watch call, from the store's threads to the watching
// coroutine. push() may be called from any thread (it posts to the coroutine's executor); next()
// waits for the next event. A watcher more than kMaxBehind events behind (its client reads too
// slowly) is ended with RESOURCE_EXHAUSTED instead of growing without bound.
// Layer: example. Threading: push from any thread; next on the executor given at construction.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <memory>

#include "kv.pb.h"
#include "rpc/status.hpp"

namespace kv {

class watch_feed : public std::enable_shared_from_this<watch_feed> {
 public:
  static constexpr std::size_t kMaxBehind = 10'000;

  explicit watch_feed(boost::asio::any_io_executor ex)
      : timer_(std::move(ex), boost::asio::steady_timer::time_point::max()) {}

  void push(const WatchEvent& event) {
    boost::asio::post(timer_.get_executor(), [self = shared_from_this(), event] {
      if (self->queue_.size() >= kMaxBehind) {
        self->overflowed_ = true;
      } else {
        self->queue_.push_back(event);
      }
      self->timer_.cancel();  // wakes next()
    });
  }

  // The next event. Throws rdmarpc::status_error RESOURCE_EXHAUSTED after an overflow, and
  // boost::system::system_error when the call is cancelled (its stream ended).
  boost::asio::awaitable<WatchEvent> next() {
    while (queue_.empty() && !overflowed_) {
      (void)co_await timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
      const auto state = co_await boost::asio::this_coro::cancellation_state;
      if (state.cancelled() != boost::asio::cancellation_type::none) {
        throw boost::system::system_error(boost::asio::error::operation_aborted);
      }
    }
    if (overflowed_) {
      throw rdmarpc::status_error(rdmarpc::status_code::resource_exhausted,
                                  "the watcher fell more than 10000 events behind");
    }
    WatchEvent event = std::move(queue_.front());
    queue_.pop_front();
    co_return event;
  }

 private:
  boost::asio::steady_timer timer_;
  std::deque<WatchEvent> queue_;  // on the timer's executor
  bool overflowed_ = false;
};

}  // namespace kv
