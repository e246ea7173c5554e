// kv_server: serves the example key-value store (kv.proto) on one or more URIs until SIGINT or
// SIGTERM, then shuts down gracefully (in-flight calls get up to 5 s to finish).
//   kv_server rdma://10.0.0.1:7471
//   kv_server --threads 2 tcp://0.0.0.0:7471 rdma://0.0.0.0:7471
// Prints "kv_server listening on <uri>" on stdout for every URI (with the real port when 0 was
// asked for), so scripts can wait for it.
// Also serves grpc.health.v1 (kv.Store and the server: SERVING; NOT_SERVING once shutting down) and
// grpc.reflection.v1, so the rdmarpc CLI can list, describe and call it without kv.proto.

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <rdmarpc/health_service.hpp>
#include <rdmarpc/reflection_service.hpp>
#include <rdmarpc/server.hpp>
#include <string>
#include <vector>

#include "memory_store.hpp"
#include "store_service.hpp"

namespace {

int usage() {
  std::cerr << "usage: kv_server [--threads N] URI [URI...]\n"
               "  URI: rdma://ADDRESS:PORT or tcp://ADDRESS:PORT (port 0 picks a free one)\n";
  return 2;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::size_t threads = 0;
  std::vector<std::string> uris;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "-h" || arg == "--help" || arg.starts_with("-")) {
      return usage();
    } else {
      uris.push_back(arg);
    }
  }
  if (uris.empty()) return usage();

  try {
    boost::asio::io_context io;
    kv::memory_store store;
    kv::store_service service(store);
    rdmarpc::services::health_service health;  // services outlive the server: declared first
    rdmarpc::services::reflection_service reflection;
    rdmarpc::server server(io.get_executor(), {.threads = threads});
    server.add_service(service);
    server.add_service(health);
    reflection.add_to(server);
    health.set_status(service.full_name(), rdmarpc::services::kServing);
    for (const std::string& uri : uris) {
      const auto bound = server.listen(uri);
      spdlog::info("kv_server: serving {} on {}", service.full_name(), bound.to_uri());
      std::cout << "kv_server listening on " << bound.to_uri() << std::endl;
    }

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      spdlog::info("kv_server: signal {}, shutting down ({} keys stored)", signal, store.size());
      health.shutdown();  // watchers see NOT_SERVING and their watches end, so they do not hold the grace
      server.async_shutdown(std::chrono::seconds(5), [&] {
        spdlog::info("kv_server: stopped");
        io.stop();
      });
    });
    io.run();
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("kv_server: {}", e.what());
    std::cerr << "kv_server: " << e.what() << "\n";
    return 1;
  }
}
