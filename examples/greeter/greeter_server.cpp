// greeter_server: the README's walkthrough server (examples/greeter). Serves Greeter on the URI
// given (default rdma://10.0.0.1:7471) until killed; prints "greeter_server listening on <uri>".
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "greeter/greeter.rdmarpc.pb.h"
#include "rpc/server.hpp"

class greeter_impl final : public greeter::v1::Greeter::Service {
  boost::asio::awaitable<greeter::v1::HelloReply> say_hello(
      rdmarpc::server_context& context, const greeter::v1::HelloRequest& request) override {
    if (request.name().empty())
      throw rdmarpc::status_error(rdmarpc::status_code::invalid_argument, "no name");
    greeter::v1::HelloReply reply;
    reply.set_text("hello, " + request.name() + " (from " + context.peer() + ")");
    co_return reply;
  }
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
