#pragma once
// unary_op: a unary call's client-side completion as the channel sees it: the reply message the
// channel parses into and the caller's handler, in one block of Asio's recycled memory (no
// allocation per call in steady state). async_unary_call makes it; the channel uses it through
// this small interface (completion_op plus the reply), so the channel is no template.
// Layer: rpc. Threading: made on any thread, used on the channel's executor, completed on the
// handler's associated executor.

#include <google/protobuf/message_lite.h>

#include <utility>

#include "rpc/completion_op.hpp"

namespace rdmarpc {

// complete(ec) calls the handler with (ec, reply); the reply is default-constructed when ec is set.
class unary_op : public completion_op {
 public:
  // The message the channel parses the reply into.
  virtual google::protobuf::MessageLite& response() noexcept = 0;

 protected:
  ~unary_op() = default;
};

using unary_op_ptr = op_ptr<unary_op>;

namespace detail {

template <typename Reply, typename Handler>
class typed_unary_op final : public handler_op<unary_op, Handler> {
 public:
  using handler_op<unary_op, Handler>::handler_op;

  google::protobuf::MessageLite& response() noexcept override { return reply_; }
  void complete(boost::system::error_code ec) override {
    // The handler takes the reply straight from this op (one move, into its parameter), so the op
    // is freed after it returns, or when it throws.
    struct destroy_on_exit {
      typed_unary_op* op;
      ~destroy_on_exit() { op->destroy(); }
    } const guard{this};
    if (ec) {
      std::move(this->handler_)(ec, Reply{});
    } else {
      std::move(this->handler_)(ec, std::move(reply_));
    }
  }
  void destroy() noexcept override { recycled_destroy(this); }

 private:
  Reply reply_;
};

}  // namespace detail

// A unary_op for a call whose reply is a Reply and whose handler is void(error_code, Reply).
template <typename Reply, typename Handler>
unary_op_ptr make_unary_op(Handler&& handler) {
  return detail::make_recycled<detail::typed_unary_op<Reply, std::decay_t<Handler>>>(
      std::forward<Handler>(handler));
}

}  // namespace rdmarpc
