#pragma once
// completion_op: an operation's completion handler as the untyped parts of the rpc layer hold it
// (a unary call's reply and handler, a stream read's or write's handler). The typed op lives in one
// block of Asio's recycled memory (no allocation per operation in steady state) and knows its
// handler's type, so the common case -- a handler that runs on the connection's own io_context --
// is completed with no type-erased executor at all: in place when the caller is on that
// io_context and not inside the operation's initiating function, else posted to the io_context
// directly. complete_on_handler_executor is the general path (strands, other executors).
// Layer: rpc. Threading: made on any thread, completed on the handler's associated executor.

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <boost/system/error_code.hpp>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace rdmarpc {

class completion_op {
 public:
  using io_executor = boost::asio::io_context::executor_type;

  // The handler's associated cancellation slot (unconnected when it has none).
  virtual boost::asio::cancellation_slot cancellation_slot() const noexcept = 0;
  // The handler's associated executor; `candidate` when it has none.
  virtual boost::asio::any_completion_executor executor(const io_executor& candidate) const = 0;
  virtual boost::asio::any_completion_executor executor(
      const boost::asio::any_io_executor& candidate) const = 0;
  // True when the handler's executor is `io` itself (default or associated): a caller running on
  // `io` may complete it in place.
  virtual bool runs_on(const io_executor& io) const noexcept = 0;
  // Calls the handler with `ec` (and whatever the op adds, e.g. a reply) and frees the op (before
  // the handler runs, or after it when the handler takes a member such as the reply). Call it on
  // the handler's executor, once.
  virtual void complete(boost::system::error_code ec) = 0;
  // Frees the op without calling its handler (an operation that can never complete).
  virtual void destroy() noexcept = 0;

 protected:
  ~completion_op() = default;
};

struct completion_op_deleter {
  template <typename Op>
  void operator()(Op* op) const noexcept {
    op->destroy();
  }
};
template <typename Op>
using op_ptr = std::unique_ptr<Op, completion_op_deleter>;
using completion_op_ptr = op_ptr<completion_op>;

namespace detail {

// Implements completion_op's handler-dependent members for an op type Base derived from it; the
// derived op adds complete() and destroy() (which knows its own allocator).
template <typename Base, typename Handler>
class handler_op : public Base {
 public:
  using io_executor = completion_op::io_executor;

  explicit handler_op(Handler handler) : handler_(std::move(handler)) {}

  boost::asio::cancellation_slot cancellation_slot() const noexcept override {
    return boost::asio::get_associated_cancellation_slot(handler_);
  }
  boost::asio::any_completion_executor executor(const io_executor& candidate) const override {
    return boost::asio::get_associated_executor(handler_, candidate);
  }
  boost::asio::any_completion_executor executor(
      const boost::asio::any_io_executor& candidate) const override {
    return boost::asio::get_associated_executor(handler_, candidate);
  }
  bool runs_on(const io_executor& io) const noexcept override {
    const auto ex = boost::asio::get_associated_executor(handler_, io);
    if constexpr (std::is_same_v<std::decay_t<decltype(ex)>, io_executor>) {
      return ex == io;
    } else if constexpr (requires { ex.template target<io_executor>(); }) {
      const auto* target = ex.template target<io_executor>();  // a type-erased executor
      return target != nullptr && *target == io;
    } else {
      return false;  // a strand or another executor: dispatched to it
    }
  }

 protected:
  ~handler_op() = default;
  Handler handler_;
};

// Allocates an Op (constructed from `args`) in Asio's recycled memory; Op::destroy frees it with
// recycled_destroy.
template <typename Op, typename... Args>
op_ptr<Op> make_recycled(Args&&... args) {
  boost::asio::recycling_allocator<Op> alloc;
  Op* p = alloc.allocate(1);
  try {
    ::new (static_cast<void*>(p)) Op(std::forward<Args>(args)...);
  } catch (...) {
    alloc.deallocate(p, 1);
    throw;
  }
  return op_ptr<Op>(p);
}
template <typename Op>
void recycled_destroy(Op* op) noexcept {
  op->~Op();
  boost::asio::recycling_allocator<Op>().deallocate(op, 1);
}

// A completion handler whose handler is void(error_code): a stream operation's.
template <typename Handler>
class error_code_op final : public handler_op<completion_op, Handler> {
 public:
  using handler_op<completion_op, Handler>::handler_op;
  void complete(boost::system::error_code ec) override {
    Handler handler(std::move(this->handler_));
    destroy();  // before the handler runs: the next operation it starts reuses this memory
    std::move(handler)(ec);
  }
  void destroy() noexcept override { recycled_destroy(this); }
};

// A finished operation on its way to a handler whose executor is not the io_context at hand.
template <typename Op>
struct posted_completion {
  using executor_type = boost::asio::any_completion_executor;
  op_ptr<Op> op;
  boost::system::error_code ec;
  executor_type executor;

  executor_type get_executor() const noexcept { return executor; }
  void operator()() {
    // Clear the slot on the handler's own executor, where the caller emits cancellations.
    auto slot = op->cancellation_slot();
    if (slot.is_connected()) slot.clear();
    op.release()->complete(ec);
  }
};

// The same, for a handler that runs on the io_context it is posted to: no executor to carry.
template <typename Op>
struct io_completion {
  op_ptr<Op> op;
  boost::system::error_code ec;
  void operator()() {
    auto slot = op->cancellation_slot();
    if (slot.is_connected()) slot.clear();
    op.release()->complete(ec);
  }
};

}  // namespace detail

// An op for a handler void(error_code).
template <typename Handler>
completion_op_ptr make_completion_op(Handler&& handler) {
  return detail::make_recycled<detail::error_code_op<std::decay_t<Handler>>>(std::forward<Handler>(handler));
}

// Inside a catch block: posts the exception being handled to `ex`, so that it comes out of the
// io_context's run() later instead of unwinding through the transport that is calling us.
inline void rethrow_from_run(const boost::asio::any_io_executor& ex) {
  boost::asio::post(ex, [e = std::current_exception()] { std::rethrow_exception(e); });
}

// Completes `op` here with `complete(op)` (which calls complete, or a sibling): the caller runs on
// the handler's executor (op->runs_on) and is not inside the operation's initiating function. A
// handler that throws must not unwind through the transport that delivered the frame (an rdma poll
// loop would lose its batch and its re-arm): its exception is posted to `ex`, to come out of the
// io_context's run() as any handler's would.
template <typename Op, typename Complete>
void complete_in_place_with(op_ptr<Op> op, const boost::asio::any_io_executor& ex, Complete&& complete) {
  auto slot = op->cancellation_slot();
  if (slot.is_connected()) slot.clear();
  try {
    complete(*op.release());
  } catch (...) {
    rethrow_from_run(ex);
  }
}

// Completes `op` with `ec` here (see complete_in_place_with).
template <typename Op>
void complete_in_place(op_ptr<Op> op, boost::system::error_code ec, const boost::asio::any_io_executor& ex) {
  complete_in_place_with(std::move(op), ex, [ec](Op& o) { o.complete(ec); });
}

// Queues the completion of `op` with `ec` on the handler's associated executor (`io`, or `ex` when
// `io` is null, by default); never runs it inside this call.
template <typename Op>
void post_completion(op_ptr<Op> op, boost::system::error_code ec, const completion_op::io_executor* io,
                     const boost::asio::any_io_executor& ex) {
  if (io != nullptr && op->runs_on(*io)) {
    // defer: when we run on io already, Asio keeps it in this thread's private queue.
    boost::asio::defer(*io, detail::io_completion<Op>{std::move(op), ec});
    return;
  }
  auto target = io != nullptr ? op->executor(*io) : op->executor(ex);
  boost::asio::post(ex, detail::posted_completion<Op>{std::move(op), ec, std::move(target)});
}

// Counts as outstanding work on an io_context while held: executor_work_guard's job, as a plain
// pointer that moves without GCC losing track of whether it is set.
class io_work_count {
 public:
  io_work_count() noexcept = default;
  explicit io_work_count(const boost::asio::io_context::executor_type* ex) noexcept : ex_(ex) {
    if (ex_ != nullptr) ex_->on_work_started();
  }
  io_work_count(io_work_count&& other) noexcept : ex_(std::exchange(other.ex_, nullptr)) {}
  io_work_count& operator=(io_work_count&& other) noexcept {
    if (this != &other) {
      reset();
      ex_ = std::exchange(other.ex_, nullptr);
    }
    return *this;
  }
  ~io_work_count() { reset(); }
  void reset() noexcept {
    if (const auto* ex = std::exchange(ex_, nullptr)) ex->on_work_finished();
  }
  explicit operator bool() const noexcept { return ex_ != nullptr; }

 private:
  const boost::asio::io_context::executor_type* ex_ = nullptr;
};

}  // namespace rdmarpc
