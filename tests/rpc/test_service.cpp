#include "test_service.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>
#include <string>

#include "rpc/status.hpp"

namespace rdmarpc::test {

boost::asio::awaitable<EchoReply> test_service::do_sleep(server_context& ctx, const EchoRequest& req) {
  const int now = ++concurrent;
  for (int seen = max_concurrent.load(); now > seen && !max_concurrent.compare_exchange_weak(seen, now);) {
  }
  ++sleeps_started;
  notify();
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                  std::chrono::milliseconds(req.sleep_ms()));
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

boost::asio::awaitable<EchoReply> test_service::do_echo(server_context&, const EchoRequest& req) {
  EchoReply reply;
  reply.set_data(req.data());
  co_return reply;
}

boost::asio::awaitable<EchoReply> test_service::do_throw(server_context&, const EchoRequest&) {
  throw std::runtime_error("boom");
  co_return EchoReply{};
}

boost::asio::awaitable<EchoReply> test_service::do_fail(server_context&, const EchoRequest& req) {
  throw status_error(status_code::not_found, "no such key: " + req.data());
  co_return EchoReply{};
}

boost::asio::awaitable<EchoReply> test_service::do_metadata(server_context& ctx, const EchoRequest& req) {
  EchoReply reply;
  for (const auto& [key, value] : ctx.client_metadata()) {
    reply.mutable_data()->append(key + "=" + value + ";");
    ctx.add_initial_metadata("echo-" + key, value);
  }
  ctx.add_trailing_metadata("count", std::to_string(ctx.client_metadata().size()));
  if (req.data() == "fail") ctx.set_status(status_code::not_found, "failed as asked");
  if (req.data() == "flood" || req.data() == "flood and fail") {  // more than a client accepts (64)
    for (int i = 0; i < 100; ++i) ctx.add_trailing_metadata("k" + std::to_string(i), "v");
  }
  if (req.data() == "flood and fail") ctx.set_status(status_code::aborted, "flooded");
  co_return reply;
}

std::unique_ptr<server_call> test_service::new_call(std::size_t index) {
  using call = member_server_call<test_service, EchoRequest, EchoReply>;
  switch (index) {
    case 0: return std::make_unique<call>(*this, &test_service::do_echo);
    case 1: return std::make_unique<call>(*this, &test_service::do_sleep);
    case 2: return std::make_unique<call>(*this, &test_service::do_throw);
    case 3: return std::make_unique<call>(*this, &test_service::do_fail);
    case 4: return std::make_unique<call>(*this, &test_service::do_metadata);
    default: return nullptr;
  }
}

}  // namespace rdmarpc::test
