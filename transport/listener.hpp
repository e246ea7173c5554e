#pragma once
// listener: the server side of a transport, accepting connections on one bound endpoint. Each
// transport implements it (rdma/rdma_listener, tcp/tcp_listener); transport/connect.hpp makes one
// from a URI. Layer: transport. Threading: a listener belongs to one executor, like a connection.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <memory>

#include "transport/connection.hpp"
#include "transport/endpoint.hpp"

namespace rdmarpc::transport {

// Completion of a connect or an accept: the new connection, not started yet.
using connect_signature = void(boost::system::error_code, std::shared_ptr<connection>);

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
          async_accept_impl(std::move(cex),
                            boost::asio::any_completion_handler<connect_signature>(std::move(handler)));
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

}  // namespace rdmarpc::transport
