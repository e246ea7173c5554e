#include "services/health_service.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "rpc/status.hpp"

namespace rdmarpc::services {

namespace health = grpc::health::v1;

// One Watch call: the status it has not sent yet (only the latest: a slow client skips the ones
// in between) and whether it should end. The state is guarded by the service's mutex; the timer
// is used on the watch's executor only (a connection's io_context, one thread), where wake()
// cancels it to make the coroutine look at the state again.
class health_service::watcher : public std::enable_shared_from_this<watcher> {
 public:
  explicit watcher(boost::asio::any_io_executor ex)
      : timer_(std::move(ex), boost::asio::steady_timer::time_point::max()) {}

  // Under the service's mutex.
  void update_locked(serving_status status) {
    latest_ = status;
    changed_ = true;
    wake_locked();
  }
  void end_locked() {
    ending_ = true;
    wake_locked();
  }
  // What to do next: a status to send, the end, or nothing yet (wait()).
  struct step {
    std::optional<serving_status> send;
    bool end = false;
  };
  step next_locked() {
    wake_posted_ = false;
    if (changed_) {
      changed_ = false;
      return {latest_, false};
    }
    return {std::nullopt, ending_};
  }

  // Waits for wake() (or the call's cancellation); on the watch's executor.
  boost::asio::awaitable<void> wait() {
    (void)co_await timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }

 private:
  // At most one wake is in flight: any number of changes before the coroutine looks cost one post.
  void wake_locked() {
    if (wake_posted_) return;
    wake_posted_ = true;
    boost::asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
  }
  friend class health_service;
  boost::asio::steady_timer timer_;
  serving_status latest_ = health::HealthCheckResponse::SERVICE_UNKNOWN;
  bool changed_ = false;
  bool ending_ = false;
  bool wake_posted_ = false;
};

health_service::health_service() {
  statuses_.emplace("", health::HealthCheckResponse::SERVING);
}

health_service::~health_service() = default;

void health_service::set_status(std::string_view service, serving_status status) {
  std::lock_guard lock(mutex_);
  if (shut_down_) return;
  auto it = statuses_.find(service);
  if (it == statuses_.end()) {
    statuses_.emplace(std::string(service), status);
  } else if (it->second == status) {
    return;  // no change: watchers are told changes only
  } else {
    it->second = status;
  }
  notify_locked(service, status);
}

void health_service::clear_status(std::string_view service) {
  std::lock_guard lock(mutex_);
  auto it = statuses_.find(service);
  if (it == statuses_.end()) return;
  statuses_.erase(it);
  notify_locked(service, health::HealthCheckResponse::SERVICE_UNKNOWN);
}

std::optional<serving_status> health_service::status(std::string_view service) const {
  std::lock_guard lock(mutex_);
  auto it = statuses_.find(service);
  if (it == statuses_.end()) return std::nullopt;
  return it->second;
}

std::size_t health_service::watch_count() const {
  std::lock_guard lock(mutex_);
  return watchers_.size();
}

void health_service::shutdown() {
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (auto& [name, status] : statuses_) {
    if (status == health::HealthCheckResponse::NOT_SERVING) continue;
    status = health::HealthCheckResponse::NOT_SERVING;
    notify_locked(name, status);
  }
  for (auto& [name, w] : watchers_) w->end_locked();
}

void health_service::resume() {
  std::lock_guard lock(mutex_);
  shut_down_ = false;
}

void health_service::notify_locked(std::string_view service, serving_status status) {
  auto [first, last] = watchers_.equal_range(service);
  for (auto it = first; it != last; ++it) it->second->update_locked(status);
}

boost::asio::awaitable<health::HealthCheckResponse> health_service::check(
    rdmarpc::server_context& context, const health::HealthCheckRequest& request) {
  health::HealthCheckResponse response;
  if (auto s = status(request.service())) {
    response.set_status(*s);
  } else {
    context.set_status(status_code::not_found, "unknown service '" + request.service() + "'");
  }
  co_return response;
}

boost::asio::awaitable<void> health_service::watch(rdmarpc::server_context& /*context*/,
                                                   const health::HealthCheckRequest& request,
                                                   rdmarpc::server_writer<health::HealthCheckResponse>& out) {
  auto w = std::make_shared<watcher>(co_await boost::asio::this_coro::executor);
  std::multimap<std::string, std::shared_ptr<watcher>, std::less<>>::iterator registration;
  {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(request.service());
    w->latest_ = it == statuses_.end() ? health::HealthCheckResponse::SERVICE_UNKNOWN : it->second;
    w->changed_ = true;
    w->ending_ = shut_down_;
    registration = watchers_.emplace(request.service(), w);
  }
  // Unregistered however the coroutine ends (returned, or destroyed while suspended).
  struct unregister {
    health_service& self;
    std::multimap<std::string, std::shared_ptr<watcher>, std::less<>>::iterator it;
    ~unregister() {
      std::lock_guard lock(self.mutex_);
      self.watchers_.erase(it);
    }
  } const guard{*this, registration};

  health::HealthCheckResponse response;
  for (;;) {
    watcher::step step;
    {
      std::lock_guard lock(mutex_);
      step = w->next_locked();
    }
    if (step.send) {
      response.set_status(*step.send);
      auto [ec] = co_await out.async_write(response, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) co_return;  // the stream ended (cancelled, connection lost): nobody to tell
      continue;
    }
    if (step.end) co_return;  // shutdown(): the last status went out, end with OK
    co_await w->wait();
    const auto state = co_await boost::asio::this_coro::cancellation_state;
    if (state.cancelled() != boost::asio::cancellation_type::none) co_return;  // client cancelled
  }
}

}  // namespace rdmarpc::services
