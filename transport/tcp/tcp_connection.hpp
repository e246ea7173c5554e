#pragma once
// tcp_connection: transport::connection over a connected Asio TCP socket. Each message is a frame:
// a 4-byte little-endian length, then the bytes. close() ends the stream with a goodbye (the length
// 0xffffffff, no bytes) before its FIN, so the peer can tell close() (closed_by_peer) from a process
// that died (a bare FIN or a reset: connection_lost). Sends are queued (bounded) and written with
// gathered writes straight from the reserved frame buffers; receives are parsed by a tcp_framer.
// Layer: transport.
// Threading: every member runs on the socket's executor (see transport/connection.hpp).

#include <array>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <exception>
#include <span>
#include <vector>

#include "transport/connection.hpp"
#include "transport/io_context_of.hpp"
#include "transport/message_buffers.hpp"
#include "transport/tcp/tcp_framer.hpp"

namespace rdmarpc::transport::tcp {

// Why a connect or accept fails with operation_not_supported (logged).
inline constexpr const char* kNeedsIoContext =
    "the connection's executor does not run on an io_context, which the tcp transport needs";

class tcp_connection final : public connection, public received_message::owner {
 public:
  // On the io_context's own executor type (see transport/io_context_of.hpp).
  using socket_type =
      boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;

  // Starts an operation on a socket_type, `initiate(handler)`, whose `handler` must run on the
  // executor `ex`: the socket completes on its bare io_context, so a handler for a strand is bound
  // to it. `bind = io_context_of(ex) == nullptr`, worked out once (it asks the executor's type
  // up to eight times).
  template <typename Initiate, typename Handler>
  static void on_executor(const executor_type& ex, bool bind, Initiate&& initiate, Handler&& handler) {
    if (bind) return initiate(boost::asio::bind_executor(ex, std::forward<Handler>(handler)));
    initiate(std::forward<Handler>(handler));
  }

  // `socket` is connected, on the io_context behind `ex` (io_context_behind); `ex` becomes the
  // connection's executor, where its handlers run. Sets TCP_NODELAY.
  tcp_connection(socket_type socket, executor_type ex, const connection_options& options);
  ~tcp_connection() override;

  executor_type get_executor() const noexcept override { return ex_; }
  void start(std::shared_ptr<connection_handler> handler) override;
  void close() override;
  bool is_open() const noexcept override { return state_ == state::open; }
  const connection_stats& stats() const noexcept override { return stats_; }
  std::string remote_address() const override { return remote_address_; }

  void release_message(std::uint64_t token) noexcept override {
    if ((token & kReadBufferToken) != 0) return framer_.give_back(static_cast<std::uint32_t>(token >> 1));
    buffers_.give_back(token);
  }
  std::shared_ptr<received_message::owner> keep_alive() noexcept override {
    return std::shared_ptr<received_message::owner>(shared_from_this(), this);
  }

  static constexpr std::size_t kHeaderSize = tcp_framer::kHeaderSize;
  static constexpr std::uint32_t kGoodbyeLength = tcp_framer::kGoodbyeLength;  // never a message's length

 protected:
  send_reservation reserve_now(std::size_t bytes, boost::system::error_code& ec) override;
  void commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept override;
  void ring_doorbell() noexcept override;
  void cancel_reservation(std::uint64_t token) noexcept override;

 private:
  enum class state {
    idle,  // constructed, not started: nothing is read
    open,
    closing,   // close() called: flushing the send queue, then shutdown(send)
    draining,  // ended (on_close posted) after a graceful shutdown: reading until the peer's EOF
    closed,
  };

  // `self` keeps the connection alive while the read is pending: each completion hands its own on
  // to the next read (no shared_from_this per read).
  void start_read(std::shared_ptr<tcp_connection> self);
  // The read path, inline from on_readable to the handler's on_message (each runs once per message
  // on both sides of a call: their calls would cost as much as their bodies).
  [[gnu::always_inline]] inline void on_read(boost::system::error_code ec, std::size_t n,
                                             std::shared_ptr<tcp_connection>&& self);
  void on_read_ended(boost::system::error_code ec, std::shared_ptr<tcp_connection>&& self);  // error, end
  // A readiness wait ended: read at once. (Inline into the wait's handler.)
  [[gnu::always_inline]] inline void on_readable(boost::system::error_code ec,
                                                 std::shared_ptr<tcp_connection>&& self);
  // The framer's space for a read that starts now (reading_).
  std::span<std::byte> begin_read() {
    reading_ = false;  // read_space() may allocate: were it to throw, a later start_read still reads
    const std::span<std::byte> space = framer_.read_space();
    reading_ = true;
    read_offered_ = space.size();
    return space;
  }
  // Delivers what the framer holds: a message lent in place from its read buffer, or (when the
  // framer lends too many buffers already, or a large frame) in its own buffer lent from buffers_.
  // False once the connection ended (protocol error or close from a handler).
  [[gnu::always_inline]] inline bool parse_frames();
  bool on_unusual_frame(tcp_framer::event e);  // a goodbye, a large frame or a protocol error
  void deliver_copy();                         // the framer's message, copied out
  void deliver(message_buffers::buffer message);
  [[gnu::always_inline]] inline void deliver(std::span<const std::byte> bytes, std::uint64_t token);
  // Marks a received message's token as a tcp_framer read buffer's, whose id is in the bits above
  // it (else: a buffers_ token, the address of a message_block, so bit 0 is clear).
  static constexpr std::uint64_t kReadBufferToken = 1;

  // Writes what is queued: first straight from the caller (a non-blocking send, or write_some over
  // several frames: no completion to post), the rest (if the socket is full) with an async write.
  // Does nothing while corked: frames committed while a read's messages are delivered go out in one
  // write after it. Inline: one whole frame sent at once (every call's request and reply);
  // flush_any does every case.
  [[gnu::always_inline]] inline void flush();
  void flush_any();
  // What a send took (`written` of `offered` bytes, or the error): drops what left, waits for room.
  void after_send(std::size_t written, std::size_t offered, const boost::system::error_code& ec);
  std::size_t fill_gather();  // gather_ over the queued frames; returns how many
  void start_write();         // async write of what flush could not write at once
  void on_written(boost::system::error_code ec, std::size_t bytes);
  void consume_written(std::size_t bytes);  // drops the frames (fully) written
  [[gnu::always_inline]] inline void frame_written(
      bool goodbye) noexcept;  // the first frame left whole: drops it
  void after_write();          // room for waiters; more to write, or the shutdown
  void on_write_failed(const boost::system::error_code& ec);
  void shutdown_send();
  // on_read's cork ends while a handler's exception leaves it: writes what the handlers committed,
  // and parses the rest of the read in a later handler.
  void uncork_unwinding() noexcept;

  // Ends the connection once: ends waiting reservations, posts on_close(reason), drops the handler.
  // hard: close the socket now (errors); otherwise keep reading to drain until the peer's EOF.
  void finish(boost::system::error_code reason, bool hard);
  std::shared_ptr<tcp_connection> self() {
    return std::static_pointer_cast<tcp_connection>(shared_from_this());
  }

  boost::asio::any_io_executor ex_;
  bool through_strand_;  // ex_ is not the io_context's own executor: completions are bound to it
  socket_type socket_;
  connection_options options_;
  std::string remote_address_;
  state state_ = state::idle;
  boost::system::error_code end_reason_;
  std::shared_ptr<connection_handler> handler_;

  // Sending: frames (header + payload in one buffer, reserved with the header as headroom)
  // committed but not fully written yet; the first `writing_` of them are in the current async
  // write.
  message_buffers buffers_;
  message_queue send_queue_;
  std::size_t send_offset_ = 0;  // bytes of send_queue_.front() already written
  std::size_t writing_ = 0;
  std::size_t offered_ = 0;  // bytes the current async write offered
  // The last write found the socket's buffer full (it would block, or took less than offered): the
  // next one to complete shows the peer took bytes (connection_stats::peer_activity). A write into
  // a socket with room shows nothing: our kernel takes it whether or not the peer is there.
  bool socket_full_ = false;
  bool corked_ = false;  // delivering a read's messages: commits only queue (see flush)
  // The current gathered write's buffers, at most 64 frames (a share of IOV_MAX); unchanged while
  // the write runs, since Asio copies only the span over them.
  std::array<boost::asio::const_buffer, 64> gather_{};

  // Receiving: the framer holds what was read and not delivered yet (and the peer's goodbye: its
  // EOF is then closed_by_peer).
  tcp_framer framer_;
  bool reading_ = false;
  // Reads wait for readability first, then recv: Asio's async read tries a recv first, which fails
  // whenever the peer has not answered yet (in a request/reply exchange, always). Only where that
  // wait wakes for nothing else: on Asio's epoll reactor (kqueue watches writability from the
  // start), not after a read that filled its buffer (more may be there), and never once Asio waited
  // for writability on the socket (it stays registered: every wait would wake for it too; the
  // connector re-registers a new socket to drop async_connect's, see tcp_transport.cpp).
#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
  bool wait_before_read_ = true;
#else
  bool wait_before_read_ = false;
#endif
  bool last_read_filled_ = false;
  std::size_t read_offered_ = 0;  // the size of the last read's buffer
  bool close_reported_ = false;   // a handler got on_close
  boost::asio::steady_timer drain_timer_;

  connection_stats stats_;
};

}  // namespace rdmarpc::transport::tcp
