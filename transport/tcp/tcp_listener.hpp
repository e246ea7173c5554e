#pragma once
// tcp_listener: transport::listener over an Asio TCP acceptor; accepted sockets become
// tcp_connections on the executor the caller names. Layer: transport.
// Threading: belongs to one executor; call its members there.

#include <boost/asio/ip/tcp.hpp>

#include "transport/listener.hpp"

namespace rdmarpc::transport::tcp {

class tcp_listener final : public listener {
 public:
  // Binds and listens; throws boost::system::system_error on failure. Port 0 picks a free port.
  tcp_listener(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options);

  executor_type get_executor() const noexcept override { return ex_; }
  void close() override;
  endpoint local_endpoint() const override;

 protected:
  void async_accept_impl(boost::asio::any_io_executor connection_executor,
                         boost::asio::any_completion_handler<connect_signature> handler) override;

 private:
  boost::asio::any_io_executor ex_;
  boost::asio::ip::tcp::acceptor acceptor_;
  connection_options options_;
  endpoint bound_;
};

}  // namespace rdmarpc::transport::tcp
