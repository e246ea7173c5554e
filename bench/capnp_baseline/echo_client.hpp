#pragma once
// rdmarpc::bench::capnp_baseline::echo_client: the Cap'n Proto RPC baseline_client
// (bench/common/baseline_main.hpp): N calls in flight on one EzRpcClient connection, a promise chain
// per slot, measured by the same closed_loop as the other clients. Layer: bench. Threading: one
// thread, which owns the client's KJ event loop; run_point() blocks until the point is done.

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
  explicit echo_client(const std::string& target);
  bool wait_connected(std::chrono::seconds timeout);  // one empty call, on the resolved capability
  bench_result run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                         progress& out);
  void idle(std::chrono::nanoseconds duration);  // runs the event loop

 private:
  struct point;
  // Starts a slot's next call at `started` (the first at now, later ones at the completion that
  // freed the slot: one clock read a call, as perftest takes one time stamp an iteration).
  kj::Promise<void> slot_loop(point& p, closed_loop::clock::time_point started);
  kj::Promise<void> watchdog(point& p);

  capnp::EzRpcClient client_;
  EchoBench::Client echo_;
};

}  // namespace rdmarpc::bench::capnp_baseline
