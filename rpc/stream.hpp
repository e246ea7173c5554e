#pragma once
// Streaming calls as user code sees them: rdmarpc::client_stream on the client, server_reader,
// server_writer and server_reader_writer in a server's coroutine handler. Each is a typed front of
// stream_io, the untyped stream the channel or the server's connection implements (a test may
// implement its own, e.g. behind a fake client Interface). Layer: rpc.
//
// Every operation takes a completion token (callback, use_awaitable, as_tuple, use_future,
// deferred) with the signature void(error_code):
//   - async_write(msg): done once msg is on its way (serialized and handed to the transport, or
//     queued within the stream's window); msg may be reused as soon as the operation has started.
//   - async_read(msg): msg holds the next message. End of stream is boost::asio::error::eof
//     (rdmarpc::is_end_of_stream): on the client the server finished the stream (call
//     async_finish for its status), on the server the client called writes_done. A stream that
//     broke (reset, cancelled, deadline, connection lost) fails with its status instead.
//   - async_writes_done (client): no more messages from this side (half-close).
//   - async_finish (client): the stream's final status (OK = success), once the server finished it
//     or it broke; client_context::status_message() and server_trailing_metadata() are set then.
// Errors other than eof are in rdmarpc::status_category(). At most one read and one write
// (async_write or async_writes_done) may be outstanding at a time, as on an Asio stream; another
// fails FAILED_PRECONDITION. A terminal or partial cancellation of any operation (its handler's
// associated cancellation slot) cancels the whole stream, as cancel() does: both sides see
// CANCELLED. Handlers run on their associated executor (default: the channel's or connection's).
// One exception: a coroutine awaiting async_write with use_awaitable or as_tuple(use_awaitable)
// on the stream's own executor goes on at once when the write needed no waiting (try_write).

#include <google/protobuf/message_lite.h>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "rpc/completion_op.hpp"
#include "rpc/status.hpp"

namespace rdmarpc {

// True for the result that ends a read loop normally.
inline bool is_end_of_stream(const boost::system::error_code& ec) noexcept {
  return ec == boost::asio::error::eof;
}

// One end of a stream, untyped. Every member may be called from any thread; completions run on the
// handler's associated executor, never inside the call that started the operation (the awaitable
// write above only skips the operation, when try_write did the write).
class stream_io {
 public:
  using signature = void(boost::system::error_code);
  // The caller's handler in recycled memory (rpc/completion_op.hpp): complete it with
  // rdmarpc::post_completion, or in place where completion_op says that is allowed.
  using handler = completion_op_ptr;

  virtual ~stream_io() = default;

  // `message` is serialized before write returns.
  virtual void write(const google::protobuf::MessageLite& message, handler h) = 0;
  // Writes `message` at once when that needs no waiting; see client_stream::try_write.
  virtual bool try_write(const google::protobuf::MessageLite& message) {
    (void)message;
    return false;
  }
  // `message` must stay valid until h runs; it is parsed into on the stream's executor.
  virtual void read(google::protobuf::MessageLite& message, handler h) = 0;
  // Client only (a server's stream ends when its handler returns): FAILED_PRECONDITION there.
  virtual void writes_done(handler h) = 0;
  virtual void finish(handler h) = 0;
  // Ends the stream with CANCELLED on both sides (no-op once it ended).
  virtual void cancel() noexcept = 0;
  // The user's stream object is gone: cancel it, and never touch its client_context again (from
  // the moment this returns, whatever thread it is called on). Default: cancel().
  virtual void release() noexcept { cancel(); }
};

namespace detail {

// Installed in an operation's cancellation slot by the initiating function, on the caller's thread
// (Asio's rule: slots are used on the handler's executor); the completion clears it there too.
struct cancel_stream_on_signal {
  // A constructor, not an aggregate: slot.emplace constructs with parentheses (clang 14 has no P0960).
  explicit cancel_stream_on_signal(std::weak_ptr<stream_io> s) noexcept : stream(std::move(s)) {}
  std::weak_ptr<stream_io> stream;
  void operator()(boost::asio::cancellation_type type) const {
    if (type == boost::asio::cancellation_type::none) return;
    if (auto s = stream.lock()) s->cancel();
  }
};

// Connects `handler`'s cancellation slot to the stream; false (handler completed with
// FAILED_PRECONDITION) for an empty stream object (default-constructed or moved from).
template <typename Handler>
bool prepare(const std::shared_ptr<stream_io>& io, Handler& handler) {
  if (!io) {
    auto ex = boost::asio::get_associated_executor(handler);
    boost::asio::post(
        ex, boost::asio::append(std::move(handler), make_error_code(status_code::failed_precondition)));
    return false;
  }
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected()) slot.template emplace<cancel_stream_on_signal>(io);
  return true;
}

template <typename Token>
auto initiate_stream_write(std::shared_ptr<stream_io> io, const google::protobuf::MessageLite& message,
                           Token&& token) {
  return boost::asio::async_initiate<Token, stream_io::signature>(
      [io = std::move(io)](auto handler, const google::protobuf::MessageLite* m) {
        if (prepare(io, handler)) io->write(*m, make_completion_op(std::move(handler)));
      },
      token, &message);
}

// The coroutine tokens whose writes may finish without a trip through the scheduler.
template <typename Token>
struct awaitable_write_token : std::false_type {};
template <typename Executor>
struct awaitable_write_token<boost::asio::use_awaitable_t<Executor>> : std::true_type {
  static constexpr bool as_tuple = false;
};
template <typename Executor>
struct awaitable_write_token<boost::asio::as_tuple_t<boost::asio::use_awaitable_t<Executor>>>
    : std::true_type {
  static constexpr bool as_tuple = true;
};

// Asio 1.81 posts every completion, so a coroutine awaiting a write that needed no waiting would
// still be resumed from the scheduler: about 1.9 k instructions a message, half of rxe's message
// rate. This awaitable tries the write first and goes on at once when it is done (as Boost 1.82's
// immediate executor does for any token); otherwise it waits as any async_write does.
template <typename Token>
typename boost::asio::async_result<Token, stream_io::signature>::return_type awaitable_stream_write(
    std::shared_ptr<stream_io> io, const google::protobuf::MessageLite& message, Token token) {
  if (io && io->try_write(message)) {
    if constexpr (awaitable_write_token<Token>::as_tuple) {
      co_return std::tuple<boost::system::error_code>{};
    } else {
      co_return;
    }
  }
  co_return co_await initiate_stream_write(std::move(io), message, std::move(token));
}

template <typename Token>
auto async_stream_write(std::shared_ptr<stream_io> io, const google::protobuf::MessageLite& message,
                        Token&& token) {
  if constexpr (awaitable_write_token<std::decay_t<Token>>::value) {
    return awaitable_stream_write<std::decay_t<Token>>(std::move(io), message, std::forward<Token>(token));
  } else {
    return initiate_stream_write(std::move(io), message, std::forward<Token>(token));
  }
}

template <typename Token>
auto async_stream_read(std::shared_ptr<stream_io> io, google::protobuf::MessageLite& message, Token&& token) {
  return boost::asio::async_initiate<Token, stream_io::signature>(
      [io = std::move(io)](auto handler, google::protobuf::MessageLite* m) {
        if (prepare(io, handler)) io->read(*m, make_completion_op(std::move(handler)));
      },
      token, &message);
}

template <void (stream_io::*Op)(stream_io::handler), typename Token>
auto async_stream_op(std::shared_ptr<stream_io> io, Token&& token) {
  return boost::asio::async_initiate<Token, stream_io::signature>(
      [io = std::move(io)](auto handler) {
        if (prepare(io, handler)) ((*io).*Op)(make_completion_op(std::move(handler)));
      },
      token);
}

}  // namespace detail

// The client's end of a streaming call: writes Write messages, reads Read messages. Made by a
// generated stub (server streaming: the request was written and writes are done already). Move
// only; destroying it before the stream finished cancels the stream. Its client_context must
// outlive it (destroy the stream first; from then on the stream never touches the context, on
// any thread). An empty client_stream (default-constructed, moved from) fails every operation
// FAILED_PRECONDITION.
template <typename Write, typename Read>
class client_stream {
 public:
  client_stream() noexcept = default;
  explicit client_stream(std::shared_ptr<stream_io> io) noexcept : io_(std::move(io)) {}
  client_stream(client_stream&&) noexcept = default;
  client_stream& operator=(client_stream&& other) noexcept {
    if (this != &other) {
      if (io_) io_->release();
      io_ = std::move(other.io_);
    }
    return *this;
  }
  ~client_stream() {
    if (io_) io_->release();
  }

  template <typename Token>
  auto async_write(const Write& message, Token&& token) {
    return detail::async_stream_write(io_, message, std::forward<Token>(token));
  }
  // The non-waiting write, for a writer that produces messages faster than a completion per
  // message costs: true when `message` was serialized and queued for sending (as a completed
  // async_write), false when nothing happened because it would have to wait -- called off the
  // stream's executor (the channel's, or the server handler's own), with a write outstanding,
  // the peer's window closed, no send room, or the stream ended -- then use async_write. Messages
  // written this way go out together when the writer next waits. Runs no handler.
  bool try_write(const Write& message) { return io_ && io_->try_write(message); }
  template <typename Token>
  auto async_read(Read& message, Token&& token) {
    return detail::async_stream_read(io_, message, std::forward<Token>(token));
  }
  template <typename Token>
  auto async_writes_done(Token&& token) {
    return detail::async_stream_op<&stream_io::writes_done>(io_, std::forward<Token>(token));
  }
  template <typename Token>
  auto async_finish(Token&& token) {
    return detail::async_stream_op<&stream_io::finish>(io_, std::forward<Token>(token));
  }
  void cancel() noexcept {
    if (io_) io_->cancel();
  }

  const std::shared_ptr<stream_io>& io() const noexcept { return io_; }

 private:
  std::shared_ptr<stream_io> io_;
};

// A server handler's view of a client-streaming call's requests.
template <typename Read>
class server_reader {
 public:
  explicit server_reader(std::shared_ptr<stream_io> io) noexcept : io_(std::move(io)) {}
  template <typename Token>
  auto async_read(Read& message, Token&& token) {
    return detail::async_stream_read(io_, message, std::forward<Token>(token));
  }

 private:
  std::shared_ptr<stream_io> io_;
};

// A server handler's view of a server-streaming call's replies. The stream ends (trailers with the
// handler's status) when the handler returns; initial metadata set on the server_context before
// the first write go with it.
template <typename Write>
class server_writer {
 public:
  explicit server_writer(std::shared_ptr<stream_io> io) noexcept : io_(std::move(io)) {}
  template <typename Token>
  auto async_write(const Write& message, Token&& token) {
    return detail::async_stream_write(io_, message, std::forward<Token>(token));
  }
  bool try_write(const Write& message) { return io_->try_write(message); }  // see client_stream

 private:
  std::shared_ptr<stream_io> io_;
};

// Both, for a bidirectional-streaming call.
template <typename Read, typename Write>
class server_reader_writer {
 public:
  explicit server_reader_writer(std::shared_ptr<stream_io> io) noexcept : io_(std::move(io)) {}
  template <typename Token>
  auto async_read(Read& message, Token&& token) {
    return detail::async_stream_read(io_, message, std::forward<Token>(token));
  }
  template <typename Token>
  auto async_write(const Write& message, Token&& token) {
    return detail::async_stream_write(io_, message, std::forward<Token>(token));
  }
  bool try_write(const Write& message) { return io_->try_write(message); }  // see client_stream

 private:
  std::shared_ptr<stream_io> io_;
};

}  // namespace rdmarpc
