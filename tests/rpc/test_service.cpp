#include "test_service.hpp"

#include "rpc/status.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <stdexcept>

namespace rdmarpc::test {

boost::asio::awaitable<EchoReply> test_service::do_sleep(server_context& ctx, const EchoRequest& req) {
  const int now = ++concurrent;
  for (int seen = max_concurrent.load(); now > seen && !max_concurrent.compare_exchange_weak(seen, now);) {
  }
  ++sleeps_started;
  notify();
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(req.sleep_ms()));
  try {
    co_await timer.async_wait(boost::asio::use_awaitable);
  } catch (const boost::system::system_error&) {
    // Terminal cancellation from the server (deadline, cancel frame, connection closed).
    --concurrent;
    if (ctx.is_cancelled()) ++sleeps_cancelled;
    notify();
    throw;
  }
  --concurrent;
  ++sleeps_finished;
  notify();
  EchoReply reply;
  reply.set_data(req.data());
  co_return reply;
}

boost::asio::awaitable<void> test_service::dispatch(std::size_t index, server_context& ctx,
                                                    std::span<const std::byte> request, std::string& response) {
  EchoRequest req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    ctx.set_status(status_code::invalid_argument, "cannot parse rdmarpc.test.EchoRequest");
    co_return;
  }
  EchoReply reply;
  switch (index) {
    case 0:
      reply.set_data(req.data());
      break;
    case 1:
      reply = co_await do_sleep(ctx, req);
      break;
    case 2:
      throw std::runtime_error("boom");
    case 3:
      throw status_error(status_code::not_found, "no such key: " + req.data());
    case 4:
      for (const auto& [key, value] : ctx.client_metadata()) reply.mutable_data()->append(key + "=" + value + ";");
      break;
    default:
      ctx.set_status(status_code::internal, "bad method index");
      co_return;
  }
  if (ctx.status() == status_code::ok) reply.SerializeToString(&response);
}

}  // namespace rdmarpc::test
