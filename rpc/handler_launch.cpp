#include "rpc/handler_launch.hpp"

namespace rdmarpc {

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
