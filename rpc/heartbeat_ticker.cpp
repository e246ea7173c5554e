#include "rpc/heartbeat_ticker.hpp"

#include <algorithm>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>
#include <exception>
#include <map>
#include <random>
#include <unordered_map>

#include "rpc/liveness.hpp"

namespace rdmarpc {

boost::asio::execution_context::id heartbeat_ticker::id;

struct heartbeat_ticker::entry {
  explicit entry(tick_function f) : tick(std::move(f)) {}
  tick_function tick;
  std::atomic<bool> active{true};  // cleared by the subscription's end, on any thread
  // On the executor: the grid instant set_due asked for (min(): the next one), and whether the
  // group's `dues` counts it (from when it joined until it is dropped).
  clock::time_point due = clock::time_point::min();
  bool counted = false;
};

// One grid on one executor. `ticking` and the entries' due are touched on the executor only (by
// the timer's handler, one wait pending at a time, and by set_due); subscribers arrive in
// `incoming` (any thread) and join at the next instant.
struct heartbeat_ticker::group : std::enable_shared_from_this<group> {
  group(const boost::asio::any_io_executor& ex, clock::duration period, clock::duration phase)
      : executor(ex), period(period), phase(phase), domain(random_domain()), timer(ex) {}

  static std::uint64_t random_domain() {
    std::random_device device;
    const std::uint64_t id = (std::uint64_t{device()} << 32) ^ device();
    return id != 0 ? id : 1;  // 0 on the wire means "no domain"
  }

  const boost::asio::any_io_executor executor;
  const clock::duration period;
  const clock::duration phase;
  const std::uint64_t domain;
  // On the executor only (every member runs there): peer domain -> what its connections share.
  std::unordered_map<std::uint64_t, std::weak_ptr<peer_liveness>> peers;

  std::mutex mutex;
  // Guarded by mutex, from the timer to wait_generation.
  boost::asio::steady_timer timer;
  std::vector<std::shared_ptr<entry>> incoming;
  std::size_t subscribed = 0;         // subscriptions not ended
  bool armed = false;                 // a wait is pending
  std::uint64_t wait_generation = 0;  // a wait's handler from before a stop() finds it changed
  // On the executor only: the subscriptions that joined (the handler moves them from incoming),
  // and how many of them need a tick at each grid instant (their due's), so the earliest is at
  // hand however many there are: set_due costs O(log instants), not a walk over them all.
  std::vector<std::shared_ptr<entry>> ticking;
  std::map<clock::time_point, std::size_t> dues;
  bool in_round = false;  // on the executor: the handler is calling ticks

  // A timer that sleeps through idle instants still wakes after this many periods, so a due far
  // off (or never: max()) needs no care with the clock's range.
  static constexpr int kMaxSkip = 64;

  // Under mutex, not armed: wait for the next instant after now.
  void arm_locked() {
    armed = true;
    timer.expires_at(liveness::next_grid_instant(clock::now(), period, phase));
    wait_locked();
  }

  // On the executor: the earliest instant any subscription that joined needs a tick at (one that
  // ended meanwhile may still count until the next round drops it: an early wake-up at worst).
  clock::time_point earliest_due() const {
    return dues.empty() ? clock::time_point::max() : dues.begin()->first;
  }

  // The grid instant a due asks for: the first at or after it (min() stays: the next instant).
  clock::time_point instant_for(clock::time_point due) const {
    constexpr auto far = clock::time_point(clock::duration::max() / 2);  // skip_to caps it anyway
    if (due == clock::time_point::min()) return due;
    if (due >= far) return far;
    return liveness::next_grid_instant(due - clock::duration(1), period, phase);
  }

  // On the executor: entry e's due becomes `due` (a grid instant from instant_for, or min()).
  void move_due(entry& e, clock::time_point due) {
    if (e.counted && e.due != due) {
      uncount(e);
      ++dues[due];
    }
    e.due = due;
  }
  void count(entry& e) {
    e.counted = true;
    ++dues[e.due];
  }
  void uncount(entry& e) {
    const auto it = dues.find(e.due);
    if (--it->second == 0) dues.erase(it);
  }

  // The instant to wake at: `next` (the next grid instant), or `earliest` when that is later
  // (a key of `dues`, already a grid instant: instant_for), within kMaxSkip periods.
  clock::time_point skip_to(clock::time_point next, clock::time_point earliest) const {
    if (earliest <= next) return next;
    return std::min(earliest, next + (kMaxSkip - 1) * period);
  }

  // On the executor, outside a round: a subscription's due changed; wait for the earliest one.
  void reschedule() {
    if (in_round) return;  // the round's end arms for every subscription's due
    const auto earliest = earliest_due();
    const std::lock_guard lock(mutex);
    if (!armed || !incoming.empty()) return;  // stopped, or a newcomer ticks at the next instant
    const auto now = clock::now();
    if (timer.expiry() <= now) return;  // that instant came: its round arms for every due
    const auto next = skip_to(liveness::next_grid_instant(now, period, phase), earliest);
    if (next == timer.expiry()) return;
    timer.expires_at(next);  // cancels the wait, whose handler then sees an error and returns
    wait_locked();
  }

  // Under mutex, armed: a newcomer ticks at the next instant, however far the timer slept.
  void wake_for_newcomer_locked() {
    const auto next = liveness::next_grid_instant(clock::now(), period, phase);
    if (timer.expiry() <= next) return;
    timer.expires_at(next);
    wait_locked();
  }

  void wait_locked() {
    timer.async_wait(
        [self = shared_from_this(), generation = ++wait_generation](const boost::system::error_code& ec) {
          if (!ec) self->on_instant(generation);
        });
  }

  void on_instant(std::uint64_t generation) {
    clock::time_point instant;
    const auto ran_at = clock::now();
    {
      const std::lock_guard lock(mutex);
      if (!armed || generation != wait_generation) return;  // stopped meanwhile
      instant = timer.expiry();
      for (auto& e : incoming) {
        count(*e);
        ticking.push_back(std::move(e));
      }
      incoming.clear();
    }
    // A tick may end its own or another subscription (the flag only) or start one (incoming):
    // the vector is not touched while we walk it. A tick that throws does not stop the others'
    // heartbeats: the round finishes, the timer re-arms, then the exception leaves run() as it
    // would have from a connection's own timer.
    std::exception_ptr error;
    in_round = true;
    for (const auto& e : ticking) {
      if (!e->active.load(std::memory_order_acquire)) continue;
      move_due(*e, clock::time_point::min());  // the next instant, unless the tick says otherwise
      try {
        e->tick(instant, ran_at);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    in_round = false;
    std::erase_if(ticking, [this](const auto& e) {
      if (e->active.load(std::memory_order_acquire)) return false;
      uncount(*e);
      return true;
    });
    const auto earliest = earliest_due();
    {
      const std::lock_guard lock(mutex);
      if (ticking.empty() && incoming.empty()) {
        armed = false;  // nothing to tick: no timer keeps the executor's context busy
      } else if (armed && generation == wait_generation) {
        // The next instant after this one, or after now when this ran more than a period late;
        // later when no subscription can act before (set_due) and none waits to join.
        auto next = instant + period;
        const auto now = clock::now();
        if (next <= now) next = liveness::next_grid_instant(now, period, phase);
        if (incoming.empty()) next = skip_to(next, earliest);
        timer.expires_at(next);
        wait_locked();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  // On the executor, after the last subscription ended: cancel the wait at once, so a closed
  // connection leaves no timer behind (an io_context's run() returns, a server's threads join).
  void stop_if_unused() {
    const std::lock_guard lock(mutex);
    if (!armed || subscribed > 0) return;
    armed = false;
    ++wait_generation;
    timer.cancel();
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
    ++g->subscribed;
    if (!g->armed) {
      g->arm_locked();
    } else {
      g->wake_for_newcomer_locked();
    }
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
  if (!entry_) return;
  entry_->active.store(false, std::memory_order_release);
  entry_.reset();
  bool last = false;
  {
    const std::lock_guard lock(group_->mutex);
    last = --group_->subscribed == 0 && group_->armed;
  }
  if (last) {
    try {
      boost::asio::post(group_->executor, [g = group_] { g->stop_if_unused(); });
    } catch (...) {  // out of memory: the timer stops at its next instant instead
    }
  }
  group_.reset();
}

void heartbeat_ticker::subscription::set_due(clock::time_point due) {
  if (!entry_) return;
  group_->move_due(*entry_, group_->instant_for(due));
  group_->reschedule();
}

heartbeat_ticker::clock::time_point heartbeat_ticker::subscription::next_instant(
    clock::time_point now) const noexcept {
  return group_ ? liveness::next_grid_instant(now, group_->period, group_->phase) : now;
}

std::uint64_t heartbeat_ticker::subscription::domain() const noexcept {
  return group_ ? group_->domain : 0;
}

std::shared_ptr<peer_liveness> heartbeat_ticker::subscription::share(std::uint64_t peer_domain,
                                                                     std::shared_ptr<peer_liveness> mine) {
  if (!group_ || peer_domain == 0) return mine;
  auto& peers = group_->peers;
  std::erase_if(peers, [](const auto& p) { return p.second.expired(); });  // a handful of peers
  auto& slot = peers[peer_domain];
  auto shared = slot.lock();
  if (!shared) {
    slot = mine;
    return mine;
  }
  if (!shared->same_settings(*mine)) return mine;
  return shared;
}

}  // namespace rdmarpc
