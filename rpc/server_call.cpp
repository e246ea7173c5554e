#include "rpc/server_call.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/version.hpp>

#include "rpc/status.hpp"

// Boost 1.81 (Debian 12's): handlers on an io_context start through Asio's own coroutine thread
// (boost::asio::detail::awaitable_thread) with an entry point of ours. Another Boost falls back to
// co_spawn until this is checked against its awaitable internals.
#if BOOST_VERSION == 108100
#define RDMARPC_DIRECT_HANDLER_LAUNCH 1
#else
#define RDMARPC_DIRECT_HANDLER_LAUNCH 0
#endif

namespace rdmarpc {
namespace {

#if RDMARPC_DIRECT_HANDLER_LAUNCH
using handler_executor = boost::asio::any_io_executor;
using tracked_io_executor =
    std::decay_t<decltype(boost::asio::prefer(std::declval<boost::asio::io_context::executor_type>(),
                                              boost::asio::execution::outstanding_work.tracked))>;

// The bottom frame of a handler's coroutine thread: runs the handler, then reports its end. Unlike
// co_spawn's entry point it neither dispatches first (we are on the executor) nor posts once more
// when the handler finished without suspending: done may run inside start() (the server keeps the
// call until start() returns), so a handler that answers at once costs no trip through the
// scheduler. `work` keeps run() from returning while the handler waits (co_spawn's guard).
boost::asio::awaitable<boost::asio::detail::awaitable_thread_entry_point, handler_executor> run_to_done(
    boost::asio::awaitable<void> handler, server_done done, tracked_io_executor work) {
  (void)work;
  std::exception_ptr error;
  try {
    co_await std::move(handler);
  } catch (...) {
    error = std::current_exception();
  }
  done(std::move(error));
}
#endif

}  // namespace

void server_done::drop() noexcept {
  if (auto t = std::move(target_)) t->call_dropped(key_, std::uncaught_exceptions() > 0);
}

void server_done::target::call_dropped(std::uint64_t key, bool unwinding) noexcept {
  call_done(key, std::make_exception_ptr(
                     status_error(status_code::internal,
                                  unwinding ? "the handler dropped its completion while an exception unwound"
                                            : "the handler dropped its completion without invoking it")));
}

void spawn_handler(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> handler,
                   boost::asio::cancellation_slot cancel, server_done done) {
  // On an io_context, co_spawn on its concrete executor: co_spawn keeps the executor busy while
  // the call runs, which through the type-erased executor costs an allocation per call.
  auto spawn = [&](const auto& executor) {
    boost::asio::co_spawn(
        executor, std::move(handler),
        boost::asio::bind_cancellation_slot(
            cancel, [done = std::move(done)](std::exception_ptr e) mutable { done(std::move(e)); }));
  };
  if (const auto* io = ex.target<boost::asio::io_context::executor_type>()) {
#if RDMARPC_DIRECT_HANDLER_LAUNCH
    // Only from inside the io_context's run(), as the server calls it: from another thread the
    // handler would run there, and outside run() its work guard could be the context's last work,
    // whose release stops the context.
    if (!io->running_in_this_thread()) return spawn(*io);
    // Runs the handler here until it first suspends (or ends); a suspended handler's thread moves
    // into the operation it waits for, leaving this one empty. The coroutine's cancellation state
    // goes straight into the server's slot (co_spawn puts a relay in between, which only matters
    // when the emitter is on another executor; the server emits on this one).
    boost::asio::detail::awaitable_thread<handler_executor> thread(
        run_to_done(std::move(handler), std::move(done),
                    boost::asio::prefer(*io, boost::asio::execution::outstanding_work.tracked)),
        handler_executor(*io), cancel, boost::asio::cancellation_state(cancel));
    thread.launch();
    return;
#else
    return spawn(*io);
#endif
  }
  spawn(ex);
}

}  // namespace rdmarpc
