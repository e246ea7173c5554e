#pragma once
// rdmarpc::bench::grpc_baseline::echo_client: the gRPC C++ echo client of the comparison. It keeps
// N unary calls in flight on one completion queue polled by the calling thread (one client
// thread) and measures them with the same closed_loop as the rdmarpc client. Layer: bench.
// Threading: one thread; run_point() blocks until the point is done.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "bench/common/bench_result.hpp"
#include "bench/common/closed_loop.hpp"
#include "bench/common/progress.hpp"
#include "echo_bench.grpc.pb.h"

namespace rdmarpc::bench::grpc_baseline {

class echo_client {
 public:
  // `target` is "host:port".
  explicit echo_client(const std::string& target);

  // Waits until the channel is connected; false on timeout.
  bool wait_connected(std::chrono::seconds timeout);

  // One point: `concurrency` calls in flight with `payload` bytes each way. Throws
  // std::runtime_error when the point makes no progress (server gone).
  bench_result run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                         progress& out);

  // Polls the completion queue for `duration` with nothing in flight, as an idle client would.
  void idle(std::chrono::nanoseconds duration);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<EchoBench::Stub> stub_;
  grpc::CompletionQueue cq_;
};

}  // namespace rdmarpc::bench::grpc_baseline
