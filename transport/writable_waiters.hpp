#pragma once
// writable_waiters: the pending async_wait_writable operations of one connection, with
// per-operation cancellation. Shared by the transport implementations (loopback, tcp, rdma).
// Layer: transport. Threading: used on the owning connection's executor only; cancellation must be
// emitted on that executor too (Asio's rule for per-operation cancellation).

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <vector>

namespace rdmarpc::transport {

class writable_waiters {
 public:
  using signature = void(boost::system::error_code);
  using handler_type = boost::asio::any_completion_handler<signature>;

  explicit writable_waiters(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  writable_waiters(const writable_waiters&) = delete;
  writable_waiters& operator=(const writable_waiters&) = delete;
  // Pending handlers are destroyed without being invoked: the connection is going away and its
  // executor may be too. Connections complete them (complete_all) before that in normal operation.
  ~writable_waiters() = default;

  // Queues `handler` until complete_all. A cancellation emitted on its slot completes it (posted)
  // with operation_aborted.
  void add(handler_type handler);

  // Posts every pending handler's completion with `ec`; each runs on its associated executor
  // (default: the connection's), never inline.
  void complete_all(boost::system::error_code ec);

  // Posts one completion: the helper every connection also uses for "writable right away".
  static void post_completion(const boost::asio::any_io_executor& ex, handler_type handler,
                              boost::system::error_code ec);

  bool empty() const noexcept;

 private:
  struct entry {
    handler_type handler;  // empty once completed or cancelled
  };
  boost::asio::any_io_executor ex_;
  std::vector<std::shared_ptr<entry>> entries_;
};

}  // namespace rdmarpc::transport
