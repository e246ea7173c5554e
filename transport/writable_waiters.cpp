#include "transport/writable_waiters.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>

namespace rdmarpc::transport {

void writable_waiters::post_completion(const boost::asio::any_io_executor& ex, handler_type handler,
                                       boost::system::error_code ec) {
  // Post to the connection's executor first (never inline), then hop to the handler's own
  // associated executor. The slot is cleared there, outside any emit() that may have led here.
  boost::asio::post(ex, [ex, handler = std::move(handler), ec]() mutable {
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) slot.clear();
    boost::asio::dispatch(ex, boost::asio::append(std::move(handler), ec));
  });
}

void writable_waiters::add(handler_type handler) {
  std::erase_if(entries_, [](const std::shared_ptr<entry>& e) { return !e->handler; });
  auto e = std::make_shared<entry>(entry{std::move(handler)});
  auto slot = boost::asio::get_associated_cancellation_slot(e->handler);
  if (slot.is_connected()) {
    // The slot may outlive the entry (and this object): hold it weakly.
    slot.assign([weak = std::weak_ptr<entry>(e), ex = ex_](boost::asio::cancellation_type type) {
      using ct = boost::asio::cancellation_type;
      if ((type & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
      auto target = weak.lock();
      if (!target || !target->handler) return;
      post_completion(ex, std::move(target->handler), boost::asio::error::operation_aborted);
    });
  }
  entries_.push_back(std::move(e));
}

void writable_waiters::complete_all(boost::system::error_code ec) {
  auto entries = std::move(entries_);
  entries_.clear();
  for (auto& e : entries) {
    if (e->handler) post_completion(ex_, std::move(e->handler), ec);
  }
}

bool writable_waiters::empty() const noexcept {
  return std::none_of(entries_.begin(), entries_.end(), [](const std::shared_ptr<entry>& e) { return bool(e->handler); });
}

}  // namespace rdmarpc::transport
