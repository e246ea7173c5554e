#include "transport/rdma/device_event_monitor.hpp"

#include <fcntl.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "log/log.hpp"
#include "transport/rdma/fd_watch.hpp"

namespace rdmarpc::transport::rdma {

struct device_event_monitor::device_reader {
  device_reader(const boost::asio::any_io_executor& ex, ibv_context* c)
      : context(c), watch(ex, c->async_fd) {}
  ibv_context* context;
  fd_watch watch;
};

device_event_monitor::subscription& device_event_monitor::subscription::operator=(
    subscription&& other) noexcept {
  if (this != &other) {
    reset();
    monitor_ = std::move(other.monitor_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void device_event_monitor::subscription::reset() noexcept {
  if (id_ == 0) return;
  if (auto monitor = monitor_.lock()) monitor->unsubscribe(id_);
  monitor_.reset();
  id_ = 0;
}

std::shared_ptr<device_event_monitor> device_event_monitor::create(boost::asio::any_io_executor ex) {
  return std::shared_ptr<device_event_monitor>(new device_event_monitor(std::move(ex)));
}

device_event_monitor::device_event_monitor(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

// Nothing of ours runs on ex_ now (every handler holds us while it runs): letting go of the fds
// here cancels their waits, whose handlers then find no monitor.
device_event_monitor::~device_event_monitor() = default;

device_event_monitor::subscription device_event_monitor::subscribe(const device_event_target& target,
                                                                   end_callback on_end) {
  std::uint64_t id = 0;
  bool new_device = false;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    subscribers_.emplace(id, subscriber{target, std::move(on_end)});
    new_device = devices_.insert(target.context).second;
  }
  if (new_device) {
    boost::asio::post(ex_, [weak = weak_from_this(), context = target.context] {
      if (auto self = weak.lock()) self->start_reading(context);
    });
  }
  return subscription(weak_from_this(), id);
}

void device_event_monitor::unsubscribe(std::uint64_t id) noexcept {
  std::lock_guard lock(mutex_);
  subscribers_.erase(id);
}

device_event_monitor::figures device_event_monitor::stats() const {
  std::lock_guard lock(mutex_);
  figures f = figures_;
  f.subscriptions = subscribers_.size();
  return f;
}

void device_event_monitor::start_reading(ibv_context* context) {
  // Non-blocking, so reading until EAGAIN empties the queue (the reactor's wait is edge-triggered).
  const int flags = ::fcntl(context->async_fd, F_GETFL);
  if (flags < 0 || ::fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    rdmarpc::logger()->warn("rdma device {}: async events not watched: fcntl: {}",
                            ibv_get_device_name(context->device), std::strerror(errno));
    return;
  }
  std::unique_ptr<device_reader> reader;
  try {
    reader = std::make_unique<device_reader>(ex_, context);
  } catch (const std::exception& e) {
    // EEXIST: another monitor reads this device on the same io_context (there should be one).
    rdmarpc::logger()->warn(
        "rdma device {}: async events not watched ({}); share one device_event_monitor "
        "among every server and channel of the process",
        ibv_get_device_name(context->device), e.what());
    return;
  }
  auto& r = *readers_.emplace(context, std::move(reader)).first->second;
  {
    std::lock_guard lock(mutex_);
    ++figures_.devices;
  }
  read_events(r);
}

void device_event_monitor::read_events(device_reader& reader) {
  for (;;) {
    ibv_async_event event{};
    if (ibv_get_async_event(reader.context, &event) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      // The device is gone (rdma_cm's DEVICE_REMOVAL ends its connections); a readable fd that
      // keeps failing would spin, so stop here.
      rdmarpc::logger()->warn(
          "rdma device {}: ibv_get_async_event: {}; its async events are no longer watched",
          ibv_get_device_name(reader.context->device), std::strerror(errno));
      reader.watch.release();
      return;
    }
    const device_event_info info = describe(event);
    ibv_ack_async_event(&event);  // ibv_destroy_qp and ibv_destroy_cq wait for their events' acks
    dispatch(reader.context, info);
  }
  reader.watch.async_wait_readable([weak = weak_from_this(), &reader](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;  // released: `reader` may be gone
    self->read_events(reader);
  });
}

void device_event_monitor::dispatch(ibv_context* context, const device_event_info& event) {
  std::vector<std::pair<end_callback, errc>> told;
  {
    std::lock_guard lock(mutex_);
    ++figures_.events_read;
    for (const auto& [id, s] : subscribers_) {
      if (s.target.context != context) continue;
      if (const auto reason = device_event_end_reason(event, s.target)) told.emplace_back(s.on_end, *reason);
    }
    figures_.connections_ended += told.size();
  }
  // Connection-wide events are logged by the connection's owner (its close reason); what concerns a
  // whole port or device once here.
  const char* device = ibv_get_device_name(context->device);
  if (event.type == IBV_EVENT_PORT_ERR || event.type == IBV_EVENT_DEVICE_FATAL) {
    rdmarpc::logger()->warn("rdma device {} port {}: {}: ending its {} connections", device, event.port,
                            ibv_event_type_str(event.type), told.size());
  } else {
    rdmarpc::logger()->debug("rdma device {}: {} ({} connections end)", device,
                             ibv_event_type_str(event.type), told.size());
  }
  for (auto& [on_end, reason] : told) on_end(reason);
}

}  // namespace rdmarpc::transport::rdma
