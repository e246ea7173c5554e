#pragma once
// device_event_monitor: reads the async event fd of every RDMA device its connections use
// (ibv_get_async_event) and ends the connections an event concerns: a QP's fatal or access error,
// a CQ overrun, the port going down, the device failing (device_event_policy.hpp says which).
//
// One per process. librdmacm opens each device once per process and every rdma_cm id shares that
// context, so a device has one async event queue for the whole process: two monitors would each
// read part of it, and an event one reads never reaches the other's connections (on one
// io_context the second cannot even register the fd: it says so at warning level once and tries
// again at its next subscription). Give the same monitor to every server and channel
// (connection_options::device_events); a server makes its own when none is given
// (server_options::watch_device_events). Without a monitor a failed QP still ends its connection
// when its posted receives come back flushed; port and device events are not seen.
// The monitor sets each device's async fd non-blocking. A PORT_ERR is acted on only while the port
// is still down (ibv_query_port): one queued before a flap recovered ends nothing. After
// DEVICE_FATAL, or when reading fails (the device is gone), it stops reading that device.
// Layer: transport (rdma). Threading: subscribe() and subscriptions from any thread; events are
// read and callbacks run on a strand of the monitor's executor, whose io_context must outlive the
// monitor. Once a subscription's reset() returns its callback is not running and never runs.
// Destroyed, it lets go of the devices' fds on that executor (where their waits run), so they stay
// watched until the io_context runs once more, or is destroyed.

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "transport/error.hpp"
#include "transport/rdma/device_event_policy.hpp"

namespace rdmarpc::transport::rdma {

class device_event_monitor : public std::enable_shared_from_this<device_event_monitor> {
 public:
  // Told why its connection must end. Runs on the monitor's executor with the monitor's lock held:
  // post to your own executor and act there, nothing more.
  using end_callback = std::function<void(errc reason)>;

  // Stays subscribed until destroyed or reset(); move-only.
  class subscription {
   public:
    subscription() noexcept = default;
    subscription(subscription&& other) noexcept : monitor_(std::move(other.monitor_)), id_(other.id_) {
      other.id_ = 0;
    }
    subscription& operator=(subscription&& other) noexcept;
    subscription(const subscription&) = delete;
    subscription& operator=(const subscription&) = delete;
    ~subscription() { reset(); }
    void reset() noexcept;

   private:
    friend class device_event_monitor;
    subscription(std::weak_ptr<device_event_monitor> monitor, std::uint64_t id) noexcept
        : monitor_(std::move(monitor)), id_(id) {}
    std::weak_ptr<device_event_monitor> monitor_;
    std::uint64_t id_ = 0;
  };

  struct figures {
    std::uint64_t events_read = 0;        // every event taken off a device's queue
    std::uint64_t connections_ended = 0;  // callbacks told to end their connection
    std::uint64_t stale_port_errors = 0;  // PORT_ERR read while the port was active again: ignored
    std::size_t devices = 0;              // async fds being read now
    std::size_t subscriptions = 0;
  };

  static std::shared_ptr<device_event_monitor> create(boost::asio::any_io_executor ex);
  ~device_event_monitor();
  device_event_monitor(const device_event_monitor&) = delete;
  device_event_monitor& operator=(const device_event_monitor&) = delete;

  // Calls `on_end` when an event ends `target`'s connection (target.context must not be null).
  // The first subscription on a device starts reading its async fd.
  subscription subscribe(const device_event_target& target, end_callback on_end);

  figures stats() const;

 private:
  struct device_reader;  // one device's fd, read on ex_
  struct subscriber {
    device_event_target target;
    end_callback on_end;
  };

  explicit device_event_monitor(const boost::asio::any_io_executor& ex);
  void unsubscribe(std::uint64_t id) noexcept;
  // On ex_ (a strand): start, keep and stop reading one device's fd.
  void start_reading(ibv_context* context);
  void read_events(ibv_context* context);
  void stop_reading(ibv_context* context) noexcept;
  // Ends the connections `raw` concerns and acknowledges it, in that order: once acknowledged, its
  // QP or CQ may be destroyed and the address reused by a new connection's.
  void dispatch(ibv_context* context, ibv_async_event& raw);

  boost::asio::any_io_executor ex_;
  mutable std::mutex mutex_;  // guards what follows, but readers_ (ex_ only)
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, subscriber> subscribers_;
  std::set<ibv_context*> devices_;  // being read, or asked to be
  figures figures_;
  bool warned_unwatched_ = false;  // a device's fd could not be watched (logged once)
  std::map<ibv_context*, std::unique_ptr<device_reader>> readers_;
};

}  // namespace rdmarpc::transport::rdma
