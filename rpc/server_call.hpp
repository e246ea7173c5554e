#pragma once
// server_call: one unary call's typed request and reply on the server side, made by a service for
// one of its methods (generated code uses member_server_call for coroutine handlers and
// callback_server_call for callback handlers). The server parses the request straight from the
// receive buffer into it before the handler runs (so the buffer is released at once), starts the
// handler, and once the handler's server_done is invoked serializes reply() straight into the
// connection's send memory. A call object is reused for the next call of the same method (clear()
// keeps the messages' memory). Layer: rpc. Threading: used on the executor its call runs on.

#include <google/protobuf/message_lite.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "rpc/handler_launch.hpp"
#include "rpc/parse_message.hpp"
#include "rpc/server_context.hpp"
#include "rpc/server_done.hpp"

namespace rdmarpc {

class server_call {
 public:
  virtual ~server_call() = default;

  // Parses the request. False when it does not parse or, with `check_required`, misses a proto2
  // required field (method_descriptor::request_may_lack_required says whether it can).
  // `parser`: the request type's generated parser, or null (method_descriptor::request_parser).
  virtual bool parse_request(std::span<const std::byte> bytes, message_parser parser,
                             bool check_required) = 0;
  // Starts the user's handler; `done` is invoked once it finished (possibly before start returns).
  // A handler reports an error with ctx.set_status() or (coroutines) by throwing
  // rdmarpc::status_error; any other exception becomes INTERNAL. `cancel` gets terminal
  // cancellation when the client cancels, the deadline passes or the connection ends.
  virtual void start(server_context& ctx, server_done done, boost::asio::cancellation_slot cancel) = 0;
  // The handler's reply, once done was invoked.
  virtual const google::protobuf::MessageLite& reply() const noexcept = 0;
  // The request's full protobuf type name, for error messages ("kv.GetRequest").
  virtual std::string request_type() const = 0;
  // Readies the call object for the next call: the reply emptied (its allocated memory stays).
  // The request is left as it is: parse_request empties it first (protobuf's parse does).
  virtual void clear() noexcept = 0;
};

// Parsing, reply access and reuse, shared by both kinds of typed calls.
template <typename Request, typename Reply>
class typed_server_call : public server_call {
 public:
  bool parse_request(std::span<const std::byte> bytes, message_parser parser, bool check_required) override {
    return detail::parse_message(request_, bytes, parser, check_required);
  }
  const google::protobuf::MessageLite& reply() const noexcept override { return reply_; }
  std::string request_type() const override { return request_.GetTypeName(); }
  void clear() noexcept override { reply_.Clear(); }

 protected:
  Request request_;
  Reply reply_;
};

// A call whose handler is a coroutine member function of the service:
// boost::asio::awaitable<Reply> (Owner::*)(server_context&, const Request&). Costs its coroutine
// frames and their launch (spawn_handler) per call; callback_server_call does not.
template <typename Owner, typename Request, typename Reply>
class member_server_call final : public typed_server_call<Request, Reply> {
 public:
  using handler_type = boost::asio::awaitable<Reply> (Owner::*)(server_context&, const Request&);

  member_server_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  // Not a coroutine itself: it creates the handler's (lazy) awaitable, whose result spawn_handler
  // stores into reply_ in the frame that runs it.
  void start(server_context& ctx, server_done done, boost::asio::cancellation_slot cancel) override {
    spawn_handler<Reply>(ctx.get_executor(), (owner_->*handler_)(ctx, this->request_), &this->reply_, cancel,
                         std::move(done));
  }

 private:
  Owner* owner_;
  handler_type handler_;
};

// A call whose handler is a plain member function of the service that fills the reply and invokes
// `done` (now or later): void (Owner::*)(server_context&, const Request&, Reply&, server_done).
template <typename Owner, typename Request, typename Reply>
class callback_server_call final : public typed_server_call<Request, Reply> {
 public:
  using handler_type = void (Owner::*)(server_context&, const Request&, Reply&, server_done);

  callback_server_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  void start(server_context& ctx, server_done done, boost::asio::cancellation_slot /*cancel*/) override {
    (owner_->*handler_)(ctx, this->request_, this->reply_, done.pass_on());
  }

 private:
  Owner* owner_;
  handler_type handler_;
};

}  // namespace rdmarpc
