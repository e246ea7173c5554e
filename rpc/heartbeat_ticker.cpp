#include "rpc/heartbeat_ticker.hpp"

#include <algorithm>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rpc/liveness.hpp"

namespace rdmarpc {

boost::asio::execution_context::id heartbeat_ticker::id;

struct heartbeat_ticker::entry {
  explicit entry(tick_function f) : tick(std::move(f)) {}
  tick_function tick;
  std::atomic<bool> active{true};  // cleared by the subscription's end, on any thread
};

// One grid on one executor. `ticking` is touched on the executor only; subscribers arrive in
// `incoming` (any thread) and join at the next instant.
struct heartbeat_ticker::group : std::enable_shared_from_this<group> {
  group(const boost::asio::any_io_executor& ex, clock::duration period, clock::duration phase)
      : executor(ex), period(period), phase(phase), timer(ex) {}

  const boost::asio::any_io_executor executor;
  const clock::duration period;
  const clock::duration phase;

  std::mutex mutex;
  std::vector<std::shared_ptr<entry>> incoming;  // guarded by mutex
  bool armed = false;                            // guarded by mutex; the timer's wait is pending
  boost::asio::steady_timer timer;               // waits only while armed (by whoever set it)
  std::vector<std::shared_ptr<entry>> ticking;   // on the executor

  // Under mutex, armed false: the next instant after now.
  void arm_locked() {
    armed = true;
    timer.expires_at(liveness::next_grid_instant(clock::now(), period, phase));
    wait_locked();
  }

  void wait_locked() {
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->on_instant();
    });
  }

  void on_instant() {
    const auto instant = timer.expiry();
    {
      const std::lock_guard lock(mutex);
      for (auto& e : incoming) ticking.push_back(std::move(e));
      incoming.clear();
    }
    // A tick may end its own or another subscription (the flag only) or start one (incoming):
    // the vector is not touched while we walk it.
    for (const auto& e : ticking)
      if (e->active.load(std::memory_order_acquire)) e->tick(instant);
    std::erase_if(ticking, [](const auto& e) { return !e->active.load(std::memory_order_acquire); });
    const std::lock_guard lock(mutex);
    if (ticking.empty() && incoming.empty()) {
      armed = false;  // nothing to tick: no timer keeps the executor's context busy
      return;
    }
    // The next instant after this one, or after now when this ran more than a period late.
    auto next = instant + period;
    const auto now = clock::now();
    if (next <= now) next = liveness::next_grid_instant(now, period, phase);
    timer.expires_at(next);
    wait_locked();
  }
};

heartbeat_ticker::heartbeat_ticker(boost::asio::execution_context& context)
    : boost::asio::execution_context::service(context) {}

heartbeat_ticker::~heartbeat_ticker() = default;

void heartbeat_ticker::shutdown() {
  const std::lock_guard lock(mutex_);
  groups_.clear();
}

heartbeat_ticker& heartbeat_ticker::of(const boost::asio::any_io_executor& ex) {
  return boost::asio::use_service<heartbeat_ticker>(boost::asio::query(ex, boost::asio::execution::context));
}

heartbeat_ticker::subscription heartbeat_ticker::subscribe(const boost::asio::any_io_executor& ex,
                                                           clock::duration period, clock::duration phase,
                                                           tick_function tick) {
  std::shared_ptr<group> g;
  {
    const std::lock_guard lock(mutex_);
    std::erase_if(groups_, [](const auto& w) { return w.expired(); });
    for (const auto& w : groups_) {
      auto candidate = w.lock();
      if (candidate && candidate->period == period && candidate->phase == phase &&
          candidate->executor == ex) {
        g = std::move(candidate);
        break;
      }
    }
    if (!g) {
      g = std::make_shared<group>(ex, period, phase);
      groups_.push_back(g);
    }
  }
  auto e = std::make_shared<entry>(std::move(tick));
  {
    const std::lock_guard lock(g->mutex);
    g->incoming.push_back(e);
    if (!g->armed) g->arm_locked();
  }
  return subscription(std::move(g), std::move(e));
}

std::size_t heartbeat_ticker::running_groups() {
  const std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& w : groups_) {
    if (const auto g = w.lock()) {
      const std::lock_guard group_lock(g->mutex);
      n += g->armed ? 1 : 0;
    }
  }
  return n;
}

heartbeat_ticker::subscription& heartbeat_ticker::subscription::operator=(subscription&& other) noexcept {
  if (this != &other) {
    reset();
    group_ = std::move(other.group_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

void heartbeat_ticker::subscription::reset() noexcept {
  if (entry_) entry_->active.store(false, std::memory_order_release);
  entry_.reset();
  group_.reset();
}

}  // namespace rdmarpc
