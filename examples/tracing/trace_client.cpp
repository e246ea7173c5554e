// trace_client URI: calls SayHello on URI with a traceparent (a new trace) and the demo bearer
// token, prints the trace id it started and the reply (examples/tracing); then once without the
// token, which the server refuses.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <rdmarpc/channel.hpp>

#include "greeter/greeter.rdmarpc.pb.h"
#include "trace_interceptors.hpp"

namespace {

// Prints the traceparent each call goes out with (the interceptors before it added it) and how
// the call ended.
class sent_trace final : public rdmarpc::client_interceptor {
 public:
  rdmarpc::call_verdict on_call_start(const rdmarpc::client_call_info&, rdmarpc::metadata& added) override {
    if (auto t = tracing::traceparent_of(added))
      std::cout << "trace " << t->trace_id << " span " << t->parent_id << "\n";
    return {};
  }
  void on_call_end(const rdmarpc::client_call_info&, const rdmarpc::call_outcome& outcome) override {
    std::cout << "call ended: " << rdmarpc::to_string(outcome.code) << "\n";
  }
};

}  // namespace

int main(int argc, char* argv[]) {
  if (argc < 2) {
    std::cerr << "usage: trace_client URI\n";
    return 2;
  }
  boost::asio::io_context io(1);
  rdmarpc::channel_options with_token, without_token;
  auto propagation = std::make_shared<tracing::traceparent_propagation>();
  with_token.interceptors = {propagation, std::make_shared<tracing::bearer_token>("demo-token"),
                             std::make_shared<sent_trace>()};
  without_token.interceptors = {propagation};
  auto channel = rdmarpc::channel::create(io.get_executor(), argv[1], with_token);
  auto anonymous = rdmarpc::channel::create(io.get_executor(), argv[1], without_token);
  int failed = 0;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        greeter::v1::Greeter::Stub greeter(channel), stranger(anonymous);
        greeter::v1::HelloRequest request;
        request.set_name("ada");
        rdmarpc::client_context ctx;
        ctx.set_timeout(std::chrono::seconds(30));
        auto [ec, reply] =
            co_await greeter.async_say_hello(ctx, request, boost::asio::as_tuple(boost::asio::use_awaitable));
        if (ec) {
          std::cout << "SayHello: " << rdmarpc::to_string(rdmarpc::to_status_code(ec)) << ": "
                    << ctx.status_message() << "\n";
          ++failed;
        } else {
          std::cout << "SayHello: " << reply.text() << "\n";
        }
        rdmarpc::client_context no_token;
        no_token.set_timeout(std::chrono::seconds(30));
        auto [ec2, reply2] = co_await stranger.async_say_hello(
            no_token, request, boost::asio::as_tuple(boost::asio::use_awaitable));
        std::cout << "without a token: " << rdmarpc::to_string(rdmarpc::to_status_code(ec2)) << ": "
                  << no_token.status_message() << "\n";
        if (!ec2) ++failed;
        channel->close();
        anonymous->close();
      },
      boost::asio::detached);
  io.run();
  return failed == 0 ? 0 : 1;
}
