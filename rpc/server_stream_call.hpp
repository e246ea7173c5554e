#pragma once
// server_stream_call: one streaming call on the server side, made by a service for one of its
// streaming methods (generated code uses the three templates below). The server starts it with
// the call's stream; the handler coroutine reads and writes through a typed server_reader /
// server_writer / server_reader_writer; when it returns (or throws) `done` sends the trailers
// with its status. Layer: rpc. Threading: used on the executor its call runs on.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <utility>

#include "rpc/server_call.hpp"
#include "rpc/status.hpp"
#include "rpc/stream.hpp"

namespace rdmarpc {

class server_stream_call {
 public:
  virtual ~server_stream_call() = default;
  // Starts the handler on `stream`; `done` is invoked once it finished. Cancellation as for
  // server_call::start (the stream was reset, the deadline passed or the connection ended).
  virtual void start(server_context& ctx, std::shared_ptr<stream_io> stream, server_done done,
                     boost::asio::cancellation_slot cancel) = 0;
};

// server streaming: boost::asio::awaitable<void> (Owner::*)(server_context&, const Request&,
// server_writer<Reply>&). The one request is read before the handler starts (none:
// INVALID_ARGUMENT).
template <typename Owner, typename Request, typename Reply>
class server_streaming_call final : public server_stream_call {
 public:
  using handler_type = boost::asio::awaitable<void> (Owner::*)(server_context&, const Request&,
                                                               server_writer<Reply>&);
  server_streaming_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  void start(server_context& ctx, std::shared_ptr<stream_io> stream, server_done done,
             boost::asio::cancellation_slot cancel) override {
    writer_.emplace(stream);
    spawn_handler(ctx.get_executor(), run(owner_, handler_, ctx, std::move(stream), request_, *writer_), cancel,
                  std::move(done));
  }

 private:
  // Static, parameters only (see member_server_call: GCC 12's UBSan and template members).
  static boost::asio::awaitable<void> run(Owner* owner, handler_type handler, server_context& ctx,
                                          std::shared_ptr<stream_io> stream, Request& request,
                                          server_writer<Reply>& writer) {
    auto [ec] = co_await detail::async_stream_read(stream, request,
                                                   boost::asio::as_tuple(boost::asio::use_awaitable));
    if (is_end_of_stream(ec)) throw status_error(status_code::invalid_argument, "no request message");
    if (ec) throw status_error(to_status_code(ec), "reading the request: " + ec.message());
    co_await (owner->*handler)(ctx, request, writer);
  }

  Owner* owner_;
  handler_type handler_;
  Request request_;
  std::optional<server_writer<Reply>> writer_;
};

// client streaming: boost::asio::awaitable<Reply> (Owner::*)(server_context&,
// server_reader<Request>&). The reply is written as the stream's one message, then the trailers.
template <typename Owner, typename Request, typename Reply>
class client_streaming_call final : public server_stream_call {
 public:
  using handler_type = boost::asio::awaitable<Reply> (Owner::*)(server_context&, server_reader<Request>&);
  client_streaming_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  void start(server_context& ctx, std::shared_ptr<stream_io> stream, server_done done,
             boost::asio::cancellation_slot cancel) override {
    reader_.emplace(stream);
    spawn_handler(ctx.get_executor(), run(owner_, handler_, ctx, std::move(stream), *reader_, reply_), cancel,
                  std::move(done));
  }

 private:
  static boost::asio::awaitable<void> run(Owner* owner, handler_type handler, server_context& ctx,
                                          std::shared_ptr<stream_io> stream, server_reader<Request>& reader,
                                          Reply& reply) {
    reply = co_await (owner->*handler)(ctx, reader);
    if (ctx.status() != status_code::ok) co_return;  // the handler chose a status: no reply
    auto [ec] = co_await detail::async_stream_write(stream, reply,
                                                    boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) throw status_error(to_status_code(ec), "writing the reply: " + ec.message());
  }

  Owner* owner_;
  handler_type handler_;
  Reply reply_;
  std::optional<server_reader<Request>> reader_;
};

// bidirectional streaming: boost::asio::awaitable<void> (Owner::*)(server_context&,
// server_reader_writer<Request, Reply>&).
template <typename Owner, typename Request, typename Reply>
class bidi_streaming_call final : public server_stream_call {
 public:
  using handler_type = boost::asio::awaitable<void> (Owner::*)(server_context&,
                                                               server_reader_writer<Request, Reply>&);
  bidi_streaming_call(Owner& owner, handler_type handler) noexcept : owner_(&owner), handler_(handler) {}

  void start(server_context& ctx, std::shared_ptr<stream_io> stream, server_done done,
             boost::asio::cancellation_slot cancel) override {
    io_.emplace(std::move(stream));
    spawn_handler(ctx.get_executor(), (owner_->*handler_)(ctx, *io_), cancel, std::move(done));
  }

 private:
  Owner* owner_;
  handler_type handler_;
  std::optional<server_reader_writer<Request, Reply>> io_;
};

}  // namespace rdmarpc
