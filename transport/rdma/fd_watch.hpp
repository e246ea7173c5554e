#pragma once
// fd_watch: waits, on an Asio executor, for a file descriptor it does not own (a verbs completion
// channel or an rdma_cm event channel) to become readable. release() cancels the wait and lets go
// of the fd without closing it: the verbs object that owns it closes it. On an io_context's own
// executor the descriptor is typed on io_context::executor_type, so a wait costs no type-erased
// work tracking or dispatch (see transport/io_context_of.hpp); on any other executor (a strand
// too, whose handlers must go through it) it works the same, through the type-erased executor.
// Layer: transport (rdma).
// Threading: used on its executor only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <optional>
#include <utility>

#include "transport/io_context_of.hpp"

namespace rdmarpc::transport::rdma {

class fd_watch {
 public:
  fd_watch(const boost::asio::any_io_executor& ex, int fd) {
    if (boost::asio::io_context* io = io_context_of(ex)) {
      io_fd_.emplace(io->get_executor(), fd);
    } else {
      fd_.emplace(ex, fd);
    }
  }
  fd_watch(const fd_watch&) = delete;
  fd_watch& operator=(const fd_watch&) = delete;
  ~fd_watch() { release(); }

  // True until release().
  bool watching() const noexcept { return io_fd_.has_value() || fd_.has_value(); }

  // handler(error_code) once the fd is readable (operation_aborted after release()).
  template <typename Handler>
  void async_wait_readable(Handler&& handler) {
    constexpr auto readable = boost::asio::posix::descriptor_base::wait_read;
    if (io_fd_) {
      io_fd_->async_wait(readable, std::forward<Handler>(handler));
    } else if (fd_) {
      fd_->async_wait(readable, std::forward<Handler>(handler));
    }
  }

  void release() noexcept {
    let_go(io_fd_);
    let_go(fd_);
  }

 private:
  template <typename Descriptor>
  static void let_go(std::optional<Descriptor>& d) noexcept {
    if (!d) return;
    boost::system::error_code ignored;
    d->cancel(ignored);
    (void)d->release();  // never closed here
    d.reset();
  }

  std::optional<boost::asio::posix::basic_stream_descriptor<boost::asio::io_context::executor_type>> io_fd_;
  std::optional<boost::asio::posix::stream_descriptor> fd_;
};

}  // namespace rdmarpc::transport::rdma
