#pragma once
// scrape_coalescer: bounds what metrics scrapes cost the RPC threads (metrics_http). Every scrape is
// answered with the page of a collection that started after it arrived (never a stale page), but
// scrapes share collections: at most one is in flight, and one starts no sooner than
// `min_interval` after the previous one. However often scrapers ask, the RPC threads see at most
// one collection (a small task per connection) per interval.
// Pure: no I/O, no clock of its own (every input takes `now`), so tests drive it by hand.
// Layer: rpc. Threading: not thread-safe; the endpoint uses it on its own thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rdmarpc {

class scrape_coalescer {
 public:
  using clock = std::chrono::steady_clock;
  using page_ptr = std::shared_ptr<const std::string>;
  using answer = std::function<void(const page_ptr&)>;

  // What the caller does next: start a collection now (then call collected()), or call wake() at
  // `wake_at` (a timer), or nothing.
  struct next_step {
    bool collect_now = false;
    std::optional<clock::time_point> wake_at;
  };

  explicit scrape_coalescer(clock::duration min_interval) noexcept : min_interval_(min_interval) {}

  // A scrape arrived: `a` is called with the page of the next collection to start.
  next_step request(clock::time_point now, answer a) {
    next_.push_back(std::move(a));
    return step(now);
  }

  // The collection in flight produced `page`: its scrapes are answered (here, in order).
  next_step collected(clock::time_point now, const page_ptr& page) {
    in_flight_ = false;
    auto answered = std::exchange(current_, {});
    for (auto& a : answered) a(page);
    return step(now);
  }

  // The time a previous step asked for has come.
  next_step wake(clock::time_point now) { return step(now); }

  // The endpoint is closing: the waiting scrapes are dropped unanswered.
  void clear() noexcept {
    next_.clear();
    current_.clear();
  }

  std::uint64_t collections() const noexcept { return collections_; }
  std::size_t waiting() const noexcept { return next_.size() + current_.size(); }

 private:
  next_step step(clock::time_point now) {
    if (in_flight_ || next_.empty()) return {};
    if (collections_ != 0 && now - last_start_ < min_interval_) return {false, last_start_ + min_interval_};
    in_flight_ = true;
    last_start_ = now;
    ++collections_;
    current_ = std::exchange(next_, {});
    return {true, std::nullopt};
  }

  clock::duration min_interval_;
  clock::time_point last_start_{};
  std::uint64_t collections_ = 0;
  bool in_flight_ = false;
  std::vector<answer> current_;  // scrapes the collection in flight answers
  std::vector<answer> next_;     // scrapes that arrived after it started: the next one answers them
};

}  // namespace rdmarpc
