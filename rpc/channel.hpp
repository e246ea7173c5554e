#pragma once
// rdmarpc::channel: the client end of one connection to a server, with many calls in flight.
// Generated stubs hold a shared_ptr<channel> and call async_unary_call (rpc/unary_call.hpp).
// Layer: rpc. Threading: start_unary_call may be called from any thread; the channel's own work
// runs on its executor, which must be an io_context run by one thread (its state is not locked;
// calls made on that thread are submitted at once), and each completion runs on the handler's
// associated executor.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "rpc/client_context.hpp"
#include "rpc/method.hpp"
#include "rpc/status.hpp"
#include "rpc/stream.hpp"
#include "rpc/stream_window.hpp"
#include "rpc/unary_op.hpp"
#include "transport/connection.hpp"

namespace google::protobuf {
class MessageLite;
}

namespace rdmarpc {

struct channel_options {
  // Calls started but not yet answered. Beyond it, up to max_queued_calls wait for a free slot;
  // beyond that a call fails at once with RESOURCE_EXHAUSTED (back-pressure, never unbounded).
  // Open streams count as calls here.
  std::size_t max_in_flight = 1024;
  std::size_t max_queued_calls = 4096;
  // Used when a call has no deadline of its own (client_context). max() = no default deadline.
  std::chrono::steady_clock::duration default_timeout = std::chrono::steady_clock::duration::max();
  // A response's metadata (status message, initial and trailing metadata): at most this many
  // entries and bytes, checked before anything is parsed. Beyond either that call fails
  // RESOURCE_EXHAUSTED (the connection carries on).
  std::size_t max_metadata_entries = 64;
  std::size_t max_metadata_bytes = 8 * 1024;
  // Each stream's receive window: the bytes and messages the server may send ahead of our reads
  // (what a stream whose reader stopped holds in memory, plus one message).
  stream_window_size stream_window = kDefaultStreamWindow;
  // Heartbeats (docs/wire-format.md, Heartbeats): when nothing was received for heartbeat_interval
  // (calls waiting for replies do not count) a ping goes out; no answer within heartbeat_timeout
  // ends the connection with transport::errc::connection_lost and every call and stream on it fails
  // UNAVAILABLE. Zero or max() in either disables them. A dead or hung server is noticed within
  // interval + timeout + one tick (the shorter of the two): 900 ms with the defaults. Keep the
  // interval at or above the server's min_ping_interval_allowed (default 200 ms): a channel pinging
  // faster is cut off by the server (too_many_pings).
  std::chrono::steady_clock::duration heartbeat_interval = std::chrono::milliseconds(300);
  std::chrono::steady_clock::duration heartbeat_timeout = std::chrono::milliseconds(300);
  transport::connection_options transport;
};

struct channel_stats {
  std::uint64_t calls_started = 0;
  std::uint64_t calls_ok = 0;
  std::uint64_t calls_failed = 0;
  std::uint64_t connects = 0;
  // Heartbeats: pings we sent and the pongs that answered them, the server's pings we answered,
  // connections ended because the server stopped answering, and connections the server ended
  // because we pinged too often.
  std::uint64_t pings_sent = 0;
  std::uint64_t pongs_received = 0;
  std::uint64_t pings_received = 0;
  std::uint64_t heartbeat_timeouts = 0;
  std::uint64_t too_many_pings = 0;
};

class channel {
 public:
  using executor_type = boost::asio::any_io_executor;

  virtual ~channel() = default;

  // A channel to `uri` ("rdma://host:port" or "tcp://host:port"). It connects on first use and
  // again on the next call after the connection died; calls made while connecting wait for it.
  // Throws boost::system::system_error for a malformed URI.
  static std::shared_ptr<channel> create(executor_type ex, std::string_view uri,
                                         channel_options options = {});
  // A channel over an already established connection (loopback tests, custom transports). It
  // does not reconnect.
  static std::shared_ptr<channel> create(std::shared_ptr<transport::connection> connection,
                                         channel_options options = {});

  virtual executor_type get_executor() const noexcept = 0;

  // The type-erased unary call behind every generated stub method (async_unary_call makes `op`).
  // `request` is serialized before this returns; `context` (may be null) must stay alive until
  // the op completes. Completion: op->complete(error_code) with error_code in status_category(),
  // on the op's handler's executor; the handler's associated cancellation slot cancels the call
  // (CANCELLED, and the server is told to stop).
  virtual void start_unary_call(const method_descriptor& method, client_context* context,
                                const google::protobuf::MessageLite& request, unary_op_ptr op) = 0;

  // Opens a stream for streaming `method` (rpc/stream.hpp; generated stubs wrap it in a typed
  // client_stream). `context` (may be null) must stay alive until the stream finished. When
  // `first_request` is given (server streaming) it is written and the writes are done at once.
  // Never fails here: an error (not connected, deadline, limits) ends the stream, and its
  // operations report it.
  virtual std::shared_ptr<stream_io> start_stream(const method_descriptor& method, client_context* context,
                                                  const google::protobuf::MessageLite* first_request) = 0;

  // Fails every pending call with UNAVAILABLE and closes the connection. Idempotent.
  virtual void close() = 0;

  virtual channel_stats stats() const = 0;
};

}  // namespace rdmarpc
