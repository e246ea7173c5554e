#pragma once
// CPU time of the calling process (all threads, user + system) for the idle-cost mode, and the
// JSON line that reports it. Layer: bench. Threading: any thread.

#include <chrono>
#include <string>

namespace rdmarpc::bench {

// User + system CPU time this process has used so far (getrusage(RUSAGE_SELF)).
std::chrono::nanoseconds process_cpu_time();

struct idle_result {
  std::string system;      // "rdmarpc", "grpc"
  std::string transport;   // "rdma", "tcp"
  std::string mode;        // "event", "busy_poll"
  double seconds = 0;      // wall time the connected pair sat idle
  double cpu_seconds = 0;  // CPU the process (client + server) used meanwhile
};

std::string to_json(const idle_result& r);

}  // namespace rdmarpc::bench
