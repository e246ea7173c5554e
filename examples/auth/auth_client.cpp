// auth_client: calls examples/auth's server on the URI given (default rdma://10.0.0.1:7471) without
// a token, with an unknown one and with each known one, and prints each outcome: the token goes in
// the call's metadata as "authorization: Bearer <token>".
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <rdmarpc/channel.hpp>

#include "greeter/greeter.rdmarpc.pb.h"

using greeter::v1::Greeter;
constexpr auto kNoThrow = boost::asio::as_tuple(boost::asio::use_awaitable);

std::string outcome(const boost::system::error_code& ec, const rdmarpc::client_context& context) {
  return std::string(rdmarpc::to_string(rdmarpc::to_status_code(ec))) +
         (ec ? ": " + context.status_message() : std::string());
}

boost::asio::awaitable<void> run(Greeter::Stub& greeter, const char* token) {
  greeter::v1::HelloRequest request;
  request.set_name("ada");
  const std::string label = token != nullptr ? token : "(no token)";
  {
    rdmarpc::client_context context;
    if (token != nullptr) context.add_metadata("authorization", std::string("Bearer ") + token);
    context.set_timeout(std::chrono::seconds(5));
    auto [ec, reply] = co_await greeter.async_say_hello(context, request, kNoThrow);
    std::cout << label << " SayHello: " << outcome(ec, context) << (ec ? "" : ", " + reply.text()) << "\n";
  }
  {
    rdmarpc::client_context context;
    if (token != nullptr) context.add_metadata("authorization", std::string("Bearer ") + token);
    auto stream = greeter.say_hellos(context, request);
    greeter::v1::HelloReply reply;
    for (;;) {
      auto [ec] = co_await stream.async_read(reply, kNoThrow);
      if (ec) break;
    }
    auto [ec] = co_await stream.async_finish(kNoThrow);
    std::cout << label << " SayHellos: " << outcome(ec, context) << "\n";
  }
}

int main(int argc, char* argv[]) {
  boost::asio::io_context io(1);
  auto channel = rdmarpc::channel::create(io.get_executor(), argc > 1 ? argv[1] : "rdma://10.0.0.1:7471");
  Greeter::Stub greeter(channel);
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        for (const char* token :
             {static_cast<const char*>(nullptr), "wrong-token", "hello-only-token", "demo-token"})
          co_await run(greeter, token);
        channel->close();  // an open channel keeps io.run() busy
      },
      boost::asio::detached);
  io.run();
}
