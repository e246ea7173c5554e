#pragma once
// rdmarpc::bench::capnp_baseline::echo_client: the Cap'n Proto RPC echo client of the comparison.
// It keeps N calls in flight on one EzRpcClient connection (each finished call starts the next,
// as a promise chain per slot) and measures them with the same closed_loop as the rdmarpc and
// gRPC clients. Layer: bench. Threading: one thread, which owns the client's KJ event loop;
// run_point() blocks until the point is done.

#include <capnp/ez-rpc.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/common/bench_result.hpp"
#include "bench/common/closed_loop.hpp"
#include "bench/common/progress.hpp"
#include "echo_bench.capnp.h"

namespace rdmarpc::bench::capnp_baseline {

class echo_client {
 public:
  // `target` is "host:port".
  explicit echo_client(const std::string& target);

  // One empty call, to know that the connection is up; false when it fails or times out.
  bool wait_connected(std::chrono::seconds timeout);

  // One point: `concurrency` calls in flight with `payload` bytes each way. Throws
  // std::runtime_error when the point makes no progress (server gone).
  bench_result run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                         progress& out);

  // Runs the event loop for `duration` with nothing in flight, as an idle client would.
  void idle(std::chrono::nanoseconds duration);

 private:
  struct point;
  kj::Promise<void> slot_loop(point& p);
  kj::Promise<void> watchdog(point& p);

  capnp::EzRpcClient client_;
  EchoBench::Client echo_;
};

}  // namespace rdmarpc::bench::capnp_baseline
