#pragma once
// deadline_queue: the deadlines of one owner's calls (a channel's, a server connection's), so one
// Asio timer serves them all instead of a timer per call (which costs its arming, its cancellation
// and the aborted wait's trip through the scheduler: ~1,300 instructions a call on each side).
// Entries are never removed when their call finishes early; the owner's liveness check skips them
// when they come due, before it arms its timer, or when they are the majority (compact_if), which
// bounds memory by the calls in flight. Layer: rpc. Threading: its owner's executor only; pure.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace rdmarpc {

template <typename Key>
class deadline_queue {
 public:
  using clock = std::chrono::steady_clock;

  void add(clock::time_point deadline, Key key) {
    heap_.push_back({deadline, key});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The earliest deadline of an entry `is_live(key, deadline)` accepts, dropping the earlier ones
  // it refuses; time_point::max() when none is left. What the owner's timer should wait for.
  template <typename IsLive>
  clock::time_point earliest_live(IsLive&& is_live) {
    while (!heap_.empty() && !is_live(heap_.front().key, heap_.front().deadline)) pop();
    return heap_.empty() ? clock::time_point::max() : heap_.front().deadline;
  }

  // Calls expire(key, deadline) for every entry due at `now`, earliest first, each taken out just
  // before (so `expire` may add entries). Should `expire` throw, the entries not reached stay.
  template <typename Expire>
  void pop_due(clock::time_point now, Expire&& expire) {
    while (!heap_.empty() && heap_.front().deadline <= now) {
      const entry due = heap_.front();
      pop();
      expire(due.key, due.deadline);
    }
  }

  // When more than twice `live_bound` entries (plus a few) are held, keeps only those `is_live`
  // accepts. `live_bound`: at least the number of live entries (the owner's calls in flight).
  // Amortized over the adds between two compactions, a few checks per add.
  template <typename IsLive>
  void compact_if(std::size_t live_bound, IsLive&& is_live) {
    if (heap_.size() <= 2 * live_bound + kSlack) return;
    std::erase_if(heap_, [&](const entry& e) { return !is_live(e.key, e.deadline); });
    std::make_heap(heap_.begin(), heap_.end(), later);
  }

  std::size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.empty(); }
  void clear() noexcept { heap_.clear(); }

 private:
  struct entry {
    clock::time_point deadline;
    Key key;
  };
  static bool later(const entry& a, const entry& b) noexcept { return a.deadline > b.deadline; }
  void pop() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }

  static constexpr std::size_t kSlack = 64;
  std::vector<entry> heap_;  // a min-heap on deadline
};

}  // namespace rdmarpc
