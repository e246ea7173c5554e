#pragma once
// rdmarpc::bench::echo_client: the rdmarpc echo client of the benchmark. Through the generated
// EchoBench::Stub (what users call) it keeps N calls in flight on one rdmarpc::channel and
// measures them with closed_loop, exactly like the gRPC baseline's client; or (--stream) keeps N
// server streams (EchoBench.Stream) open and counts the messages they deliver. Layer: bench.
// Threading: run_point() runs the given io_context on the calling thread until the point is done;
// nothing else may run that io_context meanwhile.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "bench/common/bench_result.hpp"
#include "bench/common/closed_loop.hpp"
#include "bench/common/progress.hpp"
#include "echo_bench.rdmarpc.pb.h"

namespace rdmarpc::bench {

class echo_client {
 public:
  // `transport` and `mode` only label the results ("tcp", "event").
  echo_client(boost::asio::io_context& io, std::shared_ptr<rdmarpc::channel> channel, std::string transport,
              std::string mode);

  // One point: `concurrency` calls in flight with `payload` bytes each way. Throws
  // std::runtime_error when the point makes no progress (server gone).
  bench_result run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                         progress& out);
  // `streams` server streams of `payload`-byte messages, one read outstanding on each; the
  // closed_loop counts each message as a call (load.calls: messages). The streams are cancelled
  // when the point ends. Throws like run_point.
  bench_result run_stream_point(std::uint64_t payload, std::uint64_t streams, const load_spec& load,
                                progress& out);
  // Asks the server to write each streamed message with async_write only (--async-writes).
  bool async_writes_only = false;
  // Unary calls parse their replies into one reply message per slot, reused call after call
  // (--caller-reply), instead of the reply the channel hands the handler.
  bool caller_reply = false;
  // The handler takes the reply by value, keeping it (--reply-by-value), instead of reading it by
  // reference where the channel parsed it (which then allocates nothing per call).
  bool reply_by_value = false;
  // Unary calls carry this timeout as their deadline (--timeout-ms; a client_context per slot,
  // reused); zero: no deadline. What a deadline costs per call.
  std::chrono::milliseconds call_timeout{0};

 private:
  // Runs io_ until a handler stops it, redrawing progress every 200 ms; false when the point made
  // no progress until loop.give_up_at() (handlers still reference the caller's frame then).
  bool run_io(const closed_loop& loop, progress& out);

  boost::asio::io_context& io_;
  std::shared_ptr<rdmarpc::channel> channel_;
  EchoBench::Stub stub_;
  std::string transport_;
  std::string mode_;
};

}  // namespace rdmarpc::bench
