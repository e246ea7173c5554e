#pragma once
// unary_op: a unary call's client-side completion as the channel sees it: the reply message the
// channel parses into (held in the op, or the caller's own) and the caller's handler, in one block
// of Asio's recycled memory (no allocation per call in steady state). async_unary_call makes it;
// the channel uses it through this small interface (completion_op plus the reply), so the channel
// is no template.
// Layer: rpc. Threading: made on any thread, used on the channel's executor, completed on the
// handler's associated executor.

#include <google/protobuf/message_lite.h>

#include <optional>
#include <utility>

#include "rpc/completion_op.hpp"

namespace rdmarpc {

// complete(ec) calls the handler: with (ec, reply) for a reply the op holds (default-constructed
// when ec is set), with (ec) for a reply the caller owns (cleared when ec is set).
class unary_op : public completion_op {
 public:
  // The message the channel parses the reply into.
  virtual google::protobuf::MessageLite& response() noexcept = 0;
  // When the handler may be given a reply the channel keeps (complete_lent) and runs on `io`
  // (runs_on): a message of response()'s type (its default instance), what the channel needs to
  // lend a reply of that type without making the op build its own. Null otherwise: the reply is
  // the caller's own message, or the handler runs elsewhere. (One virtual call where the channel
  // receives every reply.)
  virtual const google::protobuf::MessageLite* lendable_reply_type(const io_executor& io) const noexcept = 0;
  // complete(ec) for a call that succeeded, with the reply parsed into `lent`, a message of
  // response()'s type that the caller keeps for later replies: the handler gets `lent` itself, so
  // what it leaves there (its strings' memory, unless it moves the reply out) carries the next one.
  // Only asked of an op whose lendable_reply_type() was not null; the default copies `lent` into
  // response().
  virtual void complete_lent(boost::system::error_code ec, google::protobuf::MessageLite& lent) {
    response().Clear();
    response().CheckTypeAndMergeFrom(lent);
    complete(ec);
  }

 protected:
  ~unary_op() = default;
};

using unary_op_ptr = op_ptr<unary_op>;

namespace detail {

// Destroys the op when the scope ends, however it ends (a handler or a move that throws).
struct destroy_on_exit {
  unary_op* op;
  ~destroy_on_exit() { op->destroy(); }
};

template <typename Reply, typename Handler>
class typed_unary_op final : public handler_op<unary_op, Handler> {
 public:
  using handler_op<unary_op, Handler>::handler_op;

  google::protobuf::MessageLite& response() noexcept override {
    if (!reply_) reply_.emplace();
    return *reply_;
  }
  const google::protobuf::MessageLite* lendable_reply_type(
      const completion_op::io_executor& io) const noexcept override {
    if (!this->runs_on(io)) return nullptr;
    if constexpr (requires { Reply::default_instance(); }) {
      return &Reply::default_instance();  // generated messages
    } else {
      static const Reply prototype;  // a hand-written MessageLite: an immutable instance of its type
      return &prototype;
    }
  }
  void complete(boost::system::error_code ec) override {
    // The handler takes the reply straight from this op (one move, into its parameter), so the op
    // is freed after it returns, or when it throws.
    const destroy_on_exit guard{this};
    if (ec || !reply_) {
      std::move(this->handler_)(ec, Reply{});
    } else {
      std::move(this->handler_)(ec, std::move(*reply_));
    }
  }
  void complete_lent(boost::system::error_code ec, google::protobuf::MessageLite& lent) override {
    const destroy_on_exit guard{this};
    std::move(this->handler_)(ec, std::move(static_cast<Reply&>(lent)));
  }
  void destroy() noexcept override { recycled_destroy(this); }

 private:
  // Built only when the channel parses into it: a reply lent by the channel (complete_lent), the
  // usual case, never touches it.
  std::optional<Reply> reply_;
};

// The reply goes into the caller's own message, which a caller may reuse from call to call: its
// strings and repeated fields keep their memory, so no reply is built, moved or destroyed per call.
template <typename Handler>
class caller_reply_op final : public handler_op<unary_op, Handler> {
 public:
  caller_reply_op(Handler handler, google::protobuf::MessageLite& reply)
      : handler_op<unary_op, Handler>(std::move(handler)), reply_(&reply) {}

  google::protobuf::MessageLite& response() noexcept override { return *reply_; }
  // The reply is the caller's: never lent one.
  const google::protobuf::MessageLite* lendable_reply_type(
      const completion_op::io_executor&) const noexcept override {
    return nullptr;
  }
  void complete(boost::system::error_code ec) override {
    std::optional<Handler> handler;
    {
      const destroy_on_exit guard{this};  // also when Clear() or the handler's move throws
      if (ec) reply_->Clear();            // nothing of a failed call (or of the call before) is left in it
      handler.emplace(std::move(this->handler_));
    }  // destroyed before the handler runs: the next call it starts reuses this memory
    (*std::move(handler))(ec);
  }
  void destroy() noexcept override { recycled_destroy(this); }

 private:
  google::protobuf::MessageLite* reply_;
};

}  // namespace detail

// A unary_op for a call whose reply is a Reply and whose handler is void(error_code, Reply).
template <typename Reply, typename Handler>
unary_op_ptr make_unary_op(Handler&& handler) {
  return detail::make_recycled<detail::typed_unary_op<Reply, std::decay_t<Handler>>>(
      std::forward<Handler>(handler));
}

// A unary_op whose reply is parsed into `reply` (owned by the caller, valid until the handler
// runs) and whose handler is void(error_code).
template <typename Handler>
unary_op_ptr make_caller_reply_op(Handler&& handler, google::protobuf::MessageLite& reply) {
  return detail::make_recycled<detail::caller_reply_op<std::decay_t<Handler>>>(std::forward<Handler>(handler),
                                                                               reply);
}

}  // namespace rdmarpc
