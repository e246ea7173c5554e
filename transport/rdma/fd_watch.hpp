#pragma once
// fd_watch: waits, on an Asio executor, for a file descriptor it does not own (a verbs completion
// channel or an rdma_cm event channel) to become readable. release() cancels the wait and lets go
// of the fd without closing it: the verbs object that owns it closes it. Layer: transport (rdma).
// Threading: used on its executor only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <optional>
#include <utility>

namespace rdmarpc::transport::rdma {

class fd_watch {
 public:
  fd_watch(const boost::asio::any_io_executor& ex, int fd) : fd_(std::in_place, ex, fd) {}
  fd_watch(const fd_watch&) = delete;
  fd_watch& operator=(const fd_watch&) = delete;
  ~fd_watch() { release(); }

  // True until release().
  bool watching() const noexcept { return fd_.has_value(); }

  // handler(error_code) once the fd is readable (operation_aborted after release()).
  template <typename Handler>
  void async_wait_readable(Handler&& handler) {
    if (fd_) fd_->async_wait(boost::asio::posix::descriptor_base::wait_read, std::forward<Handler>(handler));
  }

  void release() noexcept {
    if (!fd_) return;
    boost::system::error_code ignored;
    fd_->cancel(ignored);
    (void)fd_->release();  // never closed here
    fd_.reset();
  }

 private:
  std::optional<boost::asio::posix::stream_descriptor> fd_;
};

}  // namespace rdmarpc::transport::rdma
