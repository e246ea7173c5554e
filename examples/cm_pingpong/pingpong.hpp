#pragma once
// The two halves of the cm_pingpong example: an rdma_cm server that accepts one RC connection,
// checks and echoes every message, and a client that sends them and times the round trips.
// Layer: examples (raw librdmacm/libibverbs, no rdmarpc). Threading: each call is blocking and
// self-contained; a server and a client may run on two threads of one process.

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "cm_pingpong/options.hpp"
#include "cm_pingpong/rtt_summary.hpp"

namespace cm_pingpong {

// Any failure: a verbs/rdma_cm call, an unexpected cm event, an error completion, wrong data,
// or a wait that exceeded options::timeout. what() names the step and the cause.
class pingpong_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct server_report {
  std::uint16_t port = 0;              // the port actually listened on
  std::uint64_t messages_checked = 0;  // pings received with the expected contents and echoed
};

struct client_report {
  std::uint64_t echoes_checked = 0;  // round trips whose echo matched what was sent
  rtt_summary rtt;
};

// Listens on opts.address:opts.port, calls on_listening(port) once the listener is bound (so a
// caller can start the client without guessing), serves exactly one client for opts.iterations
// round trips, then disconnects. Throws pingpong_error.
server_report run_server(const options& opts, const std::function<void(std::uint16_t port)>& on_listening);

// Connects to opts.address:opts.port and runs opts.iterations round trips. Throws pingpong_error.
client_report run_client(const options& opts);

}  // namespace cm_pingpong
