#pragma once
// server_call: one unary call's typed request and reply on the server side, made by a service for
// one of its methods (generated code uses member_server_call). The server parses the request
// straight from the receive buffer into it before the handler runs (so the buffer is released at
// once), awaits the handler, then serializes reply() straight into the connection's send memory.
// A call object is reused for the next call of the same method (clear() keeps the messages'
// memory). Layer: rpc. Threading: used on the executor its call runs on.

#include <google/protobuf/message_lite.h>

#include <boost/asio/awaitable.hpp>
#include <climits>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "rpc/server_context.hpp"

namespace rdmarpc {

class server_call {
 public:
  virtual ~server_call() = default;

  // Parses the request. False when it does not parse or misses a proto2 required field.
  virtual bool parse_request(std::span<const std::byte> bytes) = 0;
  // Awaits the user's handler and keeps its reply. A handler reports an error by throwing
  // rdmarpc::status_error or calling ctx.set_status(); any other exception becomes INTERNAL.
  virtual boost::asio::awaitable<void> run(server_context& ctx) = 0;
  // The handler's reply, once run() finished.
  virtual const google::protobuf::MessageLite& reply() const noexcept = 0;
  // The request's full protobuf type name, for error messages ("kv.GetRequest").
  virtual std::string request_type() const = 0;
  // Empties request and reply for the next call (their allocated memory stays).
  virtual void clear() noexcept = 0;
};

// A server_call whose handler is a member function of the service:
// boost::asio::awaitable<Reply> (Owner::*)(server_context&, const Request&).
template <typename Owner, typename Request, typename Reply>
class member_server_call final : public server_call {
 public:
  using handler_type = boost::asio::awaitable<Reply> (Owner::*)(server_context&, const Request&);

  member_server_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  bool parse_request(std::span<const std::byte> bytes) override {
    // Partial parse + IsInitialized: the same check as ParseFromArray, minus libprotobuf's own
    // error log for a missing required field (a bad request is the caller's problem).
    return bytes.size() <= static_cast<std::size_t>(INT_MAX) &&
           request_.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
           request_.IsInitialized();
  }
  // Not a coroutine itself: it creates the handler's (lazy) awaitable here and a small coroutine
  // stores its result. GCC 12's UBSan reports members of a template's `this` as null inside a
  // resumed coroutine (a false positive that would hide real reports).
  boost::asio::awaitable<void> run(server_context& ctx) override {
    return store_reply((owner_->*handler_)(ctx, request_), reply_);
  }
  const google::protobuf::MessageLite& reply() const noexcept override { return reply_; }
  std::string request_type() const override { return request_.GetTypeName(); }
  void clear() noexcept override {
    request_.Clear();
    reply_.Clear();
  }

 private:
  static boost::asio::awaitable<void> store_reply(boost::asio::awaitable<Reply> handler, Reply& out) {
    out = co_await std::move(handler);
  }

  Owner* owner_;
  handler_type handler_;
  Request request_;
  Reply reply_;
};

}  // namespace rdmarpc
