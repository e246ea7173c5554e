// kv_server: serves the example key-value store (kv.proto) on one or more URIs until SIGINT or
// SIGTERM, then shuts down gracefully (in-flight calls get up to 5 s to finish).
//   kv_server rdma://10.0.0.1:7471
//   kv_server --threads 2 tcp://0.0.0.0:7471 rdma://0.0.0.0:7471
//   kv_server --metrics-address 127.0.0.1:9464 tcp://127.0.0.1:7471   (Prometheus at /metrics)
//   kv_server --heartbeat-timeout 5 tcp://127.0.0.1:7471   (clients may be silent for longer)
// Prints "kv_server listening on <uri>" on stdout for every URI (with the real port when 0 was
// asked for), so scripts can wait for it.
// Also serves grpc.health.v1 (kv.Store and the server: SERVING; NOT_SERVING once shutting down) and
// grpc.reflection.v1, so the rdmarpc CLI can list, describe and call it without kv.proto, and the
// admin service with the server's metrics (rdmarpc stats URI).

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <rdmarpc/admin_service.hpp>
#include <rdmarpc/health_service.hpp>
#include <rdmarpc/reflection_service.hpp>
#include <rdmarpc/server.hpp>
#include <string>
#include <vector>

#include "memory_store.hpp"
#include "store_service.hpp"

namespace {

int usage() {
  std::cerr << "usage: kv_server [--threads N] [--metrics-address HOST:PORT] [--heartbeat-timeout SECONDS]\n"
               "                 URI [URI...]\n"
               "  URI: rdma://ADDRESS:PORT or tcp://ADDRESS:PORT (port 0 picks a free one)\n"
               "  --metrics-address: serve Prometheus metrics at http://HOST:PORT/metrics\n"
               "  --heartbeat-timeout: how long a silent client may take to answer a heartbeat before its\n"
               "    connection is closed (default 0.3; 0: no heartbeats)\n";
  return 2;
}

// "1.5" -> 1.5 s; nullopt for anything but a number from 0 to 1e9 (a larger one would overflow a
// steady_clock duration), and for a positive one below a nanosecond (it would read as 0, "off").
std::optional<std::chrono::steady_clock::duration> parse_seconds(const char* text) {
  char* end = nullptr;
  const double s = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(s) || s < 0 || s > 1e9) return std::nullopt;
  const auto d =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  if (s > 0 && d == std::chrono::steady_clock::duration::zero()) return std::nullopt;
  return d;
}

}  // namespace

int main(int argc, char* argv[]) {
  rdmarpc::server_options options;
  options.metrics = true;  // per-method figures for the admin service (rdmarpc stats)
  std::vector<std::string> uris;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      options.threads = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--metrics-address" && i + 1 < argc) {
      options.metrics_address = argv[++i];
    } else if (arg == "--heartbeat-timeout" && i + 1 < argc) {
      const auto timeout = parse_seconds(argv[++i]);
      if (!timeout) return usage();
      options.heartbeat_timeout = *timeout;
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
    rdmarpc::services::admin_service admin;
    rdmarpc::server server(io.get_executor(), options);
    server.add_service(service);
    server.add_service(health);
    reflection.add_to(server);
    admin.add_to(server);
    health.set_status(service.full_name(), rdmarpc::services::kServing);
    for (const std::string& uri : uris) {
      const auto bound = server.listen(uri);
      spdlog::info("kv_server: serving {} on {}", service.full_name(), bound.to_uri());
      std::cout << "kv_server listening on " << bound.to_uri() << std::endl;
    }
    if (auto metrics = server.metrics_endpoint())
      std::cout << "kv_server metrics on http://" << *metrics << "/metrics" << std::endl;

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
