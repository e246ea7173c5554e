#pragma once
// rdmarpc::bench::grpc_baseline::echo_client: the gRPC C++ baseline_client (bench/common/baseline_main.hpp):
// N unary calls in flight on one completion queue, measured by the same closed_loop as the rdmarpc
// client. Layer: bench. Threading: one thread, which polls the queue; run_point() blocks until done.

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
  explicit echo_client(const std::string& target);
  bool wait_connected(std::chrono::seconds timeout);  // the channel's WaitForConnected
  bench_result run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                         progress& out);
  // `streams` server streams (Stream, count 0) read with one Read outstanding each, as gRPC's qps
  // benchmark client does for STREAMING_FROM_SERVER; each message counts as a call. The streams are
  // cancelled (TryCancel) and finished when the point ends.
  bench_result run_stream_point(std::uint64_t payload, std::uint64_t streams, const load_spec& load,
                                progress& out);
  void idle(std::chrono::nanoseconds duration);  // polls the completion queue

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<EchoBench::Stub> stub_;
  grpc::CompletionQueue cq_;
};

}  // namespace rdmarpc::bench::grpc_baseline
