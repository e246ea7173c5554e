#pragma once
// unary_op: a unary call's client-side completion as the channel sees it: the reply message the
// channel parses into and the caller's handler, in one block of Asio's recycled memory (no
// allocation per call in steady state). async_unary_call makes it; the channel uses it through
// this small interface, so the channel is no template. Layer: rpc. Threading: made on any
// thread, used on the channel's executor, completed on the handler's associated executor.

#include <google/protobuf/message_lite.h>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace rdmarpc {

class unary_op {
 public:
  // The message the channel parses the reply into.
  virtual google::protobuf::MessageLite& response() noexcept = 0;
  // The handler's associated cancellation slot (unconnected when it has none).
  virtual boost::asio::cancellation_slot cancellation_slot() const noexcept = 0;
  // The handler's associated executor; `candidate` when it has none.
  virtual boost::asio::any_completion_executor executor(
      const boost::asio::io_context::executor_type& candidate) const = 0;
  virtual boost::asio::any_completion_executor executor(
      const boost::asio::any_io_executor& candidate) const = 0;
  // True when the handler's executor is `io` itself (default or associated): a caller running on
  // `io` may complete it in place.
  virtual bool runs_on(const boost::asio::io_context::executor_type& io) const noexcept = 0;
  // Frees the op, then calls the handler with (ec, reply); the reply is default-constructed when ec
  // is set. Call it on the handler's executor, once.
  virtual void complete(boost::system::error_code ec) = 0;
  // Frees the op without calling its handler (a call that can never complete: its executor is gone).
  virtual void destroy() noexcept = 0;

 protected:
  ~unary_op() = default;
};

struct unary_op_deleter {
  void operator()(unary_op* op) const noexcept { op->destroy(); }
};
using unary_op_ptr = std::unique_ptr<unary_op, unary_op_deleter>;

namespace detail {

template <typename Reply, typename Handler>
class typed_unary_op final : public unary_op {
 public:
  using io_executor = boost::asio::io_context::executor_type;
  using allocator = boost::asio::recycling_allocator<typed_unary_op>;

  explicit typed_unary_op(Handler handler) : handler_(std::move(handler)) {}

  google::protobuf::MessageLite& response() noexcept override { return reply_; }
  boost::asio::cancellation_slot cancellation_slot() const noexcept override {
    return boost::asio::get_associated_cancellation_slot(handler_);
  }
  boost::asio::any_completion_executor executor(const io_executor& candidate) const override {
    return boost::asio::get_associated_executor(handler_, candidate);
  }
  boost::asio::any_completion_executor executor(
      const boost::asio::any_io_executor& candidate) const override {
    return boost::asio::get_associated_executor(handler_, candidate);
  }
  bool runs_on(const io_executor& io) const noexcept override {
    const auto ex = boost::asio::get_associated_executor(handler_, io);
    if constexpr (std::is_same_v<std::decay_t<decltype(ex)>, io_executor>) {
      return ex == io;
    } else if constexpr (requires { ex.template target<io_executor>(); }) {
      const auto* target = ex.template target<io_executor>();  // a type-erased executor
      return target != nullptr && *target == io;
    } else {
      return false;  // a strand or another executor: the channel dispatches to it
    }
  }
  void complete(boost::system::error_code ec) override {
    Handler handler(std::move(handler_));
    Reply reply = ec ? Reply{} : std::move(reply_);
    destroy();  // before the handler runs: the next call it starts reuses this memory
    std::move(handler)(ec, std::move(reply));
  }
  void destroy() noexcept override {
    this->~typed_unary_op();
    allocator().deallocate(this, 1);
  }

  static unary_op_ptr make(Handler handler) {
    allocator alloc;
    typed_unary_op* p = alloc.allocate(1);
    try {
      ::new (static_cast<void*>(p)) typed_unary_op(std::move(handler));
    } catch (...) {
      alloc.deallocate(p, 1);
      throw;
    }
    return unary_op_ptr(p);
  }

 private:
  ~typed_unary_op() = default;

  Handler handler_;
  Reply reply_;
};

}  // namespace detail

// A unary_op for a call whose reply is a Reply and whose handler is void(error_code, Reply).
template <typename Reply, typename Handler>
unary_op_ptr make_unary_op(Handler&& handler) {
  return detail::typed_unary_op<Reply, std::decay_t<Handler>>::make(std::forward<Handler>(handler));
}

}  // namespace rdmarpc
