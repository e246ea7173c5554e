#pragma once
// async_unary_call<Reply>: the completion-token front of channel::start_unary_call, used by
// generated stubs. Completion signature void(error_code, Reply), so callers may pass a callback,
// use_future, use_awaitable, as_tuple(use_awaitable) or deferred. Layer: rpc.
// The handler's associated executor and cancellation slot are honoured.

#include "rpc/channel.hpp"

#include <boost/asio/async_result.hpp>

namespace rdmarpc {

// Declared here, defined by the rpc layer in this header (below this line is the rpc layer's):
template <typename Reply, typename CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token);

}  // namespace rdmarpc
