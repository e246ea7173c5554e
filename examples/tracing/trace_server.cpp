// trace_server NAME URI [BACKEND_URI]: the greeter behind interceptors (examples/tracing). With a
// BACKEND_URI, SayHello asks that backend's SayHello on behalf of its own call (the trace goes
// on: client_context::set_parent) and answers "NAME -> <backend's text>". Every finished call is
// logged with its trace (request_log); calls need "authorization: Bearer demo-token"
// (bearer_check). Prints "trace_server listening on <uri>".
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <rdmarpc/channel.hpp>
#include <rdmarpc/server.hpp>

#include "greeter/greeter.rdmarpc.pb.h"
#include "trace_interceptors.hpp"

using greeter::v1::Greeter;

class greeter_impl final : public Greeter::Service {
 public:
  greeter_impl(std::string name, std::shared_ptr<rdmarpc::channel> backend)
      : name_(std::move(name)),
        backend_(backend ? std::make_optional<Greeter::Stub>(backend) : std::nullopt) {}

  boost::asio::awaitable<greeter::v1::HelloReply> say_hello(
      rdmarpc::server_context& ctx, const greeter::v1::HelloRequest& request) override {
    greeter::v1::HelloReply reply;
    if (!backend_) {
      reply.set_text(name_ + ": hello, " + request.name());
      co_return reply;
    }
    rdmarpc::client_context downstream;
    downstream.set_parent(ctx);  // same trace, and never a later deadline than our caller's
    auto [ec, backend_reply] = co_await backend_->async_say_hello(
        downstream, request, boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec)
      throw rdmarpc::status_error(rdmarpc::to_status_code(ec), "backend: " + downstream.status_message());
    reply.set_text(name_ + " -> " + backend_reply.text());
    co_return reply;
  }
  boost::asio::awaitable<void> say_hellos(rdmarpc::server_context&, const greeter::v1::HelloRequest&,
                                          rdmarpc::server_writer<greeter::v1::HelloReply>&) override {
    throw rdmarpc::status_error(rdmarpc::status_code::unimplemented, "not in this example");
  }

 private:
  std::string name_;
  std::optional<Greeter::Stub> backend_;
};

int main(int argc, char* argv[]) {
  if (argc < 3) {
    std::cerr << "usage: trace_server NAME URI [BACKEND_URI]\n";
    return 2;
  }
  const std::string name = argv[1];
  boost::asio::io_context io;
  std::shared_ptr<rdmarpc::channel> backend;
  if (argc > 3) {
    rdmarpc::channel_options copts;
    copts.interceptors = {std::make_shared<tracing::traceparent_propagation>(),
                          std::make_shared<tracing::bearer_token>("demo-token")};
    backend = rdmarpc::channel::create(io.get_executor(), argv[3], copts);
  }
  greeter_impl service(name, backend);
  rdmarpc::server_options options;
  options.interceptors = {std::make_shared<tracing::request_log>(name),
                          std::make_shared<tracing::bearer_check>("demo-token")};
  rdmarpc::server server(io.get_executor(), options);
  server.add_service(service);
  const auto bound = server.listen(argv[2]);
  std::cout << "trace_server listening on " << bound.to_uri() << std::endl;
  io.run();
}
