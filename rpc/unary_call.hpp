#pragma once
// async_unary_call<Reply>: the completion-token front of channel::start_unary_call, used by
// generated stubs. Completion signature void(error_code, Reply), so callers may pass a callback,
// use_future, use_awaitable, as_tuple(use_awaitable) or deferred. Layer: rpc.
// The handler's associated executor and cancellation slot are honoured.

#include <boost/asio/async_result.hpp>
#include <utility>

#include "rpc/channel.hpp"
#include "rpc/unary_op.hpp"

namespace rdmarpc {

// Declared here, defined by the rpc layer in this header (below this line is the rpc layer's):
template <typename Reply, typename CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token);

namespace detail {

struct unary_call_initiation {
  template <typename Handler, typename Reply>
  void operator()(Handler&& handler, channel* ch, method_descriptor method, client_context* context,
                  const google::protobuf::MessageLite* request, Reply*) const {
    ch->start_unary_call(method, context, *request, make_unary_op<Reply>(std::forward<Handler>(handler)));
  }
};

}  // namespace detail

// Calls `method` on the server behind `ch` with `request` (serialized before this returns unless
// the token defers initiation, e.g. `deferred`: then `request` must live until the operation is
// launched). Completion: void(error_code, Reply), error_code in status_category(); on error Reply
// is default-constructed and `context` (may be null; must outlive the call) holds the status
// message. The handler runs on its associated executor (default: the channel's); its associated
// cancellation slot cancels the call (CANCELLED; the server is told to stop).
template <typename Reply, typename CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Reply)>(
      detail::unary_call_initiation{}, token, &ch, method, context, &request, static_cast<Reply*>(nullptr));
}

}  // namespace rdmarpc
