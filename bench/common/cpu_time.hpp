#pragma once
// CPU time of the calling process (all threads, user + system) for the idle-cost mode, and the
// JSON line that reports it. Layer: bench. Threading: any thread.

#include <pthread.h>

#include <chrono>
#include <string>

namespace rdmarpc::bench {

// User + system CPU time this process has used so far (getrusage(RUSAGE_SELF)).
std::chrono::nanoseconds process_cpu_time();
// CPU time thread `t` has used so far (its CLOCK_THREAD_CPUTIME_ID clock).
std::chrono::nanoseconds thread_cpu_time(pthread_t t);

struct idle_result {
  std::string system;      // "rdmarpc", "grpc"
  std::string transport;   // "rdma", "tcp"
  std::string mode;        // "event", "busy_poll"
  double seconds = 0;      // wall time the connected pair sat idle
  double cpu_seconds = 0;  // CPU the process (client + server) used meanwhile
  // The same split by side when each runs its own thread (negative: not measured).
  double client_cpu_seconds = -1;
  double server_cpu_seconds = -1;
};

std::string to_json(const idle_result& r);

}  // namespace rdmarpc::bench
