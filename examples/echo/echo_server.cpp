// echo_server: serves echo.Echo on one or more URIs until SIGINT/SIGTERM (graceful shutdown).
//   echo_server rdma://10.0.0.1:7472
// Prints "echo_server listening on <uri>" on stdout per URI, with the real port.

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <rdmarpc/server.hpp>
#include <string>
#include <vector>

#include "echo.rdmarpc.pb.h"

namespace {

class echo_service final : public echo::Echo::Service {
 public:
  // rpc Echo: the method's snake_case name is `echo`.
  boost::asio::awaitable<echo::EchoReply> echo(rdmarpc::server_context&,
                                               const echo::EchoRequest& request) override {
    echo::EchoReply reply;
    reply.set_payload(request.payload());
    co_return reply;
  }
};

}  // namespace

int main(int argc, char* argv[]) {
  std::size_t threads = 0;
  std::vector<std::string> uris;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg.starts_with("-")) {
      uris.clear();
      break;
    } else {
      uris.push_back(arg);
    }
  }
  if (uris.empty()) {
    std::cerr
        << "usage: echo_server [--threads N] URI [URI...]   (rdma://ADDRESS:PORT or tcp://ADDRESS:PORT)\n";
    return 2;
  }
  try {
    boost::asio::io_context io;
    echo_service service;
    rdmarpc::server server(io.get_executor(), {.threads = threads});
    server.add_service(service);
    for (const std::string& uri : uris) {
      const auto bound = server.listen(uri);
      spdlog::info("echo_server: serving echo.Echo on {}", bound.to_uri());
      std::cout << "echo_server listening on " << bound.to_uri() << std::endl;
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      spdlog::info("echo_server: signal {}, shutting down", signal);
      server.async_shutdown(std::chrono::seconds(5), [&] {
        spdlog::info("echo_server: stopped");
        io.stop();
      });
    });
    io.run();
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("echo_server: {}", e.what());
    return 1;
  }
}
