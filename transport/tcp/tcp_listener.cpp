#include "transport/tcp/tcp_listener.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>

#include "log/log.hpp"
#include "transport/io_context_of.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/track_work.hpp"

namespace rdmarpc::transport::tcp {

namespace {
boost::asio::ip::tcp::endpoint resolve_local(const boost::asio::any_io_executor& ex, const endpoint& ep) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(ep.host, ec);
  if (!ec) return {address, ep.port};
  // A host name: setup code, so a blocking resolve (which throws on failure) is acceptable here.
  boost::asio::ip::tcp::resolver resolver(ex);
  const auto results =
      resolver.resolve(ep.host, std::to_string(ep.port), boost::asio::ip::tcp::resolver::passive);
  return results.begin()->endpoint();
}

[[noreturn]] void throw_errno(const char* what) {
  throw boost::system::system_error(boost::system::error_code(errno, boost::system::system_category()), what);
}

// A socket bound and listening on `local`, made without the acceptor: an Asio socket is registered
// with its io_context's reactor from the moment it opens, and destroying one whose bind failed
// would touch that reactor from the thread calling listen(), which only the io_context's own
// thread may do under the concurrency hint UNSAFE_IO (README). The acceptor takes it when ready.
int listening_socket(const boost::asio::ip::tcp::endpoint& local) {
  const int fd = ::socket(local.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) throw_errno("socket");
  const auto fail = [fd](const char* what) {
    const int error = errno;
    ::close(fd);
    errno = error;
    throw_errno(what);
  };
  const int on = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) fail("setsockopt(SO_REUSEADDR)");
  if (::bind(fd, local.data(), static_cast<socklen_t>(local.size())) != 0) fail("bind");
  if (::listen(fd, SOMAXCONN) != 0) fail("listen");
  return fd;
}
}  // namespace

tcp_listener::tcp_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                           const connection_options& options)
    : ex_(std::move(ex)), acceptor_(ex_), options_(options) {
  const auto local = resolve_local(ex_, ep);
  const int fd = listening_socket(local);
  boost::system::error_code ec;
  acceptor_.assign(local.protocol(), fd, ec);  // (Asio keeps an fd it failed to register open)
  if (ec) {
    ::close(fd);
    throw boost::system::system_error(ec, "assign");
  }
  const auto bound = acceptor_.local_endpoint();
  bound_ = endpoint{scheme::tcp, bound.address().to_string(), bound.port()};
  rdmarpc::logger()->debug("tcp: listening on {}", bound_.to_uri());
}

void tcp_listener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);  // a pending accept completes with operation_aborted
}

endpoint tcp_listener::local_endpoint() const {
  return bound_;
}

void tcp_listener::async_accept_impl(boost::asio::any_io_executor connection_executor,
                                     boost::asio::any_completion_handler<connect_signature> handler) {
  if (!acceptor_.is_open()) {
    boost::asio::post(ex_, boost::asio::append(std::move(handler), boost::asio::error::operation_aborted,
                                               std::shared_ptr<connection>()));
    return;
  }
  boost::asio::io_context* io = io_context_behind(connection_executor);
  if (io == nullptr) {
    rdmarpc::logger()->error("tcp: cannot accept on {}: {}", bound_.to_uri(), kNeedsIoContext);
    boost::asio::post(ex_,
                      boost::asio::append(std::move(handler), boost::asio::error::operation_not_supported,
                                          std::shared_ptr<connection>()));
    return;
  }
  // The completion captures no `this`: the listener may be destroyed while an accept is pending.
  // Asio tracks work on the listener's executor only; `work` keeps the handler's own busy too.
  auto work = track_work(handler, ex_);
  acceptor_.async_accept(
      io->get_executor(),
      [ex = ex_, connection_executor, options = options_, handler = std::move(handler),
       work = std::move(work)](boost::system::error_code ec, tcp_connection::socket_type socket) mutable {
        std::shared_ptr<connection> conn;
        if (!ec)
          conn = std::make_shared<tcp_connection>(std::move(socket), std::move(connection_executor), options);
        // We run on the listener's executor (Asio completes accept there); hop to the handler's,
        // which then tracks its own work (so `work` may go once this returns).
        boost::asio::dispatch(ex, boost::asio::append(std::move(handler), ec, std::move(conn)));
      });
}

}  // namespace rdmarpc::transport::tcp
