#pragma once
// Opening connections from URIs: async_connect on the client side, listener on the server side.
// Dispatches on the endpoint's scheme to the rdma or tcp implementation. Layer: transport.
// Threading: a listener belongs to one executor, like a connection.

#include "transport/connection.hpp"
#include "transport/endpoint.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <memory>

namespace rdmarpc::transport {

using connect_signature = void(boost::system::error_code, std::shared_ptr<connection>);

// Non-template entry point (connect.cpp dispatches on ep.scheme).
void async_connect_impl(boost::asio::any_io_executor ex, endpoint ep, connection_options options,
                        boost::asio::any_completion_handler<connect_signature> handler);

// Connects to `ep`; the new connection belongs to `ex`. Completion: void(error_code,
// shared_ptr<connection>) on the handler's associated executor (default `ex`). Errors:
// errc::unreachable, errc::connect_timeout, errc::handshake_rejected, errc::unsupported_scheme.
template <typename CompletionToken>
auto async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, connect_signature>(
      [](auto handler, boost::asio::any_io_executor ex, endpoint ep, connection_options options) {
        async_connect_impl(std::move(ex), std::move(ep), std::move(options),
                           boost::asio::any_completion_handler<connect_signature>(std::move(handler)));
      },
      token, std::move(ex), ep, options);
}

class listener {
 public:
  using executor_type = boost::asio::any_io_executor;
  virtual ~listener() = default;
  virtual executor_type get_executor() const noexcept = 0;

  // Accepts the next connection; it will belong to `connection_executor` (lets a server spread
  // connections over several io_contexts). Completion: void(error_code, shared_ptr<connection>).
  template <typename CompletionToken>
  auto async_accept(boost::asio::any_io_executor connection_executor, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, connect_signature>(
        [this](auto handler, boost::asio::any_io_executor cex) {
          async_accept_impl(std::move(cex), boost::asio::any_completion_handler<connect_signature>(std::move(handler)));
        },
        token, std::move(connection_executor));
  }

  // Stops listening; a pending accept completes with operation_aborted. Idempotent.
  virtual void close() = 0;
  // The bound address, with the real port when 0 was asked for.
  virtual endpoint local_endpoint() const = 0;

 protected:
  virtual void async_accept_impl(boost::asio::any_io_executor connection_executor,
                                 boost::asio::any_completion_handler<connect_signature> handler) = 0;
};

// Binds and listens on `ep` (scheme rdma or tcp). Throws boost::system::system_error on failure.
std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options);

}  // namespace rdmarpc::transport
