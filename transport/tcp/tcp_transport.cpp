// tcp::async_connect (resolve, connect, bounded by connect_timeout) and tcp::make_listener.
#include "transport/tcp/tcp_transport.hpp"

#include <unistd.h>

#include <boost/asio/append.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "log/log.hpp"
#include "transport/io_context_of.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_listener.hpp"

namespace rdmarpc::transport::tcp {

namespace {

// One connection attempt: resolver, socket and timer race; the first to finish completes.
class connect_operation : public std::enable_shared_from_this<connect_operation> {
 public:
  connect_operation(boost::asio::any_io_executor ex, boost::asio::io_context& io, endpoint ep,
                    connection_options options,
                    boost::asio::any_completion_handler<connect_signature> handler)
      : ex_(std::move(ex)),
        ep_(std::move(ep)),
        options_(options),
        handler_(std::move(handler)),
        resolver_(ex_),
        socket_(io.get_executor()),
        timer_(ex_) {}

  void start() {
    timer_.expires_after(options_.connect_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->done_) return;
      self->timed_out_ = true;  // the pending resolve or connect now fails with operation_aborted
      self->resolver_.cancel();
      boost::system::error_code ignored;
      self->socket_.close(ignored);
    });
    resolver_.async_resolve(
        ep_.host, std::to_string(ep_.port),
        [self = shared_from_this()](boost::system::error_code ec,
                                    boost::asio::ip::tcp::resolver::results_type results) {
          self->on_resolved(ec, std::move(results));
        });
  }

 private:
  void on_resolved(boost::system::error_code ec, boost::asio::ip::tcp::resolver::results_type results) {
    if (ec || timed_out_) return fail(ec, "resolve");
    tcp_connection::on_executor(
        ex_, io_context_of(ex_) == nullptr,
        [&](auto handler) { boost::asio::async_connect(socket_, results, std::move(handler)); },
        [self = shared_from_this()](boost::system::error_code ec, const boost::asio::ip::tcp::endpoint&) {
          // The timer may have fired (and closed the socket) after this
          // completion was already queued as a success.
          if (ec || self->timed_out_) return self->fail(ec, "connect");
          if (const auto failed = self->reregister()) return self->fail(failed, "re-register");
          self->complete(
              {}, std::make_shared<tcp_connection>(std::move(self->socket_), self->ex_, self->options_));
        });
  }

  // async_connect left the reactor waiting for the socket's writability, for good; registering the
  // descriptor afresh drops that, so the connection's read waits wake only when bytes arrive (see
  // tcp_connection::wait_before_read_).
  boost::system::error_code reregister() {
    boost::system::error_code ec;
    const auto protocol = socket_.local_endpoint(ec).protocol();
    if (ec) return ec;
    const auto fd = socket_.release(ec);
    if (ec) return ec;
    socket_.assign(protocol, fd, ec);
    if (ec) ::close(fd);
    return ec;
  }

  void fail(boost::system::error_code ec, const char* step) {
    rdmarpc::logger()->debug("tcp: {} to {} failed: {}", step, ep_.to_uri(), ec.message());
    complete(timed_out_ ? errc::connect_timeout : errc::unreachable, nullptr);
  }

  void complete(boost::system::error_code ec, std::shared_ptr<connection> conn) {
    done_ = true;
    timer_.cancel();
    // We run inside a completion on ex_ (never inline in async_connect); go to the handler's executor.
    boost::asio::dispatch(ex_, boost::asio::append(std::move(handler_), ec, std::move(conn)));
  }

  boost::asio::any_io_executor ex_;
  endpoint ep_;
  connection_options options_;
  boost::asio::any_completion_handler<connect_signature> handler_;
  boost::asio::ip::tcp::resolver resolver_;
  tcp_connection::socket_type socket_;
  boost::asio::steady_timer timer_;
  bool done_ = false;
  bool timed_out_ = false;
};

}  // namespace

void async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   boost::asio::any_completion_handler<connect_signature> handler) {
  boost::asio::io_context* io = io_context_behind(ex);
  if (io == nullptr) {
    rdmarpc::logger()->error("tcp: cannot connect to {}: {}", ep.to_uri(), kNeedsIoContext);
    boost::asio::post(ex, boost::asio::append(std::move(handler), boost::asio::error::operation_not_supported,
                                              std::shared_ptr<connection>()));
    return;
  }
  std::make_shared<connect_operation>(std::move(ex), *io, ep, options, std::move(handler))->start();
}

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options) {
  return std::make_unique<tcp_listener>(std::move(ex), ep, options);
}

}  // namespace rdmarpc::transport::tcp
