#pragma once
// rdmarpc::transport::connection: the seam between rpc/ and transport/. A reliable, ordered,
// message-oriented pipe (what an RC queue pair is), implemented over rdma, tcp and in-memory
// loopback. The rpc layer sees nothing but this header, endpoint.hpp and connect.hpp.
// Threading: a connection belongs to one executor: an io_context run by ONE thread (the rdma
// connection re-arms its edge-triggered fds from its handlers; a second thread could take an edge
// before the re-arm and lose it). Call every member on that executor; every handler and callback
// is invoked on it, never inline from inside send()/close() (completions are posted, so user code
// never re-enters the transport).

#include "transport/error.hpp"
#include "transport/received_message.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace rdmarpc::transport {

// Settings shared by every implementation; each ignores what does not apply to it.
struct connection_options {
  // Largest message send() accepts and the peer may send us (default 16 MiB). Larger -> errc::message_too_large.
  std::size_t max_message_size = 16u << 20;
  // Bound on messages accepted by send() but not yet handed to the wire (waiting for credits or
  // socket space). Beyond it send() answers errc::send_queue_full; async_send() waits for room.
  std::size_t send_queue_limit = 4096;
  std::chrono::milliseconds connect_timeout{5000};

  // rdma only -----------------------------------------------------------------------------
  std::uint32_t recv_ring_depth = 128;  // slots pre-posted on the receive queue (= peer's credits)
  std::uint32_t slot_size = 8192;       // bytes per receive slot; larger messages are fragmented
  std::uint32_t send_buffers = 128;     // registered send buffers in the pool (each slot_size)
  std::uint32_t signal_every = 16;      // request a send completion every N sends
  bool busy_poll = false;               // spin on the CQ instead of sleeping on the completion fd
  bool disable_credits = false;         // TEST ONLY: send without flow control to prove RNR detection
};

// Counters per connection. Plain integers: read them on the connection's executor.
struct connection_stats {
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t credit_stalls = 0;         // times a send had to queue for lack of peer credits
  std::uint64_t credit_only_messages = 0;  // credit updates sent with no payload
  std::uint64_t rnr_errors = 0;            // IBV_WC_RNR_RETRY_EXC_ERR seen; must stay 0
  std::uint64_t reposts = 0;               // receive slots reposted
  std::uint64_t cq_wakeups = 0;            // completion-channel events handled
};

// Receives what a connection delivers. Both calls come on the connection's executor.
class connection_handler {
 public:
  // One call per message, in the order the peer sent them.
  virtual void on_message(received_message message) = 0;
  // Exactly once, last: why the connection ended (errc::closed_locally after close(), else the
  // peer's close or the failure). The connection drops its reference to the handler afterwards.
  virtual void on_close(const boost::system::error_code& reason) = 0;

 protected:
  ~connection_handler() = default;
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  using executor_type = boost::asio::any_io_executor;
  using wait_signature = void(boost::system::error_code);

  virtual ~connection() = default;

  virtual executor_type get_executor() const noexcept = 0;

  // Starts delivery to `handler`. Call once. The connection holds the handler until on_close.
  virtual void start(std::shared_ptr<connection_handler> handler) = 0;

  // Sends one message gathered from `parts`. Never blocks, never fails for lack of peer credits:
  // the bytes are copied (into a registered send buffer or the bounded send queue) before it
  // returns, so the caller may reuse its buffers at once. Errors (nothing was sent):
  //   errc::message_too_large  larger than max_message_size()
  //   errc::send_queue_full    send_queue_limit reached; see async_wait_writable / async_send()
  //   errc::not_connected      the connection has ended (or not started)
  virtual boost::system::error_code send(std::span<const boost::asio::const_buffer> parts) = 0;
  boost::system::error_code send(boost::asio::const_buffer one) {
    return send(std::span<const boost::asio::const_buffer>(&one, 1));
  }

  // Completes with void(error_code) once send() would not answer send_queue_full (success), or
  // with the reason the connection ended. Handler runs on its associated executor (default: the
  // connection's). Supports per-operation cancellation (completes with operation_aborted).
  template <typename CompletionToken>
  auto async_wait_writable(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, wait_signature>(
        [this](auto handler) {
          async_wait_writable_impl(boost::asio::any_completion_handler<wait_signature>(std::move(handler)));
        },
        token);
  }

  // Sends one message like send(), but waits for room in the send queue instead of answering
  // send_queue_full. Completion: void(error_code) once the message is accepted (success), or
  // message_too_large / not_connected / the reason the connection ended / operation_aborted (per-
  // operation cancellation, nothing sent). `message` must stay valid until then. The handler runs
  // on its associated executor (default: the connection's), never inside this call. Several
  // waiting async_sends are not ordered among themselves: chain them to keep an order.
  template <typename CompletionToken>
  auto async_send(boost::asio::const_buffer message, CompletionToken&& token) {
    return boost::asio::async_compose<CompletionToken, wait_signature>(
        [this, message, step = send_step::first, first_try = boost::system::error_code{}](
            auto& self, boost::system::error_code ec = {}) mutable {
          switch (step) {
            case send_step::first:
              ec = send(message);
              if (ec != errc::send_queue_full) {
                // Accepted (or refused) at once: complete from the executor, not inline.
                step = send_step::done;
                first_try = ec;
                return boost::asio::post(get_executor(), std::move(self));
              }
              step = send_step::waiting;
              return async_wait_writable(std::move(self));
            case send_step::waiting:
              if (ec) return self.complete(ec);
              ec = send(message);
              if (ec == errc::send_queue_full) return async_wait_writable(std::move(self));  // lost a race
              return self.complete(ec);
            case send_step::done:
              return self.complete(first_try);
          }
        },
        token, get_executor());
  }

  // Graceful close: messages already accepted by send() are flushed first where the transport
  // can (rdma, tcp); then on_close(errc::closed_locally). Idempotent.
  virtual void close() = 0;

  virtual bool is_open() const noexcept = 0;
  virtual std::size_t max_message_size() const noexcept = 0;
  virtual const connection_stats& stats() const noexcept = 0;
  virtual std::string remote_address() const = 0;  // e.g. "rdma://10.0.0.1:7471", for logs

 protected:
  enum class send_step { first, waiting, done };  // async_send's states
  virtual void async_wait_writable_impl(boost::asio::any_completion_handler<wait_signature> handler) = 0;
};

}  // namespace rdmarpc::transport
