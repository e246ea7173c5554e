#pragma once
// rdmarpc::bench::grpc_baseline::echo_server: the gRPC C++ baseline_server (bench/common/baseline_main.hpp),
// an async (completion-queue) server for bench/echo_bench.proto (Echo and the server-streaming Stream)
// written the way the gRPC examples do it.
// Layer: bench (baseline only; the library never depends on gRPC). Threading: run() polls the one
// completion queue on the calling thread (one server thread); shutdown() from any thread.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>

#include "echo_bench.grpc.pb.h"

namespace rdmarpc::bench::grpc_baseline {

class echo_server {
 public:
  explicit echo_server(const std::string& address);
  ~echo_server();
  echo_server(const echo_server&) = delete;
  echo_server& operator=(const echo_server&) = delete;

  int port() const noexcept { return port_; }
  void run();  // returns after every call object has been reclaimed
  void shutdown();

  class call;         // one call's state and completion-queue tag (echo_server.cpp)
  struct queue_gate;  // orders stream operations before the queue's shutdown (echo_server.cpp)

 private:
  std::unique_ptr<queue_gate> gate_;
  EchoBench::AsyncService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

}  // namespace rdmarpc::bench::grpc_baseline
