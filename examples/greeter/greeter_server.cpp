// greeter_server: the README's walkthrough server (examples/greeter). Serves Greeter on the URI
// given (default rdma://10.0.0.1:7471) until killed (SayHello and the server-streaming SayHellos); prints
// "greeter_server listening on <uri>".
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <rdmarpc/server.hpp>

#include "greeter/greeter.rdmarpc.pb.h"

class greeter_impl final : public greeter::v1::Greeter::Service {
  boost::asio::awaitable<greeter::v1::HelloReply> say_hello(
      rdmarpc::server_context& context, const greeter::v1::HelloRequest& request) override {
    if (request.name().empty())
      throw rdmarpc::status_error(rdmarpc::status_code::invalid_argument, "no name");
    greeter::v1::HelloReply reply;
    reply.set_text("hello, " + request.name() + " (from " + context.peer() + ")");
    co_return reply;
  }

  // server streaming: one reply per language; each write waits while the client's window is full
  boost::asio::awaitable<void> say_hellos(rdmarpc::server_context&, const greeter::v1::HelloRequest& request,
                                          rdmarpc::server_writer<greeter::v1::HelloReply>& writer) override {
    static constexpr const char* kHellos[] = {"hello", "bonjour", "hallo"};
    greeter::v1::HelloReply reply;
    for (const char* hello : kHellos) {
      reply.set_text(std::string(hello) + ", " + request.name());
      co_await writer.async_write(reply, boost::asio::use_awaitable);
    }
  }  // returning ends the stream with OK (throwing: with that status)
};

int main(int argc, char* argv[]) {
  boost::asio::io_context io;
  greeter_impl service;
  rdmarpc::server server(io.get_executor());
  server.add_service(service);  // not owned: keep `service` alive
  const auto bound = server.listen(argc > 1 ? argv[1] : "rdma://10.0.0.1:7471");  // once per URI
  std::cout << "greeter_server listening on " << bound.to_uri() << std::endl;
  io.run();  // see examples/kv/kv_server.cpp for SIGINT/SIGTERM shutdown
}
