#pragma once
// In-memory loopback transport: a connected pair of transport::connection objects with fault
// injection (drop, delay, corrupt, or break the connection at message #N) for fast component tests
// of the rpc layer. Layer: transport. Threading: each end belongs to its own executor (the two may
// be the same); see transport/connection.hpp. The ends talk to each other only by posting.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "transport/connection.hpp"

namespace rdmarpc::transport::loopback {

// Faults applied to the messages ONE end sends. Messages are numbered from 1 in the order they
// were committed; 0 disables a fault.
struct loopback_faults {
  std::uint64_t drop_at = 0;   // message #N vanishes (the sender counts it as sent)
  std::uint64_t delay_at = 0;  // message #N, and everything behind it, waits `delay` (asio timer)
  std::chrono::milliseconds delay{0};
  std::uint64_t corrupt_at = 0;  // message #N arrives with every byte inverted (same length)
  std::uint64_t close_at = 0;    // instead of message #N the link breaks: both ends connection_lost
};

struct loopback_options {
  // max_message_size and send_queue_bytes apply; the rdma-only fields are ignored.
  connection_options connection;
  // Messages one end may have handed to its peer that the peer has not delivered to its handler
  // yet (like the peer's receive ring). A peer that is not started does not deliver, so this is
  // how a test makes the sender's queue fill up: would_block and async_reserve.
  std::size_t capacity = 128;
  loopback_faults a_to_b;  // faults on what `a` sends
  loopback_faults b_to_a;  // faults on what `b` sends
};

// A connected pair: `first` belongs to executor `a`, `second` to executor `b`. Neither is started.
// Dropping an end without close() looks like a crashed peer: the other end sees connection_lost.
// close() hands every queued message to the peer first, so against a peer that never consumes (and
// never closes) it stays closing, as a tcp close would with a peer that never reads.
// Destroy both ends before their executors' io_contexts: an end posts to its peer as it goes.
std::pair<std::shared_ptr<connection>, std::shared_ptr<connection>> make_loopback_pair(
    boost::asio::any_io_executor a, boost::asio::any_io_executor b, const loopback_options& options = {});

}  // namespace rdmarpc::transport::loopback
