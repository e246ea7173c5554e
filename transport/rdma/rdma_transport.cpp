#include "transport/rdma/rdma_transport.hpp"

#include "transport/rdma/rdma_connector.hpp"
#include "transport/rdma/rdma_listener.hpp"

namespace rdmarpc::transport::rdma {

void async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   boost::asio::any_completion_handler<connect_signature> handler) {
  rdma_connector::start(std::move(ex), ep, options, std::move(handler));
}

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options) {
  return std::make_unique<rdma_listener>(std::move(ex), ep, options);
}

}  // namespace rdmarpc::transport::rdma
