#pragma once
// heartbeat_ticker: one timer per executor and tick grid drives the heartbeat ticks of every
// connection on that executor. Per-connection timers cost a timer-queue insertion, a handler and a
// re-arm per connection and tick (~1,300 instructions; 100 idle connections, client and server,
// tick 667 times a second); here one timer wakes per grid instant and calls each subscriber in a
// loop, and sleeps through the instants at which no subscriber can act (subscription::set_due).
// An Asio service of the executor's execution context (no global state): groups are keyed
// by executor (a strand is its own key), period and phase.
// Layer: rpc. Threading: subscribe() and ending a subscription from any thread; the tick functions
// run on the subscription's executor, never concurrently with each other.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace rdmarpc {

class peer_liveness;

class heartbeat_ticker : public boost::asio::execution_context::service {
 public:
  using clock = std::chrono::steady_clock;
  // Called on the executor at the grid instants the group's timer wakes at (every one, unless all
  // of its subscriptions let it sleep: subscription::set_due), with that instant (timer latency differs from
  // tick to tick, the grid does not) and the time the round of ticks began (later than the instant
  // by the timer's latency, or by a whole stall of the process: liveness::ping_stamp and
  // holds_verdict).
  using tick_function = std::function<void(clock::time_point grid_instant, clock::time_point ran_at)>;

  static boost::asio::execution_context::id id;

  explicit heartbeat_ticker(boost::asio::execution_context& context);
  ~heartbeat_ticker() override;

  struct entry;
  struct group;

  // Ticks until destroyed or reset() (from any thread; a tick in progress finishes).
  class subscription {
   public:
    subscription() noexcept = default;
    subscription(subscription&&) noexcept = default;
    subscription& operator=(subscription&& other) noexcept;
    ~subscription() { reset(); }
    void reset() noexcept;

    // This grid's heartbeat domain: a random non-zero id, sent in pings and pongs, by which peers
    // tell which of their connections lead to one grid (0 when not subscribed).
    std::uint64_t domain() const noexcept;

    // On the subscription's executor: its next tick is not needed before `due` (liveness::next_due;
    // clock::time_point::min(): at the next instant, the default). Within a tick it applies to the
    // instants after that tick's round; outside one it moves the timer to the group's earliest due
    // at once, later or sooner (unless a newcomer waits, or the timer's instant came: that round
    // arms again). The timer waits for the earliest due of its group's subscriptions, so idle
    // connections wake their thread only when one of them may act. O(log n) in the distinct dues.
    void set_due(clock::time_point due);
    // The first grid instant after `now`.
    clock::time_point next_instant(clock::time_point now) const noexcept;

    // On the subscription's executor: the peer_liveness shared by this grid's connections to the
    // peer grid `peer_domain`. The first connection to ask makes `mine` the shared one; `mine`
    // comes back unshared when peer_domain is 0 or the shared one has other settings.
    std::shared_ptr<peer_liveness> share(std::uint64_t peer_domain, std::shared_ptr<peer_liveness> mine);

   private:
    friend class heartbeat_ticker;
    subscription(std::shared_ptr<group> g, std::shared_ptr<entry> e) noexcept
        : group_(std::move(g)), entry_(std::move(e)) {}
    std::shared_ptr<group> group_;  // keeps the group (and its timer) while we tick
    std::shared_ptr<entry> entry_;
  };

  // Calls `tick` on `ex` at the instants of the grid of `period` shifted by `phase` (see
  // liveness::next_tick), from the first one after now, until the subscription ends: at every one,
  // unless the group's set_due let the timer sleep through some.
  subscription subscribe(const boost::asio::any_io_executor& ex, clock::duration period,
                         clock::duration phase, tick_function tick);

  // The ticker of `ex`'s execution context.
  static heartbeat_ticker& of(const boost::asio::any_io_executor& ex);

  // Timers running (tests: one per executor and grid, none once every subscription ended).
  std::size_t running_groups();

 private:
  void shutdown() override;

  std::mutex mutex_;
  std::vector<std::weak_ptr<group>> groups_;
};

}  // namespace rdmarpc
