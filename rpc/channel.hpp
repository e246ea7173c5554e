#pragma once
// rdmarpc::channel: the client end of connections to one or several server endpoints, with many
// calls in flight. It connects when first used, reports its state (rpc/connectivity.hpp),
// reconnects with backoff, and spreads calls over its endpoints by a load-balancing policy.
// Generated stubs hold a shared_ptr<channel> and call async_unary_call (rpc/unary_call.hpp).
// Layer: rpc. Threading: start_unary_call may be called from any thread; the channel's own work
// runs on its executor, which must be an io_context run by one thread (its state is not locked;
// calls made on that thread are submitted at once), and each completion runs on the handler's
// associated executor.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "rpc/client_context.hpp"
#include "rpc/connectivity.hpp"
#include "rpc/interceptor.hpp"
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
  // (calls waiting for replies do not count; a long message still moving either way does) a ping
  // goes out; no answer within heartbeat_timeout ends the connection with
  // transport::errc::connection_lost and every call and stream on it fails UNAVAILABLE. Zero or max() in
  // either disables them. A dead or hung server is noticed within interval + timeout + one tick (the shorter
  // of the two): 900 ms with the defaults, after whatever bytes were still on their way stop moving. Keep the
  // interval at or above the server's min_ping_interval_allowed (default 200 ms): a channel pinging faster is
  // cut off by the server (too_many_pings).
  std::chrono::steady_clock::duration heartbeat_interval = std::chrono::milliseconds(300);
  std::chrono::steady_clock::duration heartbeat_timeout = std::chrono::milliseconds(300);
  // Interceptors (rpc/interceptor.hpp), asked in this order about every call and stream: they may
  // add request metadata and refuse a call, and see how it ended. Empty (the default): no cost
  // beyond one branch per call.
  std::vector<std::shared_ptr<client_interceptor>> interceptors;
  load_balancing_policy load_balancing = load_balancing_policy::pick_first;
  // Waits between failed connection attempts to one endpoint (rpc/connectivity.hpp has the
  // defaults and why): 100 ms, growing 1.6× per failure up to 10 s, each ±20 %.
  reconnect_backoff_options reconnect;
  transport::connection_options transport;
};

struct channel_stats {
  std::uint64_t calls_started = 0;
  std::uint64_t calls_ok = 0;
  std::uint64_t calls_failed = 0;
  std::uint64_t connects = 0;          // connections established
  std::uint64_t connect_failures = 0;  // attempts that failed (resolution, connect, handshake)
  std::uint64_t disconnects = 0;       // established connections that ended, for any reason
  std::uint64_t going_aways = 0;       // connections a server drained for a graceful shutdown
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

  // A channel to `uri`: "rdma://host:port", "tcp://host:port", or a list of endpoints,
  // "rdma://10.0.0.1:7471,10.0.0.2:7471" (transport::parse_endpoint_list). Host names are resolved
  // asynchronously on first use; a name with several addresses is an endpoint per address. The
  // channel connects on first use (or state(true)), reconnects with backoff after a failure, and
  // spreads calls by options.load_balancing. Calls made while no connection is ready wait for one;
  // when every endpoint failed (transient_failure) they fail UNAVAILABLE at once, unless their
  // context asks to wait_for_ready. Throws boost::system::system_error for a malformed URI,
  // std::invalid_argument for options.transport settings its endpoints' transport cannot use
  // (transport::check_options: rdma's ring sizes).
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
  // (CANCELLED, and the server is told to stop). The reply is parsed into op->response() (which
  // may be the caller's own message) on the channel's executor, before the completion; or, for a
  // call completed in place that takes it (unary_op::lendable_reply_type), into a message the
  // channel keeps and lends to the handler (unary_op::complete_lent).
  virtual void start_unary_call(const method_descriptor& method, client_context* context,
                                const google::protobuf::MessageLite& request, unary_op_ptr op) = 0;

  // Opens a stream for streaming `method` (rpc/stream.hpp; generated stubs wrap it in a typed
  // client_stream). `context` (may be null) must stay alive until the stream finished. When
  // `first_request` is given (server streaming) it is written and the writes are done at once.
  // Never fails here: an error (not connected, deadline, limits) ends the stream, and its
  // operations report it.
  virtual std::shared_ptr<stream_io> start_stream(const method_descriptor& method, client_context* context,
                                                  const google::protobuf::MessageLite* first_request) = 0;

  // Fails every pending call with UNAVAILABLE and closes the connections; the state becomes
  // shutdown. Idempotent.
  virtual void close() = 0;

  // The channel's state now (any thread). try_to_connect: an idle channel starts connecting.
  virtual channel_state state(bool try_to_connect = false) = 0;

  using state_change_signature = void(boost::system::error_code, channel_state);
  // Completes once the state differs from `last_observed`. Completion: void(error_code,
  // channel_state) with the new state, on the handler's associated executor; error
  // boost::asio::error::operation_aborted when cancelled through the handler's cancellation slot
  // (use it for a time limit), boost::asio::error::shut_down when `last_observed` is shutdown (it
  // never changes). Waiting for a change keeps a failed channel retrying, as a waiting call would.
  template <typename CompletionToken>
  auto async_wait_for_state_change(channel_state last_observed, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, state_change_signature>(
        [this](auto handler, channel_state last) {
          wait_for_state_change(
              last, boost::asio::any_completion_handler<state_change_signature>(std::move(handler)));
        },
        token, last_observed);
  }

  virtual void wait_for_state_change(channel_state last_observed,
                                     boost::asio::any_completion_handler<state_change_signature> handler) = 0;

  virtual channel_stats stats() const = 0;
};

}  // namespace rdmarpc
