#pragma once
// rdmarpc::transport::connection: the seam between rpc/ and transport/. A reliable, ordered,
// message-oriented pipe (what an RC queue pair is), implemented over rdma, tcp and in-memory
// loopback. The rpc layer sees nothing but this header, endpoint.hpp and connect.hpp.
// Threading: a connection belongs to one executor: an io_context run by ONE thread (the rdma
// connection re-arms its edge-triggered fds from its handlers; a second thread could take an edge
// before the re-arm and lose it). Call every member on that executor; every handler and callback
// is invoked on it, never inline from inside a reserve, commit or close() call (completions are
// posted, so user code never re-enters the transport).

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>

#include "transport/error.hpp"
#include "transport/memory_budget.hpp"
#include "transport/received_message.hpp"
#include "transport/send_reservation.hpp"

namespace rdmarpc::transport {

namespace rdma {
class device_event_monitor;  // transport/rdma/device_event_monitor.hpp
}

// How an rdma connection waits for completions.
enum class cq_polling {
  event,     // arm the CQ and sleep on the completion channel fd: ~0 CPU idle, a wake-up per event
  busy,      // spin on the CQ forever (yielding to other handlers between spins): a core per thread
  adaptive,  // after a wake-up, spin a while after the last completion (adaptive_spin ..
             // adaptive_spin_max, learnt from the gaps between completions), then arm and sleep
};

// Settings shared by every implementation; each ignores what does not apply to it.
struct connection_options {
  // Largest message the connection sends and the peer may send us (default 16 MiB). Larger
  // reservations are refused with errc::message_too_large.
  std::size_t max_message_size = 16u << 20;
  // Bound on bytes reserved or committed but not yet handed to the wire (tcp, loopback; rdma's
  // messages larger than a quarter of its send ring). One message is always admitted when nothing
  // is queued, so any message up to max_message_size can be sent. Beyond it try_reserve answers
  // would_block and async_reserve waits.
  std::size_t send_queue_bytes = 4u << 20;
  // Connection setup, and close()'s flush of what is queued: a peer that never reads (tcp) or
  // never returns credits (rdma) is cut off this long after close(), and the rest dropped.
  std::chrono::milliseconds connect_timeout{5000};

  // rdma only -----------------------------------------------------------------------------
  std::uint32_t recv_ring_depth = 128;  // slots pre-posted on the receive queue (= peer's credits)
  std::uint32_t slot_size = 8192;       // bytes per receive slot; larger messages are fragmented
  // (Each slot larger than 256 B also has a 256 B receive head, where a message's first bytes land
  // packed next to the other slots' heads: qp_resources::kRecvHeadBytes. 32 KiB by default.)
  // The registered send ring holds send_buffers * slot_size bytes; it is also the send queue's
  // depth in work requests (one per fragment).
  std::uint32_t send_buffers = 128;
  std::uint32_t signal_every = 16;  // request a send completion every N sends
  cq_polling polling = cq_polling::adaptive;
  // adaptive: how long to keep polling after the last completion before sleeping, at first and
  // after a quiet spell. Long enough to catch the reply of a call just sent on real NICs (a few us)
  // and in the Soft-RoCE VM (tens).
  std::chrono::microseconds adaptive_spin{100};
  // adaptive: the longest that spin grows to. A completion that woke the thread less than this
  // after the one before doubles the spin (up to it); a longer gap sets it back to adaptive_spin.
  // So completions less than adaptive_spin_max apart (a loaded connection, a call's reply) find
  // the thread polling, as busy-poll would, while sparser ones (an idle connection's heartbeat
  // every few hundred ms) cost adaptive_spin each. Equal to adaptive_spin: a fixed spin. Both are
  // clamped to 1 s.
  std::chrono::microseconds adaptive_spin_max{1000};
  // How long a reliable-connection send waits for the peer's ACK before the NIC retransmits:
  // 4.096 us * 2^ack_timeout_exponent (14: 67 ms), and how many times it retransmits before the
  // QP fails with IBV_WC_RETRY_EXC_ERR (the connection then ends connection_lost). With the
  // defaults a host that died under traffic is noticed after (1 + 7) * 67 ms ~ 0.54 s (the spec
  // lets a NIC wait up to 4x longer), where rdma_cm's own default for RoCE (exponent 18, ~1.07 s
  // a try) takes ~8.6 s. Short enough for the <= 1 s detection target; long enough that a
  // datacenter's worst queueing (single-digit ms) and Soft-RoCE under emulation never retransmit
  // spuriously. Idle connections rely on heartbeats (rpc layer), which cover hung processes too.
  std::uint8_t ack_timeout_exponent = 14;
  std::uint8_t retry_count = 7;  // 0..7 (3 bits on the wire)
  // Listener: connection requests accepted (a QP and its registered rings allocated) whose client
  // has not completed the handshake yet (rdma_cm ESTABLISHED). Beyond max_pending_handshakes a new
  // request is rejected before anything is allocated (the client sees errc::handshake_rejected and
  // a channel retries with backoff); one pending longer than handshake_timeout is dropped and its
  // QP, memory and cm_id freed. An honest client completes in one round trip, so a client that
  // stalls (or many of them) holds at most max_pending_handshakes * the rings' registered memory
  // (2 MiB + 32 KiB each by default), for at most handshake_timeout. The default admits a burst of 128
  // clients connecting at once (a fleet reconnecting after a restart); more retry with backoff.
  // Registered (pinned) memory: each connection's receive ring and send ring (recv_ring_depth and
  // send_buffers times slot_size, plus the receive heads: 2 MiB + 32 KiB by default) are leased from this
  // budget before anything is allocated; a connection that would take it past its limit is not made (a
  // listener rejects it: its client's connect fails registered_memory_exhausted, as a connect here does).
  // Null: no bound here. A server fills it in from server_options::max_registered_memory; share one budget
  // among every server and channel for one bound per process. Large-message send buffers are not
  // leased: send_queue_bytes bounds them per connection.
  std::shared_ptr<memory_budget> registered_memory;
  // Reads the devices' async events and ends the connections a QP error, a CQ overrun, a port going
  // down or a device failing concerns (errc::queue_pair_error, port_down, device_error), at once.
  // One per process, shared by every server and channel: rdma_cm shares each device's event queue
  // among all of a process's connections. Null: not watched (a failed QP still ends its connection
  // when its receives come back flushed; port and device events go unseen until heartbeats or
  // retransmits fail). A server makes one when none is given (server_options::watch_device_events).
  std::shared_ptr<rdma::device_event_monitor> device_events;
  std::size_t max_pending_handshakes = 128;
  std::chrono::milliseconds handshake_timeout{5000};
  // A message larger than a slot arrives as fragments, each a whole slot but the last; it must be
  // complete within this time of its first fragment, or the connection ends as a protocol error.
  // Until it is complete nothing of it reaches the rpc layer (its fragments only count as activity
  // for heartbeats: connection_stats::peer_activity), so it bounds how long a peer can hold a
  // partial message (up to max_message_size). A 16 MiB message takes milliseconds on a NIC and
  // about a second on Soft-RoCE under emulation.
  std::chrono::milliseconds reassembly_timeout{5000};

  // tcp only ------------------------------------------------------------------------------
  // SO_SNDBUF and SO_RCVBUF of the socket; 0 keeps the kernel's (auto-tuned, up to megabytes).
  // Messages are written straight into the socket while it has room, so a smaller value makes
  // back-pressure (send_queue_bytes) reach the sender sooner.
  std::size_t tcp_socket_buffer_bytes = 0;
};

// Counters per connection. Plain integers: read them on the connection's executor.
struct connection_stats {
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t credit_stalls = 0;         // times a committed message waited for peer credits
  std::uint64_t credit_only_messages = 0;  // credit updates sent with no payload
  std::uint64_t fragments_sent =
      0;  // rdma sends posted for messages (a message larger than a slot takes several)
  std::uint64_t rnr_errors = 0;  // IBV_WC_RNR_RETRY_EXC_ERR seen; must stay 0
  std::uint64_t reposts = 0;     // receive slots reposted
  std::uint64_t cq_wakeups = 0;  // completion-channel events handled
  // Signs of the peer below the message level: reads that brought bytes (a whole message or part of
  // one), rdma receive completions (fragments, credit updates), tcp writes that completed after the
  // socket's buffer had been full (room came back because the peer took bytes; a write into room
  // does not count). Only its changes mean anything: heartbeats look at it once a tick, so a
  // connection busy with one long message, either way, is not taken for a silent one.
  std::uint64_t peer_activity = 0;
};

// Receives what a connection delivers. Both calls come on the connection's executor.
class connection_handler {
 public:
  // One call per message, in the order the peer sent them. Should not throw: an exception leaves
  // through the executor's run(), and only tcp is built to deliver on after one (rdma may stop
  // delivering on that connection; loopback holds the rest until the next message). The rpc layer
  // never lets one through. The message is lent: kept past this call, it must be moved out (the
  // move takes a reference on the connection, which is why the parameter is a value).
  virtual void on_message(received_message message) = 0;
  // Exactly once, last: why the connection ended (errc::closed_locally after close(), else the
  // peer's close or the failure). The connection drops its reference to the handler afterwards.
  virtual void on_close(const boost::system::error_code& reason) = 0;

 protected:
  ~connection_handler() = default;
};

// The one back-pressure mechanism of a connection: reserve room (try_reserve, or async_reserve to
// wait for it), write the message into the reservation, commit it. Waiting reservations are served
// first come, first served; while any waits, try_reserve answers would_block, so order holds.
class connection : public std::enable_shared_from_this<connection>, protected send_reservation::owner {
 public:
  using executor_type = boost::asio::any_io_executor;
  using reserve_signature = void(boost::system::error_code, send_reservation);

  virtual ~connection();

  virtual executor_type get_executor() const noexcept = 0;

  // Starts delivery to `handler`. Call once. The connection holds the handler until on_close;
  // started after close() (or after it failed), it gets on_close at once (posted).
  virtual void start(std::shared_ptr<connection_handler> handler) = 0;

  // Room for one message of `bytes` bytes, now. On failure the reservation is empty and `ec` says:
  //   boost::asio::error::would_block  no room right now (or async_reserve calls wait ahead of
  //                                    this one): wait with async_reserve
  //   errc::message_too_large          bytes > max_message_size(); nothing changed
  //   errc::not_connected              not started, closing or ended
  // (Inline: the usual case is two checks and the transport's reserve_now, which checks it is open.)
  send_reservation try_reserve(std::size_t bytes, boost::system::error_code& ec) {
    if (bytes <= max_message_size_ && waiters_.empty()) [[likely]] {
      ec = {};
      return reserve_now(bytes, ec);
    }
    return refuse_reserve(bytes, ec);
  }

  // Waits for room for one message of `bytes` bytes. Completion: void(error_code, send_reservation)
  // with a reservation on success, else message_too_large / not_connected at once, the connection's
  // end reason (errc::closed_locally after close()) for a waiting call, or operation_aborted on
  // per-operation cancellation. The handler runs on its associated executor (default: the
  // connection's), never inside this call; waiting calls are served in the order they were made.
  // Emit a cancellation on the connection's executor (Asio's rule for per-operation cancellation).
  // The reservation belongs to the connection's executor like every member: a handler bound to
  // another executor must write, commit or drop it back there. The connection must outlive it.
  template <typename CompletionToken>
  auto async_reserve(std::size_t bytes, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, reserve_signature>(
        [this](auto handler, std::size_t n) {
          async_reserve_impl(n, boost::asio::any_completion_handler<reserve_signature>(std::move(handler)));
        },
        token, bytes);
  }

  // Sends a copy of `parts` as one message if there is room now: try_reserve + copy + commit, for
  // small control messages and tests. Same errors as try_reserve.
  boost::system::error_code send_copy(std::span<const boost::asio::const_buffer> parts);
  boost::system::error_code send_copy(boost::asio::const_buffer one) {
    return send_copy(std::span<const boost::asio::const_buffer>(&one, 1));
  }

  // Graceful close: committed messages are flushed first where the transport can (rdma, tcp);
  // then on_close(errc::closed_locally). Waiting async_reserve calls complete with closed_locally.
  // Before start(): ends at once, and the peer's on_close says connection_lost (nothing was said on
  // it, not even a goodbye). Idempotent.
  virtual void close() = 0;

  virtual bool is_open() const noexcept = 0;
  // The largest message this connection sends (on rdma the peer's limit, if smaller than ours).
  std::size_t max_message_size() const noexcept { return max_message_size_; }
  virtual const connection_stats& stats() const noexcept = 0;
  virtual std::string remote_address() const = 0;  // e.g. "rdma://10.0.0.1:7471", for logs

  // Coalesced commits (send_reservation::commit_coalesced) held for the doorbell now, and the most
  // it holds: beyond that many the doorbell rings at its next turn.
  static constexpr std::uint32_t kMaxHeldCommits = 16;
  std::uint32_t held_commits() const noexcept { return held_commits_; }

 protected:
  explicit connection(std::size_t max_message_size) noexcept : max_message_size_(max_message_size) {}

  // Room for `bytes` (already checked: not too large), would_block, or not_connected when the
  // connection is not open. No other error.
  virtual send_reservation reserve_now(std::size_t bytes, boost::system::error_code& ec) = 0;
  // Implementations call this whenever room was freed: waiting reservations are granted in order.
  // Inline: it runs after every send, and almost always nobody waits.
  void room_freed() {
    if (!waiters_.empty()) grant_waiters();
  }
  // Implementations call this once, when they stop being open (close() or the end): every waiting
  // reservation completes with `reason`.
  void end_reservations(boost::system::error_code reason);

  // Coalescing (send_reservation::commit_coalesced): the implementation queued the message without
  // sending it and calls this. ring_doorbell() follows once the sender stops committing: a turn of
  // the executor later, again for as long as each turn saw another coalesced commit, at most
  // kMaxHeldCommits commits. A writer that posts its completion and commits again from it so
  // sends up to that many messages in one write (tcp) or one chained post (rdma); a lone message
  // waits two turns. Anything else that sends (a plain commit, close) takes held messages along.
  void hold_doorbell() noexcept;
  // Sends what was committed and held (on the executor).
  virtual void ring_doorbell() noexcept = 0;

 private:
  struct waiter;
  void grant_waiters();  // room_freed() with waiters
  void async_reserve_impl(std::size_t bytes, boost::asio::any_completion_handler<reserve_signature> handler);
  void post_reservation(boost::asio::any_completion_handler<reserve_signature> handler,
                        boost::system::error_code ec, send_reservation reservation);
  void schedule_doorbell_turn(std::shared_ptr<connection> self) noexcept;
  void doorbell_turn(std::shared_ptr<connection> self) noexcept;

  send_reservation refuse_reserve(std::size_t bytes, boost::system::error_code& ec) const;  // says why not
  const std::size_t max_message_size_;
  std::deque<std::shared_ptr<waiter>> waiters_;  // async_reserve calls waiting for room, oldest first
  std::uint32_t held_commits_ = 0;               // coalesced commits since the doorbell was last rung
  std::uint32_t seen_commits_ = 0;               // held_commits_ at the last turn
  bool doorbell_scheduled_ = false;
};

}  // namespace rdmarpc::transport
