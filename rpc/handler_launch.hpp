#pragma once
// handler_launch: how a coroutine handler starts. spawn_handler runs it on the call's executor,
// cancellable, and invokes its server_done once it ended; a handler returning its reply has the
// reply stored into the call's own message first, in the same coroutine frame that runs it (no
// wrapper coroutine per call). Inside the run() of the io_context the executor belongs to (the
// server's case) a handler starts at once, here, and one that never suspends finishes before
// spawn_handler returns (no scheduler hop); that direct start uses Boost 1.81's coroutine
// internals (awaitable_thread), so with another Boost, or from outside run(), it is co_spawned.
// Layer: rpc. Threading: the executor's.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/version.hpp>
#include <exception>
#include <type_traits>
#include <utility>

#include "rpc/server_done.hpp"

#if BOOST_VERSION == 108100
#define RDMARPC_DIRECT_HANDLER_LAUNCH 1
#else
#define RDMARPC_DIRECT_HANDLER_LAUNCH 0
#endif

namespace rdmarpc {
namespace detail {

// Where a handler's result goes: a reply (stored by move assignment), or nowhere (void).
template <typename T>
using handler_result_ptr = std::conditional_t<std::is_void_v<T>, void*, T*>;

// The co_spawn fallback's body for a handler returning a reply: awaits it and stores the reply.
template <typename T>
boost::asio::awaitable<void> await_and_store(boost::asio::awaitable<T> handler, T* out) {
  *out = co_await std::move(handler);
}

// co_spawns `body` on `ex` (on its io_context's own executor when it has one: co_spawn keeps the
// executor busy while the call runs, which through the type-erased executor costs an allocation
// per call). Out of line: co_spawn's machinery stays out of every generated service.
void co_spawn_handler(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> body,
                      boost::asio::cancellation_slot cancel, server_done done);

#if RDMARPC_DIRECT_HANDLER_LAUNCH
using handler_executor = boost::asio::any_io_executor;
using handler_entry =
    boost::asio::awaitable<boost::asio::detail::awaitable_thread_entry_point, handler_executor>;
using tracked_io_executor =
    std::decay_t<decltype(boost::asio::prefer(std::declval<boost::asio::io_context::executor_type>(),
                                              boost::asio::execution::outstanding_work.tracked))>;

// The bottom frame of a handler's coroutine thread: runs the handler, stores its result, then
// reports its end. Unlike co_spawn's entry point it neither dispatches first (we are on the
// executor) nor posts once more when the handler finished without suspending: done may run inside
// start() (the server keeps the call until start() returns), so a handler that answers at once
// costs no trip through the scheduler. `work` keeps run() from returning while the handler waits
// (co_spawn's guard). Static, all state in parameters: GCC 12's UBSan misreports a template's
// `this` as null inside a resumed coroutine.
template <typename T>
handler_entry run_to_done(boost::asio::awaitable<T> handler, handler_result_ptr<T> out, server_done done,
                          tracked_io_executor work) {
  (void)work;
  std::exception_ptr error;
  try {
    if constexpr (std::is_void_v<T>) {
      (void)out;
      co_await std::move(handler);
    } else {
      *out = co_await std::move(handler);
    }
  } catch (...) {
    error = std::current_exception();
  }
  done(std::move(error));
}

// Runs `entry` here until it first suspends (or ends); a suspended handler's thread moves into the
// operation it waits for. The coroutine's cancellation state goes straight into `cancel` (co_spawn
// puts a relay in between, which only matters when the emitter is on another executor).
void launch_here(handler_entry entry, const boost::asio::io_context::executor_type& io,
                 boost::asio::cancellation_slot cancel);
#endif

}  // namespace detail

// Runs coroutine handler `handler` on `ex`, cancellable through `cancel`; stores what it returns
// into `*out` (a reply; null and unused for a void handler), then invokes `done` with how it ended.
template <typename T>
void spawn_handler(const boost::asio::any_io_executor& ex, boost::asio::awaitable<T> handler,
                   detail::handler_result_ptr<T> out, boost::asio::cancellation_slot cancel,
                   server_done done) {
#if RDMARPC_DIRECT_HANDLER_LAUNCH
  // Only from inside the io_context's run(), as the server calls it: from another thread the
  // handler would run there, and outside run() its work guard could be the context's last work,
  // whose release stops the context.
  if (const auto* io = ex.target<boost::asio::io_context::executor_type>();
      io && io->running_in_this_thread()) {
    return detail::launch_here(
        detail::run_to_done<T>(std::move(handler), out, std::move(done),
                               boost::asio::prefer(*io, boost::asio::execution::outstanding_work.tracked)),
        *io, cancel);
  }
#endif
  if constexpr (std::is_void_v<T>) {
    (void)out;
    detail::co_spawn_handler(ex, std::move(handler), cancel, std::move(done));  // nothing to store
  } else {
    detail::co_spawn_handler(ex, detail::await_and_store(std::move(handler), out), cancel, std::move(done));
  }
}

// A handler with nothing to store (streams, or a test's).
inline void spawn_handler(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> handler,
                          boost::asio::cancellation_slot cancel, server_done done) {
  spawn_handler<void>(ex, std::move(handler), nullptr, cancel, std::move(done));
}

}  // namespace rdmarpc
