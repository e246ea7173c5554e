#pragma once
// async_unary_call<Reply>: the completion-token front of channel::start_unary_call, used by
// generated stubs. Completion signature void(error_code, Reply), or void(error_code) when the
// caller passes its own reply message; callers may pass a callback, use_future, use_awaitable,
// as_tuple(use_awaitable) or deferred. Layer: rpc.
// The handler's associated executor and cancellation slot are honoured.

#include <boost/asio/async_result.hpp>
#include <type_traits>
#include <utility>

#include "rpc/channel.hpp"
#include "rpc/unary_op.hpp"

namespace rdmarpc {

// Declared here, defined by the rpc layer in this header (below this line is the rpc layer's):
template <typename Reply,
          boost::asio::completion_token_for<void(boost::system::error_code, Reply)> CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token);
template <typename Reply, boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, Reply& reply, CompletionToken&& token);

namespace detail {

struct unary_call_initiation {
  template <typename Handler, typename Reply>
  void operator()(Handler&& handler, channel* ch, method_descriptor method, client_context* context,
                  const google::protobuf::MessageLite* request, Reply*) const {
    ch->start_unary_call(method, context, *request, make_unary_op<Reply>(std::forward<Handler>(handler)));
  }
};

struct caller_reply_call_initiation {
  template <typename Handler>
  void operator()(Handler&& handler, channel* ch, method_descriptor method, client_context* context,
                  const google::protobuf::MessageLite* request, google::protobuf::MessageLite* reply) const {
    ch->start_unary_call(method, context, *request,
                         make_caller_reply_op(std::forward<Handler>(handler), *reply));
  }
};

}  // namespace detail

// Calls `method` on the server behind `ch` with `request` (serialized before this returns unless
// the token defers initiation, e.g. `deferred`: then `request` must live until the operation is
// launched). Completion: void(error_code, Reply), error_code in status_category(); on error Reply
// is default-constructed and `context` (may be null; must outlive the call) holds the status
// message. The handler runs on its associated executor (default: the channel's); its associated
// cancellation slot cancels the call (CANCELLED; the server is told to stop).
template <typename Reply,
          boost::asio::completion_token_for<void(boost::system::error_code, Reply)> CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Reply)>(
      detail::unary_call_initiation{}, token, &ch, method, context, &request, static_cast<Reply*>(nullptr));
}

// The same, parsing the reply into the caller's `reply` (completion: void(error_code)). `reply`
// belongs to the call from this call until the handler runs: the channel writes it on its own
// executor, so it must stay valid and untouched until then (a handler that starts the next call
// into it must be done reading it first). It is cleared when the call fails; if the handler never
// runs (its executor destroyed first), its content is unspecified. A caller that passes the same
// message call after call (one per call in flight) builds no reply per call: its fields keep their
// memory, the fastest way to make calls in a loop.
template <typename Reply, boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, Reply& reply, CompletionToken&& token) {
  static_assert(std::is_base_of_v<google::protobuf::MessageLite, Reply>, "reply must be a protobuf message");
  static_assert(!std::is_const_v<Reply>, "the reply is written: it cannot be const");
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      detail::caller_reply_call_initiation{}, token, &ch, method, context, &request,
      static_cast<google::protobuf::MessageLite*>(&reply));
}

}  // namespace rdmarpc
