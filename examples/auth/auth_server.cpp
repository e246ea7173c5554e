// auth_server: the greeter behind a bearer token (examples/auth). Serves Greeter on the URI given
// (default rdma://10.0.0.1:7471) and lets a call through only with metadata
// "authorization: Bearer <token>" naming a known token: "demo-token" may call everything,
// "hello-only-token" SayHello but not the stream SayHellos. Prints "auth_server listening on <uri>".
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <map>
#include <rdmarpc/server.hpp>
#include <string>

#include "greeter/greeter.rdmarpc.pb.h"

using greeter::v1::Greeter;

class greeter_impl final : public Greeter::Service {
  boost::asio::awaitable<greeter::v1::HelloReply> say_hello(
      rdmarpc::server_context&, const greeter::v1::HelloRequest& request) override {
    greeter::v1::HelloReply reply;
    reply.set_text("hello, " + request.name());
    co_return reply;
  }
  boost::asio::awaitable<void> say_hellos(rdmarpc::server_context&, const greeter::v1::HelloRequest& request,
                                          rdmarpc::server_writer<greeter::v1::HelloReply>& writer) override {
    greeter::v1::HelloReply reply;
    reply.set_text("hello, " + request.name());
    co_await writer.async_write(reply, boost::asio::use_awaitable);
  }
};

// Who a token stands for and whether it may open streams. A real server verifies a signed token
// or asks its identity service; check_call runs on the connection's thread, so keep that quick
// (cache the answers) and never block in it.
struct principal {
  std::string name;
  bool may_stream;
};
const std::map<std::string, principal, std::less<>> kTokens = {
    {"demo-token", {"demo", true}},
    {"hello-only-token", {"hello-only", false}},
};

rdmarpc::call_verdict check_bearer(const rdmarpc::call_info& call) {
  constexpr std::string_view kBearer = "Bearer ";
  for (const auto& [key, value] : call.metadata) {
    if (key != "authorization") continue;
    if (!std::string_view(value).starts_with(kBearer))
      return {rdmarpc::status_code::unauthenticated, "authorization is not a bearer token"};
    const auto who = kTokens.find(std::string_view(value).substr(kBearer.size()));
    if (who == kTokens.end()) return {rdmarpc::status_code::unauthenticated, "unknown token"};
    if (call.stream && !who->second.may_stream)
      return {rdmarpc::status_code::permission_denied,
              who->second.name + " may not call " + std::string(call.method)};
    return {};  // OK: the handler runs
  }
  return {rdmarpc::status_code::unauthenticated, "no \"authorization: Bearer <token>\" metadata"};
}

int main(int argc, char* argv[]) {
  boost::asio::io_context io;
  greeter_impl service;
  rdmarpc::server_options options;
  options.check_call = check_bearer;
  // Connections could be filtered by peer too (options.admit_connection), e.g. only from one subnet:
  //   options.admit_connection = [](const rdmarpc::peer_info& p) { return p.host.starts_with("10."); };
  rdmarpc::server server(io.get_executor(), options);
  server.add_service(service);
  const auto bound = server.listen(argc > 1 ? argv[1] : "rdma://10.0.0.1:7471");
  std::cout << "auth_server listening on " << bound.to_uri() << std::endl;
  io.run();
}
