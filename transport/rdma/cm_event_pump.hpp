#pragma once
// cm_event_pump: reads every rdma_cm event waiting on an event channel whenever its fd becomes
// readable and hands each to its handler: the one loop the connector, the listener and each
// connection share. Layer: transport (rdma). Threading: used on its executor only; the handler
// runs there.

#include <rdma/rdma_cma.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
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
    // rdma_get_cm_event failed. True: keep pumping (read again at once a few times, then after a
    // pause that doubles up to a second while it keeps failing); false: stop.
    virtual bool on_cm_error(const boost::system::error_code& ec) = 0;
    // Every waiting event was handed over (called only while still pumping).
    virtual void on_cm_events_drained() {}

   protected:
    ~handler() = default;
  };

  cm_event_pump(const boost::asio::any_io_executor& ex, rdma_event_channel* channel)
      : ex_(ex), channel_(channel), watch_(ex, channel->fd), retry_timer_(ex) {}

  // Reads what waits now (the fd is edge-triggered: a plain wait would see only the next event),
  // then keeps reading as events come. Every wait holds `h`, which must own this pump.
  void start(const std::shared_ptr<handler>& h) { read_events(h); }

  // No more events are read; the fd is let go of (never closed). Safe from inside on_cm_event.
  void stop() noexcept {
    watch_.release();
    try {
      retry_timer_.cancel();
    } catch (...) {  // nothing waits on it then
    }
  }
  bool pumping() const noexcept { return watch_.watching(); }

 private:
  void read_events(const std::shared_ptr<handler>& h);

  // After a failed read: read again at once, a few times in a row at most, then after a pause.
  // Not at the fd's next readiness: a readable fd stays readable (the wait would complete at once,
  // a loop of failing reads), and one that is not may hold events behind the failure.
  static constexpr int kRetriesAfterError = 3;
  static constexpr std::chrono::milliseconds kFirstPause{50};
  static constexpr std::chrono::milliseconds kLongestPause{1000};

  boost::asio::any_io_executor ex_;
  rdma_event_channel* channel_;
  fd_watch watch_;
  boost::asio::steady_timer retry_timer_;
  int errors_in_a_row_ = 0;
  std::chrono::milliseconds pause_ = kFirstPause;
};

}  // namespace rdmarpc::transport::rdma
