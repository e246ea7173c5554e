#include "rpc/server_call.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "rpc/status.hpp"

namespace rdmarpc {

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
  auto spawn = [&](const auto& executor) {
    boost::asio::co_spawn(
        executor, std::move(handler),
        boost::asio::bind_cancellation_slot(
            cancel, [done = std::move(done)](std::exception_ptr e) mutable { done(std::move(e)); }));
  };
  // On an io_context, spawn on its concrete executor: co_spawn keeps the executor busy while the
  // call runs, which through the type-erased executor costs an allocation per call.
  if (const auto* io = ex.target<boost::asio::io_context::executor_type>()) return spawn(*io);
  spawn(ex);
}

}  // namespace rdmarpc
