#pragma once
// rdmarpc::bench::capnp_baseline::echo_server: the Cap'n Proto RPC baseline_server
// (bench/common/baseline_main.hpp), an EzRpcServer whose EchoBench (echo_bench.capnp) builds the reply
// from the request's payload before echo() returns. Layer: bench (baseline only). Threading:
// construct, run() and destroy on one thread (it owns a KJ event loop); shutdown() from any thread.

#include <capnp/ez-rpc.h>
#include <kj/async.h>

#include <memory>
#include <mutex>
#include <string>

namespace rdmarpc::bench::capnp_baseline {

class echo_server {
 public:
  explicit echo_server(const std::string& address);
  ~echo_server();
  echo_server(const echo_server&) = delete;
  echo_server& operator=(const echo_server&) = delete;

  unsigned port() const noexcept { return port_; }
  void run();
  void shutdown();  // also before run(), which then returns at once

 private:
  capnp::EzRpcServer server_;
  unsigned port_ = 0;
  kj::Own<const kj::Executor> executor_;  // the server thread's event loop, for shutdown()
  kj::Own<kj::PromiseFulfiller<void>> shutdown_fulfiller_;
  kj::Promise<void> stopped_{nullptr};
  std::once_flag shutdown_once_;
};

}  // namespace rdmarpc::bench::capnp_baseline
