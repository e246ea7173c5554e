#include "transport/rdma/cm_event_pump.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>

namespace rdmarpc::transport::rdma {

void cm_event_pump::read_events(const std::shared_ptr<handler>& h) {
  while (watch_.watching()) {
    verbs::cm_event event;
    const auto ec = verbs::get_cm_event(channel_, event);
    if (ec == boost::system::errc::operation_would_block) break;
    if (ec) {
      if (!h->on_cm_error(ec)) return stop();
      if (++errors_in_a_row_ <= kRetriesAfterError) {
        boost::asio::post(ex_, [this, h] { read_events(h); });
        return;
      }
      retry_timer_.expires_after(pause_);
      pause_ = std::min(pause_ * 2, kLongestPause);
      retry_timer_.async_wait([this, h](const boost::system::error_code& waited) {
        if (!waited && watch_.watching()) read_events(h);
      });
      return;
    }
    errors_in_a_row_ = 0;
    pause_ = kFirstPause;
    h->on_cm_event(std::move(event));
  }
  if (!watch_.watching()) return;
  h->on_cm_events_drained();
  watch_.async_wait_readable([this, h](const boost::system::error_code& ec) {
    if (!ec) read_events(h);
  });
}

}  // namespace rdmarpc::transport::rdma
