#pragma once
// async_unary_call<Reply>: the completion-token front of channel::start_unary_call, used by
// generated stubs. Completion signature void(error_code, Reply), so callers may pass a callback,
// use_future, use_awaitable, as_tuple(use_awaitable) or deferred. Layer: rpc.
// The handler's associated executor and cancellation slot are honoured.

#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <memory>
#include <new>
#include <utility>

#include "rpc/channel.hpp"

namespace rdmarpc {

// Declared here, defined by the rpc layer in this header (below this line is the rpc layer's):
template <typename Reply, typename CompletionToken>
auto async_unary_call(channel& ch, const method_descriptor& method, client_context* context,
                      const google::protobuf::MessageLite& request, CompletionToken&& token);

namespace detail {

// The reply of a call in flight lives in Asio's per-thread recycled memory: no malloc per call in
// steady state.
template <typename Reply>
struct recycled_delete {
  void operator()(Reply* p) const noexcept {
    p->~Reply();
    boost::asio::recycling_allocator<Reply>().deallocate(p, 1);
  }
};
template <typename Reply>
using recycled_ptr = std::unique_ptr<Reply, recycled_delete<Reply>>;

template <typename Reply>
recycled_ptr<Reply> make_recycled() {
  boost::asio::recycling_allocator<Reply> alloc;
  Reply* p = alloc.allocate(1);
  try {
    ::new (static_cast<void*>(p)) Reply();
  } catch (...) {
    alloc.deallocate(p, 1);
    throw;
  }
  return recycled_ptr<Reply>(p);
}

// Adapts the channel's void(error_code) completion to void(error_code, Reply): owns the reply the
// channel parses into, and hands it to the user's handler. Its associated executor, cancellation
// slot and allocator are the user handler's (see the associator specialisation below).
template <typename Reply, typename Handler>
class unary_reply_handler {
 public:
  unary_reply_handler(Handler handler, recycled_ptr<Reply> reply)
      : handler_(std::move(handler)), reply_(std::move(reply)) {}

  void operator()(const boost::system::error_code& ec) {
    Reply reply = ec ? Reply{} : std::move(*reply_);
    reply_.reset();
    std::move(handler_)(ec, std::move(reply));
  }

  Handler handler_;

 private:
  recycled_ptr<Reply> reply_;
};

struct unary_call_initiation {
  template <typename Handler, typename Reply>
  void operator()(Handler&& handler, channel* ch, method_descriptor method, client_context* context,
                  const google::protobuf::MessageLite* request, Reply*) const {
    auto reply = make_recycled<Reply>();
    Reply& target = *reply;
    ch->start_unary_call(
        method, context, *request, target,
        unary_reply_handler<Reply, std::decay_t<Handler>>(std::forward<Handler>(handler), std::move(reply)));
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

// The adapter exposes the wrapped handler's associations (executor, cancellation slot, allocator).
template <template <typename, typename> class Associator, typename Reply, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, rdmarpc::detail::unary_reply_handler<Reply, Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const rdmarpc::detail::unary_reply_handler<Reply, Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler_);
  }
  static auto get(const rdmarpc::detail::unary_reply_handler<Reply, Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler_, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler_, c);
  }
};
