#pragma once
// run_churn: connect, call, disconnect, `cycles` times, against a server in this process (its own
// io thread), and compare what the process holds before and after (resource_counts). Shared by the
// churn tests (short runs in CI) and `rdmarpc_churn` (the full 10^4 cycles, tests/soak/churn.sh).
// Test support. Threading: blocking; call from one thread.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "resource_counts.hpp"

namespace rdmarpc::soak {

struct churn_options {
  std::string target = "tcp";  // "tcp" or "rdma"
  std::string address = "127.0.0.1";
  std::size_t cycles = 1000;
  // Cycles run before the first snapshot, so one-time costs (thread caches, protobuf's descriptor
  // pool, librdmacm's device contexts) are not counted as a leak. Over rdma also the peak of
  // connections lingering in teardown (~40), which Asio's reactor keeps a record per descriptor
  // of: it takes ~100 cycles to reach (tests/soak/README.md).
  std::size_t warmup_cycles = 20;
  static constexpr std::size_t kRdmaWarmupCycles = 100;
  // Heap growth tolerated between the snapshots: caches that fill once and do not grow with the
  // cycles (Asio's recycled blocks: ~3.6–6.5 KB over rdma in a malloc trace). Exact only with
  // glibc's thread caches off (tests/soak/README.md). A leak of 55 B a cycle exceeds it within the
  // CI run's 300 cycles.
  std::size_t heap_slack_bytes = 16 * 1024;
  // How long teardown (the server's side of each close, the client's connection objects) may take
  // to return everything after the last cycle.
  std::chrono::milliseconds settle{std::chrono::seconds(20)};
  std::function<void(std::size_t cycles_done)> progress;  // called every 1 % (and at the end)
  // Called right after the first snapshot and right before the last: what runs between them is
  // what the comparison sees (rdmarpc_churn --mtrace traces the heap there).
  std::function<void()> on_measure_start, on_measure_end;
};

struct churn_result {
  std::size_t cycles_done = 0;
  std::size_t calls_ok = 0;
  std::string first_failure;  // empty when every cycle's call succeeded and tore down
  resource_counts before;     // after the warm-up
  resource_counts after;      // after the last cycle, once settled (or the settle time ran out)
  std::string leaked;         // after.growth_since(before): empty when nothing leaked
  double seconds = 0;         // the measured cycles only

  bool ok() const noexcept { return first_failure.empty() && leaked.empty() && calls_ok == cycles_done; }
  std::string to_json(const churn_options& o) const;
};

churn_result run_churn(const churn_options& options);

}  // namespace rdmarpc::soak
