#pragma once
// rdmarpc::bench::capnp_baseline::echo_server: the Cap'n Proto RPC side of the comparison, an
// EzRpcServer whose bootstrap capability implements EchoBench (bench/capnp_baseline/echo_bench.capnp)
// the plain way: the reply is built from the request's payload before echo() returns.
// Layer: bench (baseline only; the library never depends on Cap'n Proto).
// Threading: construct, port() and run() on one thread (it owns a KJ event loop); stop() may be
// called from any thread.

#include <capnp/ez-rpc.h>
#include <kj/async.h>

#include <memory>
#include <mutex>
#include <string>

namespace rdmarpc::bench::capnp_baseline {

class echo_server {
 public:
  // Listens on "host:port" (port 0 = any). Throws std::runtime_error when it cannot.
  explicit echo_server(const std::string& address);
  ~echo_server();
  echo_server(const echo_server&) = delete;
  echo_server& operator=(const echo_server&) = delete;

  unsigned port() const noexcept { return port_; }
  // Serves until stop().
  void run();
  // Makes run() return; safe from any thread, before or during run().
  void stop();

 private:
  capnp::EzRpcServer server_;
  unsigned port_ = 0;
  kj::Own<const kj::Executor> executor_;  // the server thread's event loop, for stop()
  kj::Own<kj::PromiseFulfiller<void>> stop_fulfiller_;
  kj::Promise<void> stopped_{nullptr};
  std::once_flag stop_once_;
};

}  // namespace rdmarpc::bench::capnp_baseline
