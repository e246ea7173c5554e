#include "rpc/handler_launch.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>

namespace rdmarpc {
namespace detail {

void co_spawn_handler(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> body,
                      boost::asio::cancellation_slot cancel, server_done done) {
  auto spawn = [&](const auto& executor) {
    boost::asio::co_spawn(
        executor, std::move(body),
        boost::asio::bind_cancellation_slot(
            cancel, [done = std::move(done)](std::exception_ptr e) mutable { done(std::move(e)); }));
  };
  if (const auto* io = ex.target<boost::asio::io_context::executor_type>()) return spawn(*io);
  spawn(ex);
}

}  // namespace detail

#if RDMARPC_DIRECT_HANDLER_LAUNCH
namespace detail {

void launch_here(handler_entry entry, const boost::asio::io_context::executor_type& io,
                 boost::asio::cancellation_slot cancel) {
  boost::asio::detail::awaitable_thread<handler_executor> thread(
      std::move(entry), handler_executor(io), cancel, boost::asio::cancellation_state(cancel));
  thread.launch();
}

}  // namespace detail
#endif

}  // namespace rdmarpc
