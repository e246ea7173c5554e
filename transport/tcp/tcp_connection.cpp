#include "transport/tcp/tcp_connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>
#include <span>

#include "log/log.hpp"
#include "transport/endpoint.hpp"
#include "transport/tcp/raw_socket_io.hpp"

namespace rdmarpc::transport::tcp {

namespace {
// After our graceful shutdown we keep reading (and discarding) until the peer closes, so that our
// close() never turns into a reset that could destroy data the peer has not read yet; bounded.
constexpr std::chrono::seconds kDrainTimeout{5};

// A non-blocking recv or send of one buffer straight on the descriptor: what Asio's read_some and
// write_some do, minus their per-call wrapper (state checks, a message header, error translation:
// ~100 instructions a call). Errors come as Asio's would: would_block, eof, else the errno.

std::size_t receive_now(int fd, std::span<std::byte> into, boost::system::error_code& ec) {
  for (;;) {
    const ssize_t n = raw_recv(fd, into.data(), into.size());
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) {
      if (!into.empty()) ec = boost::asio::error::eof;  // the peer shut down its side
      return 0;
    }
    if (errno == EINTR) continue;
    ec.assign(errno, boost::asio::error::get_system_category());
    return 0;
  }
}

[[gnu::always_inline]] inline std::size_t send_now(int fd, std::span<const std::byte> bytes,
                                                   boost::system::error_code& ec) {
  for (;;) {
    const ssize_t n = raw_send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);  // no SIGPIPE: an error
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    ec.assign(errno, boost::asio::error::get_system_category());
    return 0;
  }
}

std::string describe(const tcp_connection::socket_type& socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "tcp://?";
  return endpoint{scheme::tcp, remote.address().to_string(), remote.port()}.to_uri();
}
}  // namespace

tcp_connection::tcp_connection(socket_type socket, executor_type ex, const connection_options& options)
    : connection(options.max_message_size),
      ex_(std::move(ex)),
      through_strand_(io_context_of(ex_) == nullptr),
      socket_(std::move(socket)),
      options_(options),
      remote_address_(describe(socket_)),
      buffers_(kHeaderSize, options.send_queue_bytes),
      framer_(options.max_message_size),
      drain_timer_(ex_) {
  boost::system::error_code ec;
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);  // messages are latency-bound
  if (ec) rdmarpc::logger()->debug("tcp {}: TCP_NODELAY failed: {}", remote_address_, ec.message());
  if (options_.tcp_socket_buffer_bytes > 0) {
    const int bytes = static_cast<int>(std::min<std::size_t>(options_.tcp_socket_buffer_bytes, INT_MAX));
    socket_.set_option(boost::asio::socket_base::send_buffer_size(bytes), ec);
    if (!ec) socket_.set_option(boost::asio::socket_base::receive_buffer_size(bytes), ec);
    if (ec) rdmarpc::logger()->debug("tcp {}: socket buffer size failed: {}", remote_address_, ec.message());
  }
  socket_.non_blocking(true, ec);  // flush() writes straight from the caller and must never block
  if (ec) rdmarpc::logger()->debug("tcp {}: non-blocking mode failed: {}", remote_address_, ec.message());
}

tcp_connection::~tcp_connection() = default;

void tcp_connection::start(std::shared_ptr<connection_handler> handler) {
  if (!handler) return;
  if (state_ == state::closed && end_reason_ == errc::closed_locally && !close_reported_) {
    // close() before start(): the handler still hears how the connection ended, once.
    close_reported_ = true;
    boost::asio::post(ex_,
                      [handler = std::move(handler), reason = end_reason_] { handler->on_close(reason); });
    return;
  }
  if (state_ != state::idle) return;
  handler_ = std::move(handler);
  state_ = state::open;
  start_read(self());
}

send_reservation tcp_connection::reserve_now(std::size_t bytes, boost::system::error_code& ec) {
  if (state_ != state::open) [[unlikely]] {
    ec = errc::not_connected;
    return {};
  }
  if (bytes >= kGoodbyeLength) {  // only with a max_message_size of 4 GiB or more
    ec = errc::message_too_large;
    return {};
  }
  if (!buffers_.has_room(bytes)) {
    ec = boost::asio::error::would_block;
    return {};
  }
  return buffers_.reserve(this, bytes);
}

void tcp_connection::commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept {
  auto frame = buffers_.take(token, size);
  if (state_ != state::open) {  // closing or ended since the reservation: dropped
    buffers_.written(size);
    buffers_.recycle(std::move(frame));
    return;
  }
  tcp_framer::put_length(frame->data(), static_cast<std::uint32_t>(size));
  send_queue_.push_back(std::move(frame));
  if (coalesce && !corked_) return hold_doorbell();
  flush();  // writes (or queues): nothing user-visible runs inside commit()
}

void tcp_connection::ring_doorbell() noexcept {
  flush();
}

void tcp_connection::cancel_reservation(std::uint64_t token) noexcept {
  buffers_.cancel(token);
  room_freed();
}

void tcp_connection::close() {
  switch (state_) {
    case state::idle: {
      state_ = state::closed;
      end_reason_ = errc::closed_locally;
      end_reservations(end_reason_);
      boost::system::error_code ec;
      socket_.close(ec);
      return;
    }
    case state::open:
      state_ = state::closing;
      end_reason_ = errc::closed_locally;
      end_reservations(errc::closed_locally);
      // The goodbye goes last, behind everything queued; once it is written, on_written shuts down.
      send_queue_.push_back(buffers_.wrap(std::vector<std::byte>(kHeaderSize, std::byte{0xff})));
      // Bound the flush, as rdma does: a peer that never reads must not keep us open for ever.
      drain_timer_.expires_after(options_.connect_timeout);
      drain_timer_.async_wait([self = self()](boost::system::error_code ec) {
        if (!ec && self->state_ == state::closing) self->finish(errc::closed_locally, true);
      });
      flush();
      return;
    case state::closing:
    case state::draining:
    case state::closed: return;
  }
}

// --- receiving ---------------------------------------------------------------------------------

void tcp_connection::start_read(std::shared_ptr<tcp_connection> self) {
  if (reading_) return;
  if (wait_before_read_ && !last_read_filled_) {
    // The usual case (a peer that answers): nothing to read yet. A recv now would only fail.
    reading_ = true;
    on_executor(
        ex_, through_strand_,
        [&](auto handler) { socket_.async_wait(socket_type::wait_read, std::move(handler)); },
        [self = std::move(self)](boost::system::error_code ec) mutable {
          self->on_readable(ec, std::move(self));
        });
    return;
  }
  const std::span<std::byte> space = begin_read();
  on_executor(
      ex_, through_strand_,
      [&](auto handler) {
        socket_.async_read_some(boost::asio::buffer(space.data(), space.size()), std::move(handler));
      },
      [self = std::move(self)](boost::system::error_code ec, std::size_t n) mutable {
        self->on_read(ec, n, std::move(self));
      });
}

void tcp_connection::on_readable(boost::system::error_code ec, std::shared_ptr<tcp_connection>&& self) {
  std::size_t n = 0;
  if (!ec && state_ != state::closed) {  // (closed: on_read lets the framer go)
    const std::span<std::byte> space = begin_read();
    n = receive_now(socket_.native_handle(), space, ec);
    // Woken for nothing. (error_code's == is out of line: not asked after a read that worked.)
    if (ec && (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again)) [[unlikely]] {
      reading_ = false;
      return start_read(std::move(self));
    }
  }
  on_read(ec, n, std::move(self));
}

// The read path below runs once per message on both sides of every call: it is inline from the
// readiness handler down to on_message, and what is rare (errors, the end, copies, large frames)
// is out of line.
void tcp_connection::on_read(boost::system::error_code ec, std::size_t n,
                             std::shared_ptr<tcp_connection>&& self) {
  reading_ = false;
  last_read_filled_ = n == read_offered_;
  if (ec || (state_ != state::open && state_ != state::closing)) [[unlikely]]
    return on_read_ended(ec, std::move(self));
  framer_.commit(n);
  ++stats_.peer_activity;  // bytes arrived, even if no message is whole yet
  // Replies committed while this read's messages are delivered leave in one write, after them.
  corked_ = true;
  bool more = false;
  try {
    more = parse_frames();
  } catch (...) {
    uncork_unwinding();
    throw;
  }
  corked_ = false;
  try {
    flush();
  } catch (const std::exception& e) {  // out of memory: the connection is lost
    rdmarpc::logger()->error("tcp {}: {}", remote_address_, e.what());
  }
  if (!more) return;
  if (state_ == state::open || state_ == state::closing || state_ == state::draining)
    start_read(std::move(self));
}

void tcp_connection::on_read_ended(boost::system::error_code ec, std::shared_ptr<tcp_connection>&& self) {
  if (state_ == state::closed) {
    framer_.discard();
    return;
  }
  if (state_ == state::draining) {
    framer_.discard();  // we are no longer interested
    if (ec) {           // the peer closed (or failed): done
      state_ = state::closed;
      drain_timer_.cancel();
      socket_.close(ec);
      return;
    }
    start_read(std::move(self));
    return;
  }
  if (state_ == state::closing) {
    finish(errc::closed_locally, true);  // the flush cannot complete any more
  } else if (ec == boost::asio::error::eof && framer_.idle()) {
    // A FIN without a goodbye: the peer process died (the kernel closed its socket).
    finish(framer_.said_goodbye() ? errc::closed_by_peer : errc::connection_lost, true);
  } else {
    rdmarpc::logger()->debug("tcp {}: read failed: {}", remote_address_, ec.message());
    finish(errc::connection_lost, true);  // reset, or EOF in the middle of a frame
  }
}

// A handler's exception is leaving on_read: the rest of the buffered frames are parsed in a later
// handler, so the connection still reads.
void tcp_connection::uncork_unwinding() noexcept {
  corked_ = false;
  try {
    flush();
    if (!reading_ && (state_ == state::open || state_ == state::closing)) {
      boost::asio::post(ex_, [self = self()] {
        if (!self->parse_frames()) return;
        if (self->state_ == state::open || self->state_ == state::closing ||
            self->state_ == state::draining) {
          self->start_read(self);
        }
      });
    }
  } catch (const std::exception& e) {  // out of memory (while unwinding): the connection is lost
    rdmarpc::logger()->error("tcp {}: {}", remote_address_, e.what());
  }
}

bool tcp_connection::parse_frames() {
  while (state_ == state::open || state_ == state::closing) {
    const tcp_framer::event e = framer_.next();
    if (e == tcp_framer::event::message) [[likely]] {
      if (state_ != state::open) continue;  // close() was called: no deliveries after it
      if (framer_.can_lend()) [[likely]] {
        deliver(framer_.message(), std::uint64_t{framer_.lend()} << 1 | kReadBufferToken);
      } else {
        deliver_copy();
      }
    } else if (e == tcp_framer::event::need_more) {
      return true;
    } else if (!on_unusual_frame(e)) {
      return false;
    }
  }
  return false;
}

bool tcp_connection::on_unusual_frame(tcp_framer::event e) {
  switch (e) {
    case tcp_framer::event::goodbye: return true;  // its FIN follows
    case tcp_framer::event::after_goodbye:
      rdmarpc::logger()->warn("tcp {}: peer sent data after its goodbye; closing the connection",
                              remote_address_);
      finish(errc::protocol_error, true);
      return false;
    case tcp_framer::event::too_large:
      rdmarpc::logger()->warn(
          "tcp {}: peer sent a frame of {} bytes, above the maximum message size {}; closing the "
          "connection",
          remote_address_, framer_.announced(), options_.max_message_size);
      finish(errc::protocol_error, true);
      return false;
    case tcp_framer::event::large_message: deliver(buffers_.wrap(framer_.take_large())); return true;
    case tcp_framer::event::need_more:
    case tcp_framer::event::message: break;  // (parse_frames handles them)
  }
  return true;
}

void tcp_connection::deliver_copy() {
  const auto bytes = framer_.message();
  auto message = buffers_.take_spare(bytes.size());
  if (!bytes.empty()) std::memcpy(message->data(), bytes.data(), bytes.size());
  deliver(std::move(message));
}

void tcp_connection::deliver(message_buffers::buffer message) {
  if (state_ != state::open) return;  // close() was called: no deliveries after it
  // Lent, not given: its buffer comes back on release and carries a later message.
  const std::uint64_t token = message_buffers::lend(std::move(message));
  deliver(message_buffers::lent(token), token);
}

void tcp_connection::deliver(std::span<const std::byte> bytes, std::uint64_t token) {
  ++stats_.messages_received;
  stats_.bytes_received += bytes.size();
  // handler_ itself, not a copy: if on_message closes us, finish() hands it to the posted
  // on_close, which keeps it alive until after this call. The message is lent: the read (on_read's
  // `self`) keeps us alive meanwhile.
  handler_->on_message(received_message(bytes, *this, token));
}

// --- sending -----------------------------------------------------------------------------------

void tcp_connection::flush() {
  if (corked_ || writing_ > 0 || send_queue_.empty()) return;
  if (state_ != state::open || !send_queue_.has_one() || send_offset_ != 0) [[unlikely]]
    return flush_any();
  // The usual case: one whole frame (no goodbye: we are open), a plain send without a gather list.
  const auto frame = send_queue_.front().bytes();
  boost::system::error_code ec;
  const std::size_t written = send_now(socket_.native_handle(), frame, ec);
  if (written != frame.size() || ec) [[unlikely]]
    return after_send(written, frame.size(), ec);
  socket_full_ = false;
  frame_written(false);
  room_freed();
}

void tcp_connection::flush_any() {
  if (state_ != state::open && state_ != state::closing) return;
  boost::system::error_code ec;
  std::size_t written = 0;
  std::size_t offered = 0;
  if (send_queue_.has_one()) {
    const auto frame = send_queue_.front().bytes();
    offered = frame.size() - send_offset_;
    written = send_now(socket_.native_handle(), frame.subspan(send_offset_), ec);
  } else {
    const std::size_t frames = fill_gather();
    const std::span<const boost::asio::const_buffer> buffers(gather_.data(), frames);
    offered = boost::asio::buffer_size(buffers);
    written = socket_.write_some(buffers, ec);
  }
  after_send(written, offered, ec);
}

void tcp_connection::after_send(std::size_t written, std::size_t offered,
                                const boost::system::error_code& ec) {
  socket_full_ = written < offered;
  if (ec) {
    if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
      start_write();  // the socket's buffer is full: wait for room
      return;
    }
    return on_write_failed(ec);
  }
  consume_written(written);
  after_write();
}

std::size_t tcp_connection::fill_gather() {
  std::size_t frames = 0;
  for (const message_block* b = send_queue_.first(); b != nullptr && frames < gather_.size(); b = b->next) {
    gather_[frames++] = boost::asio::buffer(b->data(), b->size);
  }
  gather_[0] += send_offset_;
  return frames;
}

void tcp_connection::start_write() {
  if (writing_ > 0 || send_queue_.empty()) return;
  const std::size_t frames = fill_gather();
  writing_ = frames;
  // Asio keeps waiting for writability from now on: a wait for readability would then also wake
  // whenever the socket is writable.
  wait_before_read_ = false;
  const std::span<const boost::asio::const_buffer> buffers(gather_.data(), frames);
  offered_ = boost::asio::buffer_size(buffers);
  on_executor(
      ex_, through_strand_,
      // write_some, not async_write: each time the peer makes room shows (peer_activity) while a
      // long backlog drains. (Asio may try the write at once; after a short one it waits for room.)
      [&](auto handler) { socket_.async_write_some(buffers, std::move(handler)); },
      [self = self()](boost::system::error_code ec, std::size_t bytes) { self->on_written(ec, bytes); });
}

void tcp_connection::on_written(boost::system::error_code ec, std::size_t bytes) {
  writing_ = 0;
  if (state_ == state::closed || state_ == state::draining) {
    send_queue_.clear();  // kept alive until now only because the write referenced it
    send_offset_ = 0;
    return;
  }
  if (ec) return on_write_failed(ec);
  if (socket_full_) ++stats_.peer_activity;  // room came back: the peer took bytes
  socket_full_ = bytes < offered_;
  consume_written(bytes);
  after_write();
}

void tcp_connection::consume_written(std::size_t bytes) {
  while (bytes > 0 && !send_queue_.empty()) {
    const std::size_t left = send_queue_.front().size - send_offset_;
    if (bytes < left) {
      send_offset_ += bytes;
      return;
    }
    bytes -= left;
    frame_written(state_ == state::closing && send_queue_.has_one());  // the goodbye is always the last
  }
}

void tcp_connection::frame_written(bool goodbye) noexcept {
  send_offset_ = 0;
  if (!goodbye) {
    const std::size_t size = send_queue_.front().size - kHeaderSize;
    ++stats_.messages_sent;
    stats_.bytes_sent += size;
    buffers_.written(size);
  }
  buffers_.recycle(send_queue_.pop_front());
}

void tcp_connection::after_write() {
  if (state_ == state::open) room_freed();
  if (!send_queue_.empty()) {
    start_write();
  } else if (state_ == state::closing) {
    shutdown_send();
  }
}

void tcp_connection::on_write_failed(const boost::system::error_code& ec) {
  rdmarpc::logger()->debug("tcp {}: write failed: {}", remote_address_, ec.message());
  finish(state_ == state::closing ? errc::closed_locally : errc::connection_lost, true);
}

void tcp_connection::shutdown_send() {
  boost::system::error_code ec;
  socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  finish(errc::closed_locally, ec.failed());
}

// --- ending ------------------------------------------------------------------------------------

void tcp_connection::finish(boost::system::error_code reason, bool hard) {
  if (state_ == state::closed || state_ == state::draining) return;
  end_reason_ = reason;
  end_reservations(reason);
  if (handler_) {
    close_reported_ = true;
    // A copy, reset after the post: were the post to throw, handler_ would still own the handler,
    // which may be inside on_message (deliver calls it through handler_).
    boost::asio::post(ex_, [handler = handler_, reason] { handler->on_close(reason); });
    handler_.reset();
  }
  if (hard) {
    state_ = state::closed;
    drain_timer_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);  // pending operations complete with operation_aborted and stop
    // Buffers a pending read or write still references are freed when it completes.
    if (writing_ == 0) {
      send_queue_.clear();
      send_offset_ = 0;
    }
    buffers_.clear();
    if (!reading_) framer_.discard();
    return;
  }
  state_ = state::draining;
  start_read(self());
  drain_timer_.expires_after(kDrainTimeout);
  drain_timer_.async_wait([self = self()](boost::system::error_code ec) {
    if (ec || self->state_ != state::draining) return;
    self->state_ = state::closed;
    boost::system::error_code ignored;
    self->socket_.close(ignored);
  });
}

}  // namespace rdmarpc::transport::tcp
