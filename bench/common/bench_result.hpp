#pragma once
// rdmarpc::bench::bench_result: the numbers of one benchmark point (system, transport, payload,
// concurrency; unary echo calls or server-streamed messages) and their two outputs, a
// human-readable table and one JSON object per line.
// Layer: bench. Threading: plain values and pure functions.

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>

#include "bench/common/closed_loop.hpp"

namespace rdmarpc::bench {

struct bench_result {
  std::string system;     // "rdmarpc", "grpc"
  std::string transport;  // "rdma", "tcp", "loopback"
  std::string mode;       // "event" (sleeps on the completion fd / socket) or "busy_poll"
  // "unary": echo calls, each moving the payload both ways. "server_stream": `concurrency` server
  // streams, each delivering messages of `payload` bytes one way; then `calls` counts messages
  // received and the latency is how long each read waited for its message.
  std::string rpc = "unary";
  std::uint64_t payload = 0;      // bytes in each request, and again in each reply
  std::uint64_t concurrency = 0;  // calls kept in flight
  std::uint64_t calls = 0;        // measured calls that succeeded
  std::uint64_t errors = 0;       // measured calls that failed
  double seconds = 0;             // length of the measured window
  double calls_per_s = 0;
  double mb_per_s = 0;  // request payload bytes per second / 1e6 (one direction)
  // Latency of successful calls, microseconds.
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
};

// A point's result before it is measured: what it is, no numbers yet.
bench_result point_result(std::string system, std::string transport, std::string mode, std::uint64_t payload,
                          std::uint64_t concurrency, std::string rpc = "unary");

// The point's progress label: "grpc tcp 64 B x8", with the mode unless it is "event" and
// "stream" for a server-streaming point ("rdmarpc rdma adaptive stream 64 B x1").
std::string point_label(const bench_result& r);

// Fills the numbers of `r` from a finished closed_loop.
void fill_from(bench_result& r, const closed_loop& loop, closed_loop::clock::time_point now);

// One JSON object on one line (no trailing newline).
std::string to_json(const bench_result& r);

// A fixed-width table with a header row.
void print_table(std::ostream& out, std::span<const bench_result> results);

// Appends to_json(r) + '\n' to `path` (created if missing). Throws std::runtime_error on failure.
void append_json_line(const std::string& path, const bench_result& r);

}  // namespace rdmarpc::bench
