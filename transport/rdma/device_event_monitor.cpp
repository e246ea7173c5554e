#include "transport/rdma/device_event_monitor.hpp"

#include <fcntl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "log/log.hpp"
#include "transport/rdma/fd_watch.hpp"

namespace rdmarpc::transport::rdma {

struct device_event_monitor::device_reader {
  device_reader(const boost::asio::any_io_executor& ex, ibv_context* context)
      : watch(ex, context->async_fd) {}
  fd_watch watch;
};

namespace {

const char* device_name(ibv_context* context) noexcept {
  const char* name = ibv_get_device_name(context->device);
  return name != nullptr ? name : "?";
}

// A PORT_ERR may have waited in the queue while the link came back (a flap before anyone read it).
bool port_active(ibv_context* context, int port) noexcept {
  ibv_port_attr attr{};
  return ibv_query_port(context, static_cast<std::uint8_t>(port), &attr) == 0 &&
         attr.state == IBV_PORT_ACTIVE;
}

}  // namespace

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
  return std::shared_ptr<device_event_monitor>(new device_event_monitor(ex));
}

// A strand: the executor may be run by several threads (a server's own executor), and the
// readers are touched on it only.
device_event_monitor::device_event_monitor(const boost::asio::any_io_executor& ex)
    : ex_(boost::asio::make_strand(ex)) {}

// No handler of ours runs now (each holds the monitor while it runs). Destroying the readers lets
// go of their fds, cancelling the waits: that touches the reactor's state of each fd, which only
// ex_'s thread may do when its io_context runs without per-descriptor locks (the concurrency hint
// UNSAFE_IO, README), so it happens there. (Were even the post to fail, here.)
device_event_monitor::~device_event_monitor() {
  if (readers_.empty()) return;
  try {
    boost::asio::post(ex_, [readers = std::move(readers_)]() mutable { readers.clear(); });
  } catch (...) {
  }
}

device_event_monitor::subscription device_event_monitor::subscribe(const device_event_target& target,
                                                                   end_callback on_end) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    subscribers_.emplace(id, subscriber{target, std::move(on_end)});
  }
  subscription s(weak_from_this(), id);  // from here a throw unsubscribes
  bool new_device = false;
  {
    std::lock_guard lock(mutex_);
    new_device = devices_.insert(target.context).second;
  }
  if (new_device) {
    try {
      boost::asio::post(ex_, [weak = weak_from_this(), context = target.context] {
        if (auto self = weak.lock()) self->start_reading(context);
      });
    } catch (...) {
      std::lock_guard lock(mutex_);
      devices_.erase(target.context);  // the next subscription asks again
      throw;
    }
  }
  return s;
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
  std::string failure;
  // Non-blocking, so reading until EAGAIN empties the queue (the reactor's wait is edge-triggered).
  const int flags = ::fcntl(context->async_fd, F_GETFL);
  if (flags < 0 || ::fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    failure = std::string("fcntl: ") + std::strerror(errno);
  } else {
    try {
      readers_.emplace(context, std::make_unique<device_reader>(ex_, context));
    } catch (const std::exception& e) {
      // EEXIST: another monitor watches this fd on the same io_context.
      failure = e.what();
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (failure.empty()) {
      ++figures_.devices;
    } else {
      devices_.erase(context);  // the next subscription tries again
      if (!std::exchange(warned_unwatched_, true)) {
        rdmarpc::logger()->warn(
            "rdma device {}: its async events are not watched ({}); one device_event_monitor per process, "
            "shared by every server and channel, reads them (connection_options::device_events)",
            device_name(context), failure);
      }
    }
  }
  if (failure.empty()) read_events(context);
}

void device_event_monitor::read_events(ibv_context* context) {
  const auto reader = readers_.find(context);
  if (reader == readers_.end()) return;
  for (;;) {
    ibv_async_event event{};
    if (ibv_get_async_event(context, &event) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      // The device is gone (rdma_cm's DEVICE_REMOVAL ends its connections); a readable fd that
      // keeps failing would spin.
      rdmarpc::logger()->warn("rdma device {}: ibv_get_async_event: {}; no longer watching its async events",
                              device_name(context), std::strerror(errno));
      stop_reading(context);
      return;
    }
    const bool device_failed = event.event_type == IBV_EVENT_DEVICE_FATAL;
    dispatch(context, event);
    if (device_failed) {
      // The kernel's last event for the device; librdmacm closes the context once its ids are gone.
      stop_reading(context);
      return;
    }
  }
  reader->second->watch.async_wait_readable(
      [weak = weak_from_this(), context](const boost::system::error_code& ec) {
        const auto self = weak.lock();
        if (ec || !self) return;
        self->read_events(context);  // a reader stopped meanwhile is not found there
      });
}

void device_event_monitor::stop_reading(ibv_context* context) noexcept {
  if (readers_.erase(context) == 0) return;  // its fd_watch lets go of the fd
  std::lock_guard lock(mutex_);
  devices_.erase(context);
  --figures_.devices;
}

void device_event_monitor::dispatch(ibv_context* context, ibv_async_event& raw) {
  const device_event_info event = describe(raw);
  const bool stale = event.type == IBV_EVENT_PORT_ERR && port_active(context, event.port);
  std::size_t ended = 0;
  {
    // Matched, told and acknowledged under the lock: a subscription reset() meanwhile waits, so a
    // callback never runs after it, and a QP or CQ destroyed after its reset() cannot have its
    // address matched by this event in a new connection.
    std::lock_guard lock(mutex_);
    ++figures_.events_read;
    if (stale) {
      ++figures_.stale_port_errors;
    } else {
      for (const auto& [id, s] : subscribers_) {
        if (s.target.context != context) continue;
        if (const auto reason = device_event_end_reason(event, s.target)) {
          s.on_end(*reason);
          ++ended;
        }
      }
      figures_.connections_ended += ended;
    }
    ibv_ack_async_event(&raw);  // ibv_destroy_qp and ibv_destroy_cq wait for their events' acks
  }
  // A connection's end is logged by its owner (its close reason); a port's or device's once here.
  if (event.type == IBV_EVENT_PORT_ERR) {
    rdmarpc::logger()->warn("rdma device {} port {}: {}{}: {} connections ended", device_name(context),
                            event.port, ibv_event_type_str(event.type),
                            stale ? " (the port is active again)" : "", ended);
  } else if (event.type == IBV_EVENT_DEVICE_FATAL) {
    rdmarpc::logger()->warn("rdma device {}: {}: {} connections ended", device_name(context),
                            ibv_event_type_str(event.type), ended);
  } else {
    rdmarpc::logger()->debug("rdma device {}: {}: {} connections ended", device_name(context),
                             ibv_event_type_str(event.type), ended);
  }
}

}  // namespace rdmarpc::transport::rdma
