#pragma once
// device_event_monitor: reads the async event fd of every RDMA device its connections use
// (ibv_get_async_event) and ends the connections an event concerns: a QP's fatal or access error,
// a CQ overrun, the port going down, the device failing (device_event_policy.hpp says which).
//
// One per process. librdmacm opens each device once per process and every rdma_cm id shares that
// context, so a device has one async event queue for the whole process: two monitors would each
// read part of it, and an event one reads never reaches the other's connections. Give the same
// monitor to every server and channel (connection_options::device_events); a server makes its own
// when none is given (server_options::watch_device_events). Without a monitor a failed QP still
// ends its connection when its posted receives come back flushed; port and device events are not
// seen. The monitor sets each device's async fd non-blocking.
// Layer: transport (rdma). Threading: subscribe() and subscriptions from any thread; events are
// read and callbacks run on the monitor's executor, which must outlive the monitor.

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
  // Told why its connection must end. Runs on the monitor's executor, possibly after the
  // subscription is gone: post to your own executor and check there.
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
    std::size_t devices = 0;              // async fds being read
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

  explicit device_event_monitor(boost::asio::any_io_executor ex);
  void unsubscribe(std::uint64_t id) noexcept;
  void start_reading(ibv_context* context);  // on ex_
  void read_events(device_reader& reader);   // on ex_
  void dispatch(ibv_context* context, const device_event_info& event);

  boost::asio::any_io_executor ex_;
  mutable std::mutex mutex_;  // guards what follows, but readers_ (ex_ only)
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, subscriber> subscribers_;
  std::set<ibv_context*> devices_;  // asked to be read
  figures figures_;
  std::map<ibv_context*, std::unique_ptr<device_reader>> readers_;
};

}  // namespace rdmarpc::transport::rdma
