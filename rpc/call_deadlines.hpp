#pragma once
// call_deadlines: one Asio timer for all the deadlines of a channel's or a server connection's
// calls, armed for the earliest deadline of a call still in flight (deadline_queue holds them).
// A timer per call cost its arming, its cancellation and the aborted wait's trip through the
// scheduler on every call that finished in time: ~1,200 instructions a call on each side.
// The owner (held by a shared_ptr) provides:
//   bool deadline_live(Key, time_point)  the entry is still that call's (it is in flight)
//   void deadline_passed(Key)            end the call: its deadline has passed
//   void deadlines_due()                 call fire(*this)
// Layer: rpc. Threading: the owner's executor only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>

#include "rpc/deadline_queue.hpp"

namespace rdmarpc {

template <typename Key>
class call_deadlines {
 public:
  using clock = std::chrono::steady_clock;

  explicit call_deadlines(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  // Call `key` must end at `deadline`. `in_flight`: at least the owner's calls in flight (bounds
  // the entries kept for calls that finished early).
  template <typename Owner>
  void watch(Owner& owner, Key key, clock::time_point deadline, std::size_t in_flight) {
    queue_.add(deadline, key);
    queue_.compact_if(in_flight, [&owner](Key k, clock::time_point d) { return owner.deadline_live(k, d); });
    if (deadline < armed_) arm(owner, deadline);
  }

  // The timer went off: ends the calls whose deadline passed, then waits for the next one.
  // Should ending a call throw, the timer is armed again before the exception leaves: the calls
  // not reached yet end at the next wake-up, at once.
  template <typename Owner>
  void fire(Owner& owner) {
    armed_ = clock::time_point::max();
    try {
      queue_.pop_due(clock::now(), [&owner](Key k, clock::time_point d) {
        if (owner.deadline_live(k, d)) owner.deadline_passed(k);
      });
    } catch (...) {
      arm_for_earliest(owner);
      throw;
    }
    arm_for_earliest(owner);
  }

  // No more deadlines (the owner closed).
  void stop() {
    timer_.cancel();
    queue_.clear();
    armed_ = clock::time_point::max();
  }

 private:
  template <typename Owner>
  void arm_for_earliest(Owner& owner) {
    const auto next =
        queue_.earliest_live([&owner](Key k, clock::time_point d) { return owner.deadline_live(k, d); });
    if (next != clock::time_point::max()) arm(owner, next);
  }
  template <typename Owner>
  void arm(Owner& owner, clock::time_point at) {
    armed_ = at;
    timer_.expires_at(at);  // a wait for a later deadline ends with operation_aborted
    timer_.async_wait([weak = owner.weak_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->deadlines_due();
    });
  }

  deadline_queue<Key> queue_;
  boost::asio::steady_timer timer_;
  clock::time_point armed_ = clock::time_point::max();  // what timer_ waits for
};

}  // namespace rdmarpc
