#pragma once
// cm_event_pump: reads every rdma_cm event waiting on an event channel whenever its fd becomes
// readable and hands each to its handler: the one loop the connector, the listener and each
// connection share. Layer: transport (rdma). Threading: used on its executor only; the handler
// runs there.

#include <rdma/rdma_cma.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>
#include <memory>

#include "transport/rdma/fd_watch.hpp"
#include "verbs/handles.hpp"

namespace rdmarpc::transport::rdma {

class cm_event_pump {
 public:
  class handler {
   public:
    // One event; it is acknowledged when `event` is dropped (rdma_destroy_id waits for that).
    virtual void on_cm_event(verbs::cm_event event) = 0;
    // rdma_get_cm_event failed. True: keep pumping (read again soon, then from the fd's next
    // readiness); false: stop.
    virtual bool on_cm_error(const boost::system::error_code& ec) = 0;
    // Every waiting event was handed over (called only while still pumping).
    virtual void on_cm_events_drained() {}

   protected:
    ~handler() = default;
  };

  cm_event_pump(const boost::asio::any_io_executor& ex, rdma_event_channel* channel)
      : ex_(ex), channel_(channel), watch_(ex, channel->fd) {}

  // Reads what waits now (the fd is edge-triggered: a plain wait would see only the next event),
  // then keeps reading as events come. Every wait holds `h`, which must own this pump.
  void start(const std::shared_ptr<handler>& h) { read_events(h); }

  // No more events are read; the fd is let go of (never closed). Safe from inside on_cm_event.
  void stop() noexcept { watch_.release(); }
  bool pumping() const noexcept { return watch_.watching(); }

 private:
  void read_events(const std::shared_ptr<handler>& h);

  // After a failed read the fd may hold no new edge although events wait behind the failure:
  // read again soon, a few times in a row at most, before waiting for readiness.
  static constexpr int kRetriesAfterError = 3;

  boost::asio::any_io_executor ex_;
  rdma_event_channel* channel_;
  fd_watch watch_;
  int errors_in_a_row_ = 0;
};

}  // namespace rdmarpc::transport::rdma
