#pragma once
// rdmarpc::bench driver: what every echo bench program (rdmarpc_echo_bench and the baselines) does
// around its client: the payload x concurrency matrix, the one call before an idle measurement and
// the idle measurement's report. Layer: bench. Threading: the thread that drives the client.

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/bench_result.hpp"
#include "bench/common/client_options.hpp"
#include "bench/common/cpu_time.hpp"
#include "bench/common/progress.hpp"

namespace rdmarpc::bench {

// Runs options.payloads x options.concurrency with client.run_point(payload, concurrency, load,
// progress&) (with --stream: client.run_stream_point, same arguments, concurrency = streams),
// appending each point to options.json_path as it finishes. A client without run_stream_point
// throws std::invalid_argument on --stream.
template <class Client>
std::vector<bench_result> run_matrix(Client& client, const client_options& options) {
  constexpr bool can_stream = requires(Client & c, const load_spec& load, progress& p) {
    c.run_stream_point(std::uint64_t{}, std::uint64_t{}, load, p);
  };
  if (options.stream && !can_stream) throw std::invalid_argument("this client has no --stream mode");
  progress out(options.progress);
  std::vector<bench_result> results;
  for (auto payload : options.payloads) {
    for (auto concurrency : options.concurrency) {
      if constexpr (can_stream) {
        if (options.stream) {
          results.push_back(client.run_stream_point(payload, concurrency, options.load, out));
          if (!options.json_path.empty()) append_json_line(options.json_path, results.back());
          continue;
        }
      }
      results.push_back(client.run_point(payload, concurrency, options.load, out));
      if (!options.json_path.empty()) append_json_line(options.json_path, results.back());
    }
  }
  return results;
}

// One 64-byte call, no warm-up, no progress: proves a pair is connected before it sits idle.
client_options one_call_options();

// Calls sit_idle() and measures the wall and process CPU time it took.
template <class SitIdle>
idle_result measure_idle(std::string system, std::string transport, std::string mode, SitIdle&& sit_idle) {
  const auto cpu0 = process_cpu_time();
  const auto t0 = std::chrono::steady_clock::now();
  std::forward<SitIdle>(sit_idle)();
  return idle_result{std::move(system), std::move(transport), std::move(mode),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     std::chrono::duration<double>(process_cpu_time() - cpu0).count()};
}

// Prints to_json(r) on stdout and appends it to json_path ("" = none).
void report_idle(const idle_result& r, const std::string& json_path);

// Seconds (as given to --seconds) as the nanoseconds a client idles for.
std::chrono::nanoseconds idle_duration(double seconds);

}  // namespace rdmarpc::bench
