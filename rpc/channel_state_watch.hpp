#pragma once
// channel_state_watch: a channel's published state (channel::state, from any thread) and the
// wait_for_state_change calls waiting for it to move on. Layer: rpc. Threading: published() and
// next_waiter_id() from any thread; the rest on the channel's executor.

#include <atomic>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "rpc/connectivity.hpp"

namespace rdmarpc {

class channel_state_watch {
 public:
  struct waiter {
    std::uint64_t id = 0;
    channel_state last_observed = channel_state::idle;
    // channel::state_change_signature, written out (no need for all of rpc/channel.hpp here)
    boost::asio::any_completion_handler<void(boost::system::error_code, channel_state)> handler;
    boost::asio::any_io_executor work;  // an outstanding operation keeps its executor busy
  };

  // Completions go through `ex` (the channel's) to each handler's associated executor.
  explicit channel_state_watch(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

  // The state as last published.
  channel_state published() const noexcept {
    return static_cast<channel_state>(state_.load(std::memory_order_relaxed));
  }
  std::uint64_t next_waiter_id() noexcept { return next_waiter_id_.fetch_add(1, std::memory_order_relaxed); }
  bool has_waiters() const noexcept { return !waiters_.empty(); }

  // The channel's state is `now`: the waiters that observed another one complete.
  void publish(channel_state now);
  // A wait_for_state_change call, with the state `now`: completes at once when it observed another
  // state (or the channel shut down), else waits. True when it waits (it is demand for a connection).
  bool add(waiter w, channel_state now);
  // Completes waiter `id` with operation_aborted, if it still waits.
  void cancel(std::uint64_t id, channel_state now);

 private:
  void complete(waiter w, boost::system::error_code ec, channel_state s);

  const boost::asio::any_io_executor ex_;
  std::vector<waiter> waiters_;                                                      // on ex_
  std::atomic<std::uint8_t> state_{static_cast<std::uint8_t>(channel_state::idle)};  // any thread
  std::atomic<std::uint64_t> next_waiter_id_{1};
};

}  // namespace rdmarpc
