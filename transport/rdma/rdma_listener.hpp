#pragma once
// rdma_listener: server side of rdma_cm. rdma_listen; on CONNECT_REQUEST validate the client's
// handshake (reject malformed ones with a logged reason), create the QP, post the whole ring,
// rdma_accept with ours; on ESTABLISHED migrate the id to the connection's own event channel and
// hand the connection to async_accept. Layer: transport (rdma).
// Threading: the listener and its rdma_cm channel belong to one executor.

#include <memory>

#include "transport/listener.hpp"

namespace rdmarpc::transport::rdma {

class rdma_listener final : public listener {
 public:
  // Binds and listens; throws boost::system::system_error.
  rdma_listener(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options);
  ~rdma_listener() override;

  executor_type get_executor() const noexcept override;
  void close() override;
  endpoint local_endpoint() const override;

 protected:
  void async_accept_impl(boost::asio::any_io_executor connection_executor,
                         boost::asio::any_completion_handler<connect_signature> handler) override;

 private:
  class core;  // the state async operations keep alive
  std::shared_ptr<core> core_;
};

}  // namespace rdmarpc::transport::rdma
