#pragma once
// unary_completion<Reply>: a unary call's completion as a generated client Interface hands it to
// its do_* function: the caller's handler and the reply message in one typed op (rpc/unary_op.hpp),
// so the handler is never type-erased on the way to the channel. The Stub passes it on to
// channel::start_unary_call; a fake Interface completes it with (error_code, Reply).
// Layer: rpc (used by generated code). Threading: move-only, completed once, on any thread.

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/system/error_code.hpp>
#include <utility>

#include "rpc/unary_op.hpp"

namespace rdmarpc {

template <typename Reply>
class unary_completion {
 public:
  // The completion of a call whose handler is void(error_code, Reply).
  template <typename Handler>
  static unary_completion make(Handler&& handler) {
    return unary_completion(make_unary_op<Reply>(std::forward<Handler>(handler)));
  }

  // The completion of a call whose reply goes into the caller's `reply` and whose handler is
  // void(error_code) (rpc/unary_call.hpp).
  template <typename Handler>
  static unary_completion make_into(Reply& reply, Handler&& handler) {
    return unary_completion(make_caller_reply_op(std::forward<Handler>(handler), reply));
  }

  explicit unary_completion(unary_op_ptr op) noexcept : op_(std::move(op)) {}

  // Calls the handler with (ec, reply) here and now, as invoking a completion handler directly
  // would: a fake calls it from work it posted (never inside do_*, which is the initiating
  // function) on the handler's executor. `reply` is dropped when ec is set (the handler then gets
  // a default-constructed Reply, as from a real channel). For a caller's own reply message
  // (make_into), `reply` is moved into it, and the handler gets (ec).
  void operator()(boost::system::error_code ec, Reply reply) {
    if (!ec) static_cast<Reply&>(op_->response()) = std::move(reply);
    op_.release()->complete(ec);
  }

  // The handler's associated cancellation slot (a fake may honour it; the channel does).
  boost::asio::cancellation_slot cancellation_slot() const noexcept { return op_->cancellation_slot(); }

  // The op, for channel::start_unary_call.
  unary_op_ptr release() && noexcept { return std::move(op_); }

 private:
  unary_op_ptr op_;
};

}  // namespace rdmarpc
