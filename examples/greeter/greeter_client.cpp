// greeter_client: the README's walkthrough client (examples/greeter). Calls SayHello twice on the
// URI given (default rdma://10.0.0.1:7471), once with a callback and once from a coroutine, and
// reads the server-streaming SayHellos.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <rdmarpc/channel.hpp>

#include "greeter/greeter.rdmarpc.pb.h"

int main(int argc, char* argv[]) {
  boost::asio::io_context io(1);
  auto channel = rdmarpc::channel::create(io.get_executor(), argc > 1 ? argv[1] : "rdma://10.0.0.1:7471");
  greeter::v1::Greeter::Stub greeter(channel);
  greeter::v1::HelloRequest request;
  request.set_name("ada");
  int pending = 3, failed = 0;  // an open channel keeps io.run() busy: close it after the last call
  auto done = [&](bool ok) {
    failed += ok ? 0 : 1;
    if (--pending == 0) channel->close();
  };

  // callback (never runs inside the call that starts it)
  greeter.async_say_hello(request, [&](boost::system::error_code ec, const greeter::v1::HelloReply& reply) {
    if (!ec) std::cout << "callback:  " << reply.text() << "\n";
    done(!ec);
  });

  // coroutine: use_awaitable throws boost::system::system_error; as_tuple(use_awaitable) does not
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        rdmarpc::client_context context;  // optional: deadline, metadata, status message
        context.set_timeout(std::chrono::seconds(5));
        auto [ec, reply] = co_await greeter.async_say_hello(
            context, request, boost::asio::as_tuple(boost::asio::use_awaitable));
        if (ec)
          std::cout << rdmarpc::to_string(rdmarpc::to_status_code(ec)) << ": " << context.status_message()
                    << "\n";
        else
          std::cout << "coroutine: " << reply.text() << "\n";
        done(!ec);
      },
      boost::asio::detached);

  // server streaming: read until the end of the stream, then its status
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto stream = greeter.say_hellos(request);  // the request is sent; keep `stream` to read
        greeter::v1::HelloReply reply;
        for (;;) {
          auto [ec] = co_await stream.async_read(reply, boost::asio::as_tuple(boost::asio::use_awaitable));
          if (ec) break;  // rdmarpc::is_end_of_stream(ec) when the server finished
          std::cout << "stream:    " << reply.text() << "\n";
        }
        auto [status] = co_await stream.async_finish(boost::asio::as_tuple(boost::asio::use_awaitable));
        done(!status);
      },
      boost::asio::detached);
  io.run();
  return failed == 0 ? 0 : 1;
}
